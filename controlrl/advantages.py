"""Advantage estimators of the group objective: outcome rewards [..., n, G] (n groups of G
outputs for one context each; leading axes are independent batches, a population's seeds) to
advantages of the same shape, registered in controlrl.objective.ADVANTAGES under their
--adv-norm names (GRPO's mean-std and Dr. GRPO's mean are registered there, from
controlrl.group.group_advantages). Batch-level ones reduce over the last two axes only.

Reference code: JeanKaddour/tpo src/tpo/experiments/_trial.py (the batch-mean baseline);
volcengine/verl verl/trainer/ppo/core_algos.py (compute_rloo_outcome_advantage,
compute_reinforce_plus_plus_outcome_advantage, ..._baseline_outcome_advantage); AMAP-ML/GPG
open-r1/src/open_r1/gpg_trainer.py (GPG's alpha);
changyi7231/BNPO recipe/bnpo/src/bnpo_ray_trainer.py (compute_bnpo_outcome_advantage).
"""

from __future__ import annotations

import torch

from controlrl.group import group_advantages, zero_variance_mask
from controlrl.objective import ADVANTAGES, register

BATCH = (-2, -1)  # the axes of one batch: every output of every group


@register(ADVANTAGES, "rloo")
def rloo(rewards: torch.Tensor) -> torch.Tensor:
    """REINFORCE leave-one-out (Ahmadian et al. 2024, "Back to Basics", arXiv 2402.14740; Kool
    et al. 2019): r_i - mean of the group's other G - 1 rewards; 0 for G = 1."""
    G = rewards.shape[-1]
    if G < 2:
        return torch.zeros_like(rewards)
    others = (rewards.sum(-1, keepdim=True) - rewards) / (G - 1)
    return rewards - others


