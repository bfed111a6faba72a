"""DPO, Discovered Policy Optimisation (Lu et al. 2022, arXiv 2210.05639): PPO's rollout, critic
and minibatch loop with the clip replaced by the closed-form drift the paper distilled from its
meta-learned LPO objective (the paper's eq. for DPO; luchris429/discovered-policy-optimisation).

    python algos/dpo.py --env-id Hopper-v5 --total-timesteps 1000000 --seed 1

The drift D(r, A) >= 0 vanishes with its gradient at r = 1 (a Mirror Learning drift), so the
update starts as the policy gradient; the objective r A - D saturates once the ratio has moved
in the advantage's direction, in (r - 1) A with scale alpha for A >= 0 and in log(r) A with
scale beta for A < 0 (paper: alpha 2, beta 0.6). Everything else is ppo.py's, with CleanRL's
defaults, so that dpo.py and ppo.py differ in the policy loss alone. Logs what ppo.py logs;
clip_frac and the ratio deviation count ratios outside PPO's 1 +- clip_coef (DPO clips nothing).
--num-seeds S trains S seeds at once on a bandit, as ppo.py's population path
(controlrl/population_actor_critic.py) with the DPO loss.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from algos import ppo
from controlrl.cli import parse, require, require_positive
from controlrl.losses import surrogate_stats
from controlrl.nets import ValueNet, make_policy
from controlrl.training import Run
from controlrl.update import actor_critic_loss, adam, minibatch_update, rollout_ratios


@dataclass
class Args(ppo.Args):
    alpha: float = 2.0
    """drift scale for A >= 0, in (r - 1) A (DPO paper 2.0)"""
    beta: float = 0.6
    """drift scale for A < 0, in log(r) A (DPO paper 0.6)"""

    def validate(self) -> None:
        super().validate()
        require_positive(self, "alpha")
        require_positive(self, "beta")
        require(self.chebyshev_degree == 0, "chebyshev_degree", "is ppo.py's; dpo.py uses the MLP")


def dpo_drift(ratio: torch.Tensor, adv: torch.Tensor, alpha: float, beta: float) -> torch.Tensor:
    """D(r, A) = relu(x - alpha tanh(x / alpha)), x = (r - 1) A, for A >= 0; the same in
    y = log(r) A with beta for A < 0."""
    x = (ratio - 1) * adv
    y = ratio.log() * adv
    positive = torch.relu(x - alpha * torch.tanh(x / alpha))
    negative = torch.relu(y - beta * torch.tanh(y / beta))
    return torch.where(adv >= 0, positive, negative)


def dpo_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    adv: torch.Tensor,
    alpha: float,
    beta: float,
    eps: float,
    ratio: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """DPO objective, minimised: -mean(r A - D(r, A)), r the per-step exp(logp - old_logp) or the
    given ratio (--ratio). approx_kl is of the per-step ratio, clip_frac counts r outside
    1 +- eps (a statistic only)."""
    log_ratio = logp - old_logp
    step_ratio = log_ratio.exp()
    if ratio is None:
        ratio = step_ratio
    loss = -(ratio * adv - dpo_drift(ratio, adv, alpha, beta)).mean()
    return loss, surrogate_stats(step_ratio, log_ratio, eps, used=ratio)


def update(
    policy, value_net, optimizer, batch: dict[str, torch.Tensor], args: Args, ended=None
) -> dict:
    """update_epochs x num_minibatches Adam steps on the DPO loss (ppo.update with dpo_loss);
    returns mean statistics."""
    eps = args.clip_coef

    def policy_loss(logp, old_logp, adv, ratio=None):
        return dpo_loss(logp, old_logp, adv, args.alpha, args.beta, eps, ratio)

    ratios = rollout_ratios(args, ended)  # once per rollout
    loss_fn = actor_critic_loss(policy, value_net, policy_loss, eps, args, ratios)
    return minibatch_update(optimizer, batch, loss_fn, args, ratios=ratios)


def main(args: Args) -> None:
    if args.num_seeds is not None:  # every seed at once (ppo.py's population path)
        from controlrl.population_actor_critic import train_population

        train_population(args, update)
        return
    run = Run(args)
    policy = make_policy(run.obs_space, run.act_space, args.hidden_sizes)
    value_net = ValueNet(run.obs_dim, args.critic_hidden_sizes or args.hidden_sizes)
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
