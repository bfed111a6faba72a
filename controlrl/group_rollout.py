"""Groups of whole episodes for the critic-free group methods (GRPO, TPO): the data path that
replaces the collector + buffer + GAE of the PPO family.

Every iteration starts fresh episodes in all N envs, G consecutive envs to a group, the G
members of a group from the same context: a bandit groups its envs itself (envs.make(...,
group_size=G): the same context or prompt for the group), any other vector env is reset with
one seed per group (Gymnasium: the same seed gives the same start state). Then every env runs
until its FIRST episode ends; the steps after that (the vector env's autoreset has started
another episode) are padding, masked out by `valid`. So every episode is whole: no episode is
cut by the rollout, its return is its score, and a group's episodes may differ in length. An
episode still running after max_steps is cut there (its return so far is its score). The
rollout is a deterministic function of the reset seed and the torch RNG: a run resumed from a
checkpoint collects exactly what the uninterrupted run would have.

    collector = GroupCollector(envs, group_size, obs_normalizer, max_steps)
    rollout = collector.collect(policy.sample, seed=reset_seed(args.seed, iteration))
    logp, entropy, old_params = rollout.log_probs(policy)        # one batched pass, [T, N]
    scores = rollout.scores()                                    # [N / G, G] episode returns
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import gymnasium as gym
import numpy as np
import torch

from controlrl import diagnostics
from controlrl.cli import require
from controlrl.nets import LOG_2PI
from controlrl.normalize import ObsNormalizer

GROUP_BACKENDS = ("bandit", "gym")  # backends whose resets can repeat a start state


def require_group_flags(args) -> None:
    """group_size >= 2 (or 1 under a batch-level baseline) dividing num_envs; an env id whose
    backend can repeat a start state."""
    from envs import split_id

    G = args.group_size
    batch_baseline = getattr(args, "adv_norm", None) == "batch-mean"  # the batch is the baseline
    require(
        G >= 2 or (batch_baseline and G >= 1),
        "group_size",
        f"must be >= 2 (a group needs a baseline; 1 with --adv-norm batch-mean), got {G}",
    )
    require(
        args.num_envs % G == 0,
        "group_size",
        f"must divide --num-envs ({args.num_envs}) into whole groups, got {G}",
    )
    backend = split_id(args.env_id)[0]
    require(
        backend in GROUP_BACKENDS,
        "env_id",
        f"{args.env_id}: groups need resets that repeat a start state: bandit: and Gymnasium "
        f"ids only (not {backend}:)",
    )


def make_group_envs(env_id: str, num_envs: int, group_size: int, seed: int):
    """envs.make for a group method: a bandit's envs grouped by the bandit itself."""
    import envs

    kwargs = {"group_size": group_size} if envs.split_id(env_id)[0] == "bandit" else {}
    return envs.make(env_id, num_envs, seed, **kwargs)


@dataclass
class GroupRollout:
    """T steps x N envs of one iteration; env n is member n % G of group n // G."""

    obs: np.ndarray  # [T, N, *obs_shape] float32, normalised as the policy saw them
    actions: np.ndarray  # [T, N, *act_shape] sampled, unclipped
    valid: np.ndarray  # [T, N] bool: step t belongs to env n's episode
    ended: np.ndarray  # [T, N] bool: the episode ends at step t (every padding step: True)
    returns: np.ndarray  # [N] float64: summed raw reward of each env's episode
    lengths: np.ndarray  # [N] int64: steps of each env's episode
    group_size: int
    # a population's rollout (controlrl.population): obs, actions, returns and lengths carry
    # these leading axes ([S, T, N, ...], [S, N]); valid and ended are the same for every seed
    lead: tuple[int, ...] = ()

    @property
    def num_steps(self) -> int:
        return self.valid.shape[0]

    def scores(self) -> torch.Tensor:
        """Episode returns per group [..., N / G, G] (float64)."""
        return torch.from_numpy(self.returns).reshape(*self.lead, -1, self.group_size)

    def flat_obs(self) -> torch.Tensor:
        """Observations [..., T * N, *obs_shape], row t * N + n (no copy)."""
        return self._flat(self.obs)

    def flat_actions(self) -> torch.Tensor:
        """Actions [..., T * N, *act_shape], row t * N + n (no copy)."""
        return self._flat(self.actions)

    def _flat(self, x: np.ndarray) -> torch.Tensor:
        k = len(self.lead)
        return torch.from_numpy(x).reshape(*self.lead, -1, *x.shape[k + 2 :])

    def log_probs(self, policy) -> tuple[torch.Tensor, torch.Tensor, diagnostics.Params]:
        """log pi(a_t|s_t) and the policy's entropy at every step [..., T, N], and its
        distribution parameters on the T * N rows (diagnostics.dist_params), from one batched
        forward."""
        *T, N = self.lead + self.valid.shape
        params = diagnostics.dist_params(policy, self.flat_obs())
        with torch.no_grad():
            logp = policy.log_prob_at(params, self.flat_actions()).reshape(*T, N)
            if isinstance(params, tuple):  # diagonal Gaussian: sum of log-std + const
                entropy = (params[1] + 0.5 * (1.0 + LOG_2PI)).sum(-1)
            else:
                entropy = -(params.exp() * params).sum(-1)
        return logp, entropy.reshape(*T, N), params

    def episode_stats(self) -> dict[str, float]:
        """train/episode_return and train/episode_length (means over the N episodes) and
        train/episodes."""
        return {
            "train/episode_return": float(self.returns.mean()),
            "train/episode_length": float(self.lengths.mean()),
            "train/episodes": int(self.returns.size),
        }


