"""EnvPool backend: ids 'envpool:<id>' (e.g. envpool:HalfCheetah-v5, envpool:CheetahRun-v1).

EnvPool steps a batch of C++ environments in its own threads. Its autoreset is next-step (the
step after an episode ends returns the reset observation and ignores the action); this adapter
turns that into the same-step convention of every other backend: when an episode ends, the ended
envs are reset at once (EnvPool's partial reset by env id), the returned observation is the new
episode's first one, and the true final observation goes to info['final_obs'].
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
from gymnasium.vector.utils import batch_space

from envs.errors import check_known


def _envpool():
    import envpool  # optional extra 'envpool'

    return envpool


def check_id(name: str) -> None:
    """Raise if EnvPool does not register `name`, naming the closest ids."""
    check_known(name, lambda: _envpool().list_all_envs(), "envpool", extra="envpool")


class EnvPoolVectorEnv(gym.vector.VectorEnv):
    """A Gymnasium VectorEnv over one EnvPool batch, with same-step autoreset.

    EnvPool seeds at construction, so reset(seed=s) rebuilds the pool when s changes (the pool
    seeds its envs s, s+1, ..., like Gymnasium's vector envs).
    """

    def __init__(self, name: str, num_envs: int, num_threads: int = 0, **kwargs) -> None:
        self.name = name
        self.num_envs = num_envs
        self._num_threads = num_threads
        self._kwargs = kwargs
        self._seed: int | None = None
        self._pool = self._build(0)
        self.single_observation_space = self._pool.single_observation_space
        self.single_action_space = self._pool.single_action_space
        # EnvPool's own spaces are one env's; a VectorEnv's are the batch's, as Gymnasium's are
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self.metadata = {"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP}

    def _build(self, seed: int):
        return _envpool().make_gymnasium(
            self.name,
            num_envs=self.num_envs,
            seed=seed,
            num_threads=self._num_threads,
            **self._kwargs,
        )

    def reset(self, *, seed: int | None = None, options=None):
        if seed is not None and seed != self._seed:
            self._pool.close()
            self._pool = self._build(seed)
            self._seed = seed
        obs, _ = self._pool.reset()
        return obs, {}

    def step(self, actions):
        obs, reward, terminated, truncated, _ = self._pool.step(np.asarray(actions))
        ended = terminated | truncated
        info = {}
        if ended.any():
            ids = np.flatnonzero(ended).astype(np.int32)
            info = {"final_obs": obs.copy(), "_final_obs": ended}
            reset_obs, reset_info = self._pool.reset(ids)
            obs = obs.copy()
            obs[reset_info["env_id"]] = reset_obs
        return obs, reward, terminated, truncated, info

    def close_extras(self, **kwargs):
        self._pool.close()


def make(
    name: str,
    num_envs: int,
    vectorization: str = "sync",
    render_mode: str | None = None,
    copy: bool = True,
) -> gym.vector.VectorEnv:
    """EnvPool's own threads replace Python vectorization; `vectorization` is ignored."""
    if render_mode is not None:
        raise ValueError("envpool: ids do not render here; evaluate on the Gymnasium id instead")
    return EnvPoolVectorEnv(name, num_envs)
