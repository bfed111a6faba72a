"""Gymnasium backend: MuJoCo v5 and classic-control ids as a Sync/AsyncVectorEnv."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, SyncVectorEnv

from envs.errors import UnknownEnvError, check_known
from envs.start_states import StartStates

# headless offscreen rendering (videos) by default; MuJoCo reads this when it first renders
os.environ.setdefault("MUJOCO_GL", "egl")


def check_id(name: str) -> None:
    """Raise if `name` is not a registered Gymnasium id, naming the closest ones."""
    check_known(name, lambda: gym.registry, "gym", form=" (Gymnasium)")


def check_supported(name: str) -> None:
    """Raise UnknownEnvError if the algorithm scripts cannot serve the registered id `name`:
    its package is not installed (Box2D's), it is deprecated, its observations are not a flat
    Box (FrozenLake's Discrete, Blackjack's Tuple, CarRacing's image) or its actions neither a
    Box nor Discrete. Builds the env once to read its spaces; steps nothing."""
    try:
        env = gym.make(name)
    except (gym.error.Error, ImportError) as exc:  # DependencyNotInstalled, DeprecatedEnv,
        # or a compatibility id whose shim is not installed (GymV26Environment-v0: shimmy)
        line = " ".join(str(exc).split())
        raise UnknownEnvError(f"'{name}' cannot be made here: {line}") from None
    obs_space, act_space = env.observation_space, env.action_space
    env.close()
    if not isinstance(obs_space, gym.spaces.Box) or len(obs_space.shape) != 1:
        raise UnknownEnvError(
            f"'{name}' has {obs_space} observations; the scripts take flat Box observations"
        )
    if not isinstance(act_space, gym.spaces.Box | gym.spaces.Discrete):
        raise UnknownEnvError(
            f"'{name}' has {act_space} actions; the scripts take Box or Discrete actions"
        )


def missing_render_package(name: str) -> str | None:
    """The package that rendering `name` needs and this install lacks (pygame for classic
    control, toy text and Box2D; MuJoCo ids render without it), or None."""
    entry = gym.spec(name).entry_point
    if isinstance(entry, str) and ".mujoco" in entry:
        return None
    return "pygame" if importlib.util.find_spec("pygame") is None else None


class LeanSyncVectorEnv(SyncVectorEnv):
    """Gymnasium's SyncVectorEnv with SAME_STEP autoreset and a lean step: each env's
    observation is written straight into the batch array, and infos hold only what an ended
    episode leaves behind (final_obs, final_info and their masks), not every env's per-step info
    merged into arrays (~14% of a rollout at 8 envs). Reset, spaces, seeding (env i gets
    seed + i), render, call and close are SyncVectorEnv's. Box observations only."""

    def __init__(self, env_fns, copy: bool = True) -> None:
        super().__init__(env_fns, copy=copy, autoreset_mode=AutoresetMode.SAME_STEP)
        if not isinstance(self.single_observation_space, gym.spaces.Box):
            raise TypeError(
                f"LeanSyncVectorEnv needs Box observations, got {self.single_observation_space}"
            )

    def step(
        self, actions: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Step every env with actions[i]; an ended env is reset at once (obs is the reset one,
        infos['final_obs'][i] the episode's last)."""
        batch_obs, env_obs = self._observations, self._env_obs
        rewards, terminations, truncations = self._rewards, self._terminations, self._truncations
        infos: dict[str, Any] = {}
        for i, env in enumerate(self.envs):
            obs, rewards[i], terminated, truncated, info = env.step(actions[i])
            terminations[i], truncations[i] = terminated, truncated
            if terminated or truncated:
                infos = self._add_info(infos, {"final_obs": obs, "final_info": info}, i)
                obs, _ = env.reset()
            batch_obs[i] = obs
            env_obs[i] = obs  # what SyncVectorEnv.reset(options={"reset_mask": ...}) batches
        return (
            batch_obs.copy() if self.copy else batch_obs,
            rewards.copy(),
            terminations.copy(),
            truncations.copy(),
            infos,
        )


def make(
    name: str,
    num_envs: int,
    vectorization: str = "sync",
    render_mode: str | None = None,
    copy: bool = True,
    start_states: np.ndarray | None = None,
    wrap: Callable[[gym.Env], gym.Env] | None = None,
) -> gym.vector.VectorEnv:
    """num_envs copies of gym.make(name) with SAME_STEP autoreset.

    wrap (sync only): applied to each env after it is made, e.g. envs.adversarial's
    AdversarialForces.

    start_states [n, obs_dim] (sync only; envs.start_states.check them first): every episode
    starts from a row drawn uniformly (StartStates) instead of the env's own reset.

    Sync (Box observations): LeanSyncVectorEnv, whose per-step infos hold only final_obs and
    final_info of ended envs. copy=False returns the vector env's own observation array on each
    step (no copy): for callers that copy it into a buffer at once, like controlrl's Collector.
    Async (one process per env) only pays off with many cores: on 2 cores sync is faster.
    """
    if vectorization not in ("sync", "async"):
        raise ValueError(f"vectorization must be 'sync' or 'async', got {vectorization!r}")
    if start_states is not None and vectorization != "sync":
        raise ValueError("start_states needs sync vectorization")
    if wrap is not None and vectorization != "sync":
        raise ValueError("wrap needs sync vectorization")
    if vectorization == "sync":

        def build() -> gym.Env:
            env = gym.make(name, render_mode=render_mode)
            env = env if start_states is None else StartStates(env, start_states)
            return env if wrap is None else wrap(env)

        env_fns = [build] * num_envs
        first = env_fns[0]()  # built once here to check its observation space, then reused
        fns = [lambda: first] + env_fns[1:]
        if isinstance(first.observation_space, gym.spaces.Box):
            return LeanSyncVectorEnv(fns, copy=copy)
        return SyncVectorEnv(fns, copy=copy, autoreset_mode=AutoresetMode.SAME_STEP)
    return gym.make_vec(
        name,
        num_envs=num_envs,
        vectorization_mode=vectorization,
        vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP, "copy": copy, "context": "fork"},
        render_mode=render_mode,
    )
