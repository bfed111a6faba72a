"""On-policy rollout storage (preallocated [T, N] arrays with zero-copy torch views) and the
offline dataset buffer (one transition table sampled in minibatches)."""

from __future__ import annotations

import numpy as np
import torch

from controlrl import diagnostics


class RolloutBuffer:
    """T steps x N envs of (obs, action, reward, terminated, ended) plus what the learner fills in.

    The numpy arrays are written in the rollout loop; the `*_t` torch tensors share their memory.
    `values`, `next_values` and `logprobs` are filled after collection, in one batched pass.
    `extras`: per-step arrays [T, N, ...] an algorithm registers with add_extra (DPPO's denoising
    chain); the collector's act function then returns (actions, {name: [N, ...]}) each step.
    """

    def __init__(
        self,
        num_steps: int,
        num_envs: int,
        obs_shape: tuple[int, ...],
        action_shape: tuple[int, ...],
        discrete: bool,
    ) -> None:
        T, N = num_steps, num_envs
        self.num_steps, self.num_envs, self.discrete = T, N, discrete
        self.obs = np.zeros((T, N, *obs_shape), np.float32)  # normalised, as the policy saw them
        act_dtype = np.int64 if discrete else np.float32
        self.actions = np.zeros((T, N, *action_shape), act_dtype)  # unclipped samples
        self.rewards = np.zeros((T, N), np.float32)  # after reward scaling
        self.terminated = np.zeros((T, N), bool)
        self.ended = np.zeros((T, N), bool)  # terminated or truncated
        self.values = np.zeros((T, N), np.float32)
        self.next_values = np.zeros((T, N), np.float32)  # V(true next obs of step t)
        self.logprobs = np.zeros((T, N), np.float32)
        self.last_obs = np.zeros((N, *obs_shape), np.float32)  # obs after step T - 1
        # truncated steps: (t, env) and the normalised final observation, for bootstrapping
        self.trunc_index: list[tuple[int, int]] = []
        self.trunc_obs: list[np.ndarray] = []
        self.obs_t = torch.from_numpy(self.obs)
        self.actions_t = torch.from_numpy(self.actions)
        self.extras: dict[str, np.ndarray] = {}

    def add_extra(self, name: str, shape: tuple[int, ...], dtype=np.float32) -> None:
        """Store a per-step array [T, N, *shape] beside the actions: what the act function hands
        back under `name` each step (rollout.Collector), returned by flat() as [T*N, *shape]."""
        reserved = {"obs", "actions", "logprobs", "values", "advantages", "returns"}
        if name in reserved or name in self.extras:
            raise ValueError(f"extra {name!r} clashes with a batch entry")
        self.extras[name] = np.zeros((self.num_steps, self.num_envs, *shape), dtype)

    def reset(self) -> None:
        """Forget the truncation list before a new collection (arrays are overwritten in place)."""
        self.trunc_index.clear()
        self.trunc_obs.clear()

    def fill_values(self, value_fn) -> None:
        """values[t] = V(obs[t]); next_values[t] = V(true next obs), batched in three forwards."""
        T, N = self.num_steps, self.num_envs
        with torch.inference_mode():
            v = value_fn(self.obs_t.reshape(T * N, *self.obs.shape[2:])).reshape(T, N)
            self.values[:] = v.numpy()
            self.next_values[:-1] = self.values[1:]
            self.next_values[-1] = value_fn(torch.from_numpy(self.last_obs)).numpy()
            if self.trunc_obs:
                vt = value_fn(torch.from_numpy(np.stack(self.trunc_obs))).numpy()
                for (t, n), v_final in zip(self.trunc_index, vt):
                    self.next_values[t, n] = v_final

    def fill_logprobs(self, policy):
        """logprobs[t] = log pi_old(a_t | s_t), in one batched pass after collection; returns
        the policy's distribution parameters on the T*N observations (diagnostics.dist_params),
        from the same forward: what the update's KL is measured against."""
        T, N = self.num_steps, self.num_envs
        params = diagnostics.dist_params(policy, self.obs_t.reshape(T * N, *self.obs.shape[2:]))
        with torch.no_grad():
            logp = policy.log_prob_at(
                params, self.actions_t.reshape(T * N, *self.actions.shape[2:])
            )
            self.logprobs[:] = logp.reshape(T, N).numpy()
        return params

    def flat(self, **extra: np.ndarray) -> dict[str, torch.Tensor]:
        """Batch dict of [T*N, ...] tensors (views where possible) for minibatch updates."""
        T, N = self.num_steps, self.num_envs
        out = {
            "obs": self.obs_t.reshape(T * N, *self.obs.shape[2:]),
            "actions": self.actions_t.reshape(T * N, *self.actions.shape[2:]),
            "logprobs": torch.from_numpy(self.logprobs).reshape(-1),
            "values": torch.from_numpy(self.values).reshape(-1),
        }
        for name, arr in self.extras.items():  # views: [T, N, ...] -> [T*N, ...]
            out[name] = torch.from_numpy(arr).reshape(T * N, *arr.shape[2:])
        for key, arr in extra.items():
            out[key] = torch.as_tensor(np.asarray(arr, np.float32)).reshape(T * N)
        return out


