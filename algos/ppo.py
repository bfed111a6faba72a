"""PPO-clip (Schulman et al. 2017) with CleanRL's MuJoCo defaults, for Box and Discrete actions.

    python algos/ppo.py --env-id Hopper-v5 --total-timesteps 1000000 --seed 1

Logs to the run directory (config.json, metrics.csv, timing.csv, tb/, checkpoints/, videos/):
episode returns, losses, approx-KL (k3), clip fraction, ratio deviation, explained variance,
evaluation returns with the normaliser frozen, and steps/s. Spec: shared specs algorithms.md §0, §2.
"""

from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

import envs
from controlrl import checkpoint
from controlrl.buffers import RolloutBuffer
from controlrl.cli import CommonArgs, config_dict, fail, parse, require
from controlrl.evaluate import evaluate
from controlrl.logger import RunLogger, default_run_dir
from controlrl.nets import ValueNet, make_policy
from controlrl.normalize import ObsNormalizer, RewardScaler
from controlrl.returns import gae
from controlrl.rollout import Collector
from controlrl.seeding import rng_state, seed_everything, set_rng_state


@dataclass
class Args(CommonArgs):
    learning_rate: float = 3e-4
    """Adam learning rate (CleanRL 3e-4)"""
    anneal_lr: bool = True
    """anneal the learning rate linearly to 0 (CleanRL True)"""
    num_steps: int = 2048
    """steps per env per rollout (CleanRL 2048)"""
    gamma: float = 0.99
    """discount (CleanRL 0.99)"""
    gae_lambda: float = 0.95
    """GAE lambda (CleanRL 0.95)"""
    num_minibatches: int = 32
    """minibatches per epoch (CleanRL 32, i.e. 64 samples with 1 env)"""
    update_epochs: int = 10
    """epochs over each rollout (CleanRL 10)"""
    norm_adv: bool = True
    """normalise advantages per minibatch (CleanRL True)"""
    clip_coef: float = 0.2
    """ratio clip eps (CleanRL 0.2)"""
    clip_vloss: bool = True
    """clip the value loss around the old values with the same eps (CleanRL True)"""
    ent_coef: float = 0.0
    """entropy bonus coefficient (CleanRL 0.0)"""
    vf_coef: float = 0.5
    """value loss coefficient (CleanRL 0.5)"""
    max_grad_norm: float = 0.5
    """global gradient-norm clip (CleanRL 0.5)"""
    target_kl: float | None = None
    """stop the epochs when approx-KL of the last minibatch exceeds this (CleanRL None)"""
    norm_obs: bool = True
    """running observation normalisation, clipped to [-10, 10] (CleanRL wrappers)"""
    norm_reward: bool = True
    """scale rewards by the std of a running discounted return, clip to [-10, 10] (CleanRL)"""
    hidden_sizes: tuple[int, ...] = (64, 64)
    """hidden layers of the actor and of the critic (CleanRL 64, 64 tanh)"""

    def validate(self) -> None:
        super().validate()
        for name in (
            "learning_rate",
            "num_steps",
            "num_minibatches",
            "update_epochs",
            "clip_coef",
            "max_grad_norm",
        ):
            require(getattr(self, name) > 0, name, f"must be > 0, got {getattr(self, name)}")
        require(0 <= self.gamma <= 1, "gamma", f"must be in [0, 1], got {self.gamma}")
        require(
            0 <= self.gae_lambda <= 1, "gae_lambda", f"must be in [0, 1], got {self.gae_lambda}"
        )
        require(self.ent_coef >= 0 and self.vf_coef >= 0, "ent_coef", "and --vf-coef must be >= 0")
        require(self.target_kl is None or self.target_kl > 0, "target_kl", "must be > 0")
        require(all(h > 0 for h in self.hidden_sizes), "hidden_sizes", "must all be > 0")
        batch = self.num_steps * self.num_envs
        require(
            batch % self.num_minibatches == 0,
            "num_minibatches",
            f"must divide the batch num_steps * num_envs = {batch}, got {self.num_minibatches}",
        )
        require(
            self.total_timesteps >= batch,
            "total_timesteps",
            f"must be >= one batch (num_steps * num_envs = {batch}), got {self.total_timesteps}",
        )


