"""FPO, Flow Policy Optimization (McAllister, Ge, Yi, Kim, Weber, Choi, Feng, Kanazawa 2025, "Flow
Matching Policy Gradients", arXiv 2507.21053): a flow-matching policy, trained from a random
initialisation with PPO-clip on a likelihood-free ratio built from conditional flow-matching (CFM)
losses. Defaults of akanazawa/fpo playground/src/flow_policy/fpo.py where they apply to this
CleanRL-style loop.

    python algos/fpo.py --env-id Hopper-v5 --total-timesteps 1000000 --seed 1
    python algos/fpo.py --env-id bandit:bimodal --num-envs 64 --num-steps 8

The policy samples an action by Euler integration of its velocity field from noise (t = 1) to
the action (t = 0) in --flow-steps steps (controlrl/generative.py euler_sample). Right after each
rollout, in one batched pass before the first gradient step (so with the rollout's parameters,
which is what the reference does at rollout time), every action gets --n-mc pairs (eps_i, t_i),
t_i on the grid {1, 0.9, ..., 0.1}, and their CFM losses l_old_i are frozen. The ratio is
rho = exp(mean_i l_old_i - mean_i l_new_i) with the same pairs.

Differences from the reference: GAE once per rollout with the rollout's values (CleanRL; the
reference recomputes Brax-style GAE inside every minibatch with the current value net), reward
and observation normalisation of CleanRL instead of a reward scale of 10, a global gradient-norm
clip of 0.5, Adam eps 1e-5 (optax's 1e-8), and the whole flat batch is split into
--num-minibatches. Evaluation samples from noise, as the reference's does (its deterministic flag
only drops an optional extra action noise, 0 by default). Logs what ppo.py logs
except the likelihood-based statistics (kl_*, ratio_dev_*), plus the ratio's mean, min and max.
"""

from __future__ import annotations

from dataclasses import dataclass

import gymnasium as gym
import torch
from torch import nn

import envs
from controlrl.cli import (
    ArgError,
    CommonArgs,
    fail,
    parse,
    require,
    require_batch,
    require_nonnegative,
    require_positive,
    require_sizes,
    require_unit_interval,
)
from controlrl.generative import cfm_loss, euler_sample, flow_velocity_net, sample_cfm_pairs
from controlrl.losses import clipped_value_loss, surrogate_stats
from controlrl.nets import ValueNet
from controlrl.training import Run
from controlrl.update import adam, detached, minibatch_update


