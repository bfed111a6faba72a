"""DeepMind Control Suite backend: ids 'dmc:<domain>-<task>' as a Gymnasium SyncVectorEnv.

Each suite task becomes a gymnasium.Env with the observation dict flattened in the suite's own key
order (float64, like the suite) and a Box action space from the action spec. The suite's time
limit (1000 control steps for most tasks) ends an episode with discount 1: that is reported as
truncation, so the learner bootstraps from the final observation; discount 0 would be a
termination.
"""

from __future__ import annotations

import os

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode

from envs.errors import check_known

# dm_control picks its rendering backend at import time; headless EGL unless the user chose one
os.environ.setdefault("MUJOCO_GL", "egl")


def _suite():
    from dm_control import suite  # imported lazily: the optional 'dmc' extra

    return suite


def known_ids() -> list[str]:
    return [f"{domain}-{task}" for domain, task in _suite().ALL_TASKS]


def check_id(name: str) -> None:
    """Raise if 'domain-task' is not a suite task, naming the closest ones."""
    check_known(name, known_ids, "dmc", extra="dmc", form=" (domain-task)")


class DMCEnv(gym.Env):
    """One dm_control suite task behind the Gymnasium API."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 30}

    def __init__(
        self,
        domain: str,
        task: str,
        render_mode: str | None = None,
        render_size: tuple[int, int] = (240, 320),
        camera_id: int = 0,
    ) -> None:
        self._env = _suite().load(domain, task, task_kwargs={"random": 0})
        spec = self._env.observation_spec()
        self._keys = list(spec)
        dim = sum(int(np.prod(s.shape)) for s in spec.values())
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (dim,), np.float64)
        a = self._env.action_spec()
        self.action_space = gym.spaces.Box(
            a.minimum.astype(np.float32), a.maximum.astype(np.float32), a.shape, np.float32
        )
        self.render_mode = render_mode
        self._render_size = render_size
        self._camera_id = camera_id
        self.metadata = {**self.metadata, "render_fps": round(1.0 / self._env.control_timestep())}

    def _flat(self, observation) -> np.ndarray:
        return np.concatenate([np.asarray(observation[k], np.float64).ravel() for k in self._keys])

    def reset(self, *, seed: int | None = None, options=None):
        super().reset(seed=seed)
        if seed is not None:
            # the task draws its initial state from this RandomState
            self._env.task.random.seed(seed % 2**32)  # RandomState takes 32 bits
        ts = self._env.reset()
        return self._flat(ts.observation), {}

    def step(self, action):
        ts = self._env.step(np.asarray(action, np.float64))
        ended = ts.last()
        terminated = bool(ended and ts.discount == 0.0)
        truncated = bool(ended and not terminated)
        return self._flat(ts.observation), float(ts.reward or 0.0), terminated, truncated, {}

    def render(self):
        h, w = self._render_size
        return self._env.physics.render(height=h, width=w, camera_id=self._camera_id)

    def close(self):
        self._env.close()


def make(
    name: str,
    num_envs: int,
    vectorization: str = "sync",
    render_mode: str | None = None,
    copy: bool = True,
) -> gym.vector.VectorEnv:
    """num_envs copies of suite task 'domain-task' with SAME_STEP autoreset."""
    if vectorization not in ("sync", "async"):
        raise ValueError(f"vectorization must be 'sync' or 'async', got {vectorization!r}")
    domain, task = name.split("-", 1)

    def thunk():
        return DMCEnv(domain, task, render_mode=render_mode)

    fns = [thunk] * num_envs
    if vectorization == "async":
        return gym.vector.AsyncVectorEnv(
            fns, autoreset_mode=AutoresetMode.SAME_STEP, copy=copy, context="fork"
        )
    return gym.vector.SyncVectorEnv(fns, autoreset_mode=AutoresetMode.SAME_STEP, copy=copy)
