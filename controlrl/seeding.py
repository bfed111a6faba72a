"""Seeding and RNG state capture (for reproducible runs and exact resumes)."""

from __future__ import annotations

import random

import numpy as np
import torch


def seed_everything(seed: int, torch_deterministic: bool = True) -> np.random.Generator:
    """Seed python, numpy and torch; return a numpy Generator for the run's own sampling."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    torch.use_deterministic_algorithms(torch_deterministic, warn_only=True)
    return np.random.default_rng(seed)


def rng_state(rng: np.random.Generator) -> dict:
    """RNG states of torch and the run's numpy Generator, as checkpoint-safe objects."""
    return {"torch": torch.get_rng_state(), "numpy": rng.bit_generator.state}


def set_rng_state(state: dict, rng: np.random.Generator) -> None:
    """Restore what rng_state captured."""
    torch.set_rng_state(state["torch"])
    rng.bit_generator.state = state["numpy"]