@dataclass
class Args(CommonArgs):
    learning_rate: float = 3e-4
    """Adam learning rate (reference 3e-4, constant)"""
    anneal_lr: bool = False
    """anneal the learning rate linearly to 0 (reference: constant)"""
    num_steps: int = 2048
    """steps per env per rollout (CleanRL 2048; the reference unrolls 30 steps of 2048 envs)"""
    gamma: float = 0.995
    """discount (reference 0.995)"""
    gae_lambda: float = 0.95
    """GAE lambda (reference 0.95)"""
    num_minibatches: int = 32
    """minibatches per epoch (reference 32)"""
    update_epochs: int = 16
    """epochs over each rollout (reference num_updates_per_batch 16)"""
    norm_adv: bool = True
    """normalise advantages per minibatch (reference normalize_advantage True)"""
    clip_coef: float = 0.05
    """ratio clip eps (reference clipping_epsilon 0.05; much smaller than PPO's 0.2: the CFM
    ratio is a proxy whose scale differs from a likelihood ratio)"""
    clip_vloss: bool = False
    """clip the value loss around the old values (reference: no)"""
    vf_coef: float = 0.5
    """value loss coefficient on 0.5 * MSE (reference value_loss_coeff 0.25 on the plain MSE)"""
    max_grad_norm: float = 0.5
    """global gradient-norm clip (CleanRL 0.5; the reference does not clip)"""
    target_kl: float | None = None
    """stop the epochs when the k3 estimate on log rho exceeds this (reference: off)"""
    norm_obs: bool = True
    """running observation normalisation (reference normalize_observations True)"""
    norm_reward: bool = True
    """CleanRL's return-based reward scaling (the reference multiplies rewards by 10)"""
    hidden_sizes: tuple[int, ...] = (32, 32, 32, 32)
    """velocity MLP hidden layers, SiLU (reference 4 x 32)"""
    critic_hidden_sizes: tuple[int, ...] = (256, 256, 256, 256, 256)
    """value MLP hidden layers, SiLU (reference 5 x 256)"""
    flow_steps: int = 10
    """Euler steps from noise to action at sampling, and the size of the t grid (reference 10)"""
    n_mc: int = 8
    """(eps, t) pairs per action for the CFM ratio (reference n_samples_per_action 8)"""
    discrete_t: bool = True
    """draw t on the sampling grid {1, ..., 1/flow_steps} rather than U[0, 1] (reference
    discretize_t_for_training True)"""
    cfm_mode: str = "eps"
    """CFM loss: eps (velocity supervised as noise, reference default "u_but_supervise_as_eps")
    or u (velocity MSE)"""
    per_pair_ratio: bool = False
    """one ratio per pair, exp(clip(l_old_i - l_new_i, -3, 3)), and a PPO term per pair
    (reference average_losses_before_exp False) instead of the averaged one"""
    time_dim: int = 8
    """time embedding size [cos(t 2^k), sin(t 2^k)] (reference timestep_embed_dim 8)"""
    output_scale: float = 0.25
    """velocity output multiplier (reference policy_mlp_output_scale 0.25)"""

    def validate(self) -> None:
        super().validate()
        require_positive(
            self, "learning_rate", "num_steps", "num_minibatches", "update_epochs", "max_grad_norm"
        )
        require_positive(self, "clip_coef", "flow_steps", "n_mc", "output_scale")
        require_unit_interval(self, "gamma", "gae_lambda")
        require_nonnegative(self, "vf_coef")
        require_sizes(self, "hidden_sizes", "critic_hidden_sizes")
        require_batch(self, self.num_steps, self.num_minibatches)
        require(self.time_dim >= 2 and self.time_dim % 2 == 0, "time_dim", "must be even, >= 2")
        require(
            self.cfm_mode in ("eps", "u"), "cfm_mode", f"must be eps or u, got {self.cfm_mode!r}"
        )
        require(self.target_kl is None or self.target_kl > 0, "target_kl", "must be > 0")
        act_space = envs.spaces(self.env_id, self.brax_pipeline)[1]
        if not isinstance(act_space, gym.spaces.Box):
            raise ArgError(no_box_message(self.env_id, act_space))


def no_box_message(env_id: str, act_space) -> str:
    return f"--env-id: fpo needs continuous (Box) actions; {env_id} has {act_space}"


class FlowPolicy(nn.Module):
    """A flow-matching policy: velocity net v(x_t, t, obs), actions by Euler from N(0, I)."""

    def __init__(self, obs_dim: int, act_dim: int, args: Args) -> None:
        super().__init__()
        self.act_dim, self.flow_steps, self.cfm_mode = act_dim, args.flow_steps, args.cfm_mode
        self.velocity = flow_velocity_net(
            obs_dim, act_dim, args.hidden_sizes, args.time_dim, args.output_scale
        )

    def sample(self, obs: torch.Tensor) -> torch.Tensor:
        """Actions [B, A]: one batched forward per Euler step for all envs."""
        return euler_sample(self.velocity, obs, self.act_dim, self.flow_steps)

    # the reference's "deterministic" evaluation still starts from random noise (it only drops
    # the optional feather noise, 0 by default): a flow policy's noise is its distribution
    mode = sample

    def cfm_losses(self, obs, actions, eps, t) -> torch.Tensor:
        """Per-pair CFM losses [B, N] of actions [B, A] with pairs eps [B, N, A], t [B, N]."""
        return cfm_loss(self.velocity, obs, actions, eps, t, self.cfm_mode)


