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
    seeds its envs s, s+1, ..., like Gymnasium's vector envs). reset(seed=[s_0, s_1, ...]) seeds
    env i with s_i, as Gymnasium's vector envs do: one pool per run of consecutive seeds (a
    population's seeds, each with its N envs; controlrl/population_control.py), stepped in turn.
    """

    def __init__(self, name: str, num_envs: int, num_threads: int = 0, **kwargs) -> None:
        self.name = name
        self.num_envs = num_envs
        self._num_threads = num_threads
        self._kwargs = kwargs
        self._seed: int | list[int] | None = None
        self._pool = self._build(0, num_envs)
        self._pools = [self._pool]  # more than one only for a seed list (see reset)
        self.single_observation_space = self._pool.single_observation_space
        self.single_action_space = self._pool.single_action_space
        # EnvPool's own spaces are one env's; a VectorEnv's are the batch's, as Gymnasium's are
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self.metadata = {"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP}

    def _build(self, seed: int, num_envs: int):
        return _envpool().make_gymnasium(
            self.name,
            num_envs=num_envs,
            seed=seed,
            num_threads=self._num_threads,
            **self._kwargs,
        )

    def reset(self, *, seed: int | list[int] | None = None, options=None):
        if seed is not None and seed != self._seed:
            for pool in self._pools:
                pool.close()
            one = np.ndim(seed) == 0
            runs = [(int(seed), self.num_envs)] if one else _consecutive_runs(list(seed))
            if sum(n for _, n in runs) != self.num_envs:
                raise ValueError(f"{len(seed)} seeds for {self.num_envs} envs")
            self._pools = [self._build(first, n) for first, n in runs]
            self._pool = self._pools[0]
            self._seed = seed
        parts = [pool.reset()[0] for pool in self._pools]
        return (parts[0] if len(parts) == 1 else np.concatenate(parts)), {}

    def step(self, actions):
        actions = np.asarray(actions)
        if len(self._pools) == 1:
            return self._step_pool(self._pool, actions)
        bounds = np.cumsum([0] + [pool.config["num_envs"] for pool in self._pools])
        parts = [
            self._step_pool(pool, actions[lo:hi])
            for pool, lo, hi in zip(self._pools, bounds[:-1], bounds[1:])
        ]
        obs, reward, terminated, truncated = (
            np.concatenate([p[i] for p in parts]) for i in range(4)
        )
        info = {}
        if (terminated | truncated).any():
            finals = [p[4].get("final_obs", p[0]) for p in parts]
            info = {"final_obs": np.concatenate(finals), "_final_obs": terminated | truncated}
        return obs, reward, terminated, truncated, info

    @staticmethod
    def _step_pool(pool, actions):
        obs, reward, terminated, truncated, _ = pool.step(actions)
        ended = terminated | truncated
        info = {}
        if ended.any():
            ids = np.flatnonzero(ended).astype(np.int32)
            info = {"final_obs": obs.copy(), "_final_obs": ended}
            reset_obs, reset_info = pool.reset(ids)
            obs = obs.copy()
            obs[reset_info["env_id"]] = reset_obs
        return obs, reward, terminated, truncated, info

    def close_extras(self, **kwargs):
        for pool in self._pools:
            pool.close()


def _consecutive_runs(seeds: list[int]) -> list[tuple[int, int]]:
    """[(first seed, length)] of the maximal runs s, s + 1, ... in seeds, in order."""
    runs: list[tuple[int, int]] = []
    for s in seeds:
        if runs and s == runs[-1][0] + runs[-1][1]:
            runs[-1] = (runs[-1][0], runs[-1][1] + 1)
        else:
            runs.append((int(s), 1))
    return runs


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
