"""NFT, Negative-aware Fine-Tuning (Chen et al. 2025, "Bridging Supervised Learning and
Reinforcement Learning in Math Reasoning", arXiv 2505.18116; project page
research.nvidia.com/labs/dir/Negative-aware-Fine-Tuning): a supervised loss on every sampled
output. pi_theta models the positive (correct) answers; the old policy is the mixture
pi_old = r_q pi_+ + (1 - r_q) pi_- with r_q the context's success rate, so the negative answers
are modelled by the implicit negative policy pi_- = (pi_old - r_q pi_theta) / (1 - r_q). With
R = pi_theta / pi_old per sample, the loss of a group is

    -(1/G) sum_i omega_q [ r_i log R_i + (1 - r_i) log((1 - r_q R_i) / (1 - r_q)) ]

(maximum likelihood of the positives under pi_theta and of the negatives under pi_-). At
theta = theta_old (R = 1) its gradient is omega_q / (1 - r_q) times Dr. GRPO's, so the prompt
weight omega_q = (1 - r_q) / sigma_q gives GRPO's gradient exactly (sigma_q = 1: Dr. GRPO's),
the paper's on-policy equivalence (seeds catalogue T-G8, tested exactly in
tests/controlrl/test_nft.py).

Off-policy, a failure whose probability rose (R > 1) has an implicit-negative ratio
(1 - r_q R) / (1 - r_q) below 1, and below 0 once r_q R > 1. As the authors' code (NVlabs/NFT
dp_actor.py: clamp_preserve_grad(proxy, min_val=clamp_negative), config/nft_trainer.yaml
clamp_negative 1.0), the log takes the ratio clamped from below at clamp_negative in its value
while the gradient passes through the clamp unchanged: there the failure's loss grows with
log R at the slope omega_q r_q R / (1 - r_q) (r_q R for Dr. GRPO's omega_q = 1 - r_q), finite
for every R, where the exact log's slope omega_q r_q R / (1 - r_q R) grows without bound as
r_q R nears 1 and a floor on the ratio cuts it to 0 beyond.
"""

from __future__ import annotations

import torch


def nft_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    rewards: torch.Tensor,
    omega: torch.Tensor,
    clamp_negative: float = 1.0,
) -> torch.Tensor:
    """NFT's loss of groups [..., n, G]: log-probabilities (with the graph) and old ones, binary
    rewards and the prompt weights [..., n, 1], averaged over the groups' outputs."""
    r_q = rewards.mean(-1, keepdim=True)
    return -(omega * nft_likelihood(logp - old_logp, rewards, r_q, clamp_negative)).mean()


def clamp_preserve_grad(x: torch.Tensor, min_val: float) -> torch.Tensor:
    """max(x, min_val) in value, x's gradient everywhere (NVlabs/NFT dp_actor.py,
    clamp_preserve_grad): x + sg(max(x, min_val) - x)."""
    return x + (x.clamp_min(min_val) - x).detach()


def nft_likelihood(
    log_ratio: torch.Tensor, rewards: torch.Tensor, r_q: torch.Tensor, clamp_negative: float = 1.0
) -> torch.Tensor:
    """r log R + (1 - r) log c((1 - r_q R) / (1 - r_q)) per sample, R = exp(log_ratio), r_q its
    context's success rate (broadcast against the samples), c the clamp from below at
    clamp_negative that keeps the gradient (the authors' dp_actor.py negative_loss)."""
    pos = rewards * log_ratio
    denom = torch.where(r_q < 1, 1 - r_q, 1.0)  # r_q = 1: no negatives (and a finite graph)
    proxy = clamp_preserve_grad((1 - r_q * log_ratio.exp()) / denom, clamp_negative)
    neg = torch.where(rewards < 1, (1 - rewards) * proxy.log(), torch.zeros_like(pos))
    return pos + neg


def grpo_equivalent_weight(rewards: torch.Tensor, scale: str = "mean_std", eps: float = 1e-4):
    """omega_q = (1 - r_q) / (std_q + eps) (scale mean_std, GRPO's unbiased std as
    controlrl.group) or 1 - r_q (scale mean, Dr. GRPO); 0 in zero-variance groups [..., n, 1]."""
    r_q = rewards.mean(-1, keepdim=True)
    if scale == "mean":
        omega = 1 - r_q
    else:
        omega = (1 - r_q) / (rewards.std(-1, keepdim=True) + eps)
    flat = (rewards == rewards[..., :1]).all(-1, keepdim=True)
    return torch.where(flat, torch.zeros_like(omega), omega)
