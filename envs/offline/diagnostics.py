"""Dataset diagnostics of Schweighofer et al. (2022, "A Dataset Perspective on Offline
Reinforcement Learning"): SACo, exploration (unique state-action pairs relative to a reference
dataset's), and TQ, exploitation (mean episode return normalised between a minimal and a maximal
reference return).

The paper's MDPs are discrete; for continuous observations and actions the pairs are counted
after rounding to `decimals` (None: exact float values, right for tabular data stored as
indices)."""

from __future__ import annotations

import numpy as np

from envs.offline.dataset import Dataset


def episode_returns(data: Dataset) -> np.ndarray:
    """Undiscounted return of every complete episode (ended by a terminal or a timeout)."""
    ends = np.flatnonzero(data.terminals | data.timeouts)
    if len(ends) == 0:
        raise ValueError(f"{data.source}: no episode ends (terminals or timeouts) in the dataset")
    sums = np.cumsum(data.rewards, dtype=np.float64)[ends]
    return np.diff(np.concatenate([[0.0], sums]))


def unique_pairs(data: Dataset, decimals: int | None = None) -> int:
    """Number of distinct (observation, action) rows, after rounding to `decimals`."""
    pairs = np.concatenate([data.observations, data.actions], axis=1).astype(np.float64)
    if decimals is not None:
        pairs = np.round(pairs, decimals) + 0.0  # + 0.0: -0.0 and 0.0 count as one
    return len(np.unique(pairs, axis=0))


def saco(data: Dataset, reference: Dataset, decimals: int | None = None) -> float:
    """State-action coverage: unique pairs of `data` over unique pairs of `reference` (the paper
    uses the replay dataset of an online learner as reference)."""
    return unique_pairs(data, decimals) / unique_pairs(reference, decimals)


def tq(data: Dataset, ref_min: float | None = None, ref_max: float | None = None) -> float:
    """Trajectory quality: (mean episode return - ref_min) / (ref_max - ref_min); the defaults
    are the dataset's own ref_min_score / ref_max_score (random and expert returns)."""
    lo = data.ref_min_score if ref_min is None else ref_min
    hi = data.ref_max_score if ref_max is None else ref_max
    if lo is None or hi is None or hi == lo:
        raise ValueError(f"{data.source}: TQ needs distinct ref_min and ref_max, got {lo}, {hi}")
    return float((episode_returns(data).mean() - lo) / (hi - lo))
