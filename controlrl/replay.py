"""Replay of contiguous segments with behaviour log-probabilities, for Retrace-style learners
(Munos, Stepleton, Harutyunyan, Bellemare 2016; segment replay as in ACER, Wang et al. 2017).

Each observation is stored once: obs[t] is what the policy acted on at step t, and the
observation after step t is obs[t + 1] of the same env, except at an episode end (the true final
observation, kept in a small side table) and after the newest step (kept per env).
"""

from __future__ import annotations

import numpy as np
import torch

_INITIAL_FINALS = 64  # rows of the final-observation table before it first grows


class ReplayBuffer:
    """Ring buffer of vector-env steps [capacity, num_envs], each observation stored once,
    sampled as contiguous segments of segment_length steps of one env."""

    def __init__(
        self, capacity: int, num_envs: int, obs_dim: int, act_dim: int, segment_length: int
    ) -> None:
        for name, value in (
            ("capacity", capacity),
            ("num_envs", num_envs),
            ("obs_dim", obs_dim),
            ("act_dim", act_dim),
        ):
            if int(value) != value or value < 1:
                raise ValueError(f"{name} = {value} must be a positive integer")
        if int(segment_length) != segment_length or not 1 <= segment_length <= capacity:
            raise ValueError(
                f"segment_length = {segment_length} must be in [1, capacity = {capacity}]"
                " (steps per env)"
            )
        C, E = self.capacity, self.num_envs = int(capacity), int(num_envs)
        self.obs_dim, self.act_dim = int(obs_dim), int(act_dim)
        self.segment_length = int(segment_length)
        self.obs = np.zeros((C, E, obs_dim), np.float32)
        self.actions = np.zeros((C, E, act_dim), np.float32)
        self.behaviour_logp = np.zeros((C, E), np.float32)
        self.rewards = np.zeros((C, E), np.float32)
        self.terminated = np.zeros((C, E), bool)
        self.ended = np.zeros((C, E), bool)  # terminated or truncated after this step
        # episode ends get consecutive ids; final_id[t, e] is the id of the end at (t, e), and
        # its true final observation sits in row id % len(finals): a FIFO that grows on demand
        self.final_id = np.zeros((C, E), np.int64)
        self.finals = np.zeros((_INITIAL_FINALS, obs_dim), np.float32)
        self.ends_added = 0  # ids given so far
        self.ends_dropped = 0  # ids overwritten by the ring (always the oldest ones)
        self.newest_next_obs = np.zeros((E, obs_dim), np.float32)  # after the newest step
        self.pos = 0  # row the next step goes to
        self.size = 0  # rows stored (<= capacity)
        self._views()

    def _views(self) -> None:
        # flat [C * E, ...] torch views sharing memory with the numpy arrays, for index_select
        C, E = self.capacity, self.num_envs
        self._obs_t = torch.from_numpy(self.obs).view(C * E, self.obs_dim)
        self._actions_t = torch.from_numpy(self.actions).view(C * E, self.act_dim)
        self._logp_t = torch.from_numpy(self.behaviour_logp).view(-1)
        self._rewards_t = torch.from_numpy(self.rewards).view(-1)
        self._terminated_t = torch.from_numpy(self.terminated).view(-1)
        self._ended_t = torch.from_numpy(self.ended).view(-1)
        self._final_id_t = torch.from_numpy(self.final_id).view(-1)

    def add(self, obs, actions, behaviour_logp, rewards, terminated, truncated, next_obs) -> None:
        """One vector-env step, numpy arrays [E, ...]: obs acted on, actions taken, the exact
        log mu(a|s) of the behaviour policy at acting time, rewards, terminated/truncated flags,
        next_obs = the observation after the step, for ended envs the TRUE final observation
        (envs' info['final_obs'], never the reset one). next_obs is stored only where needed (at
        episode ends, and for the newest step), not as a second full observation array."""
        t = self.pos
        if self.size == self.capacity:  # row t is overwritten: its episode ends leave the FIFO
            self.ends_dropped += int(np.count_nonzero(self.ended[t]))
        self.obs[t] = obs
        self.actions[t] = np.reshape(actions, (self.num_envs, self.act_dim))
        self.behaviour_logp[t] = behaviour_logp
        self.rewards[t] = rewards
        self.terminated[t] = terminated
        ended = np.logical_or(terminated, truncated, out=self.ended[t])
        self.newest_next_obs[...] = next_obs
        n_ends = int(np.count_nonzero(ended))
        if n_ends:
            live = self.ends_added - self.ends_dropped + n_ends
            if live > len(self.finals):
                self._grow_finals(max(2 * len(self.finals), live))
            ids = self.ends_added + np.arange(n_ends)
            self.final_id[t, ended] = ids
            self.finals[ids % len(self.finals)] = self.newest_next_obs[ended]
            self.ends_added += n_ends
        self.pos = (t + 1) % self.capacity
        self.size = min(self.size + 1, self.capacity)

    def _grow_finals(self, rows: int) -> None:
        # live ids keep their id; only their row (id % table length) moves
        ids = np.arange(self.ends_dropped, self.ends_added)
        grown = np.zeros((rows, self.obs_dim), np.float32)
        grown[ids % rows] = self.finals[ids % len(self.finals)]
        self.finals = grown

    def __len__(self) -> int:
        """Steps stored (all envs)."""
        return self.size * self.num_envs

    def can_sample(self) -> bool:
        """At least one full segment can be drawn."""
        return self.size >= self.segment_length

    def sample(self, num_segments: int, generator: torch.Generator) -> dict[str, torch.Tensor]:
        """Uniform segment starts, one vectorised gather (no per-transition Python). Keys:
        obs [N, K, obs_dim], actions [N, K, act_dim], behaviour_logp [N, K], rewards [N, K],
        terminated [N, K] (float 0/1), ended [N, K] (float: terminated or truncated after step t,
        the trace is cut there), next_obs [N, K, obs_dim] (obs[t+1], or the true final obs where
        ended). A segment may cross an episode boundary: the rows after it belong to the next
        episode and are valid; `ended` marks the cut."""
        if not self.can_sample():
            raise ValueError(
                f"cannot sample: {self.size} steps stored per env, segment_length ="
                f" {self.segment_length}"
            )
        C, E, K = self.capacity, self.num_envs, self.segment_length
        # a start is (age j of its first step, env): j in [0, size - K], so that the segment
        # lies between the oldest and the newest stored step and never wraps past pos
        starts_per_env = self.size - K + 1
        u = torch.randint(starts_per_env * E, (num_segments,), generator=generator)
        env, age = u % E, u // E
        age = age[:, None] + torch.arange(K)  # [N, K] age of each step, 0 = oldest stored
        oldest = (self.pos - self.size) % C
        flat = ((oldest + age) % C) * E + env[:, None]  # [N, K] index into the [C * E] views
        idx = flat.reshape(-1)
        N = num_segments
        obs = self._obs_t.index_select(0, idx).view(N, K, self.obs_dim)
        ended = self._ended_t.index_select(0, idx).view(N, K)
        # observation after each step: the next row's obs, except after the newest step and at
        # episode ends (true final observation)
        next_flat = ((oldest + age + 1) % C) * E + env[:, None]
        next_obs = self._obs_t.index_select(0, next_flat.reshape(-1)).view(N, K, self.obs_dim)
        newest = age == self.size - 1
        if bool(newest.any()):
            newest_obs = torch.from_numpy(self.newest_next_obs)[env]  # [N, obs_dim]
            next_obs = torch.where(newest[..., None], newest_obs[:, None], next_obs)
        if bool(ended.any()):
            rows = self._final_id_t.index_select(0, idx).view(N, K) % len(self.finals)
            finals = torch.from_numpy(self.finals)[rows]  # [N, K, obs_dim]
            next_obs = torch.where(ended[..., None], finals, next_obs)
        return {
            "obs": obs,
            "actions": self._actions_t.index_select(0, idx).view(N, K, self.act_dim),
            "behaviour_logp": self._logp_t.index_select(0, idx).view(N, K),
            "rewards": self._rewards_t.index_select(0, idx).view(N, K),
            "terminated": self._terminated_t.index_select(0, idx).view(N, K).float(),
            "ended": ended.float(),
            "next_obs": next_obs,
        }

    def state_dict(self) -> dict:
        """Everything stored, exactly (tensors and ints: loads with torch.load(weights_only))."""
        live = slice(0, self.size)
        return {
            "shape": torch.tensor(
                [self.capacity, self.num_envs, self.obs_dim, self.act_dim, self.segment_length]
            ),
            "pos": self.pos,
            "size": self.size,
            "ends_added": self.ends_added,
            "ends_dropped": self.ends_dropped,
            "obs": torch.from_numpy(self.obs[live].copy()),
            "actions": torch.from_numpy(self.actions[live].copy()),
            "behaviour_logp": torch.from_numpy(self.behaviour_logp[live].copy()),
            "rewards": torch.from_numpy(self.rewards[live].copy()),
            "terminated": torch.from_numpy(self.terminated[live].copy()),
            "ended": torch.from_numpy(self.ended[live].copy()),
            "final_id": torch.from_numpy(self.final_id[live].copy()),
            "finals": torch.from_numpy(self.finals.copy()),
            "newest_next_obs": torch.from_numpy(self.newest_next_obs.copy()),
        }

    def load_state_dict(self, state: dict) -> None:
        """Restore a state_dict of a buffer of the same capacity, num_envs, dims, segment length."""
        mine = [self.capacity, self.num_envs, self.obs_dim, self.act_dim, self.segment_length]
        theirs = state["shape"].tolist()
        if theirs != mine:
            raise ValueError(
                "replay state of (capacity, num_envs, obs_dim, act_dim, segment_length) ="
                f" {tuple(theirs)} does not fit this buffer's {tuple(mine)}"
            )
        size = int(state["size"])
        for key in (
            "obs",
            "actions",
            "behaviour_logp",
            "rewards",
            "terminated",
            "ended",
            "final_id",
        ):
            array = getattr(self, key)
            array[:size] = state[key].numpy()
            array[size:] = 0  # as a fresh buffer: rows never written
        self.finals = state["finals"].numpy().copy()
        self.newest_next_obs[...] = state["newest_next_obs"].numpy()
        self.pos, self.size = int(state["pos"]), size
        self.ends_added, self.ends_dropped = int(state["ends_added"]), int(state["ends_dropped"])