def fpo_loss(
    l_new: torch.Tensor, l_old: torch.Tensor, adv: torch.Tensor, eps: float, per_pair: bool = False
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """FPO's clipped surrogate, minimised, from per-pair CFM losses l_new, l_old [B, N] and
    advantages [B]: rho = exp(mean_i l_old_i - mean_i l_new_i), loss = mean(max(-A rho,
    -A clip(rho, 1 - eps, 1 + eps))). per_pair: rho_i = exp(clip(l_old_i - l_new_i, -3, 3)) and
    the mean over (sample, pair) of the per-pair terms."""
    if per_pair:
        log_ratio = (l_old - l_new).clamp(-3.0, 3.0)
        adv = adv.unsqueeze(-1)
    else:
        log_ratio = l_old.mean(-1) - l_new.mean(-1)
    ratio = log_ratio.exp()
    loss = torch.max(-adv * ratio, -adv * ratio.clamp(1 - eps, 1 + eps)).mean()
    stats = surrogate_stats(ratio, log_ratio, eps)
    stats.update(detached(ratio_mean=ratio.mean(), ratio_max=ratio.max(), ratio_min=ratio.min()))
    return loss, stats


def attach_cfm_pairs(policy: FlowPolicy, batch: dict[str, torch.Tensor], args: Args) -> None:
    """Add to the batch N pairs per action and their frozen CFM losses under the current (the
    rollout's) parameters: cfm_eps [B, N, A], cfm_t [B, N], cfm_old [B, N]."""
    B = batch["obs"].shape[0]
    eps, t = sample_cfm_pairs(B, args.n_mc, policy.act_dim, args.flow_steps, args.discrete_t)
    with torch.no_grad():
        batch["cfm_old"] = policy.cfm_losses(batch["obs"], batch["actions"], eps, t)
    batch["cfm_eps"], batch["cfm_t"] = eps, t


def update(policy: FlowPolicy, value_net, optimizer, batch: dict[str, torch.Tensor], args: Args):
    """Draw the CFM pairs, then update_epochs x num_minibatches Adam steps on FPO's loss plus
    vf_coef times the value loss; returns mean statistics."""
    attach_cfm_pairs(policy, batch, args)
    eps = args.clip_coef

    def loss_fn(mb: dict[str, torch.Tensor], idx: torch.Tensor):
        l_new = policy.cfm_losses(mb["obs"], mb["actions"], mb["cfm_eps"], mb["cfm_t"])
        pg_loss, stats = fpo_loss(l_new, mb["cfm_old"], mb["advantages"], eps, args.per_pair_ratio)
        v_new = value_net(mb["obs"])
        v_loss = clipped_value_loss(v_new, mb["values"], mb["returns"], eps, args.clip_vloss)
        loss = pg_loss + args.vf_coef * v_loss
        terms = detached(loss=loss, policy_loss=pg_loss, value_loss=v_loss, cfm_loss=l_new.mean())
        return loss, {**stats, **terms}

    return minibatch_update(optimizer, batch, loss_fn, args)


def main(args: Args) -> None:
    run = Run(args)
    if not isinstance(run.act_space, gym.spaces.Box):
        run.envs.close()
        fail(no_box_message(args.env_id, run.act_space))
    policy = FlowPolicy(run.obs_dim, run.act_space.shape[0], args)
    value_net = ValueNet(run.obs_dim, args.critic_hidden_sizes, nn.SiLU)
    optimizer = adam(policy, value_net, lr=args.learning_rate)
    run.train(
        lambda batch: update(policy, value_net, optimizer, batch, args),
        policy,
        value_net,
        ratio_eps=args.clip_coef,
        optimizer=optimizer,
    )


if __name__ == "__main__":
    main(parse(Args))
