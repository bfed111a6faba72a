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
        self.ep_length = np.zeros(self.num_envs, np.int64)
        self.global_step = 0
        self.obs: np.ndarray | None = None

    def _normalize(self, obs: np.ndarray, update: bool = True) -> np.ndarray:
        obs = obs.astype(np.float32, copy=False)
        return self.obs_normalizer(obs, update) if self.obs_normalizer is not None else obs

    def reset(self, seed: int) -> None:
        """Reset every env (seeds seed, seed+1, ...) and the episode sums."""
        obs, _ = self.envs.reset(seed=seed)
        self.obs = self._normalize(obs)
        self.ep_return[:] = 0.0
        self.ep_length[:] = 0

    def collect(
        self, buffer: RolloutBuffer, act: Callable[[torch.Tensor], torch.Tensor]
    ) -> list[Episode]:
        """Fill buffer with T steps; act maps obs [N, d] to sampled actions (unclipped)."""
        assert self.obs is not None, "call reset() first"
        buffer.reset()
        episodes: list[Episode] = []
        with torch.inference_mode():
            self._collect(buffer, act, episodes)
        buffer.last_obs[:] = self.obs
        return episodes

    def _collect(self, buffer: RolloutBuffer, act, episodes: list[Episode]) -> None:
        for t in range(buffer.num_steps):
            buffer.obs[t] = self.obs
            action = act(torch.from_numpy(buffer.obs[t])).numpy()
            buffer.actions[t] = action
            env_action = action if self.discrete else np.clip(action, self.low, self.high)
            obs, reward, terminated, truncated, info = self.envs.step(env_action)
            self.global_step += self.num_envs
            ended = terminated | truncated
            if self.truncation_as_terminal:
                terminated = ended
            self.ep_return += reward
            self.ep_length += 1
            if self.reward_scaler is not None:
                reward = self.reward_scaler(reward, ended)
            buffer.rewards[t] = reward
            buffer.terminated[t] = terminated
            buffer.ended[t] = ended
            if ended.any():
                for n in np.flatnonzero(ended):
                    episodes.append(
                        Episode(float(self.ep_return[n]), int(self.ep_length[n]), self.global_step)
                    )
                    if not terminated[n]:  # truncated: bootstrap from the real final obs
                        final = np.asarray(info["final_obs"][n], np.float32)[None]
                        buffer.trunc_index.append((t, int(n)))
                        buffer.trunc_obs.append(self._normalize(final, update=False)[0])
                self.ep_return[ended] = 0.0
                self.ep_length[ended] = 0
            self.obs = self._normalize(obs)
