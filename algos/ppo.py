"""PPO-clip (Schulman et al. 2017) with CleanRL's MuJoCo defaults, for Box and Discrete actions.

    python algos/ppo.py --env-id Hopper-v5 --total-timesteps 1000000 --seed 1

Logs to the run directory (config.json, metrics.csv, timing.csv, tb/, checkpoints/, videos/):
episode returns, losses, approx-KL (k3), clip fraction, explained variance, evaluation returns
with the normaliser frozen, steps/s, and, after each update over the whole batch
(controlrl.diagnostics), per-state KL(old || new) mean and max and the fraction, max and mean of
|r - 1| (> eps). Spec: shared specs algorithms.md §0, §2.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from controlrl import diagnostics
from controlrl.cli import (
    CommonArgs,
    parse,
    require,
    require_batch,
    require_nonnegative,
    require_positive,
    require_unit_interval,
)
from controlrl.losses import clipped_value_loss
from controlrl.nets import ValueNet, flatten_parameters, make_policy
from controlrl.training import Run


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
    """hidden layers of the actor, and of the critic unless --critic-hidden-sizes (CleanRL 64, 64
    tanh)"""
    critic_hidden_sizes: tuple[int, ...] | None = None
    """hidden layers of the critic (default: the same as --hidden-sizes, as CleanRL)"""

    def validate(self) -> None:
        super().validate()
        require_positive(
            self,
            "learning_rate",
            "num_steps",
            "num_minibatches",
            "update_epochs",
            "clip_coef",
            "max_grad_norm",
        )
        require_nonnegative(self, "ent_coef", "vf_coef")
        require_unit_interval(self, "gamma", "gae_lambda")
        require(self.target_kl is None or self.target_kl > 0, "target_kl", "must be > 0")
        require(all(h > 0 for h in self.hidden_sizes), "hidden_sizes", "must all be > 0")
        require(
            all(h > 0 for h in self.critic_hidden_sizes or ()),
            "critic_hidden_sizes",
            "must all be > 0",
        )
        require_batch(self, self.num_steps, self.num_minibatches)


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
            v_loss = clipped_value_loss(
                value_net(batch["obs"][idx]),
                batch["values"][idx],
                batch["returns"][idx],
                args.clip_coef,
                args.clip_vloss,
            )
            ent = entropy.mean()
            loss = pg_loss - args.ent_coef * ent + args.vf_coef * v_loss
            optimizer.zero_grad(set_to_none=False)  # in place: keeps flat-parameter views
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
    diagnostics.check_finite(out, params)
    out["grad_steps"] = steps
    return out


def main(args: Args) -> None:
    run = Run(
        args, "ppo", args.gamma, args.gae_lambda, args.num_steps, args.norm_obs, args.norm_reward
    )
    policy = make_policy(run.obs_space, run.act_space, args.hidden_sizes)
    value_net = ValueNet(
        int(np.prod(run.obs_space.shape)), args.critic_hidden_sizes or args.hidden_sizes
    )
    flat_params = flatten_parameters(policy, value_net)  # clip and Adam: one tensor, not 13
    optimizer = torch.optim.Adam([flat_params], lr=args.learning_rate, eps=1e-5, fused=True)

    for iteration in run.start(policy=policy, value=value_net, optimizer=optimizer):
        frac = 1.0 - (iteration - 1) / run.num_iterations if args.anneal_lr else 1.0
        optimizer.param_groups[0]["lr"] = lr = args.learning_rate * frac
        batch, episodes = run.collect(policy, value_net)
        old_params = diagnostics.dist_params(policy, batch["obs"])
        with run.guard():
            stats = update(policy, value_net, optimizer, batch, args)
        # KL and ratio statistics over the whole batch after the update
        stats.update(
            diagnostics.policy_shift(
                policy,
                batch["obs"],
                batch["actions"],
                batch["logprobs"],
                old_params,
                args.clip_coef,
            )
        )
        run.end_iteration(iteration, {**stats, "learning_rate": lr}, episodes, act=policy.mode)
    run.finish(policy.mode)


if __name__ == "__main__":
    main(parse(Args))
