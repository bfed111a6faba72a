"""PPO-clip (Schulman et al. 2017, "Proximal Policy Optimization Algorithms") with CleanRL's
MuJoCo defaults (vwxyzjn/cleanrl cleanrl/ppo_continuous_action.py), Box and Discrete actions.

    python algos/ppo.py --env-id Hopper-v5 --total-timesteps 1000000 --seed 1
    python algos/ppo.py --env-id Hopper-v5 --ratio kalman    # KPO-clipped (arXiv 2602.10609)
    python algos/ppo.py --env-id SparseMountainCar-v0 --start-states demo_states.npy  # demo resets
    python algos/ppo.py --env-id bandit:bernoulli-10 --num-steps 1 --num-seeds 200  # 200 seeds

Differences from CleanRL: timeouts bootstrap from V(final observation) (--truncation-as-terminal
gives CleanRL's convention), the normalisers are saved in checkpoints, --ratio
(controlrl/ratios.py) can clip a sequence (GSPO) or KPO's Kalman-filtered ratio along each
episode instead of the per-step one. Logs to the run directory (config.json, metrics.csv,
timing.csv, tb/, checkpoints/, videos/) the metrics listed in the README (episode returns,
losses, approx-KL (k3, per step), clip fraction (of the ratio used), explained variance,
per-state KL(old || new) and ratio deviation over the whole batch after the update, evaluation
returns).

--num-seeds S trains seeds --seed, ..., --seed + S - 1 in one process, the seed a batch
dimension of the parameters, Adam state, normalisers and envs (PureJaxRL's vmap(train)): on a
bandit: id (controlrl/population_actor_critic.py) and on Gymnasium MuJoCo, classic-control and
envpool: ids (controlrl/population_control.py: S x N envs, seed k's N seeded as --seed k alone
seeds them). A Gymnasium id steps them in one --vectorization vector env, sync by default: on
two cores, 16 HalfCheetah-v5 envs step ~8.6x faster in one sync vector env than in an async one
(a process per env; paper_figures/out/bench_control_population_envs.csv); an envpool: id steps
them in EnvPool's thread pool. Seed k is the run --seed k alone: with one env per seed the same
actions to the bit over the first rollout, its parameters within float rounding after updates;
one run directory (metrics.csv with a seed column, aggregate.csv, final_eval.json per seed).

    python algos/ppo.py --env-id HalfCheetah-v5 --num-seeds 16 --seed 0
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
    require_start_states,
)
from controlrl.losses import surrogate_stats
from controlrl.nets import ValueNet, make_policy
from controlrl.population import PopulationArgs, require_population_flags
from controlrl.pretrain import behaviour_clone, load_demos
from controlrl.training import Run
from controlrl.update import actor_critic_loss, adam, minibatch_update, rollout_ratios


@dataclass
class Args(PopulationArgs, RatioArgs, CommonArgs):
    population_backends: ClassVar[tuple[str, ...]] = ("bandit", "gym", "envpool")

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
    """value loss coefficient (CleanRL 0.5); the value loss is 0.5 * MSE as in CleanRL, so SB3's
    vf_coef (plain MSE) of 0.5 is our 1.0 (paper_figures/ppo_vs_sb3.py)"""
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
    chebyshev_degree: int = 0
    """0: the actor is the MLP of --hidden-sizes; d >= 1: a Chebyshev policy, logits (or mean)
    linear in the tensor-product Chebyshev basis of degree d (the Mountain Car paper's
    Chebyshev policies of the analytic Mountain Car solution); the critic stays an MLP"""
    chebyshev_range: float = 3.0
    """--chebyshev-degree with --norm-obs: the basis spans [-r, r] of the normalised observation
    (clamped outside); with --no-norm-obs it spans the observation space's bounds"""
    start_states: str | None = None
    """an .npy state array [n, obs_dim]: every training episode starts from a row drawn
    uniformly (classic-control Gymnasium ids; envs/start_states.py), evaluation from the env's
    own starts (None: the env's own starts; POPE-style demo resets put demonstration states
    here)"""
    bc_demos: str | None = None
    """an .npz of demonstrations ("obs" [n, d], "actions" [n]) to behaviour-clone before RL, a
    short clone as TREK's (None: no cloning)"""
    bc_steps: int = 100
    """--bc-demos: full-batch Adam steps on -log pi(a|s) of the demonstrations"""
    bc_lr: float = 1e-3
    """--bc-demos: learning rate of the clone's Adam"""

    def validate(self) -> None:
        super().validate()
        require_minibatch_flags(self)
        require_ratio_flags(self)
        require_positive(self, "clip_coef")
        require(self.target_kl is None or self.target_kl > 0, "target_kl", "must be > 0")
        require_sizes(self, "critic_hidden_sizes")
        require(self.chebyshev_degree >= 0, "chebyshev_degree", "must be >= 0")
        require_positive(self, "chebyshev_range")
        require_start_states(self)
        require_positive(self, "bc_steps", "bc_lr")
        if self.bc_demos is not None:
            load_demos(self.bc_demos)
        if self.num_seeds is not None:  # the population path: the plain MLP actor-critic
            for flag, plain in (
                ("ratio", "step"),
                ("chebyshev_degree", 0),
                ("start_states", None),
                ("bc_demos", None),
            ):
                value, name = getattr(self, flag), "--" + flag.replace("_", "-")
                need = f"does not take {name}" if plain is None else f"needs {name} {plain}"
                require(value == plain, "num_seeds", f"{need} (the population path), got {value}")
            require_population_flags(self)


