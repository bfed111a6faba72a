"""Group-relative advantages (GRPO, Shao et al. 2024, "DeepSeekMath", arXiv 2402.03300): the ONE
place the group baseline and its normalisation live, vectorised over any number of groups.

A group is the last axis: G outputs (arm pulls, episodes from one start state) scored for the
same context. The std is the unbiased one and its epsilon is added outside the square root,
as huggingface/trl trl/trainer/grpo_trainer.py ((r - mean) / (std + 1e-4)); verl's
core_algos.py uses the same form with 1e-6. A group whose rewards are all equal carries no
signal: its advantages are exactly 0 (not rounding noise divided by eps).
"""

from __future__ import annotations

import torch

SCALES = ("mean", "mean_std")


def zero_variance_mask(rewards: torch.Tensor) -> torch.Tensor:
    """True for the groups (last axis) whose rewards are all equal [...]."""
    if rewards.ndim == 0 or rewards.shape[-1] == 0:
        raise ValueError(f"rewards has shape {tuple(rewards.shape)}, expected [..., G] with G >= 1")
    return (rewards == rewards[..., :1]).all(dim=-1)


def group_advantages(
    rewards: torch.Tensor, scale: str = "mean_std", eps: float = 1e-4
) -> torch.Tensor:
    """Advantages [..., G] of rewards [..., G]: r - mean(r) ("mean", Dr. GRPO / RLOO-style
    centring) or (r - mean(r)) / (std(r) + eps) ("mean_std", GRPO), std unbiased; exactly 0
    in zero-variance groups. G = 1 groups are zero-variance (a lone sample has no baseline)."""
    if scale not in SCALES:
        raise ValueError(f"scale = {scale!r}, expected one of {SCALES}")
    if not eps >= 0:
        raise ValueError(f"eps = {eps} must be >= 0")
    flat = zero_variance_mask(rewards)
    centred = rewards - rewards.mean(dim=-1, keepdim=True)
    if scale == "mean_std":
        # G = 1 has no unbiased std (NaN); those groups are zeroed below, as are all flat ones
        std = rewards.std(dim=-1, keepdim=True) if rewards.shape[-1] > 1 else centred
        centred = centred / (std + eps)
    return torch.where(flat.unsqueeze(-1), torch.zeros_like(centred), centred)


def zero_variance_fraction(rewards: torch.Tensor) -> float:
    """Fraction of groups (last axis) that carry no signal: what GRPO-with-filtering drops."""
    return float(zero_variance_mask(rewards).float().mean())


def masked_group_advantages(
    rewards: torch.Tensor, mask: torch.Tensor, scale: str = "mean_std", eps: float = 1e-4
) -> torch.Tensor:
    """group_advantages for groups of different sizes, padded to a common last axis: the
    members where mask [..., G] is True are the group; each group's advantages equal
    group_advantages of its members alone, and padding gets 0."""
    if scale not in SCALES:
        raise ValueError(f"scale = {scale!r}, expected one of {SCALES}")
    if mask.shape != rewards.shape or mask.dtype != torch.bool:
        raise ValueError(f"mask must be bool of the rewards' shape {tuple(rewards.shape)}")
    m = mask.to(rewards.dtype)
    size = m.sum(dim=-1, keepdim=True)
    mean = (rewards * m).sum(dim=-1, keepdim=True) / size.clamp(min=1)
    centred = (rewards - mean) * m
    first = rewards.gather(-1, mask.to(torch.int64).argmax(dim=-1, keepdim=True))
    flat = ((rewards == first) | ~mask).all(dim=-1, keepdim=True)  # size 0 and 1 too
    if scale == "mean_std":
        var = (centred**2).sum(dim=-1, keepdim=True) / (size - 1).clamp(min=1)
        centred = centred / (var.sqrt() + eps)
    return torch.where(flat | ~mask, torch.zeros_like(centred), centred)
