"""Single-sample estimators of KL(pi_theta || pi_ref) at an action a, from log-probabilities
(J. Schulman 2020, "Approximating KL divergence"), named in KL_ESTIMATORS for --kl-estimator.
With d = log pi_ref(a) - log pi_theta(a):

    k1 = -d                       unbiased under a ~ pi_theta, can be negative
    k2 = d^2 / 2                  >= 0, biased (exact to second order in d)
    k3 = exp(d) - d - 1           >= 0, unbiased under a ~ pi_theta
    k3-unbiased = (pi_theta / pi_old) k3
                                  DeepSeek-V3.2 (arXiv 2512.02556, eq. 7): a drawn from pi_old;
                                  the ratio (with its gradient) makes both the value and, in
                                  the loss, the gradient unbiased for KL(pi_theta || pi_ref)

d is clamped to [-20, 20] as the TPO repo's grpo_loss (JeanKaddour/tpo src/tpo/algorithms.py);
TRL's GRPOTrainer computes k3 the same way (trl/trainer/grpo_trainer.py). In the loss (with the
graph) or in the reward (kl_in_reward: no graph, subtracted from each episode's score);
which placement is unbiased for which gradient is tested exactly in tests/controlrl/
test_kl_estimators.py.
"""

from __future__ import annotations

import torch

PLACEMENTS = ("loss", "reward")


def _d(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    return (ref_logp - logp).clamp(-20.0, 20.0)


def k1(logp: torch.Tensor, ref_logp: torch.Tensor, old_logp=None) -> torch.Tensor:
    """log pi_theta(a) - log pi_ref(a)."""
    return -_d(logp, ref_logp)


def k2(logp: torch.Tensor, ref_logp: torch.Tensor, old_logp=None) -> torch.Tensor:
    """(log pi_theta(a) - log pi_ref(a))^2 / 2."""
    return 0.5 * _d(logp, ref_logp).square()


def k3(logp: torch.Tensor, ref_logp: torch.Tensor, old_logp=None) -> torch.Tensor:
    """exp(d) - d - 1, d = log pi_ref(a) - log pi_theta(a)."""
    d = _d(logp, ref_logp)
    return d.exp() - d - 1


def k3_unbiased(logp: torch.Tensor, ref_logp: torch.Tensor, old_logp: torch.Tensor) -> torch.Tensor:
    """exp(log pi_theta - log pi_old) k3: k3 importance-weighted to samples of pi_old."""
    return (logp - old_logp).exp() * k3(logp, ref_logp)


KL_ESTIMATORS = {"k1": k1, "k2": k2, "k3": k3, "k3-unbiased": k3_unbiased}


def kl_estimate(
    name: str, logp: torch.Tensor, ref_logp: torch.Tensor, old_logp: torch.Tensor | None = None
) -> torch.Tensor:
    """KL_ESTIMATORS[name] elementwise; old_logp (pi_old at the sampled actions) is needed by
    k3-unbiased alone."""
    if name not in KL_ESTIMATORS:
        raise ValueError(f"KL estimator {name!r}, expected one of {tuple(KL_ESTIMATORS)}")
    if name == "k3-unbiased" and old_logp is None:
        raise ValueError("k3-unbiased needs old_logp (the sampling policy's log-probabilities)")
    return KL_ESTIMATORS[name](logp, ref_logp, old_logp)


def kl_reward_penalty(
    name: str, old_logp: torch.Tensor, ref_logp: torch.Tensor, valid: torch.Tensor
) -> torch.Tensor:
    """KL in the reward: sum over an episode's valid steps (axis -2 of [..., T, N]) of the
    estimate at the rollout policy, without a graph [..., N]; the score minus beta times this
    is what the advantages are computed from (at theta = theta_old, k3-unbiased is k3)."""
    with torch.no_grad():
        est = kl_estimate(name, old_logp, ref_logp, old_logp)
        return torch.where(valid, est, torch.zeros_like(est)).sum(-2)
