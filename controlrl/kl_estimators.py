"""Single-sample estimators of KL(pi_theta || pi_ref) at an action a (J. Schulman 2020,
"Approximating KL divergence"), registered in controlrl.objective.KL_ESTIMATORS under their
--kl-estimator names beside k3 (registered there). With d = log pi_ref(a) - log pi_theta(a):

    k1 = -d                       unbiased under a ~ pi_theta, can be negative
    k2 = d^2 / 2                  >= 0, biased (exact to second order in d)
    k3 = exp(d) - d - 1           >= 0, unbiased under a ~ pi_theta (controlrl.objective.k3)
    k3-unbiased = (pi_theta / pi_old) k3
                                  DeepSeek-V3.2 (arXiv 2512.02556, eq. 7): a drawn from pi_old;
                                  the ratio (with its gradient) makes both the value and, in
                                  the loss, the gradient unbiased for KL(pi_theta || pi_ref)

d is clamped to [-20, 20] as k3's (the TPO repo's grpo_loss, JeanKaddour/tpo); TRL's
GRPOTrainer computes k3 the same way (trl/trainer/grpo_trainer.py). Which placement (--kl-in
loss or reward) makes which estimator's gradient unbiased is tested exactly in
tests/controlrl/test_kl_estimators.py: in the loss k2 (on-policy) and k3-unbiased, in the
reward k1.
"""

from __future__ import annotations

import torch

from controlrl.objective import KL_ESTIMATORS, k3, register


@register(KL_ESTIMATORS, "k1")
def k1(logp: torch.Tensor, ref_logp: torch.Tensor, old_logp=None) -> torch.Tensor:
    """log pi_theta(a) - log pi_ref(a)."""
    return (logp - ref_logp).clamp(-20.0, 20.0)


@register(KL_ESTIMATORS, "k2")
def k2(logp: torch.Tensor, ref_logp: torch.Tensor, old_logp=None) -> torch.Tensor:
    """(log pi_theta(a) - log pi_ref(a))^2 / 2."""
    return 0.5 * (ref_logp - logp).clamp(-20.0, 20.0).square()


@register(KL_ESTIMATORS, "k3-unbiased")
def k3_unbiased(
    logp: torch.Tensor, ref_logp: torch.Tensor, old_logp: torch.Tensor | None = None
) -> torch.Tensor:
    """exp(log pi_theta - log pi_old) k3: k3 importance-weighted to samples of pi_old (without
    old_logp, as in the reward at theta = theta_old, the weight is 1: k3)."""
    if old_logp is None:
        return k3(logp, ref_logp)
    return (logp - old_logp).exp() * k3(logp, ref_logp)
