"""Training-inference mismatch: rollouts drawn from a perturbed copy mu of the old policy (an
inference engine's temperature or lower-precision logits), and the importance corrections of
the policy loss by w = pi_old(a) / mu(a), with no gradient:

    none   w = 1                           biased by E_mu[g] - E_pi_old[g]
    tis    w = min(pi_old / mu, C)         truncated IS (Yao et al. 2025, "Your Efficient RL
                                           Framework Secretly Brings You Off-Policy RL
                                           Training"); unbiased when no weight reaches C
    mis    w = pi_old / mu on [low, high], masked IS / IcePop (Ling Team 2025, "Every Step
           0 outside                       Evolves", arXiv 2510.18855): masked tokens carry
                                           no gradient at all

Reference code: volcengine/verl verl/trainer/ppo/rollout_corr_helper.py (token-level
truncate and mask modes of the rollout correction).
"""

from __future__ import annotations

import contextlib

import torch

PERTURBATIONS = ("none", "temperature", "bf16")
CORRECTIONS = ("none", "tis", "mis")


def perturb_logits(logits: torch.Tensor, kind: str, temperature: float = 1.0) -> torch.Tensor:
    """The sampler's logits: logits / temperature, or logits rounded to bfloat16 and back."""
    if kind == "none":
        return logits
    if kind == "temperature":
        return logits / temperature
    if kind == "bf16":
        return logits.to(torch.bfloat16).to(logits.dtype)
    raise ValueError(f"perturbation {kind!r}, expected one of {PERTURBATIONS}")


def correction_weights(
    kind: str,
    old_logp: torch.Tensor,
    rollout_logp: torch.Tensor,
    cap: float = 2.0,
    low: float = 0.5,
    high: float = 2.0,
) -> torch.Tensor:
    """w per sampled action (no gradient) from log pi_old and log mu at that action."""
    if kind not in CORRECTIONS:
        raise ValueError(f"correction {kind!r}, expected one of {CORRECTIONS}")
    with torch.no_grad():
        rho = (old_logp - rollout_logp).exp()
        if kind == "none":
            return torch.ones_like(rho)
        if kind == "tis":
            return rho.clamp(max=cap)
        return torch.where((rho >= low) & (rho <= high), rho, torch.zeros_like(rho))


@contextlib.contextmanager
def perturbed_sampling(policy_cls: type, kind: str, temperature: float = 1.0):
    """Within the block, policy_cls.sample_with (a categorical policy's draw from logits and
    noise) draws from perturb_logits(logits) instead: the same noise stream, another policy."""
    original = policy_cls.__dict__["sample_with"]
    draw = original.__func__

    def sample_with(logits: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        return draw(perturb_logits(logits, kind, temperature), noise)

    policy_cls.sample_with = staticmethod(sample_with)
    try:
        yield
    finally:
        policy_cls.sample_with = original