class OfflineBuffer:
    """A dataset's transitions held once as one float32 table [capacity, D], each row
    [obs | action | next_obs | reward * reward_scale | terminal], sampled in minibatches with
    its own seeded torch.Generator (one randint and one index_select per minibatch, no
    per-sample Python).

    dones are the terminals only: a time-limit end (timeout) bootstraps. With normalize_obs, obs
    and next_obs are stored as (s - mean) / std with mean and std (+ eps) of the dataset's
    observations, frozen (tinkoff-ai/CORL algorithms/offline/iql.py, eps 1e-3); `normalize`
    applies them to new observations (evaluation, online steps). Rows past the dataset, up to
    capacity, take online transitions (`add`, offline-to-online). state_dict holds the
    statistics, the online rows, the generator's state and a fingerprint of the dataset, so a
    resume samples the same minibatches and refuses a different dataset."""

    def __init__(
        self,
        observations: np.ndarray,
        actions: np.ndarray,
        rewards: np.ndarray,
        next_observations: np.ndarray,
        terminals: np.ndarray,
        capacity: int | None = None,
        normalize_obs: bool = False,
        seed: int = 0,
        obs_eps: float = 1e-3,
        reward_scale: float = 1.0,
    ) -> None:
        m, self.obs_dim = observations.shape
        self.act_dim = actions.shape[1]
        self.reward_scale = reward_scale
        self.dataset_size = self.size = m
        self.capacity = m if capacity is None else capacity
        if self.capacity < m:
            raise ValueError(f"capacity {self.capacity} is below the dataset's {m} transitions")
        obs = torch.as_tensor(observations, dtype=torch.float32)
        if normalize_obs:
            self.obs_mean = obs.mean(0)
            self.obs_std = obs.std(0, correction=0) + obs_eps  # numpy's std, as CORL
        else:
            self.obs_mean = torch.zeros(self.obs_dim)
            self.obs_std = torch.ones(self.obs_dim)
        o, a = self.obs_dim, self.act_dim
        self.width = 2 * o + a + 2
        self.data = torch.zeros(self.capacity, self.width)
        self._write(slice(0, m), observations, actions, rewards, next_observations, terminals)
        self.fingerprint = self.data[:m].double().sum(0)
        self.generator = torch.Generator().manual_seed(seed)
        # column views of the table: obs | action (the Q input) | next_obs | reward | terminal
        self._cols = {
            "obs": slice(0, o),
            "obs_actions": slice(0, o + a),
            "actions": slice(o, o + a),
            "next_obs": slice(o + a, 2 * o + a),
            "rewards": 2 * o + a,
            "dones": 2 * o + a + 1,
        }

    @classmethod
    def from_dataset(cls, dataset, **kwargs) -> OfflineBuffer:
        """From an envs.offline.Dataset (its terminals, not its timeouts, become dones)."""
        return cls(
            dataset.observations,
            dataset.actions,
            dataset.rewards,
            dataset.next_observations,
            dataset.terminals,
            **kwargs,
        )

    def _write(self, rows, obs, actions, rewards, next_obs, terminals) -> None:
        o, a = self.obs_dim, self.act_dim
        block = self.data[rows]
        block[:, :o] = self.normalize_t(torch.as_tensor(obs, dtype=torch.float32))
        block[:, o : o + a] = torch.as_tensor(actions, dtype=torch.float32)
        block[:, o + a : 2 * o + a] = self.normalize_t(
            torch.as_tensor(next_obs, dtype=torch.float32)
        )
        block[:, 2 * o + a] = torch.as_tensor(rewards, dtype=torch.float32) * self.reward_scale
        block[:, 2 * o + a + 1] = torch.as_tensor(terminals, dtype=torch.float32)

    def normalize_t(self, obs: torch.Tensor) -> torch.Tensor:
        """(obs - mean) / std with the frozen dataset statistics (torch)."""
        return (obs - self.obs_mean) / self.obs_std

    def normalize(self, obs: np.ndarray, update: bool = False) -> np.ndarray:
        """normalize_t for numpy float32 observations; the statistics never update (the
        ObsNormalizer call signature, for controlrl.evaluate)."""
        return self.normalize_t(torch.from_numpy(np.asarray(obs, np.float32))).numpy()

    def sample(self, batch_size: int) -> dict[str, torch.Tensor]:
        """A minibatch of rows drawn uniformly with replacement from the filled part: views
        obs [B, o], actions [B, a], obs_actions [B, o + a], next_obs, rewards [B], dones [B]."""
        idx = torch.randint(self.size, (batch_size,), generator=self.generator)
        rows = self.data.index_select(0, idx)
        return {k: rows[:, c] for k, c in self._cols.items()}

    def add(self, obs, action, reward: float, next_obs, terminal: bool) -> None:
        """Append one online transition (raw observations and reward; normalised and scaled
        here as the dataset's)."""
        if self.size >= self.capacity:
            raise RuntimeError(f"OfflineBuffer is full ({self.capacity} rows)")
        row = slice(self.size, self.size + 1)
        self._write(row, obs[None], np.asarray(action)[None], [reward], next_obs[None], [terminal])
        self.size += 1

    def state_dict(self) -> dict:
        """What a resume needs beyond the dataset itself (tensors only)."""
        return {
            "obs_mean": self.obs_mean,
            "obs_std": self.obs_std,
            "fingerprint": self.fingerprint,
            "online": self.data[self.dataset_size : self.size].clone(),
            "generator": self.generator.get_state(),
        }

    def load_state_dict(self, state: dict) -> None:
        """Restore the online rows and the generator; refuse a different dataset."""
        if not torch.equal(state["fingerprint"], self.fingerprint) or not (
            torch.equal(state["obs_mean"], self.obs_mean)
            and torch.equal(state["obs_std"], self.obs_std)
        ):
            raise ValueError("the dataset differs from the one this checkpoint was trained on")
        online = state["online"]
        if self.dataset_size + len(online) > self.capacity:
            raise ValueError(f"{len(online)} online rows do not fit the capacity {self.capacity}")
        self.data[self.dataset_size : self.dataset_size + len(online)] = online
        self.size = self.dataset_size + len(online)
        self.generator.set_state(state["generator"])
