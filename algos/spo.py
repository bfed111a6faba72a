"""SPO (Xie et al. 2024, "Simple Policy Optimization", arXiv 2401.16025): PPO with the clip
replaced by a quadratic penalty whose per-sample optimum lies exactly on the trust-region
boundary 1 +- eps.

    python algos/spo.py --env-id Hopper-v5 --total-timesteps 1000000 --seed 1
    python algos/spo.py --env-id Hopper-v5 --hidden-sizes 64 64     # the reference's 3-layer net
    python algos/spo.py --env-id Hopper-v5 --ratio kalman           # KPO's filtered ratio

Defaults: MyRepositories-hub/Simple-Policy-Optimization `mujoco/main.py` (7-layer tanh policy,
64-64 critic, 8 envs x 256 steps, 4 minibatches, 10 epochs). Timeouts bootstrap (the reference
treats them as terminal: --truncation-as-terminal reproduces it). Adam runs fused on one flat
parameter vector (the reference: per-tensor Adam; same update up to rounding). --ratio
(controlrl/ratios.py): the sequence (GSPO) or KPO's Kalman-filtered ratio along each episode
replaces the per-step one in both the surrogate and the penalty (see spo_loss). Logs what ppo.py
logs (the README lists the metrics), with ratio deviation counted beyond eps. --num-seeds S
trains S seeds in one process as ppo.py's does (controlrl/population_control.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from controlrl.cli import (
    CommonArgs,
    RatioArgs,
    parse,
    require,
    require_minibatch_flags,
    require_positive,
    require_ratio_flags,
    require_sizes,
)
from controlrl.losses import surrogate_stats
from controlrl.nets import ValueNet, make_policy
from controlrl.population import PopulationArgs, require_population_flags
from controlrl.training import Run
from controlrl.update import actor_critic_loss, adam, minibatch_update, rollout_ratios


@dataclass
class Args(PopulationArgs, RatioArgs, CommonArgs):
    population_backends: ClassVar[tuple[str, ...]] = ("bandit", "gym", "envpool")

    num_envs: int = 8
    """parallel environments in the vector env (SPO mujoco/main.py 8)"""
    learning_rate: float = 3e-4
    """Adam learning rate (SPO 3e-4)"""
    anneal_lr: bool = True
    """anneal the learning rate linearly to 0 (SPO True)"""
    num_steps: int = 256
    """steps per env per rollout (SPO 256, batch 8 x 256 = 2048)"""
    gamma: float = 0.99
    """discount (SPO 0.99)"""
    gae_lambda: float = 0.95
    """GAE lambda (SPO 0.95)"""
    num_minibatches: int = 4
    """minibatches per epoch (SPO 4, i.e. 512 samples)"""
    update_epochs: int = 10
    """epochs over each rollout (SPO 10)"""
    norm_adv: bool = True
    """normalise advantages per minibatch (SPO True)"""
    eps: float = 0.2
    """trust-region size: the quadratic's optimum sits at r = 1 +- eps (SPO 0.2)"""
    clip_vloss: bool = True
    """clip the value loss around the old values with the same eps (SPO True)"""
    ent_coef: float = 0.0
    """entropy bonus coefficient c2 (SPO MuJoCo 0.0)"""
    vf_coef: float = 0.5
    """value loss coefficient c1 (SPO 0.5)"""
    max_grad_norm: float = 0.5
    """global gradient-norm clip (SPO 0.5)"""
    norm_obs: bool = True
    """running observation normalisation, clipped to [-10, 10] (SPO, CleanRL wrappers)"""
    norm_reward: bool = True
    """scale rewards by the std of a running discounted return, clip to [-10, 10] (SPO)"""
    hidden_sizes: tuple[int, ...] = (256, 256, 128, 128, 64, 64)
    """hidden layers of the policy (SPO's default '7-layer' tanh net; its 3-layer option: 64 64)"""
    critic_hidden_sizes: tuple[int, ...] = (64, 64)
    """hidden layers of the critic (SPO 64, 64 tanh)"""

    def validate(self) -> None:
        super().validate()
        require_minibatch_flags(self)
        require_ratio_flags(self)
        require_positive(self, "eps")
        require_sizes(self, "critic_hidden_sizes")
        if self.num_seeds is not None:  # the population path: the per-step ratio
            require(
                self.ratio == "step",
                "num_seeds",
                f"needs --ratio step (the population path), got {self.ratio}",
            )
            require_population_flags(self)


def spo_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    adv: torch.Tensor,
    eps: float,
    ratio: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """SPO objective, minimised: -mean(A r - |A| (r - 1)^2 / (2 eps)).

    Per sample, d/dr = -(A - |A| (r - 1) / eps): zero at r = 1 + sign(A) eps (the PPO clip
    boundary), a restoring force beyond it, and -A (the policy gradient) at r = 1.

    r is the per-step exp(logp - old_logp) or the given ratio (--ratio), in both terms: the
    penalty keeps the ratio the surrogate uses inside 1 +- eps, as PPO's clip does (KPO-clipped
    clips the filtered ratio). approx_kl is of the per-step ratio, clip_frac of r.
    """
    log_ratio = logp - old_logp
    step_ratio = log_ratio.exp()
    if ratio is None:
        ratio = step_ratio
    loss = -(adv * ratio - adv.abs() * (ratio - 1).pow(2) / (2 * eps)).mean()
    return loss, surrogate_stats(step_ratio, log_ratio, eps, used=ratio)


def update(
    policy, value_net, optimizer, batch: dict[str, torch.Tensor], args: Args, ended=None
) -> dict:
    """update_epochs x num_minibatches Adam steps on the SPO loss with the ratio of --ratio
    (ended [T, N]: the rollout's episode ends, needed unless --ratio step); returns mean
    statistics."""
    eps = args.eps

    def policy_loss(logp, old_logp, adv, ratio=None):
        return spo_loss(logp, old_logp, adv, eps, ratio)

    ratios = rollout_ratios(args, ended)  # once per rollout
    loss_fn = actor_critic_loss(policy, value_net, policy_loss, eps, args, ratios)
    return minibatch_update(optimizer, batch, loss_fn, args, ratios=ratios)


def main(args: Args) -> None:
    if args.num_seeds is not None:  # every seed at once, the seed a batch dimension
        from controlrl.population_actor_critic import train_population

        train_population(args, update, ratio_eps=args.eps)
        return
    run = Run(args)
    policy = make_policy(run.obs_space, run.act_space, args.hidden_sizes)
    value_net = ValueNet(run.obs_dim, args.critic_hidden_sizes)
    optimizer = adam(policy, value_net, lr=args.learning_rate)  # flat and fused (SPO: plain Adam)
    run.train(
        lambda batch: update(policy, value_net, optimizer, batch, args, run.buffer.ended),
        policy,
        value_net,
        ratio_eps=args.eps,
        optimizer=optimizer,
    )


if __name__ == "__main__":
    main(parse(Args))
