"""Trust-region diagnostics shared by every on-policy algorithm: per-state KL, ratio deviation.

Policies expose `dist_params(obs)`: (mean, log_std) [B, act_dim] each for a diagonal Gaussian,
log-probabilities [B, K] for a categorical. The old parameters are computed in ONE batched pass
over the rollout before the update (exact: the policy does not change during collection) and
compared with a second pass after it:

    old = dist_params(policy, batch["obs"])
    ... update ...
    stats |= policy_shift(policy, batch["obs"], batch["actions"], batch["logprobs"], old, eps)

which gives kl_mean, kl_max (KL(old || new) per state, over the whole batch), ratio_dev_frac
(fraction of samples with r outside [1 - eps_low, 1 + eps_high]: eps one number, the pair of an
asymmetric clip, or None where the method has no ratio range, and then no ratio_dev_frac),
ratio_dev_max and ratio_dev_mean, entropy_change (the batch-mean entropy after minus before),
and, given the batch's advantages, logp_adv_cov (Cov(log pi_old, A), the entropy mechanism's
covariance: shift_stats).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from controlrl.losses import outside_clip
from controlrl.nets import LOG_2PI

Params = torch.Tensor | tuple[torch.Tensor, torch.Tensor]
Eps = float | tuple[float, float] | None  # a clip range: symmetric, (low, high), or none


class NonFiniteError(RuntimeError):
    """A loss or a parameter became NaN or inf."""


def per_state_kl(old: Params, new: Params) -> torch.Tensor:
    """Analytic KL(old || new) per state [B]: diagonal Gaussian (mean, log_std) or categorical
    log-probabilities. Differentiable in `new` (FixPO penalises it)."""
    if isinstance(old, tuple):
        (mu_old, log_std_old), (mu_new, log_std_new) = old, new
        var_ratio = torch.exp(2 * (log_std_old - log_std_new))  # sigma_old^2 / sigma_new^2
        mean_term = (mu_old - mu_new).pow(2) * torch.exp(-2 * log_std_new)
        return 0.5 * (var_ratio + mean_term - 1 - torch.log(var_ratio)).sum(-1)
    return (old.exp() * (old - new)).sum(-1)


def entropy_of(params: Params) -> torch.Tensor:
    """The distribution's entropy per state [..., B]: a diagonal Gaussian's sum(log_std) +
    d/2 log(2 pi e), a categorical's -sum p log p."""
    if isinstance(params, tuple):
        return (params[1] + 0.5 * (1.0 + LOG_2PI)).sum(-1)
    return -(params.exp() * params).sum(-1)


def covariance(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The covariance of x and y over the last axis (the batch's rows), mean-centred, 1/B."""
    return ((x - x.mean(-1, keepdim=True)) * (y - y.mean(-1, keepdim=True))).mean(-1)


def dist_params(policy: torch.nn.Module, obs: torch.Tensor) -> Params:
    """The policy's distribution parameters at obs [B, ...], without gradient (plain tensors)."""
    with torch.no_grad():
        params = policy.dist_params(obs)
    if isinstance(params, tuple):
        return tuple(p.clone() for p in params)
    return params.clone()


def index_params(params: Params, idx: torch.Tensor) -> Params:
    """The rows idx of distribution parameters (a tuple for Gaussians)."""
    if isinstance(params, tuple):
        return tuple(p[idx] for p in params)
    return params[idx]


def ratio_stats(ratio: torch.Tensor, eps: Eps) -> dict[str, float]:
    """Fraction of samples outside [1 - eps_low, 1 + eps_high] (not with eps None), max and
    mean |r - 1|."""
    return {k: float(v) for k, v in deviation_stats(ratio.detach(), eps).items()}


def deviation_stats(ratio: torch.Tensor, eps: Eps) -> dict[str, torch.Tensor]:
    """ratio_stats as tensors reduced over the last axis (leading axes kept)."""
    deviation = (ratio - 1).abs()
    out = {}
    if eps is not None:
        out["ratio_dev_frac"] = outside_clip(ratio, eps).float().mean(-1)
    out["ratio_dev_max"] = deviation.amax(-1)
    out["ratio_dev_mean"] = deviation.mean(-1)
    return out


def policy_shift(
    policy: torch.nn.Module,
    obs: torch.Tensor,
    actions: torch.Tensor,
    old_logp: torch.Tensor,
    old_params: Params,
    eps: Eps,
    advantages: torch.Tensor | None = None,
) -> dict[str, float]:
    """How far an update moved the policy on the batch: KL(old || new) per state (mean, max),
    the ratio statistics of ratio_stats and the entropy change, from one batched forward pass;
    with the batch's advantages, their covariance with the old log-probabilities too (see
    shift_stats)."""
    stats = shift_stats(policy, obs, actions, old_logp, old_params, eps, advantages)
    return {k: float(v) for k, v in stats.items()}


def shift_stats(
    policy: torch.nn.Module,
    obs: torch.Tensor,
    actions: torch.Tensor,
    old_logp: torch.Tensor,
    old_params: Params,
    eps: Eps,
    advantages: torch.Tensor | None = None,
) -> dict[str, torch.Tensor]:
    """policy_shift's statistics as tensors, each reduced over the rows (the last axis of
    old_logp [..., B]): any leading axes are kept (the seeds of a population).

    entropy_change is the batch-mean entropy after the update minus before (exact per state).
    logp_adv_cov, given advantages, is Cov(log pi_old(a|s), A) over the batch: the entropy
    mechanism's covariance (Cui et al. 2025, arXiv 2505.22617), whose first-order law says
    the entropy falls when it is positive. For a Gaussian with a state-independent std, a plain
    gradient step of size eta on J = E[A log pi] moves each log std by eta E[A (z^2 - 1)], so
    the entropy by exactly -2 eta Cov(log pi, A) to first order (Adam, clipping and several
    epochs bend this; the experiment paper_figures/entropy-law-hopper measures how far)."""
    with torch.no_grad():
        params = policy.dist_params(obs)  # one forward for the KL and the ratios
        kl = per_state_kl(old_params, params)
        logp = policy.log_prob_at(params, actions)
        ratio = torch.exp(logp - old_logp)
        change = (entropy_of(params) - entropy_of(old_params)).mean(-1)
    out = {"kl_mean": kl.mean(-1), "kl_max": kl.amax(-1), **deviation_stats(ratio, eps)}
    out["entropy_change"] = change
    if advantages is not None:
        out["logp_adv_cov"] = covariance(old_logp, advantages)
    return out


def batch_shift(policy: torch.nn.Module, batch: dict, old_params: Params, eps: Eps) -> dict:
    """shift_stats of an actor-critic batch (obs, actions, logprobs and, where it has them,
    advantages): one run's rows or a population's [S, B]."""
    return shift_stats(
        policy,
        batch["obs"],
        batch["actions"],
        batch["logprobs"],
        old_params,
        eps,
        batch.get("advantages"),
    )


def explained_variance(values: np.ndarray, returns: np.ndarray) -> float:
    """1 - Var(R - V) / Var(R); nan when the returns are constant."""
    var = returns.var()
    return float("nan") if var == 0 else float(1 - (returns - values).var() / var)


def check_finite(stats: dict[str, float], params) -> None:
    """Raise NonFiniteError if a statistic or a parameter is NaN or inf."""
    if not all(math.isfinite(v) for v in stats.values()) or not all(
        torch.isfinite(p).all() for p in params
    ):
        raise NonFiniteError(f"non-finite loss or parameters after update: {stats}")
