"""Loss terms shared by several algorithms (their defining policy losses stay in their files)."""

from __future__ import annotations

import torch


def clipped_value_loss(
    v_new: torch.Tensor, v_old: torch.Tensor, returns: torch.Tensor, eps: float, clip: bool
) -> torch.Tensor:
    """0.5 * MSE to the returns; with clip, the max of the plain error and the error of
    V_old + clip(V_new - V_old, -eps, eps) (CleanRL / SPO / FixPO value clipping)."""
    err = (v_new - returns).pow(2)
    if clip:
        v_clipped = v_old + (v_new - v_old).clamp(-eps, eps)
        err = torch.max(err, (v_clipped - returns).pow(2))
    return 0.5 * err.mean()


def approx_kl(ratio: torch.Tensor, log_ratio: torch.Tensor) -> torch.Tensor:
    """The k3 estimator of KL(old || new) from samples of the old policy: mean((r - 1) - log r),
    unbiased and never negative (J. Schulman, "Approximating KL divergence", 2020; CleanRL)."""
    return ((ratio - 1) - log_ratio).mean()


def clip_bounds(eps: float | tuple[float, float]) -> tuple[float, float]:
    """(eps_low, eps_high) of one eps (symmetric) or of a pair (an asymmetric clip)."""
    return (eps, eps) if isinstance(eps, (int, float)) else (eps[0], eps[1])


def outside_clip(ratio: torch.Tensor, eps: float | tuple[float, float]) -> torch.Tensor:
    """ratio outside [1 - eps_low, 1 + eps_high] (bool); for one eps, |r - 1| > eps exactly."""
    low, high = clip_bounds(eps)
    dev = ratio - 1
    return (dev > high) | (-dev > low)


def surrogate_stats(
    ratio: torch.Tensor,
    log_ratio: torch.Tensor,
    eps: float | tuple[float, float],
    used: torch.Tensor | None = None,
) -> dict:
    """approx_kl (k3 of the per-step ratio and its log) and clip_frac (fraction of the ratio the
    loss uses, `used`, default ratio, outside [1 - eps_low, 1 + eps_high]; eps one number or
    the pair) of a minibatch, no gradient."""
    used = ratio if used is None else used
    with torch.no_grad():
        return {
            "approx_kl": approx_kl(ratio, log_ratio),
            "clip_frac": outside_clip(used, eps).float().mean(),
        }


def expectile_loss(u: torch.Tensor, tau: float) -> torch.Tensor:
    """mean(|tau - 1(u < 0)| * u^2): asymmetric squared error whose minimiser over m of
    loss(x - m) is the tau-expectile of x (tau 0.5: half the MSE, minimised by the mean). IQL's
    value loss with u = Q(s, a) - V(s) (Kostrikov et al. 2021, eq. 5; ikostrikov/
    implicit_q_learning critic.py, tinkoff-ai/CORL algorithms/offline/iql.py)."""
    weight = (tau - (u < 0).to(u.dtype)).abs()  # in u's dtype (a where() of floats is float32)
    return (weight * u.square()).mean()


def copg_loss(
    logp: torch.Tensor, logp_ref: torch.Tensor, rewards: torch.Tensor, beta: float
) -> torch.Tensor:
    """Contrastive Policy Gradient (Flet-Berliac et al. 2024, arXiv 2406.19185), in the form
    Cohere's Command A report writes it (arXiv 2504.00698): per group of G outputs of one
    context, 1/(G - 1) sum_{i > j} (R_i - R_j)^2 with R = r - beta log(pi / pi_ref) the
    regularised reward, gradient through both log pi terms; mean over groups. Inputs [..., G]
    (G >= 2); the outputs may come from any behaviour policy (no importance weights). Its
    gradient per group is -2 beta sum_i (R_i - mean_{j != i} R_j) grad log pi_i: RLOO on R."""
    if logp.shape[-1] < 2:
        raise ValueError("copg_loss needs groups of at least 2 outputs (pairs)")
    R = rewards - beta * (logp - logp_ref)
    gaps = R[..., :, None] - R[..., None, :]  # [..., G, G]: every ordered pair, each twice
    return (gaps.square().sum((-2, -1)) / (2 * (logp.shape[-1] - 1))).mean()
