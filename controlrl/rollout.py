"""Collect T steps from a vector env into a RolloutBuffer, with episode statistics."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import gymnasium as gym
import numpy as np
import torch

from controlrl.buffers import RolloutBuffer
from controlrl.normalize import ObsNormalizer, RewardScaler
from envs import state as env_state


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
        self.restored = False  # whether load_state_dict put the envs back mid-episode

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

    def state_dict(self) -> dict:
        """The envs mid-episode (envs.state.capture), the observation the policy acts on next
        and the episode sums, as tensors; {} when the envs cannot be captured (a resume then
        starts fresh episodes through reset)."""
        saved = env_state.capture(self.envs) if self.obs is not None else None
        if saved is None:
            return {}
        return {
            "envs": to_tensors(saved),
            "obs": torch.from_numpy(self.obs.copy()),
            "ep_return": torch.from_numpy(self.ep_return.copy()),
            "ep_length": torch.from_numpy(self._steps - self._ep_start),
        }

    def load_state_dict(self, state: dict) -> None:
        """Put back what state_dict saved (self.restored says whether there was anything: a
        resume from {} still needs reset). The reward scaler's running returns come back with
        the scaler's own state."""
        self.restored = bool(state)
        if not state:
            return
        if tuple(state["obs"].shape) != (self.num_envs, *self.envs.single_observation_space.shape):
            raise ValueError(f"saved observations {tuple(state['obs'].shape)} do not fit the envs")
        env_state.restore(self.envs, to_arrays(state["envs"]))
        self.obs = state["obs"].numpy().copy()
        self.ep_return[:] = state["ep_return"].numpy()
        self._ep_start[:] = self._steps - state["ep_length"].numpy()

    def collect(
        self, buffer: RolloutBuffer, act: Callable[[torch.Tensor], torch.Tensor]
    ) -> list[Episode]:
        """Fill buffer with T steps; act maps obs [N, d] to sampled actions (unclipped), or, when
        the buffer has extras (RolloutBuffer.add_extra), to (actions, {name: [N, ...]}), each
        extra stored in its row t beside the actions."""
        assert self.obs is not None, "call reset() first"
        buffer.reset()
        episodes: list[Episode] = []
        buffer.obs[0] = self.obs
        with torch.inference_mode():
            (self._collect_one if self.num_envs == 1 else self._collect)(buffer, act, episodes)
        self.obs = buffer.last_obs.copy()  # the loop wrote the last observation there
        return episodes

    def _clip_bounds(self):
        """The action bounds in their cheapest exact form: None (discrete), float32 arrays of
        the action's shape for one env (no broadcasting), float scalars when uniform."""
        low, high = (None, None) if self.discrete else (self.low, self.high)
        if low is not None and self.num_envs == 1:
            return low[None], high[None]
        if low is not None and (low == low.flat[0]).all() and (high == high.flat[0]).all():
            return float(low.flat[0]), float(high.flat[0])  # float32-exact scalars: faster
        return low, high

    def _episode_ended(self, buffer, episodes, t: int, n: int, ret: float, final_obs) -> None:
        """Record env n's episode that ended at step t; final_obs (truncated) is bootstrapped."""
        episodes.append(Episode(ret, self._steps - int(self._ep_start[n]), self.global_step))
        self._ep_start[n] = self._steps
        if final_obs is not None:  # truncated: bootstrap from the real final obs
            final = np.asarray(final_obs, np.float32)[None]
            buffer.trunc_index.append((t, n))
            buffer.trunc_obs.append(self._normalize(final, update=False)[0])

    def _episodes_ended(self, buffer, episodes, t: int, ended, terminated, info) -> None:
        """Record the episodes of the envs that ended at step t (ended, terminated [N])."""
        for n in np.flatnonzero(ended).tolist():
            final = None if terminated[n] else info["final_obs"][n]
            self._episode_ended(buffer, episodes, t, n, float(self.ep_return[n]), final)

    def _collect_one(self, buffer: RolloutBuffer, act, episodes: list[Episode]) -> None:
        # _collect for one env, its bookkeeping in Python scalars: between MuJoCo steps each
        # numpy call costs ~1.5 us, a scalar read or write ~0.1 (the same numbers, and bits)
        step, low, high = self.envs.step, *self._clip_bounds()
        obs_normalizer, reward_scaler = self.obs_normalizer, self.reward_scaler
        as_terminal = self.truncation_as_terminal
        ended_col, term_col = buffer.ended[:, 0], buffer.terminated[:, 0]
        reward_col = buffer.rewards[:, 0]
        rows = [*buffer.obs[1:], buffer.last_obs]  # where the observation after step t goes
        ep_return = float(self.ep_return[0])
        extras = buffer.extras or None
        for t in range(buffer.num_steps):
            action = act(torch.from_numpy(buffer.obs[t]))
            if extras is not None:
                action = _store_extras(extras, t, action)
            action = action.numpy()
            buffer.actions[t] = action
            if low is not None:
                action = np.maximum(action, low)
                np.minimum(action, high, out=action)
            obs, reward, terminated, truncated, info = step(action)
            self.global_step += 1
            self._steps += 1
            reward, terminated = float(reward[0]), bool(terminated[0])
            ended = terminated or bool(truncated[0])
            terminated = ended if as_terminal else terminated
            ended_col[t], term_col[t] = ended, terminated
            ep_return += reward
            reward_col[t] = (
                reward if reward_scaler is None else reward_scaler.scale_one(reward, ended)
            )
            if ended:
                final = None if terminated else info["final_obs"][0]
                self._episode_ended(buffer, episodes, t, 0, ep_return, final)
                ep_return = 0.0
            if obs_normalizer is not None:
                obs_normalizer(obs.astype(np.float32, copy=False), out=rows[t])
            else:
                rows[t][...] = obs  # the same float32 cast as astype
        self.ep_return[0] = ep_return

    def _collect(self, buffer: RolloutBuffer, act, episodes: list[Episode]) -> None:
        # the per-step work is written for few numpy calls and no copies: each step's
        # normalised observation goes straight into the buffer row the policy reads next;
        # np.maximum + np.minimum is np.clip (same numbers) at half its call overhead
        T, N = buffer.num_steps, self.num_envs
        step, low, high = self.envs.step, *self._clip_bounds()
        obs_normalizer, reward_scaler = self.obs_normalizer, self.reward_scaler
        ep_return = self.ep_return
        rows = [*buffer.obs[1:], buffer.last_obs]  # where the observation after step t goes
        extras = buffer.extras or None
        for t in range(T):
            action = act(torch.from_numpy(buffer.obs[t]))
            if extras is not None:
                action = _store_extras(extras, t, action)
            action = action.numpy()
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
                self._episodes_ended(buffer, episodes, t, ended, terminated, info)
                ep_return[ended] = 0.0
            if obs_normalizer is not None:
                obs_normalizer(obs.astype(np.float32, copy=False), out=rows[t])
            else:
                rows[t][...] = obs  # the same float32 cast as astype


def to_tensors(tree):
    """numpy arrays in nested lists and dicts as tensors (a checkpoint loads weights only)."""
    if isinstance(tree, np.ndarray):
        return torch.from_numpy(tree.copy())
    if isinstance(tree, dict):
        return {k: to_tensors(v) for k, v in tree.items()}
    if isinstance(tree, list):
        return [to_tensors(v) for v in tree]
    return tree


def to_arrays(tree):
    """to_tensors undone."""
    if isinstance(tree, torch.Tensor):
        return tree.numpy().copy()
    if isinstance(tree, dict):
        return {k: to_arrays(v) for k, v in tree.items()}
    if isinstance(tree, list):
        return [to_arrays(v) for v in tree]
    return tree


def _store_extras(extras: dict[str, np.ndarray], t: int, out) -> torch.Tensor:
    """Write the per-step extras of an act output (actions, {name: [N, ...]}) into row t of the
    buffer's arrays; returns the actions."""
    if not isinstance(out, tuple):
        raise TypeError("the buffer has extras: act must return (actions, {name: tensor})")
    actions, values = out
    for name, value in values.items():
        extras[name][t] = value.numpy()
    return actions
