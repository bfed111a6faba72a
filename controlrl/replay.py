"""Replay of contiguous segments with behaviour log-probabilities, for Retrace-style learners
(Munos, Stepleton, Harutyunyan, Bellemare 2016; segment replay as in ACER, Wang et al. 2017).

Each observation is stored once. obs[t] is what the policy acted on at step t; the observation
after step t is obs[t + 1] of the same env, except at an episode end, where the true final
observation sits in a small side table. The ring has one spare row past the newest step that
holds the newest step's next observation (the obs the next add writes there anyway).
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
        self.capacity, self.num_envs = int(capacity), int(num_envs)
        self.obs_dim, self.act_dim = o, a = int(obs_dim), int(act_dim)
        self.segment_length = int(segment_length)
        R, E = self.capacity + 1, self.num_envs  # + the spare row
        # one float32 table, so that a sample is one gather: obs | actions | log mu | r | term |
        # ended, with named views [R, E, ...] for writing
        self.table = np.zeros((R, E, o + a + 4), np.float32)
        self.obs = self.table[..., :o]
        self.actions = self.table[..., o : o + a]
        self.behaviour_logp, self.rewards, self.terminated, self.ended = (
            self.table[..., o + a + i] for i in range(4)
        )
        # episode ends get consecutive ids; final_id[t, e] is the id of the end at (t, e) and
        # its true final observation sits in row id % len(finals): a FIFO that grows on demand
        self.final_id = np.zeros((R, E), np.int64)
        self.finals = np.zeros((_INITIAL_FINALS, o), np.float32)
        self.ends_added = 0  # ids given so far
        self.ends_dropped = 0  # ids overwritten by the ring (always the oldest ones)
        self.pos = 0  # the spare row: the next step goes here
        self.size = 0  # steps stored per env (<= capacity)
        self._steps = np.arange(self.segment_length)
        # flat [R * E, ...] views for the gathers (views, never copies of the table)
        self._table_flat = self.table.reshape(R * E, o + a + 4)
        self._obs_flat = self._table_flat[:, :o]
        self._final_id_flat = self.final_id.reshape(R * E)

    def add(self, obs, actions, behaviour_logp, rewards, terminated, truncated, next_obs) -> None:
        """One vector-env step, numpy arrays [E, ...]: obs acted on, actions taken, the exact
        log mu(a|s) of the behaviour policy at acting time, rewards, terminated/truncated flags,
        next_obs = the observation after the step, for ended envs the TRUE final observation
        (envs' info['final_obs'], never the reset one). next_obs is stored only where needed (at
        episode ends, and for the newest step), not as a second full observation array."""
        want = (self.num_envs, self.obs_dim)
        if np.shape(obs) != want or np.shape(next_obs) != want:  # numpy would broadcast them
            raise ValueError(
                f"obs and next_obs must be [num_envs, obs_dim] = {list(want)}, got"
                f" {list(np.shape(obs))} and {list(np.shape(next_obs))}"
            )
        t, R = self.pos, self.capacity + 1
        spare = (t + 1) % R
        if self.size == self.capacity:  # the oldest step leaves: its episode ends with it
            self.ends_dropped += int(np.count_nonzero(self.ended[spare]))
        self.obs[t] = obs
        self.actions[t] = np.reshape(actions, (self.num_envs, self.act_dim))
        self.behaviour_logp[t] = behaviour_logp
        self.rewards[t] = rewards
        self.terminated[t] = terminated
        ended = np.logical_or(terminated, truncated)
        self.ended[t] = ended
        self.obs[spare] = next_obs  # obs[t + 1]; the next add writes its obs over it
        n_ends = int(np.count_nonzero(ended))
        if n_ends:
            live = self.ends_added - self.ends_dropped + n_ends
            if live > len(self.finals):
                self._grow_finals(max(2 * len(self.finals), live))
            ids = self.ends_added + np.arange(n_ends)
            self.final_id[t, ended] = ids
            self.finals[ids % len(self.finals)] = np.asarray(next_obs)[ended]
            self.ends_added += n_ends
        self.pos = spare
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
        episode and are valid; `ended` marks the cut. Tensors are views of one fresh gather."""
        if not self.can_sample():
            raise ValueError(
                f"cannot sample: {self.size} steps stored per env, segment_length ="
                f" {self.segment_length}"
            )
        E, R, K = self.num_envs, self.capacity + 1, self.segment_length
        o, a = self.obs_dim, self.act_dim
        # a start is (age j of its first step, env), j in [0, size - K]: the segment lies
        # between the oldest and the newest stored step, never across the write pointer
        u = torch.randint((self.size - K + 1) * E, (num_segments,), generator=generator).numpy()
        env = (u % E)[:, None]
        rows = (self.pos - self.size + u[:, None] // E + self._steps) % R  # [N, K]
        flat = rows * E + env
        data = self._table_flat[flat]  # [N, K, W], the one gather
        next_obs = self._obs_flat[((rows + 1) % R) * E + env]
        ended = data[..., o + a + 3]
        if ended.any():  # the true final observation where the episode ended
            where = ended > 0
            ids = self._final_id_flat[flat[where]]
            next_obs[where] = self.finals[ids % len(self.finals)]
        batch = torch.from_numpy(data)
        return {
            "obs": batch[..., :o],
            "actions": batch[..., o : o + a],
            "behaviour_logp": batch[..., o + a],
            "rewards": batch[..., o + a + 1],
            "terminated": batch[..., o + a + 2],
            "ended": batch[..., o + a + 3],
            "next_obs": torch.from_numpy(next_obs),
        }

    def state_dict(self) -> dict:
        """Everything stored, exactly (tensors and ints: loads with torch.load(weights_only))."""
        # before the first wrap only rows [0, size] (the last one spare) were ever written
        used = slice(0, min(self.size + 1, self.capacity + 1))
        return {
            "shape": torch.tensor(
                [self.capacity, self.num_envs, self.obs_dim, self.act_dim, self.segment_length]
            ),
            "pos": self.pos,
            "size": self.size,
            "ends_added": self.ends_added,
            "ends_dropped": self.ends_dropped,
            "table": torch.from_numpy(self.table[used].copy()),
            "final_id": torch.from_numpy(self.final_id[used].copy()),
            "finals": torch.from_numpy(self.finals.copy()),
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
        for key in ("table", "final_id"):
            array, saved = getattr(self, key), state[key].numpy()
            array[: len(saved)] = saved
            array[len(saved) :] = 0  # as a fresh buffer: rows never written
        self.finals = state["finals"].numpy().copy()
        self.pos, self.size = int(state["pos"]), int(state["size"])
        self.ends_added, self.ends_dropped = int(state["ends_added"]), int(state["ends_dropped"])
