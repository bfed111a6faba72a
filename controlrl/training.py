"""The plumbing of an on-policy run, shared by every algorithm's main(): seeding, resume, envs,
normalisers, rollout + GAE, logging, periodic evaluation and checkpoints, the final evaluation.

    run = Run(args, "ppo", gamma=args.gamma, gae_lambda=args.gae_lambda, num_steps=args.num_steps)
    policy, value_net, optimizer = ...  # built from run.obs_space, run.act_space
    for iteration in run.start(policy=policy, value=value_net, optimizer=optimizer):
        batch, episodes = run.collect(policy, value_net)
        with run.guard():
            stats = update(...)
        run.end_iteration(iteration, stats, episodes, act=policy.mode)
    run.finish(policy.mode)
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import torch

import envs
from controlrl import checkpoint
from controlrl.buffers import RolloutBuffer
from controlrl.cli import CommonArgs, config_dict, fail
from controlrl.diagnostics import NonFiniteError, explained_variance
from controlrl.evaluate import evaluate
from controlrl.logger import RunLogger, default_run_dir
from controlrl.normalize import ObsNormalizer, RewardScaler
from controlrl.returns import gae
from controlrl.rollout import Collector, Episode
from controlrl.seeding import rng_state, seed_everything, set_rng_state


class Run:
    """One training run's environment, normalisers, buffer, run directory and checkpoints."""

    def __init__(
        self,
        args: CommonArgs,
        algo: str,
        gamma: float,
        gae_lambda: float,
        num_steps: int,
        norm_obs: bool = True,
        norm_reward: bool = True,
    ) -> None:
        self.args, self.algo = args, algo
        self.gamma, self.gae_lambda = gamma, gae_lambda
        torch.set_num_threads(args.torch_threads)
        self.rng = seed_everything(args.seed, args.torch_deterministic)
        self.resume_state = None
        if args.resume is not None:  # read before anything is started or written
            try:
                self.resume_state = checkpoint.load(
                    Path(args.resume) / "checkpoints" / "latest.pt", required=("step", "iteration")
                )
            except checkpoint.CheckpointError as exc:
                fail(str(exc))
        self.envs = envs.make(
            args.env_id,
            args.num_envs,
            args.seed,
            args.vectorization,
            brax_pipeline=args.brax_pipeline,
            copy=False,
        )
        self.obs_space = self.envs.single_observation_space
        self.act_space = self.envs.single_action_space
        self.obs_normalizer = ObsNormalizer(self.obs_space.shape) if norm_obs else None
        self.reward_scaler = RewardScaler(args.num_envs, gamma) if norm_reward else None
        self.collector = Collector(
            self.envs, self.obs_normalizer, self.reward_scaler, args.truncation_as_terminal
        )
        self.buffer = RolloutBuffer(
            num_steps,
            args.num_envs,
            self.obs_space.shape,
            self.act_space.shape,
            self.collector.discrete,
        )
        self.batch_size = num_steps * args.num_envs
        self.num_iterations = args.total_timesteps // self.batch_size
        self.run_dir = Path(args.run_dir or default_run_dir(algo, args.env_id, args.seed))
        self.stateful: dict = {}
        self.logger: RunLogger | None = None
        self._t0 = self._t1 = 0.0

    def start(self, **stateful) -> Iterator[int]:
        """Register what checkpoints hold (modules, optimisers), restore it when resuming, open
        the run directory; yields the iterations still to run (1-based)."""
        self.stateful = stateful
        start_iteration = start_step = 0
        state = self.resume_state
        if state is not None:
            try:
                missing = [k for k in stateful if k not in state]
                if missing:
                    raise checkpoint.CheckpointError(f"checkpoint lacks keys: {', '.join(missing)}")
                for name, obj in stateful.items():
                    obj.load_state_dict(state[name])
                if self.obs_normalizer is not None:
                    self.obs_normalizer.load_state_dict(state["obs_normalizer"])
                if self.reward_scaler is not None:
                    self.reward_scaler.load_state_dict(state["reward_scaler"])
                set_rng_state(state["rng"], self.rng)
            except (checkpoint.CheckpointError, KeyError, RuntimeError, ValueError) as exc:
                fail(f"cannot resume from {self.args.resume}: {exc}")
            start_iteration, start_step = int(state["iteration"]), int(state["step"])
        args = self.args
        self.logger = RunLogger(
            self.run_dir,
            config_dict(args, self.algo),
            args.total_timesteps,
            start_step,
            args.tensorboard,
            args.progress,
        )
        if hasattr(self.envs, "compile"):  # jitted backends (brax) compile before the first step
            self.logger.bar.set_description_str("compiling...", refresh=True)
            seconds = self.envs.compile()
            self.logger.bar.set_description_str("", refresh=False)
            self.logger.bar.write(f"{args.env_id}: compiled in {seconds:.1f} s")
        self.collector.reset(seed=args.seed + 1_000_003 * start_iteration)  # fresh episodes
        self.collector.global_step = start_step
        every = args.eval_every
        self.next_eval = (start_step // every + 1) * every if every else None
        return iter(range(start_iteration + 1, self.num_iterations + 1))

    def collect(self, policy, value_net) -> tuple[dict[str, torch.Tensor], list[Episode]]:
        """One rollout with policy.sample; values, old log-probs and GAE in batched passes.
        Returns the flat batch (obs, actions, logprobs, values, advantages, returns) and the
        episodes that ended."""
        self._t0 = time.perf_counter()
        buffer = self.buffer
        episodes = self.collector.collect(buffer, policy.sample)
        buffer.fill_values(value_net)
        buffer.fill_logprobs(lambda obs, act: policy.log_prob_entropy(obs, act)[0])
        advantages = gae(
            buffer.rewards,
            buffer.values,
            buffer.next_values,
            buffer.terminated,
            buffer.ended,
            self.gamma,
            self.gae_lambda,
        )
        self._returns = advantages + buffer.values
        self._t1 = time.perf_counter()
        return buffer.flat(advantages=advantages, returns=self._returns), episodes

    @contextlib.contextmanager
    def guard(self):
        """Stop with a message (exit 1) if the update produced NaN/inf; the last good checkpoint
        stays on disk."""
        try:
            yield
        except NonFiniteError as exc:
            self.logger.close()
            print(
                f"error: {exc}; the last good checkpoint stays in {self.run_dir}", file=sys.stderr
            )
            raise SystemExit(1) from None

    def end_iteration(
        self, iteration: int, stats: dict, episodes: list[Episode], act: Callable
    ) -> None:
        """Log the iteration (plus evaluation when due) and checkpoint when due."""
        t2 = time.perf_counter()
        step = self.collector.global_step
        returns = [e.ret for e in episodes]
        metrics = {
            "train/episode_return": float(np.mean(returns)) if episodes else float("nan"),
            "train/episode_length": float(np.mean([e.length for e in episodes]))
            if episodes
            else float("nan"),
            "train/episodes": len(episodes),
            "train/explained_variance": explained_variance(
                self.buffer.values.ravel(), self._returns.ravel()
            ),
            **{f"train/{k}": v for k, v in stats.items()},
            "eval/return": float("nan"),  # a fixed column, filled on evaluation rows
        }
        if self.next_eval is not None and step >= self.next_eval:
            metrics["eval/return"] = self.evaluate(act)
            self.next_eval += self.args.eval_every
        timing = {
            "time/sps": self.batch_size / max(t2 - self._t0, 1e-9),
            "time/rollout_s": self._t1 - self._t0,
            "time/update_s": t2 - self._t1,
        }
        self.logger.log(step, metrics, timing)
        if iteration % self.args.checkpoint_every == 0 or iteration == self.num_iterations:
            self.save_checkpoint(iteration)

    def evaluate(self, act: Callable) -> float:
        """Mean return of eval_episodes deterministic episodes, normaliser frozen."""
        step = self.collector.global_step
        video = self.run_dir / "videos" / f"step_{step}.mp4" if self.args.capture_video else None
        returns = evaluate(
            act,
            self.args.env_id,
            self.obs_normalizer,
            self.args.eval_episodes,
            seed=self.args.seed + 10_000,
            video_path=video,
            brax_pipeline=self.args.brax_pipeline,
        )
        return float(returns.mean())

    def save_checkpoint(self, iteration: int) -> None:
        """Everything needed to resume, written atomically."""
        state = {
            "step": self.collector.global_step,
            "iteration": iteration,
            "rng": rng_state(self.rng),
            "obs_normalizer": self.obs_normalizer.state_dict() if self.obs_normalizer else {},
            "reward_scaler": self.reward_scaler.state_dict() if self.reward_scaler else {},
            **{name: obj.state_dict() for name, obj in self.stateful.items()},
        }
        checkpoint.save(self.run_dir / "checkpoints" / "latest.pt", state)

    def finish(self, act: Callable) -> float:
        """Final evaluation into final_eval.json; close everything."""
        final = self.evaluate(act)
        step = self.collector.global_step
        (self.run_dir / "final_eval.json").write_text(
            json.dumps({"step": step, "eval_return_mean": final}) + "\n"
        )
        self.logger.bar.write(
            f"final evaluation ({self.args.eval_episodes} episodes, normaliser frozen): "
            f"{final:.1f}   run dir: {self.run_dir}"
        )
        self.logger.close()
        self.envs.close()
        return final
