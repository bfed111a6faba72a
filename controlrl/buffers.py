"""On-policy rollout storage: preallocated [T, N] arrays with zero-copy torch views."""

from __future__ import annotations

import numpy as np
import torch

from controlrl import diagnostics


class RolloutBuffer:
    """T steps x N envs of (obs, action, reward, terminated, ended) plus what the learner fills in.

    The numpy arrays are written in the rollout loop; the `*_t` torch tensors share their memory.
    `values`, `next_values` and `logprobs` are filled after collection, in one batched pass.
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
        for key, arr in extra.items():
            out[key] = torch.as_tensor(np.asarray(arr, np.float32)).reshape(T * N)
        return out