def ppo_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    adv: torch.Tensor,
    eps: float,
    ratio: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Clipped surrogate, minimised: mean(max(-A r, -A clip(r, 1 - eps, 1 + eps))), r the
    per-step exp(logp - old_logp) or the given ratio (--ratio: sequence or KPO-filtered, clipped
    in its place, KPO's "KPO-clipped"). approx_kl is of the per-step ratio, clip_frac of r."""
    log_ratio = logp - old_logp
    step_ratio = log_ratio.exp()
    if ratio is None:
        ratio = step_ratio
    loss = torch.max(-adv * ratio, -adv * ratio.clamp(1 - eps, 1 + eps)).mean()
    return loss, surrogate_stats(step_ratio, log_ratio, eps, used=ratio)


def update(
    policy, value_net, optimizer, batch: dict[str, torch.Tensor], args: Args, ended=None
) -> dict:
    """update_epochs x num_minibatches Adam steps on the PPO loss with the ratio of --ratio
    (ended [T, N]: the rollout's episode ends, needed unless --ratio step); returns mean
    statistics."""
    eps = args.clip_coef

    def policy_loss(logp, old_logp, adv, ratio=None):
        return ppo_loss(logp, old_logp, adv, eps, ratio)

    ratios = rollout_ratios(args, ended)  # once per rollout
    loss_fn = actor_critic_loss(policy, value_net, policy_loss, eps, args, ratios)
    return minibatch_update(optimizer, batch, loss_fn, args, ratios=ratios)


def main(args: Args) -> None:
    if args.num_seeds is not None:  # every seed at once, the seed a batch dimension
        from controlrl.population_actor_critic import train_population

        train_population(args, update)
        return
    run = Run(args)
    r = args.chebyshev_range  # the normalised observation's span; None: the space's bounds
    bounds = (torch.full(run.obs_space.shape, -r), torch.full(run.obs_space.shape, r))
    policy = make_policy(
        run.obs_space,
        run.act_space,
        args.hidden_sizes,
        chebyshev_degree=args.chebyshev_degree,
        chebyshev_bounds=bounds if args.norm_obs else None,
    )
    value_net = ValueNet(run.obs_dim, args.critic_hidden_sizes or args.hidden_sizes)
    if args.bc_demos is not None and args.resume is None:  # a resumed run has its clone
        obs, actions = load_demos(args.bc_demos)
        behaviour_clone(policy, obs, actions, args.bc_steps, args.bc_lr, run.obs_normalizer)
    optimizer = adam(policy, value_net, lr=args.learning_rate)
    run.train(
        lambda batch: update(policy, value_net, optimizer, batch, args, run.buffer.ended),
        policy,
        value_net,
        ratio_eps=args.clip_coef,
        optimizer=optimizer,
    )


if __name__ == "__main__":
    main(parse(Args))
