"""The GAE paper's algorithm (Schulman, Moritz, Levine, Jordan, Abbeel 2015, "High-Dimensional
Continuous Control Using Generalized Advantage Estimation"): a TRPO policy step on GAE(gamma,
lambda) advantages computed with the value function BEFORE its update, then a trust-region value
step solved by conjugate gradient on the Gauss-Newton matrix.

    python algos/gae.py --env-id Hopper-v5 --gamma 0.995 --gae-lambda 0.97

Logs what trpo.py logs plus the value step: its constraint value, sigma^2, the step scale alpha
and the loss before and after. The policy step is TRPO's (controlrl.trust_region.policy_step, as
algos/trpo.py). eps_V (--vf-max-kl) is our assumption: the paper's value was not recovered;
modular_rl (joschu/modular_rl modular_rl/trpo.py, core.py) fits the value function by L-BFGS
instead. One departure from the paper's value step: the paper rescales the Gauss-Newton step s
to alpha s with 0.5 (alpha s)^T H (alpha s) = eps_V; here alpha = min(1, that value), so a step
already inside the region is taken as is instead of being stretched past the minimiser of the
quadratic model (with a large eps_V the step is least squares; train/vf_alpha logs alpha).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

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
from controlrl.returns import discounted_returns
from controlrl.training import Run
from controlrl.trust_region import (
    conjugate_gradient,
    flat_grad,
    get_flat,
    kl_hessian_vector_product,
    policy_step,
    set_flat,
)
from controlrl.update import normalize_advantages


@dataclass
class Args(CommonArgs):
    num_envs: int = 2
    """parallel environments (as trpo.py)"""
    num_steps: int = 1024
    """steps per env per batch (as trpo.py; the paper used 50k-step batches for 3D robots)"""
    gamma: float = 0.995
    """discount (paper's best 3D range 0.99-0.995)"""
    gae_lambda: float = 0.97
    """GAE lambda (paper's best 3D range 0.96-0.99; modular_rl examples use 0.97)"""
    max_kl: float = 0.01
    """policy trust region eps_pi on the mean KL(old || new) (paper 0.01)"""
    vf_max_kl: float = 0.01
    """value trust region eps_V on mean (V - V_old)^2 / (2 sigma^2) (our assumption: the paper's
    value was not recovered). The step scale is capped at 1 (the paper rescales every step to
    the boundary): a Gauss-Newton step inside the region is taken whole, never stretched"""
    value_target: Literal["mc", "lambda"] = "mc"
    """value targets: discounted Monte Carlo returns (paper; bootstrapped at truncations and at
    the batch end) or lambda-returns A + V_old (modern code)"""
    cg_max_steps: int = 10
    """conjugate-gradient iterations for both steps (modular_rl 10)"""
    cg_damping: float = 1e-3
    """damping of the policy's Fisher-vector product (modular_rl 1e-3)"""
    vf_cg_damping: float = 1e-3
    """damping added to the value step's Gauss-Newton product"""
    line_search_shrinking_factor: float = 0.8
    """backtracking factor of the policy line search (as trpo.py)"""
    line_search_max_iter: int = 10
    """policy line-search trials before the step is rejected and the policy restored"""
    norm_obs: bool = True
    """running observation normalisation (modular_rl filters observations)"""
    norm_reward: bool = True
    """running return-based reward scaling (modular_rl scales rewards)"""
    hidden_sizes: tuple[int, ...] = (64, 64)
    """hidden layers of policy and value net (paper 3D tasks: 100, 50, 25 tanh, recalled)"""
    ratio_eps: float = 0.2
    """eps of the logged ratio-deviation statistic (diagnostic only)"""

    def validate(self) -> None:
        super().validate()
        require_positive(
            self, "num_steps", "max_kl", "vf_max_kl", "cg_max_steps", "line_search_max_iter"
        )
        require_nonnegative(self, "cg_damping", "vf_cg_damping")
        require_unit_interval(self, "gamma", "gae_lambda")
        require(
            0 < self.line_search_shrinking_factor < 1,
            "line_search_shrinking_factor",
            f"must be in (0, 1), got {self.line_search_shrinking_factor}",
        )
        batch = require_batch(self, self.num_steps)
        require(batch >= 2, "num_steps", "* --num-envs must be >= 2 (advantage normalisation)")


def gauss_newton_product(
    value_net, obs: torch.Tensor, v_old: torch.Tensor, sigma2: float, damping: float = 0.0
):
    """v -> (H + damping I) v, H = J^T J / (N sigma^2): the Hessian at phi_old of the value
    constraint mean (V - V_old)^2 / (2 sigma^2), whose residual is zero there."""
    constraint = (value_net(obs) - v_old).pow(2).mean() / (2 * sigma2)
    return kl_hessian_vector_product(constraint, list(value_net.parameters()), damping)


def value_trust_region_step(
    value_net,
    obs: torch.Tensor,
    targets: torch.Tensor,
    eps_v: float,
    cg_steps: int,
    damping: float = 0.0,
) -> dict[str, float]:
    """minimise mean (V - Vhat)^2  s.t.  mean (V - V_old)^2 / (2 sigma^2) <= eps_V, where
    sigma^2 = mean (V_old - Vhat)^2. s = CG(H, -g) with H the Gauss-Newton matrix, rescaled so
    that 0.5 s^T H s = eps_V when it leaves the region (the paper), applied without line search;
    inside the region the full step is taken, so a large eps_V gives least squares."""
    params = list(value_net.parameters())
    with torch.no_grad():
        v_old = value_net(obs)
        sigma2 = float((v_old - targets).pow(2).mean()) + 1e-12
    loss = (value_net(obs) - targets).pow(2).mean()
    g = flat_grad(loss, params)
    hvp = gauss_newton_product(value_net, obs, v_old, sigma2, damping)
    x, residual = conjugate_gradient(hvp, -g, cg_steps)
    s = x / (2 * sigma2)  # the objective's Gauss-Newton Hessian is 2 sigma^2 H: Newton step
    sHs = float(torch.dot(s, hvp(s)))
    stats = {
        "vf_loss_before": loss.item(),
        "vf_sigma2": sigma2,
        "vf_cg_residual": residual,
        "vf_alpha": 0.0,
        "vf_quad": 0.0,
        "vf_constraint": 0.0,
        "vf_loss_after": loss.item(),
    }
    if not (sHs > 0 and math.isfinite(sHs)):
        return stats
    alpha = min(1.0, math.sqrt(2 * eps_v / sHs))
    set_flat(params, get_flat(params) + alpha * s)
    with torch.no_grad():
        v_new = value_net(obs)
        stats.update(
            vf_alpha=alpha,
            vf_quad=0.5 * alpha**2 * sHs,  # == eps_V whenever the step was rescaled
            vf_constraint=float((v_new - v_old).pow(2).mean() / (2 * sigma2)),
            vf_loss_after=float((v_new - targets).pow(2).mean()),
        )
    return stats


def update(
    policy, value_net, batch: dict[str, torch.Tensor], targets: torch.Tensor, args: Args
) -> dict[str, float]:
    """Policy step on the advantages in `batch` (computed with V before this update), THEN
    the value step."""
    obs, actions, old_logp = batch["obs"], batch["actions"], batch["logprobs"]
    adv = normalize_advantages(batch["advantages"])  # over the batch (modular_rl)
    old_params = diagnostics.dist_params(policy, obs)
    stats = policy_step(policy, obs, actions, old_logp, old_params, adv, args)
    stats.update(
        value_trust_region_step(
            value_net, obs, targets, args.vf_max_kl, args.cg_max_steps, args.vf_cg_damping
        )
    )
    diagnostics.check_finite(stats, [*policy.parameters(), *value_net.parameters()])
    return stats


def value_targets(run: Run, batch: dict[str, torch.Tensor], args: Args) -> torch.Tensor:
    """The value step's targets: discounted returns of the batch, bootstrapped from V at
    truncations and at the batch end ('mc', the paper), or the lambda-returns ('lambda')."""
    if args.value_target == "lambda":
        return batch["returns"]
    buf = run.buffer
    returns = discounted_returns(
        buf.rewards, buf.terminated, buf.ended, args.gamma, bootstrap=buf.next_values
    )
    return torch.as_tensor(returns, dtype=torch.float32).reshape(-1)


def main(args: Args) -> None:
    run = Run(args)
    policy = make_policy(run.obs_space, run.act_space, args.hidden_sizes)
    value_net = ValueNet(run.obs_dim, args.hidden_sizes)
    # the batch's advantages were computed with V before this iteration's value step
    run.train(
        lambda batch: update(policy, value_net, batch, value_targets(run, batch, args), args),
        policy,
        value_net,
        ratio_eps=args.ratio_eps,
    )


if __name__ == "__main__":
    main(parse(Args))
