"""The torch on-policy path on top of the Session: envs, normalisers, collector, rollout buffer,
GAE, the train/* metrics of a rollout, evaluation with the frozen normaliser. Built from the
algorithm's Args alone (env flags plus num_steps, gamma, gae_lambda, norm_obs, norm_reward).

    run = Run(args)
    policy, value_net, optimizer = ...                # built from run.obs_space, run.act_space
    run.train(lambda batch: update(...), policy, value_net, args.clip_coef, optimizer)

run.train is the loop below, for algorithms that need another one:

    for iteration in run.start(policy=policy, value=value_net, optimizer=optimizer):
        batch, episodes = run.collect(policy, value_net)
        with run.update(policy, batch, args.clip_coef) as stats:  # NaN guard, KL after
            stats.update(update(policy, value_net, optimizer, batch, args))
        run.end_iteration(iteration, stats, episodes, act=policy.mode)
    run.finish(policy.mode)
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator

import numpy as np
import torch

import envs
from controlrl import diagnostics
from controlrl.buffers import RolloutBuffer
from controlrl.cli import CommonArgs
from controlrl.diagnostics import explained_variance
from controlrl.evaluate import evaluate
from controlrl.normalize import ObsNormalizer, RewardScaler
from controlrl.returns import gae
from controlrl.rollout import Collector, Episode
from controlrl.seeding import eval_seed, reset_seed
from controlrl.session import Session, Timer
from controlrl.update import anneal_lr
from envs import start_states


class Run(Session):
    """A Session plus one on-policy data path: vector env, normalisers, collector, buffer."""

    def __init__(self, args: CommonArgs, wrap: Callable | None = None) -> None:
        """wrap: applied to each training env (envs.gym_mujoco.make's wrap; Gymnasium ids),
        never to evaluation's, which runs the plain env."""
        super().__init__(args, steps_per_iteration=args.num_steps * args.num_envs)
        self.gamma, self.gae_lambda = args.gamma, args.gae_lambda
        # --start-states (an algorithm's option, e.g. ppo's): the training envs' episodes start
        # from the file's states; evaluation keeps the env's own starts
        starts = getattr(args, "start_states", None)
        extra = {} if starts is None else {"start_states": start_states.load(starts)}
        if wrap is not None:
            extra["wrap"] = wrap
        self.envs = envs.make(
            args.env_id,
            args.num_envs,
            args.seed,
            args.vectorization,
            brax_pipeline=args.brax_pipeline,
            copy=False,
            **extra,
        )
        self.obs_space = self.envs.single_observation_space
        self.act_space = self.envs.single_action_space
        self.obs_dim = math.prod(self.obs_space.shape)
        self.obs_normalizer = ObsNormalizer(self.obs_space.shape) if args.norm_obs else None
        self.reward_scaler = RewardScaler(args.num_envs, args.gamma) if args.norm_reward else None
        self.collector = Collector(
            self.envs, self.obs_normalizer, self.reward_scaler, args.truncation_as_terminal
        )
        self.buffer = RolloutBuffer(
            args.num_steps,
            args.num_envs,
            self.obs_space.shape,
            self.act_space.shape,
            self.collector.discrete,
        )
        self.batch_size = self.steps_per_iteration
        self._timer = Timer()

    def start(self, **stateful):
        """Session.start with the normalisers and the collector added to what checkpoints hold,
        then the envs' first reset (jitted backends compile first, shown on the progress bar).
        A resume puts the envs back mid-episode where envs.state can capture them (Gymnasium
        MuJoCo and classic control, sync), so it continues the uninterrupted run bit for bit;
        elsewhere every env starts a fresh episode from reset_seed(seed, iteration)."""
        normalizers = {"obs_normalizer": self.obs_normalizer, "reward_scaler": self.reward_scaler}
        stateful |= {k: v for k, v in normalizers.items() if v is not None}
        # the envs mid-episode (rollout.Collector.state_dict); a checkpoint written before
        # they were saved resumes with fresh episodes
        if self.resume_state is None or "collector" in self.resume_state:
            stateful["collector"] = self.collector
        iterations = super().start(**stateful)
        self.stateful["collector"] = self.collector
        if hasattr(self.envs, "compile"):  # brax: compile before the first step
            with self.status("compiling..."):
                seconds = self.envs.compile()
            self.write(f"{self.args.env_id}: compiled in {seconds:.1f} s")
        if not self.collector.restored:
            self.collector.reset(seed=reset_seed(self.args.seed, self.start_iteration))
        self.collector.global_step = self.step
        return iterations

    def collect(self, policy, value_net) -> tuple[dict[str, torch.Tensor], list[Episode]]:
        """One rollout with policy.sample; values, old log-probs and GAE in batched passes.
        Returns the flat batch (obs, actions, logprobs, values, advantages, returns, and the
        buffer's extras) and the episodes that ended. self.old_params: the collecting policy's
        distribution parameters on the batch (diagnostics.dist_params), from the same forward
        as the old log-probs. A policy without dist_params (a diffusion or flow policy: no
        closed-form likelihood of an action) gets neither: no "logprobs" in the batch,
        old_params None; its update computes its own ratio terms."""
        self._timer = Timer()
        batch, episodes, self.old_params, self._returns = collect_batch(
            self.collector, self.buffer, policy, value_net, self.gamma, self.gae_lambda
        )
        self.step = self.collector.global_step
        self._timer.lap("rollout_s")
        return batch, episodes

    @contextlib.contextmanager
    def update(
        self, policy, batch: dict[str, torch.Tensor], ratio_eps: diagnostics.Eps
    ) -> Iterator[dict]:
        """Wraps the update of the batch self.collect returned: runs it under the NaN guard,
        then adds to the dict it yields how far it moved the policy over the whole batch
        (diagnostics.batch_shift from self.old_params: kl_mean, kl_max, ratio_dev_frac / _max
        / _mean with r outside the ratio_eps range (one eps, a (low, high) pair, or None: no
        ratio_dev_frac), entropy_change and logp_adv_cov; not for a policy without
        dist_params, see collect).

            with run.update(policy, batch, args.clip_coef) as stats:
                stats.update(update(policy, value_net, optimizer, batch, args))
        """
        old_params = self.old_params
        stats: dict = {}
        with self.guard():
            yield stats
        if old_params is None:
            return
        shift = diagnostics.batch_shift(policy, batch, old_params, ratio_eps)
        stats.update({k: float(v) for k, v in shift.items()})

    def train(
        self,
        update_fn: Callable[[dict[str, torch.Tensor]], dict],
        policy,
        value_net,
        ratio_eps: diagnostics.Eps,
        optimizer=None,
        values: Callable[[torch.Tensor], torch.Tensor] | None = None,
        **stateful,
    ) -> float:
        """The on-policy loop, then the final evaluation (returned). Each iteration: with an
        optimizer, its learning rate from args.learning_rate (linearly annealed when
        args.anneal_lr, logged as learning_rate); collect; update_fn(batch) -> stats inside
        self.update (NaN guard, policy shift over the batch); log and checkpoint. Checkpoints
        hold policy, value_net, the optimizer and **stateful. `values` (default value_net) is
        what the rollout's V(s) is read from, e.g. a critic of normalised returns scaled back."""
        if optimizer is not None:
            stateful = {"optimizer": optimizer, **stateful}
        for iteration in self.start(policy=policy, value=value_net, **stateful):
            if optimizer is not None:
                lr = anneal_lr(
                    optimizer,
                    self.args.learning_rate,
                    iteration,
                    self.num_iterations,
                    self.args.anneal_lr,
                )
            batch, episodes = self.collect(policy, values or value_net)
            with self.update(policy, batch, ratio_eps) as stats:
                stats.update(update_fn(batch))
            if optimizer is not None:
                stats["learning_rate"] = lr
            self.end_iteration(iteration, stats, episodes, act=policy.mode)
        return self.finish(policy.mode)

    def end_iteration(
        self, iteration: int, stats: dict, episodes: list[Episode], act: Callable
    ) -> None:
        """Log the rollout's train/* metrics and the update's stats (plus evaluation when due),
        checkpoint when due."""
        self._timer.lap("update_s")
        metrics = {
            **episode_metrics(episodes),
            "train/explained_variance": explained_variance(
                self.buffer.values.ravel(), self._returns.ravel()
            ),
            **{f"train/{k}": v for k, v in stats.items()},
        }
        super().end_iteration(
            iteration, metrics, self._timer.timing(self.batch_size), lambda: self.evaluate(act)
        )

    def evaluate(self, act: Callable) -> float:
        """Mean return of eval_episodes deterministic episodes, normaliser frozen."""
        args = self.args
        video = self.run_dir / "videos" / f"step_{self.step}.mp4" if args.capture_video else None
        returns = evaluate(
            act,
            args.env_id,
            self.obs_normalizer,
            args.eval_episodes,
            seed=eval_seed(args.seed),
            video_path=video,
            brax_pipeline=args.brax_pipeline,
        )
        return float(returns.mean())

    def finish(self, act: Callable) -> float:
        """Final evaluation into final_eval.json; close everything."""
        final = super().finish(lambda: self.evaluate(act))
        self.envs.close()
        return final


def collect_batch(
    collector: Collector, buffer: RolloutBuffer, policy, value_net, gamma: float, gae_lambda: float
):
    """One rollout of policy.sample into buffer, then V(s), old log-probs and GAE in batched
    passes: (flat batch, ended episodes, the collecting policy's distribution parameters or
    None, returns [T, N]); see Run.collect. Any collector and buffer: a second learner on its
    own envs (algos/rarl.py's adversary) collects through here too."""
    episodes = collector.collect(buffer, policy.sample)
    buffer.fill_values(value_net)
    likelihood = hasattr(policy, "dist_params")
    old_params = buffer.fill_logprobs(policy) if likelihood else None
    advantages = gae(
        buffer.rewards,
        buffer.values,
        buffer.next_values,
        buffer.terminated,
        buffer.ended,
        gamma,
        gae_lambda,
    )
    returns = advantages + buffer.values
    batch = buffer.flat(advantages=advantages, returns=returns)
    if not likelihood:
        del batch["logprobs"]  # never filled: stale zeros
    return batch, episodes, old_params, returns


def episode_metrics(episodes: list[Episode]) -> dict[str, float]:
    """train/episode_return, train/episode_length (means, NaN when none ended), train/episodes."""
    if not episodes:
        return {
            "train/episode_return": float("nan"),
            "train/episode_length": float("nan"),
            "train/episodes": 0,
        }
    return {
        "train/episode_return": float(np.mean([e.ret for e in episodes])),
        "train/episode_length": float(np.mean([e.length for e in episodes])),
        "train/episodes": len(episodes),
    }
