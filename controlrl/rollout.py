"""Collect T steps from a vector env into a RolloutBuffer, with episode statistics."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import gymnasium as gym
import numpy as np
import torch

from controlrl.buffers import RolloutBuffer
from controlrl.normalize import ObsNormalizer, RewardScaler


@dataclass
class Episode:
    """One finished training episode (raw, unscaled reward)."""

    ret: float
    length: int
    step: int  # global env step at which it ended


class Collector:
    """Steps a vector env with a policy and keeps its state (current obs, episode sums) between
    collections. Truncated episodes keep their true final observation for bootstrapping."""

    def __init__(
        self,
        envs: gym.vector.VectorEnv,
        obs_normalizer: ObsNormalizer | None,
        reward_scaler: RewardScaler | None,
        truncation_as_terminal: bool = False,
    ) -> None:
        self.envs = envs
        self.num_envs = envs.num_envs
        self.obs_normalizer = obs_normalizer
        self.reward_scaler = reward_scaler
        self.truncation_as_terminal = truncation_as_terminal
        space = envs.single_action_space
        self.discrete = isinstance(space, gym.spaces.Discrete)
        if not self.discrete:
            self.low = space.low.astype(np.float32)
            self.high = space.high.astype(np.float32)
        self.ep_return = np.zeros(self.num_envs, np.float64)
        # episode lengths as (vector steps so far) - (vector step the episode began at): no
        # per-step increment
        self._steps = 0
        self._ep_start = np.zeros(self.num_envs, np.int64)
        self.global_step = 0
        self.obs: np.ndarray | None = None

    def _normalize(self, obs: np.ndarray, update: bool = True) -> np.ndarray:
        obs = obs.astype(np.float32, copy=False)
        return self.obs_normalizer(obs, update) if self.obs_normalizer is not None else obs

    def reset(self, seed: int) -> None:
        """Start a fresh episode in every env (seeds seed, seed+1, ...): the reset observations
        are folded into the observation statistics once, like every observation; the episode
        sums and the reward scaler's running discounted returns restart at zero, as they do
        when an episode ends. A run starts, and a resumed run restarts, through here."""
        obs, _ = self.envs.reset(seed=seed)
        self.obs = self._normalize(obs)
        self.ep_return[:] = 0.0
        self._ep_start[:] = self._steps
        if self.reward_scaler is not None:  # restored mid-episode on resume: the episode is gone
            self.reward_scaler.returns[:] = 0.0

    def collect(
        self, buffer: RolloutBuffer, act: Callable[[torch.Tensor], torch.Tensor]
    ) -> list[Episode]:
        """Fill buffer with T steps; act maps obs [N, d] to sampled actions (unclipped)."""
        assert self.obs is not None, "call reset() first"
        buffer.reset()
        episodes: list[Episode] = []
        buffer.obs[0] = self.obs
        with torch.inference_mode():
            self._collect(buffer, act, episodes)
        self.obs = buffer.last_obs.copy()  # the loop wrote the last observation there
        return episodes

    def _collect(self, buffer: RolloutBuffer, act, episodes: list[Episode]) -> None:
        # the per-step work is written for few numpy calls and no copies: each step's
        # normalised observation goes straight into the buffer row the policy reads next;
        # np.maximum + np.minimum is np.clip (same numbers) at half its call overhead
        T, N = buffer.num_steps, self.num_envs
        step = self.envs.step
        obs_normalizer, reward_scaler = self.obs_normalizer, self.reward_scaler
        ep_return, ep_start = self.ep_return, self._ep_start
        low, high = (None, None) if self.discrete else (self.low, self.high)
        if low is not None and N == 1:  # arrays of the action's own shape: no broadcasting
            low, high = low[None], high[None]
        elif low is not None and (low == low.flat[0]).all() and (high == high.flat[0]).all():
            low, high = float(low.flat[0]), float(high.flat[0])  # float32-exact scalars: faster
        rows = [*buffer.obs[1:], buffer.last_obs]  # where the observation after step t goes
        for t in range(T):
            action = act(torch.from_numpy(buffer.obs[t])).numpy()
            buffer.actions[t] = action
            if low is not None:
                action = np.maximum(action, low)
                np.minimum(action, high, out=action)
            obs, reward, terminated, truncated, info = step(action)
            self.global_step += N
            ended = np.logical_or(terminated, truncated, out=buffer.ended[t])  # stored as made
            if self.truncation_as_terminal:
                terminated = ended
            ep_return += reward
            self._steps += 1
            if reward_scaler is not None:
                reward_scaler(reward, ended, out=buffer.rewards[t])
            else:
                buffer.rewards[t] = reward
            buffer.terminated[t] = terminated
            if np.count_nonzero(ended):
                for n in np.flatnonzero(ended):
                    length = self._steps - int(ep_start[n])
                    episodes.append(Episode(float(ep_return[n]), length, self.global_step))
                    if not terminated[n]:  # truncated: bootstrap from the real final obs
                        final = np.asarray(info["final_obs"][n], np.float32)[None]
                        buffer.trunc_index.append((t, int(n)))
                        buffer.trunc_obs.append(self._normalize(final, update=False)[0])
                ep_return[ended] = 0.0
                ep_start[ended] = self._steps
            if obs_normalizer is not None:
                obs_normalizer(obs.astype(np.float32, copy=False), out=rows[t])
            else:
                rows[t][...] = obs  # the same float32 cast as astype
