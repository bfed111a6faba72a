"""The critic-free group path on top of the Session (GRPO, TPO): grouped envs, observation
normaliser, GroupCollector, the per-iteration metrics every group method logs, evaluation.
Built from the algorithm's Args alone (env flags plus group_size, max_episode_steps, norm_obs).

    run = GroupRun(args)
    policy = run.make_policy(args.hidden_sizes)
    run.train(lambda rollout, old_logp: update(...), policy, ratio_eps, optimizer=optimizer)

ratio_eps is the clip range the logged ratio_dev_frac counts r outside of: one eps, the pair
(eps_low, eps_high) of an asymmetric clip, or None (the default) for a method without a ratio
range, which then logs no ratio_dev_frac.

An iteration is one GroupRollout of whole episodes (controlrl/group_rollout.py), so its size
in env steps varies with the episodes' lengths: the run stops after the first iteration that
reaches total_timesteps (a checkpoint is always written then). Metrics of every iteration:
train/episode_return, train/episode_length, train/episodes, train/entropy (mean policy entropy
over the rollout's steps), train/zero_variance_frac (groups whose returns are all equal), then
the update's statistics and the policy shift over the rollout (kl_mean, kl_max, ratio_dev_*).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import torch

from controlrl import diagnostics
from controlrl.cli import CommonArgs
from controlrl.evaluate import evaluate
from controlrl.group import zero_variance_fraction
from controlrl.group_rollout import GroupCollector, GroupRollout, make_group_envs
from controlrl.nets import make_policy
from controlrl.normalize import ObsNormalizer
from controlrl.seeding import eval_seed, reset_seed
from controlrl.session import Session, Timer

UpdateFn = Callable[[GroupRollout, torch.Tensor], dict]


class GroupRun(Session):
    """A Session plus the group data path: grouped vector env, normaliser, collector."""

    def __init__(self, args: CommonArgs) -> None:
        super().__init__(args, steps_per_iteration=args.num_envs)
        # an iteration takes at least num_envs steps: enough iterations to reach the budget
        self.num_iterations = -(-args.total_timesteps // args.num_envs)
        self.envs = make_group_envs(args.env_id, args.num_envs, args.group_size, args.seed)
        self.obs_space = self.envs.single_observation_space
        self.act_space = self.envs.single_action_space
        self.obs_dim = math.prod(self.obs_space.shape)
        self.obs_normalizer = ObsNormalizer(self.obs_space.shape) if args.norm_obs else None
        self.collector = GroupCollector(
            self.envs, args.group_size, self.obs_normalizer, args.max_episode_steps
        )

    def make_policy(self, hidden_sizes: tuple[int, ...]) -> torch.nn.Module:
        """The policy for the run's spaces (controlrl.nets.make_policy)."""
        return make_policy(self.obs_space, self.act_space, hidden_sizes)

    def train(
        self,
        update_fn: UpdateFn,
        policy,
        ratio_eps: diagnostics.Eps = None,
        sample: Callable | None = None,
        **stateful,
    ) -> float:
        """The loop, then the final evaluation (returned). Each iteration: collect a rollout
        (reset seed from the seed and the iteration, so a resumed run repeats the same
        episodes), the rollout policy's log-probs [T, N] in one pass, update_fn(rollout,
        old_logp) -> stats under the NaN guard, the policy shift, log and checkpoint.
        Checkpoints hold policy, the normaliser and **stateful. sample (default policy.sample)
        draws the rollout's actions: a behaviour policy other than the one trained (a
        train-inference mismatch); old_logp stays the trained policy's."""
        if self.obs_normalizer is not None:
            stateful["obs_normalizer"] = self.obs_normalizer
        total = self.args.total_timesteps
        for iteration in self.start(policy=policy, **stateful):
            if self.step >= total:  # resumed after the last iteration
                break
            timer = Timer()
            rollout = self.collector.collect(
                sample or policy.sample, seed=reset_seed(self.args.seed, iteration)
            )
            steps = int(rollout.lengths.sum())
            self.step += steps
            old_logp, entropy, old_params = rollout.log_probs(policy)
            timer.lap("rollout_s")
            with self.guard():
                stats = update_fn(rollout, old_logp)
            stats = {k: float(v) if isinstance(v, torch.Tensor) else v for k, v in stats.items()}
            rows = torch.from_numpy(np.flatnonzero(rollout.valid.reshape(-1)))
            stats.update(
                diagnostics.policy_shift(
                    policy,
                    rollout.flat_obs()[rows],
                    rollout.flat_actions()[rows],
                    old_logp.reshape(-1)[rows],
                    diagnostics.index_params(old_params, rows),
                    ratio_eps,
                )
            )
            metrics = {
                **rollout.episode_stats(),
                "train/entropy": float(entropy.reshape(-1)[rows].mean()),
                "train/zero_variance_frac": zero_variance_fraction(rollout.scores()),
                **{f"train/{k}": v for k, v in stats.items()},
            }
            timer.lap("update_s")
            self.end_iteration(
                iteration, metrics, timer.timing(steps), lambda: self.evaluate(policy.mode)
            )
            if self.step >= total:
                if iteration % self.args.checkpoint_every and iteration != self.num_iterations:
                    self.save_checkpoint(iteration)  # the last iteration always checkpoints
                break
        final = self.finish(lambda: self.evaluate(policy.mode))
        self.envs.close()
        return final

    def evaluate(self, act: Callable) -> float:
        """Mean return of eval_episodes deterministic episodes, normaliser frozen."""
        args = self.args
        returns = evaluate(
            act, args.env_id, self.obs_normalizer, args.eval_episodes, seed=eval_seed(args.seed)
        )
        return float(returns.mean())
