"""BPO, Bounded Policy Optimization (Ao et al. 2026, "Bounded Ratio Reinforcement Learning"):
fit the policy to the analytic optimum of the bounded-ratio problem, pi* = (1 + eps sign(Q - mu))
pi_old with mu the MEDIAN of Q under pi_old, learnt by an extra head on the critic.

    python algos/bpo.py --env-id Hopper-v5 --total-timesteps 1000000 --seed 1

Defaults: bounded-ratio-rl/bounded_ratio_rl, SB3 version (`src/sb3/BPO.py`,
`cfgs/algo/bpo/mujoco.yaml`): eps 0.3, temperature 1e-3, 256-256 ReLU nets, 2048 steps,
minibatch 64, 10 epochs, no advantage / observation / reward normalisation, plain MSE value
loss, u_coef 0.5, max_grad_norm 1.0. The median head U(s) is, as the reference's `u_net`
(`src/sb3/policy.py`), an MLP with the policy's hidden sizes on the critic's trunk features
(V(s) is one linear layer on the same features), every layer orthogonal with gain 1.
Adam runs fused on one flat parameter vector (the reference: per-tensor Adam; same update up to
rounding). Logs what ppo.py logs (the README lists the metrics), the median head's loss and
target_up_frac, with ratio deviation counted beyond eps. --num-seeds S trains S seeds in one
process as ppo.py's does (controlrl/population_control.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar, Literal

import torch
import torch.nn.functional as F
from torch import nn

from controlrl.cli import (
    CommonArgs,
    parse,
    require,
    require_minibatch_flags,
    require_nonnegative,
    require_positive,
)
from controlrl.losses import approx_kl
from controlrl.nets import ACTIVATIONS, layer_init, make_policy, mlp
from controlrl.population import PopulationArgs, require_population_flags
from controlrl.training import Run
from controlrl.update import adam, detached, minibatch_update


@dataclass
class Args(PopulationArgs, CommonArgs):
    population_backends: ClassVar[tuple[str, ...]] = ("bandit", "gym", "envpool")

    learning_rate: float = 3e-4
    """Adam learning rate (BPO mujoco.yaml 3e-4)"""
    anneal_lr: bool = False
    """anneal the learning rate linearly to 0 (SB3 default: constant)"""
    num_steps: int = 2048
    """steps per env per rollout (BPO n_steps 2048; its Hopper config uses 8 envs)"""
    gamma: float = 0.99
    """discount (BPO 0.99)"""
    gae_lambda: float = 0.95
    """GAE lambda of the returns q (BPO 0.95)"""
    num_minibatches: int = 32
    """minibatches per epoch (BPO batch_size 64, i.e. 32 of 2048)"""
    update_epochs: int = 10
    """epochs over each rollout (BPO n_epochs 10)"""
    eps: float = 0.3
    """ratio bound: the target ratio lies in (1 - eps, 1 + eps) (BPO clip_ratio 0.3)"""
    temperature: float = 1e-3
    """lambda_T of the sigmoid in the target ratio; -> 0 gives 1 + eps sign(q - u) (BPO 1e-3)"""
    use_median: bool = True
    """threshold q at the median head U(s), an MLP (the policy's hidden sizes) on the critic's
    trunk features as the reference's u_net; --no-use-median uses V(s) (BPO True)"""
    u_coef: float = 0.5
    """median-head loss coefficient (BPO 0.5)"""
    ent_coef: float = 0.0
    """entropy bonus coefficient (BPO 0.0)"""
    vf_coef: float = 0.5
    """value loss coefficient (BPO 0.5)"""
    max_grad_norm: float = 1.0
    """global gradient-norm clip (BPO 1.0)"""
    norm_obs: bool = False
    """running observation normalisation (BPO: no VecNormalize)"""
    norm_reward: bool = False
    """return-based reward scaling (BPO: no VecNormalize; q - V and L_u are scale dependent)"""
    hidden_sizes: tuple[int, ...] = (256, 256)
    """hidden layers of the policy, of the critic trunk and of the median head (BPO 256, 256)"""
    activation: Literal["relu", "tanh"] = "relu"
    """hidden activation of policy and critic (BPO ReLU)"""
    log_std_init: float = 0.0
    """initial log-std of the Gaussian policy (BPO 0.0)"""

    def validate(self) -> None:
        super().validate()
        require_minibatch_flags(self)
        require_positive(self, "temperature")
        require(0 < self.eps < 1, "eps", f"must be in (0, 1), got {self.eps}")
        require_nonnegative(self, "u_coef")
        require_population_flags(self)


def target_ratio(q: torch.Tensor, threshold: torch.Tensor, eps: float, temperature: float):
    """1 - eps + 2 eps sigmoid((q - threshold) / temperature): the bounded-ratio optimum
    1 + eps sign(q - median), smoothed; always strictly inside (1 - eps, 1 + eps)."""
    return 1 - eps + 2 * eps * torch.sigmoid((q - threshold) / temperature)


def bpo_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    q: torch.Tensor,
    v: torch.Tensor,
    threshold: torch.Tensor,
    eps: float,
    temperature: float,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """BPO policy loss, minimised: mean |(r - r_target) (q - sg(V))|, with
    r_target = target_ratio(q, sg(threshold)) and threshold the median head U(s) (or V(s)).

    Per sample, d/dr = |q - V| sign(r - r_target): minimised exactly at r = r_target.
    """
    log_ratio = logp - old_logp
    ratio = log_ratio.exp()
    with torch.no_grad():
        target = target_ratio(q, threshold, eps, temperature)
        weight = q - v
    loss = ((ratio - target) * weight).abs().mean()
    with torch.no_grad():
        stats = {
            "approx_kl": approx_kl(ratio, log_ratio),
            "clip_frac": ((ratio - 1).abs() > eps).float().mean(),
            "target_up_frac": (target > 1).float().mean(),
        }
    return loss, stats


def median_loss(u: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """mean(softplus(q - u) - (q - u) / 2) = mean log(2 cosh((q - u) / 2)): stationary where
    mean tanh((q - u) / 2) = 0, a smooth median regression (|q - u| / 2 for large residuals)."""
    diff = q - u
    return (F.softplus(diff) - 0.5 * diff).mean()


class MedianCritic(nn.Module):
    """V(s) and the median head U(s) on one shared trunk (as the reference's value network):
    V a linear layer on the trunk's features, U an MLP on them with hidden sizes u_hidden (the
    reference: the policy's net_arch), all of U's layers orthogonal with gain 1 (SB3's
    init_weights with the reference's u_net gain 1)."""

    def __init__(
        self,
        obs_dim: int,
        hidden: tuple[int, ...],
        activation: type[nn.Module],
        u_hidden: tuple[int, ...] | None = None,
    ):
        super().__init__()
        self.trunk = nn.Sequential(mlp([obs_dim, *hidden], activation, math.sqrt(2)), activation())
        self.v = layer_init(nn.Linear(hidden[-1], 1), 1.0)
        self.u = mlp([hidden[-1], *(hidden if u_hidden is None else u_hidden), 1], activation)
        for layer in self.u:
            if isinstance(layer, nn.Linear):
                layer_init(layer, 1.0)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """V(s) [B]."""
        return self.v(self.trunk(obs)).squeeze(-1)

    def value_and_median(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(V(s), U(s)), [B] each, from one trunk pass."""
        h = self.trunk(obs)
        return self.v(h).squeeze(-1), self.u(h).squeeze(-1)


def update(policy, critic, optimizer, batch: dict[str, torch.Tensor], args: Args) -> dict:
    """update_epochs x num_minibatches Adam steps on the BPO loss; returns mean statistics."""

    def loss_fn(mb, idx):
        obs, q = mb["obs"], mb["returns"]
        logp, entropy = policy.log_prob_entropy(obs, mb["actions"], args.ent_coef != 0)
        v, u = critic.value_and_median(obs)
        threshold = u if args.use_median else v
        pi_loss, stats = bpo_loss(logp, mb["logprobs"], q, v, threshold, args.eps, args.temperature)
        v_loss = (v - q).pow(2).mean()
        u_loss = median_loss(u, q) if args.use_median else torch.zeros(())
        ent = entropy.mean()
        loss = pi_loss + args.vf_coef * v_loss + args.u_coef * u_loss - args.ent_coef * ent
        terms = detached(
            loss=loss, policy_loss=pi_loss, value_loss=v_loss, median_loss=u_loss, entropy=ent
        )
        return loss, {**stats, **terms}

    return minibatch_update(optimizer, batch, loss_fn, args)


def build_actor_critic(obs_space, act_space, args: Args) -> tuple[nn.Module, MedianCritic]:
    """The policy, then the critic with its median head (in this order: the seed's stream)."""
    sizes = args.hidden_sizes
    policy = make_policy(obs_space, act_space, sizes, args.activation, args.log_std_init)
    obs_dim = math.prod(obs_space.shape)
    activation = ACTIVATIONS[args.activation]
    return policy, MedianCritic(obs_dim, sizes, activation, sizes)


def main(args: Args) -> None:
    if args.num_seeds is not None:  # every seed at once, the seed a batch dimension
        from controlrl.population_actor_critic import train_population

        def build(obs_space, act_space):
            return build_actor_critic(obs_space, act_space, args)

        train_population(args, update, build, ratio_eps=args.eps)
        return
    run = Run(args)
    policy, critic = build_actor_critic(run.obs_space, run.act_space, args)
    optimizer = adam(policy, critic, lr=args.learning_rate)  # flat and fused (BPO: plain Adam)
    run.train(
        lambda batch: update(policy, critic, optimizer, batch, args),
        policy,
        critic,
        ratio_eps=args.eps,
        optimizer=optimizer,
    )


if __name__ == "__main__":
    main(parse(Args))
