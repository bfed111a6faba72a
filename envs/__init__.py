"""make(env_id, num_envs, seed) -> gymnasium VectorEnv, whatever the backend.

Plain ids ("Hopper-v5", "CartPole-v1") use Gymnasium (envs/gym_mujoco.py). Backend prefixes
("brax:", "dmc:", "envpool:", "bandit:") are dispatched here as their modules land.
"""

from __future__ import annotations

import gymnasium as gym

from envs import gym_mujoco
from envs.errors import UnknownEnvError

__all__ = ["UnknownEnvError", "check_env_id", "make", "split_id"]

BACKENDS = {"gym": gym_mujoco}
PLANNED = ("brax", "dmc", "envpool", "bandit")


def split_id(env_id: str) -> tuple[str, str]:
    """('gym', 'Hopper-v5') for plain ids, (prefix, name) for 'prefix:name'."""
    if ":" in env_id:
        prefix, name = env_id.split(":", 1)
        return prefix, name
    return "gym", env_id


def check_env_id(env_id: str) -> None:
    """Raise UnknownEnvError naming the backend and the closest known ids; starts nothing."""
    backend, name = split_id(env_id)
    if backend not in BACKENDS:
        known = ", ".join(sorted(BACKENDS))
        if backend in PLANNED:
            raise UnknownEnvError(
                f"env backend '{backend}' is not installed in this version (available: {known})"
            )
        raise UnknownEnvError(f"unknown env backend '{backend}' in '{env_id}' (available: {known})")
    BACKENDS[backend].check_id(name)


def make(
    env_id: str, num_envs: int, seed: int, vectorization: str = "sync", **kwargs
) -> gym.vector.VectorEnv:
    """A VectorEnv with same-step autoreset and infos['final_obs'] for ended episodes."""
    check_env_id(env_id)
    backend, name = split_id(env_id)
    envs = BACKENDS[backend].make(name, num_envs, vectorization=vectorization, **kwargs)
    envs.action_space.seed(seed)
    return envs