class GroupCollector:
    """Collects one GroupRollout per call from a vector env (see the module docstring)."""

    def __init__(
        self,
        envs: gym.vector.VectorEnv,
        group_size: int,
        obs_normalizer: ObsNormalizer | None,
        max_steps: int,
    ) -> None:
        self.envs, self.group_size = envs, group_size
        self.obs_normalizer = obs_normalizer
        N = self.num_envs = envs.num_envs
        if N % group_size:
            raise ValueError(f"group_size {group_size} must divide num_envs {N}")
        # a bandit built with group_size groups its envs itself; others get one seed per group
        self.self_grouped = hasattr(envs, "group_size")
        if self.self_grouped and envs.group_size != group_size:
            raise ValueError(
                f"group_size {group_size}: the bandit groups its envs by {envs.group_size} "
                "(make it with envs.make(..., group_size=G), as make_group_envs does)"
            )
        # a bandit's episodes have one length: 1 pull, or L tokens for a sequence bandit
        self.max_steps = getattr(envs, "length", 1) if self.self_grouped else max_steps
        space = envs.single_action_space
        self.discrete = isinstance(space, gym.spaces.Discrete)
        self.low = None if self.discrete else space.low.astype(np.float32)
        self.high = None if self.discrete else space.high.astype(np.float32)
        obs_shape, act_shape = envs.single_observation_space.shape, space.shape
        T = self.max_steps
        self.obs = np.zeros((T, N, *obs_shape), np.float32)
        self.actions = np.zeros((T, N, *act_shape), np.int64 if self.discrete else np.float32)
        self.valid = np.zeros((T, N), bool)
        self.ended = np.ones((T, N), bool)

    def reset_seeds(self, seed: int) -> int | list[int]:
        """The reset seed(s): one int for a self-grouped bandit, else seed + group index per env."""
        if self.self_grouped:
            return seed
        return [seed + n // self.group_size for n in range(self.num_envs)]

    def _write_obs(self, obs: np.ndarray, alive: np.ndarray, row: np.ndarray) -> None:
        obs = obs.astype(np.float32, copy=False)
        if self.obs_normalizer is None:
            row[...] = obs
            return
        if alive.any():  # statistics from the episodes' own observations, not the padding
            self.obs_normalizer(obs[alive])
        self.obs_normalizer(obs, update=False, out=row)

    def collect(self, act: Callable[[torch.Tensor], torch.Tensor], seed: int) -> GroupRollout:
        """Reset every env (groups share a start) and run until each env's first episode ends
        (or max_steps); act maps observations [N, d] to sampled actions."""
        N = self.num_envs
        obs, _ = self.envs.reset(seed=self.reset_seeds(seed))
        alive = np.ones(N, bool)
        returns = np.zeros(N, np.float64)
        lengths = np.zeros(N, np.int64)
        T = self.max_steps
        with torch.inference_mode():
            for t in range(self.max_steps):
                self._write_obs(obs, alive, self.obs[t])
                action = act(torch.from_numpy(self.obs[t])).numpy()
                self.actions[t] = action
                if self.low is not None:
                    action = np.clip(action, self.low, self.high)
                obs, reward, terminated, truncated, _ = self.envs.step(action)
                self.valid[t] = alive
                returns += np.where(alive, reward, 0.0)
                lengths += alive
                ended = np.logical_or(terminated, truncated)
                self.ended[t] = ended | ~alive  # a padding step is a segment of its own
                alive &= ~ended
                if not alive.any():
                    T = t + 1
                    break
        self.ended[T - 1] = True  # an episode cut at max_steps ends there
        return GroupRollout(
            obs=self.obs[:T],
            actions=self.actions[:T],
            valid=self.valid[:T].copy(),
            ended=self.ended[:T].copy(),
            returns=returns,
            lengths=lengths,
            group_size=self.group_size,
        )
