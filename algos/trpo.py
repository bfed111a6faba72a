"""TRPO (Schulman et al. 2015, "Trust Region Policy Optimization"): natural-gradient policy steps
inside a KL trust region, with a backtracking line search, and a critic fitted by minibatch
regression. Reference: sb3-contrib `sb3_contrib/trpo/trpo.py`, with rl-baselines3-zoo
`hyperparams/trpo.yml`'s MuJoCo settings.

    python algos/trpo.py --env-id Hopper-v5 --total-timesteps 1000000 --seed 1

Logs (metrics.csv, TensorBoard): surrogate before/after, measured mean KL after the step, the
quadratic model's KL, line-search acceptance and backtracks, CG residual, critic loss, per-state
KL (mean, max) and ratio deviation, episode and evaluation returns (the README lists them).
The policy step (surrogate, mean KL, CG, line search) is controlrl.trust_region.policy_step.

    python algos/trpo.py --env-id CartPole-v1 --entropy-coef 0.01 --replay-rollouts 1  # EnTRPO

EnTRPO (Roostaie and Ebadzadeh 2021, arXiv 2110.13373, "EnTRPO: Trust Region Policy Optimization
Method with Entropy Regularization"; only its abstract is at hand: the two parts are our
reading): an entropy term alpha H(pi(.|s_t)) added to every step's reward, so that the advantage
carries the entropy accumulated over the following steps (GAE is linear in the rewards: the
entropy's own GAE with zero values is added to TRPO's advantage, and to the critic's targets),
and a replay buffer: the surrogate also averages the previous --replay-rollouts rollouts, each
sample's ratio taken against the policy that collected it; the KL trust region stays on the new
rollout. Both default off (TRPO). The replay buffer is not checkpointed: a resumed run starts
it empty.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

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
from controlrl.nets import ValueNet, make_policy
from controlrl.returns import gae
from controlrl.training import Run
from controlrl.trust_region import mean_kl, natural_step, policy_step
from controlrl.update import adam, normalize_advantages


@dataclass
class Args(CommonArgs):
    num_envs: int = 2
    """parallel environments (RL Zoo MuJoCo 2)"""
    num_steps: int = 1024
    """steps per env per rollout (RL Zoo MuJoCo 1024)"""
    gamma: float = 0.99
    """discount (RL Zoo 0.99)"""
    gae_lambda: float = 0.95
    """GAE lambda (RL Zoo 0.95)"""
    max_kl: float = 0.01
    """trust-region radius delta on the mean KL(old || new) (sb3-contrib target_kl 0.01; RL Zoo
    uses 0.04 for HalfCheetah)"""
    cg_max_steps: int = 25
    """conjugate-gradient iterations (RL Zoo MuJoCo 25; sb3-contrib default 15)"""
    cg_damping: float = 0.1
    """damping added to the Fisher-vector product (sb3-contrib 0.1)"""
    line_search_shrinking_factor: float = 0.8
    """backtracking factor of the line search (sb3-contrib 0.8)"""
    line_search_max_iter: int = 10
    """line-search trials before the step is rejected and the policy restored (sb3-contrib 10)"""
    critic_learning_rate: float = 1e-3
    """Adam learning rate of the critic (RL Zoo 1e-3)"""
    n_critic_updates: int = 20
    """passes of minibatch regression of the critic per iteration (RL Zoo MuJoCo 20)"""
    critic_batch_size: int = 128
    """critic minibatch size (RL Zoo 128)"""
    norm_adv: bool = True
    """standardise advantages over the whole batch (sb3-contrib True)"""
    norm_obs: bool = True
    """running observation normalisation (RL Zoo normalize: true)"""
    norm_reward: bool = True
    """running return-based reward scaling (RL Zoo normalize: true)"""
    hidden_sizes: tuple[int, ...] = (64, 64)
    """hidden layers of the actor and of the critic (SB3 MlpPolicy 64, 64 tanh)"""
    ratio_eps: float = 0.2
    """eps of the logged ratio-deviation statistic |r - 1| > eps (diagnostic only)"""
    entropy_coef: float = 0.0
    """EnTRPO: alpha of the entropy term alpha H(pi(.|s_t)) added to each step's (scaled)
    reward, accumulated into the advantage by GAE (EnTRPO's abstract gives no value; 0: TRPO)"""
    replay_rollouts: int = 0
    """EnTRPO: earlier rollouts kept in a replay buffer and added to the surrogate, ratios
    against their own collecting policy (EnTRPO's abstract gives no size; 0: TRPO)"""

    def validate(self) -> None:
        super().validate()
        require_positive(
            self,
            "num_steps",
            "max_kl",
            "cg_max_steps",
            "line_search_max_iter",
            "critic_learning_rate",
            "n_critic_updates",
            "critic_batch_size",
        )
        require_nonnegative(self, "cg_damping", "entropy_coef", "replay_rollouts")
        require_unit_interval(self, "gamma", "gae_lambda")
        require(
            0 < self.line_search_shrinking_factor < 1,
            "line_search_shrinking_factor",
            f"must be in (0, 1), got {self.line_search_shrinking_factor}",
        )
        batch = require_batch(self, self.num_steps)
        require(batch >= 2, "num_steps", "* --num-envs must be >= 2 (advantage normalisation)")


def fit_critic(value_net, optimizer, obs: torch.Tensor, returns: torch.Tensor, args: Args) -> float:
    """n_critic_updates passes of minibatch MSE regression to the lambda-returns; mean loss."""
    losses = []
    for _ in range(args.n_critic_updates):
        for idx in torch.randperm(obs.shape[0]).split(args.critic_batch_size):
            loss = (value_net(obs[idx]) - returns[idx]).pow(2).mean()
            optimizer.zero_grad(set_to_none=False)
            loss.backward()
            optimizer.step()
            losses.append(loss.detach())
    return float(torch.stack(losses).mean())


def entropy_advantage(entropy: torch.Tensor, terminated, ended, args: Args) -> torch.Tensor:
    """EnTRPO's entropy part of the advantage [T * N]: GAE of the rewards alpha H(pi(.|s_t))
    [T, N] with zero values, i.e. sum_l (gamma lambda)^l alpha H_{t+l} within the episode.
    Added to TRPO's GAE it gives GAE(r + alpha H, V) exactly (GAE is linear in the rewards)."""
    bonus = args.entropy_coef * entropy.double().numpy()
    zeros = torch.zeros(bonus.shape, dtype=torch.float64).numpy()
    adv = gae(bonus, zeros, zeros, terminated, ended, args.gamma, args.gae_lambda)
    return torch.from_numpy(adv).reshape(-1).to(torch.float32)


def entrpo_surrogate(policy, data: list[dict[str, torch.Tensor]]) -> torch.Tensor:
    """EnTRPO's objective to MAXIMISE: mean over the new and the replayed samples of
    (pi(a|s) / mu(a|s)) A, mu each sample's collecting policy."""
    terms = [
        torch.exp(policy.log_prob_entropy(d["obs"], d["actions"])[0] - d["logprobs"]) * d["adv"]
        for d in data
    ]
    return torch.cat(terms).mean()


def update(
    policy,
    value_net,
    critic_optimizer,
    batch: dict[str, torch.Tensor],
    args: Args,
    buffer=None,
    replay: deque | None = None,
) -> dict[str, float]:
    """Actor: one trust-region step. Critic: regression, separate parameters and optimiser, so
    it cannot move the policy. EnTRPO (--entropy-coef, --replay-rollouts): the rollout
    buffer's episode ends give the entropy term; `replay` holds the earlier rollouts."""
    obs, actions, old_logp = batch["obs"], batch["actions"], batch["logprobs"]
    adv, returns = batch["advantages"], batch["returns"]
    stats = {}
    if args.entropy_coef:
        with torch.no_grad():
            entropy = policy.log_prob_entropy(obs, actions, entropy_grad=False)[1]
        shape = buffer.terminated.shape
        bonus = entropy_advantage(entropy.view(shape), buffer.terminated, buffer.ended, args)
        adv, returns = adv + bonus, returns + bonus  # the critic learns the entropy's value too
        stats["entropy_advantage"] = float(bonus.mean())
    adv = normalize_advantages(adv) if args.norm_adv else adv
    old_params = diagnostics.dist_params(policy, obs)
    if args.replay_rollouts:
        data = [*replay, {"obs": obs, "actions": actions, "logprobs": old_logp, "adv": adv}]
        stats |= natural_step(
            list(policy.parameters()),
            objective=lambda: entrpo_surrogate(policy, data),
            constraint=lambda: mean_kl(old_params, policy, obs),
            delta=args.max_kl,
            cg_steps=args.cg_max_steps,
            damping=args.cg_damping,
            shrink=args.line_search_shrinking_factor,
            max_backtracks=args.line_search_max_iter,
        )
        replay.append(data[-1])  # deque(maxlen=replay_rollouts) drops the oldest
    else:
        stats |= policy_step(policy, obs, actions, old_logp, old_params, adv, args)
    stats["value_loss"] = fit_critic(value_net, critic_optimizer, obs, returns, args)
    diagnostics.check_finite(stats, [*policy.parameters(), *value_net.parameters()])
    return stats


def main(args: Args) -> None:
    run = Run(args)
    policy = make_policy(run.obs_space, run.act_space, args.hidden_sizes)
    value_net = ValueNet(run.obs_dim, args.hidden_sizes)
    critic_optimizer = adam(value_net, lr=args.critic_learning_rate)
    replay = deque(maxlen=args.replay_rollouts)
    run.train(
        lambda batch: update(policy, value_net, critic_optimizer, batch, args, run.buffer, replay),
        policy,
        value_net,
        ratio_eps=args.ratio_eps,
        critic_optimizer=critic_optimizer,
    )


if __name__ == "__main__":
    main(parse(Args))
