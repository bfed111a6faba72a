"""Seeding, the named seed derivations of a run, and RNG state capture for exact resumes."""

from __future__ import annotations

import random
import sys

import numpy as np
import torch

# Offsets of the derived seeds: far apart, so that the streams of seeds s and s + 1 never meet.
RESET_STRIDE = 1_000_003  # a prime: env resets of iterations i and j of nearby seeds never collide
EVAL_OFFSET = 10_000


def seed_everything(seed: int, torch_deterministic: bool = True) -> None:
    """Seed python, numpy's global stream and torch; deterministic torch kernels if asked."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    set_deterministic(torch_deterministic)


def set_deterministic(mode: bool) -> None:
    """torch.use_deterministic_algorithms(mode, warn_only=True) without its import of
    torch._inductor (to set Inductor's flag, which only torch.compile reads): that import costs
    ~1.5 s of every process start. When Inductor is already
    loaded, or torch lacks the C setter, the public call does both."""
    setter = getattr(torch._C, "_set_deterministic_algorithms", None)
    if setter is None or "torch._inductor" in sys.modules:
        torch.use_deterministic_algorithms(mode, warn_only=True)
    else:
        setter(mode, warn_only=True)


def reset_seed(seed: int, iteration: int) -> int:
    """Seed of the training envs' reset when a run starts (or resumes) after `iteration`
    iterations: fresh episodes on resume, never the ones the run began with."""
    return seed + RESET_STRIDE * iteration


def eval_seed(seed: int) -> int:
    """Seed of the evaluation envs: the same episodes at every evaluation of a run, and never
    the training envs' episodes."""
    return seed + EVAL_OFFSET


def rng_state() -> dict:
    """The torch RNG state (the only stream a run draws from), checkpoint-safe."""
    return {"torch": torch.get_rng_state()}


def set_rng_state(state: dict) -> None:
    """Restore what rng_state captured."""
    torch.set_rng_state(state["torch"])
