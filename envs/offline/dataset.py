"""The in-memory offline dataset every loader returns and every offline algorithm reads."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

ARRAYS = ("observations", "actions", "rewards", "next_observations", "terminals", "timeouts")


@dataclass
class Dataset:
    """M transitions (s, a, r, s', terminal, timeout) in D4RL's flat layout, one row each.

    terminals[i]: the episode ended in a true terminal state at transition i (no bootstrap).
    timeouts[i]: the episode was cut by the time limit at transition i (bootstrap from s': a
    timeout is not a terminal). Both False: the episode goes on at row i + 1.
    env_id: the Gymnasium id to evaluate on; ref_min_score / ref_max_score: the returns that
    map to normalised scores 0 and 100 (D4RL's convention), None when unknown."""

    observations: np.ndarray  # [M, obs_dim] float32
    actions: np.ndarray  # [M, act_dim] float32
    rewards: np.ndarray  # [M] float32
    next_observations: np.ndarray  # [M, obs_dim] float32
    terminals: np.ndarray  # [M] bool
    timeouts: np.ndarray  # [M] bool
    env_id: str
    ref_min_score: float | None = None
    ref_max_score: float | None = None
    metadata: dict = field(default_factory=dict)
    source: str = "<memory>"  # the file or directory it came from, for error messages

    def __post_init__(self) -> None:
        m = len(self.observations)
        wanted = {
            "observations": (np.float32, 2),
            "actions": (np.float32, 2),
            "rewards": (np.float32, 1),
            "next_observations": (np.float32, 2),
            "terminals": (np.bool_, 1),
            "timeouts": (np.bool_, 1),
        }
        for key, (dtype, ndim) in wanted.items():
            arr = getattr(self, key)
            if not isinstance(arr, np.ndarray) or arr.dtype != dtype or arr.ndim != ndim:
                got = f"{getattr(arr, 'dtype', type(arr))} with {getattr(arr, 'ndim', '?')} dims"
                raise ValueError(
                    f"{self.source}: '{key}' must be {np.dtype(dtype)} with {ndim} dims, got {got}"
                )
            if len(arr) != m:
                raise ValueError(f"{self.source}: '{key}' has {len(arr)} rows, observations {m}")
        if self.next_observations.shape[1:] != self.observations.shape[1:]:
            raise ValueError(f"{self.source}: 'next_observations' shape differs from observations")

    def __len__(self) -> int:
        return len(self.observations)

    def normalized_score(self, episode_return: float | np.ndarray) -> float | np.ndarray:
        """100 * (R - ref_min) / (ref_max - ref_min), D4RL's normalised score."""
        if self.ref_min_score is None or self.ref_max_score is None:
            raise ValueError(f"{self.source}: no reference scores to normalise with")
        span = self.ref_max_score - self.ref_min_score
        return 100.0 * (episode_return - self.ref_min_score) / span
