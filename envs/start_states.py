"""Episodes that start from given states: a wrapper that, on every reset, puts a classic-control
env (its `state` is its observation: MountainCar, CartPole) into one of the rows of a state
array, drawn uniformly with the wrapper's own generator (seeded by reset(seed=...)). A mixture
of start distributions is a state array with rows repeated in proportion.

    states = load("starts.npy")          # float array [n, obs_dim]; ValueError naming the file
    check("SparseMountainCar-v0", states)  # ValueError unless the env can start from them
    env = StartStates(gym.make("SparseMountainCar-v0"), states)
"""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np


def load(path: str | Path) -> np.ndarray:
    """The state array [n, d] (float64) of an .npy file; ValueError naming the file if it is
    missing, not a 2-d finite float array, or empty (never unpickles)."""
    try:
        states = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise ValueError(
            f"{path}: not a readable .npy array ({str(exc).splitlines()[0]})"
        ) from None
    if states.ndim != 2 or states.shape[0] == 0 or not np.issubdtype(states.dtype, np.number):
        raise ValueError(f"{path}: expected a numeric array [n >= 1, obs_dim], got {states.shape}")
    states = states.astype(np.float64)
    if not np.isfinite(states).all():
        raise ValueError(f"{path}: holds nan or inf")
    return states


def check(env_id: str, states: np.ndarray) -> None:
    """ValueError unless the Gymnasium id env_id can start from every row of states: its
    unwrapped env has a `state` of the observation's shape, and every row lies in the
    observation space."""
    env = gym.make(env_id)
    try:
        obs, _ = env.reset(seed=0)
        state = getattr(env.unwrapped, "state", None)
        if state is None or np.shape(state) != np.shape(obs):
            raise ValueError(f"{env_id}: its state is not its observation; cannot set start states")
        if states.shape[1] != obs.shape[0]:
            raise ValueError(f"rows of {states.shape[1]} numbers, {env_id} observes {obs.shape[0]}")
        space = env.observation_space
        outside = ~((states >= space.low) & (states <= space.high)).all(1)
        if outside.any():
            row = int(np.flatnonzero(outside)[0])
            raise ValueError(f"row {row} {states[row].tolist()} lies outside {env_id}'s {space}")
    finally:
        env.close()


class StartStates(gym.Wrapper):
    """Every reset puts the env into a row of `states` drawn uniformly (own generator, seeded
    by reset(seed=...)); the observation returned is that state."""

    def __init__(self, env: gym.Env, states: np.ndarray) -> None:
        super().__init__(env)
        self.states = np.asarray(states, np.float64)
        self.rng = np.random.default_rng()

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        """The wrapped env's reset (time limit included), then its state set to a drawn row."""
        _, info = self.env.reset(seed=seed, options=options)
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        row = self.states[self.rng.integers(len(self.states))]
        self.env.unwrapped.state = row.copy()
        return row.astype(self.observation_space.dtype), info
