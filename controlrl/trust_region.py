"""Natural-gradient machinery shared by TRPO and the GAE paper's algorithm: flat parameter
vectors, conjugate gradient, the KL-constrained step with backtracking line search, and TRPO's
policy step (Schulman et al. 2015, "Trust Region Policy Optimization"; line search as
sb3-contrib sb3_contrib/trpo/trpo.py): maximise the surrogate mean(r A) subject to the mean
KL(old || new) <= max_kl. natural_step takes the objective and the constraint as closures.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from controlrl.diagnostics import per_state_kl

Params = list[torch.nn.Parameter]


def flat_grad(output: torch.Tensor, params: Params, **kwargs) -> torch.Tensor:
    """Gradient of a scalar w.r.t. params as one vector (zeros for unused parameters)."""
    grads = torch.autograd.grad(output, params, allow_unused=True, **kwargs)
    return torch.cat(
        [(g if g is not None else torch.zeros_like(p)).reshape(-1) for g, p in zip(grads, params)]
    )


def get_flat(params: Params) -> torch.Tensor:
    """A copy of params as one vector."""
    return torch.cat([p.detach().reshape(-1) for p in params]).clone()


def set_flat(params: Params, flat: torch.Tensor) -> None:
    """Copy a vector into params in place (storage kept, so restoring is bit-exact)."""
    offset = 0
    with torch.no_grad():
        for p in params:
            n = p.numel()
            p.copy_(flat[offset : offset + n].view_as(p))
            offset += n


def conjugate_gradient(
    matvec: Callable[[torch.Tensor], torch.Tensor],
    b: torch.Tensor,
    max_steps: int,
    tol: float = 1e-10,
) -> tuple[torch.Tensor, float]:
    """Solve A x = b for symmetric positive-definite A given only x -> A x, from x = 0.
    Returns x and the relative residual ||A x - b|| / ||b|| of the recursion."""
    x = torch.zeros_like(b)
    r = b.clone()
    p = b.clone()
    rr = torch.dot(r, r)
    b_norm = math.sqrt(float(rr)) or 1.0
    for _ in range(max_steps):
        if float(rr) < tol:
            break
        Ap = matvec(p)
        alpha = rr / torch.dot(p, Ap)
        x += alpha * p
        r -= alpha * Ap
        rr_new = torch.dot(r, r)
        p = r + (rr_new / rr) * p
        rr = rr_new
    return x, math.sqrt(float(rr)) / b_norm


def kl_hessian_vector_product(
    kl: torch.Tensor, params: Params, damping: float
) -> Callable[[torch.Tensor], torch.Tensor]:
    """v -> (H + damping I) v with H the Hessian of `kl` at the current params, by double
    backprop. At theta = theta_old, with the old distribution held fixed (no gradient), H is the
    Fisher information matrix of the policy averaged over the batch states."""
    grad_kl = flat_grad(kl, params, create_graph=True)

    def fvp(v: torch.Tensor) -> torch.Tensor:
        return flat_grad(torch.dot(grad_kl, v), params, retain_graph=True) + damping * v

    return fvp


def natural_step(
    params: Params,
    objective: Callable[[], torch.Tensor],
    constraint: Callable[[], torch.Tensor],
    delta: float,
    cg_steps: int,
    damping: float,
    shrink: float = 0.8,
    max_backtracks: int = 10,
) -> dict[str, float]:
    """One trust-region step: maximise objective() s.t. constraint() <= delta.

    Direction x = F^-1 g by conjugate gradient (F the constraint's Hessian plus damping, g the
    objective's gradient), full step s = sqrt(2 delta / x^T F x) x so that 0.5 s^T F s = delta,
    then backtracking by `shrink`: a step is accepted only if constraint() <= delta and the
    objective strictly improves. On failure the parameters are restored bit for bit.
    """
    old = get_flat(params)
    obj_old = objective()
    obj_old_value = float(obj_old.detach())
    g = flat_grad(obj_old, params, retain_graph=True)
    fvp = kl_hessian_vector_product(constraint(), params, damping)
    x, residual = conjugate_gradient(fvp, g, cg_steps)
    xFx = float(torch.dot(x, fvp(x)))
    stats = {
        "objective_before": obj_old_value,
        "cg_residual": residual,
        "accepted": 0.0,
        "backtracks": float(max_backtracks),
        "quad_kl": 0.0,
        "kl": 0.0,
        "objective_after": obj_old_value,
        "step_frac": 0.0,
    }
    if not (xFx > 0 and math.isfinite(xFx)):  # zero gradient: nothing to do
        return stats
    step = math.sqrt(2.0 * delta / xFx) * x
    stats["quad_kl"] = 0.5 * float(torch.dot(step, fvp(step)))  # == delta up to rounding
    expected = float(torch.dot(g, step))
    with torch.no_grad():
        for j in range(max_backtracks):
            frac = shrink**j
            set_flat(params, old + frac * step)
            obj_new, kl_new = float(objective()), float(constraint())
            if j == 0:
                stats["kl_full_step"] = kl_new  # KL / delta -> 1 as the quadratic model holds
            if kl_new <= delta and obj_new > obj_old_value:
                stats.update(
                    accepted=1.0,
                    backtracks=float(j),
                    kl=kl_new,
                    objective_after=obj_new,
                    step_frac=frac,
                    improvement_ratio=(obj_new - obj_old_value) / (frac * expected),
                )
                return stats
        set_flat(params, old)
    return stats


def surrogate(logp: torch.Tensor, old_logp: torch.Tensor, adv: torch.Tensor) -> torch.Tensor:
    """The importance-sampled surrogate to MAXIMISE: mean(r * A), r = pi / pi_old."""
    return (torch.exp(logp - old_logp) * adv).mean()


def mean_kl(old_params, policy, obs: torch.Tensor) -> torch.Tensor:
    """The trust-region constraint: mean over states of KL(pi_old(.|s) || pi(.|s))."""
    return per_state_kl(old_params, policy.dist_params(obs)).mean()


def policy_step(
    policy,
    obs: torch.Tensor,
    actions: torch.Tensor,
    old_logp: torch.Tensor,
    old_params,
    adv: torch.Tensor,
    args,
) -> dict[str, float]:
    """TRPO's policy step on the whole batch: natural_step on surrogate s.t. mean_kl <= max_kl.
    args carries the trust-region flags of trpo.py and gae.py: max_kl, cg_max_steps,
    cg_damping, line_search_shrinking_factor, line_search_max_iter."""
    return natural_step(
        list(policy.parameters()),
        objective=lambda: surrogate(policy.log_prob_entropy(obs, actions)[0], old_logp, adv),
        constraint=lambda: mean_kl(old_params, policy, obs),
        delta=args.max_kl,
        cg_steps=args.cg_max_steps,
        damping=args.cg_damping,
        shrink=args.line_search_shrinking_factor,
        max_backtracks=args.line_search_max_iter,
    )