def ppo_loss(
    logp: torch.Tensor, old_logp: torch.Tensor, adv: torch.Tensor, eps: float
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Clipped surrogate, minimised: mean(max(-A r, -A clip(r, 1 - eps, 1 + eps)))."""
    log_ratio = logp - old_logp
    ratio = log_ratio.exp()
    loss = torch.max(-adv * ratio, -adv * ratio.clamp(1 - eps, 1 + eps)).mean()
    with torch.no_grad():
        deviation = (ratio - 1).abs()
        stats = {
            "approx_kl": ((ratio - 1) - log_ratio).mean(),  # k3 estimator of KL(old || new)
            "clip_frac": (deviation > eps).float().mean(),
            "ratio_dev_max": deviation.max(),
        }
    return loss, stats


def value_loss(
    v_new: torch.Tensor, v_old: torch.Tensor, returns: torch.Tensor, eps: float, clip: bool
) -> torch.Tensor:
    """0.5 * MSE to the lambda-returns; with clip, the max of plain and clipped errors."""
    err = (v_new - returns).pow(2)
    if clip:
        v_clipped = v_old + (v_new - v_old).clamp(-eps, eps)
        err = torch.max(err, (v_clipped - returns).pow(2))
    return 0.5 * err.mean()


class NonFiniteError(RuntimeError):
    """A loss or a parameter became NaN or inf."""


def update(policy, value_net, optimizer, batch: dict[str, torch.Tensor], args: Args) -> dict:
    """update_epochs x num_minibatches Adam steps on the PPO loss; returns mean statistics."""
    batch_size = batch["obs"].shape[0]
    mb_size = batch_size // args.num_minibatches
    params = [p for group in optimizer.param_groups for p in group["params"]]
    log: dict[str, list[torch.Tensor]] = {}
    steps = 0
    for _ in range(args.update_epochs):
        for idx in torch.randperm(batch_size).split(mb_size):
            logp, entropy = policy.log_prob_entropy(batch["obs"][idx], batch["actions"][idx])
            adv = batch["advantages"][idx]
            if args.norm_adv:
                adv = (adv - adv.mean()) / (adv.std() + 1e-8)
            pg_loss, stats = ppo_loss(logp, batch["logprobs"][idx], adv, args.clip_coef)
            v_loss = value_loss(
                value_net(batch["obs"][idx]),
                batch["values"][idx],
                batch["returns"][idx],
                args.clip_coef,
                args.clip_vloss,
            )
            ent = entropy.mean()
            loss = pg_loss - args.ent_coef * ent + args.vf_coef * v_loss
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, args.max_grad_norm)
            optimizer.step()
            steps += 1
            stats.update(
                loss=loss.detach(),
                policy_loss=pg_loss.detach(),
                value_loss=v_loss.detach(),
                entropy=ent.detach(),
            )
            for k, v in stats.items():
                log.setdefault(k, []).append(v)
        if args.target_kl is not None and stats["approx_kl"] > args.target_kl:
            break
    out = {
        k: float(torch.stack(v).max() if k == "ratio_dev_max" else torch.stack(v).mean())
        for k, v in log.items()
    }
    if not all(math.isfinite(v) for v in out.values()) or not all(
        torch.isfinite(p).all() for p in params
    ):
        raise NonFiniteError(f"non-finite loss or parameters after update: {out}")
    out["grad_steps"] = steps
    return out


def explained_variance(values: np.ndarray, returns: np.ndarray) -> float:
    """1 - Var(R - V) / Var(R); nan when the returns are constant."""
    var = returns.var()
    return float("nan") if var == 0 else float(1 - (returns - values).var() / var)


def main(args: Args) -> None:
    torch.set_num_threads(args.torch_threads)
    rng = seed_everything(args.seed, args.torch_deterministic)
    state = None
    if args.resume is not None:  # loaded before anything is started or written
        try:
            state = checkpoint.load(
                Path(args.resume) / "checkpoints" / "latest.pt",
                required=("step", "iteration", "policy", "value", "optimizer"),
            )
        except checkpoint.CheckpointError as exc:
            fail(str(exc))

    vec_env = envs.make(args.env_id, args.num_envs, args.seed, args.vectorization)
    obs_space, act_space = vec_env.single_observation_space, vec_env.single_action_space
    policy = make_policy(obs_space, act_space, args.hidden_sizes)
    value_net = ValueNet(int(np.prod(obs_space.shape)), args.hidden_sizes)
    optimizer = torch.optim.Adam(
        [*policy.parameters(), *value_net.parameters()], lr=args.learning_rate, eps=1e-5
    )
    obs_normalizer = ObsNormalizer(obs_space.shape) if args.norm_obs else None
    reward_scaler = RewardScaler(args.num_envs, args.gamma) if args.norm_reward else None
    start_iteration, start_step = 0, 0
    if state is not None:
        policy.load_state_dict(state["policy"])
        value_net.load_state_dict(state["value"])
        optimizer.load_state_dict(state["optimizer"])
        if obs_normalizer is not None:
            obs_normalizer.load_state_dict(state["obs_normalizer"])
        if reward_scaler is not None:
            reward_scaler.load_state_dict(state["reward_scaler"])
        set_rng_state(state["rng"], rng)
        start_iteration, start_step = int(state["iteration"]), int(state["step"])

    run_dir = Path(args.run_dir) if args.run_dir else default_run_dir("ppo", args.env_id, args.seed)
    logger = RunLogger(
        run_dir,
        config_dict(args, "ppo"),
        args.total_timesteps,
        start_step,
        args.tensorboard,
        args.progress,
    )
    collector = Collector(vec_env, obs_normalizer, reward_scaler, args.truncation_as_terminal)
    collector.reset(seed=args.seed + 1_000_003 * start_iteration)  # fresh episodes on resume
    collector.global_step = start_step
    buffer = RolloutBuffer(
        args.num_steps, args.num_envs, obs_space.shape, act_space.shape, collector.discrete
    )
    batch_size = args.num_steps * args.num_envs
    num_iterations = args.total_timesteps // batch_size
    next_eval = (start_step // args.eval_every + 1) * args.eval_every if args.eval_every else None

    def save_checkpoint(iteration: int) -> None:
        checkpoint.save(
            run_dir / "checkpoints" / "latest.pt",
            {
                "step": collector.global_step,
                "iteration": iteration,
                "policy": policy.state_dict(),
                "value": value_net.state_dict(),
                "optimizer": optimizer.state_dict(),
                "rng": rng_state(rng),
                "obs_normalizer": obs_normalizer.state_dict() if obs_normalizer else {},
                "reward_scaler": reward_scaler.state_dict() if reward_scaler else {},
            },
        )

    def run_eval(step: int) -> float:
        video = run_dir / "videos" / f"step_{step}.mp4" if args.capture_video else None
        returns = evaluate(
            policy.mode,
            args.env_id,
            obs_normalizer,
            args.eval_episodes,
            seed=args.seed + 10_000,
            video_path=video,
        )
        return float(returns.mean())

    for iteration in range(start_iteration + 1, num_iterations + 1):
        t0 = time.perf_counter()
        lr = args.learning_rate * (1.0 - (iteration - 1) / num_iterations if args.anneal_lr else 1)
        optimizer.param_groups[0]["lr"] = lr
        episodes = collector.collect(buffer, policy.sample)
        buffer.fill_values(value_net)
        buffer.fill_logprobs(lambda obs, act: policy.log_prob_entropy(obs, act)[0])
        advantages = gae(
            buffer.rewards,
            buffer.values,
            buffer.next_values,
            buffer.terminated,
            buffer.ended,
            args.gamma,
            args.gae_lambda,
        )
        returns = advantages + buffer.values
        t1 = time.perf_counter()
        try:
            stats = update(
                policy,
                value_net,
                optimizer,
                buffer.flat(advantages=advantages, returns=returns),
                args,
            )
        except NonFiniteError as exc:
            logger.close()
            print(f"error: {exc}; the last good checkpoint stays in {run_dir}", file=sys.stderr)
            raise SystemExit(1) from None
        t2 = time.perf_counter()
        step = collector.global_step
        metrics = {
            "train/episode_return": float(np.mean([e.ret for e in episodes]))
            if episodes
            else float("nan"),
            "train/episode_length": float(np.mean([e.length for e in episodes]))
            if episodes
            else float("nan"),
            "train/episodes": len(episodes),
            "train/learning_rate": lr,
            "train/explained_variance": explained_variance(buffer.values.ravel(), returns.ravel()),
            **{f"train/{k}": v for k, v in stats.items()},
        }
        metrics["eval/return"] = float("nan")  # a fixed column; filled on evaluation rows
        if next_eval is not None and step >= next_eval:
            metrics["eval/return"] = run_eval(step)
            next_eval += args.eval_every
        logger.log(
            step,
            metrics,
            {
                "time/sps": (t2 - t0) and batch_size / (t2 - t0),
                "time/rollout_s": t1 - t0,
                "time/update_s": t2 - t1,
            },
        )
        if iteration % args.checkpoint_every == 0 or iteration == num_iterations:
            save_checkpoint(iteration)

    final = run_eval(collector.global_step)
    (run_dir / "final_eval.json").write_text(
        f'{{"step": {collector.global_step}, "eval_return_mean": {final!r}}}\n'
    )
    logger.bar.write(
        f"final evaluation ({args.eval_episodes} episodes, normaliser frozen): "
        f"{final:.1f}   run dir: {run_dir}"
    )
    logger.close()
    vec_env.close()


if __name__ == "__main__":
    main(parse(Args))