def _batch_std(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(unbiased std over BATCH [..., 1, 1], True where x is constant over BATCH)."""
    flat = x.flatten(-2)
    const = (flat == flat[..., :1]).all(-1)[..., None, None]
    if flat.shape[-1] < 2:
        return torch.ones_like(const, dtype=x.dtype), const
    return flat.std(-1)[..., None, None], const


@register(ADVANTAGES, "batch-mean")
def batch_mean(rewards: torch.Tensor) -> torch.Tensor:
    """REINFORCE's batch-mean baseline, r - the mean reward of the whole batch (groups
    ignored): the PG, PPO and DG baselines of the TPO reference's sequence tasks
    (JeanKaddour/tpo src/tpo/experiments/_trial.py: rewards - rewards.mean(axis=0)), run there
    on one answer per prompt (--group-size 1)."""
    return rewards - rewards.mean(BATCH, keepdim=True)


@register(ADVANTAGES, "reinforce++")
def reinforce_pp(rewards: torch.Tensor, eps: float = 1e-4) -> torch.Tensor:
    """REINFORCE++ (Hu et al. 2025, arXiv 2501.03262): no group baseline; the rewards whitened
    over the whole batch (global normalisation), (r - mean_batch) / (std_batch + eps)."""
    std, const = _batch_std(rewards)
    out = (rewards - rewards.mean(BATCH, keepdim=True)) / (std + eps)
    return torch.where(const, torch.zeros_like(out), out)


@register(ADVANTAGES, "reinforce++-baseline")
def reinforce_pp_baseline(rewards: torch.Tensor, eps: float = 1e-4) -> torch.Tensor:
    """REINFORCE++-baseline (same paper, for groups): r - group mean, then whitened over the
    batch."""
    return reinforce_pp(group_advantages(rewards, "mean"), eps)


@register(ADVANTAGES, "lite-ppo")
def lite_ppo(rewards: torch.Tensor, eps: float = 1e-4) -> torch.Tensor:
    """LitePPO (Liu et al. 2025, "Tricks or Traps?", arXiv 2508.08221): group-mean baseline,
    batch-level std, (r - mean_group) / (std_batch(r) + eps)."""
    std, const = _batch_std(rewards)
    out = group_advantages(rewards, "mean") / (std + eps)
    return torch.where(const, torch.zeros_like(out), out)


@register(ADVANTAGES, "gpg")
def gpg(rewards: torch.Tensor) -> torch.Tensor:
    """GPG's corrected advantage (Chu et al. 2025, "GPG: A Simple and Strong Reinforcement
    Learning Baseline for Model Reasoning", arXiv 2504.02546): alpha (r - group mean), alpha =
    B / (B - M) over the batch, B its outputs and M those of the groups whose scores are all
    equal (no gradient): the batch's mean gradient rescaled to the outputs that carry one. As
    the authors' code (AMAP-ML/GPG open-r1/src/open_r1/gpg_trainer.py:
    inverse_alpha = n_valid_samples / num_samples, groups with std 0 not valid, the loss divided
    by it); alpha 1 where no group has spread (every advantage is 0 there). verl's
    compute_gpg_outcome_advantage takes B over the number of nonzero scores instead (for 0/1
    rewards, the successes): not this estimator."""
    flat = zero_variance_mask(rewards)  # [..., n]
    valid = (~flat).sum(-1, keepdim=True).unsqueeze(-1).to(rewards.dtype)  # [..., 1, 1]
    n = rewards.shape[-2]
    alpha = torch.where(valid > 0, n / valid.clamp_min(1.0), torch.ones_like(valid))
    return alpha * group_advantages(rewards, "mean")


def beta_parameters(p: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """BNPO's (alpha, beta) [..., 1, 1] from the group success rates p [..., n]: the method of
    moments Beta(a, b) of p over the batch, then alpha = max(1 + a/3, 1), beta = max(1 + b/3, 1)
    (the reference code); (1, 1), i.e. REINFORCE, when p has no spread or n = 1."""
    if p.shape[-1] < 2:
        one = torch.ones(p.shape[:-1] + (1, 1), dtype=p.dtype)
        return one, one
    m, v = p.mean(-1), p.var(-1)
    k = torch.where(v > 0, m * (1 - m) / v.clamp_min(1e-30) - 1, torch.zeros_like(m))
    alpha = (1 + k * m / 3).clamp_min(1.0)
    beta = (1 + k * (1 - m) / 3).clamp_min(1.0)
    return alpha[..., None, None], beta[..., None, None]


@register(ADVANTAGES, "bnpo")
def bnpo(rewards: torch.Tensor, alpha=None, beta=None, max_weight: float = 1e6) -> torch.Tensor:
    """BNPO (Xiao et al. 2025, arXiv 2506.02864): (r - p) / Beta_pdf(p; alpha, beta), p the
    group mean, 1 / pdf clamped at max_weight as the reference code; alpha, beta from
    beta_parameters unless given (alpha = beta = 1: r - mean; 3/2: GRPO's (r - p) / sqrt(p (1 -
    p)) times B(3/2, 3/2)). Binary rewards, or any in [0, 1]."""
    if bool(((rewards < 0) | (rewards > 1)).any()):
        raise ValueError("bnpo needs rewards in [0, 1] (BNPO's Beta normalisation)")
    p = rewards.mean(-1, keepdim=True)
    if alpha is None:
        alpha, beta = beta_parameters(p.squeeze(-1))
    alpha, beta = torch.as_tensor(alpha, dtype=p.dtype), torch.as_tensor(beta, dtype=p.dtype)
    log_b = torch.lgamma(alpha) + torch.lgamma(beta) - torch.lgamma(alpha + beta)
    log_pdf = torch.special.xlogy(alpha - 1, p) + torch.special.xlogy(beta - 1, 1 - p) - log_b
    weight = torch.exp(-log_pdf).clamp(max=max_weight)
    centred = rewards - p
    return torch.where(centred == 0, torch.zeros_like(centred), centred * weight)
