"""Regret of a sequence of policies and rate fitting (log-log slope, a + b log K, a + c sqrt K)."""

from __future__ import annotations

import numpy as np

from theory.mdp import TabularMDP, evaluate, value_iteration


def policy_values(mdp: TabularMDP, policies: np.ndarray) -> np.ndarray:
    """eta(pi_k) for a stack of policies [K, ...] (exact, one evaluation each)."""
    return np.array([mdp.rho0 @ _v0(mdp, pi) for pi in policies])


def _v0(mdp: TabularMDP, pi: np.ndarray) -> np.ndarray:
    V, _ = evaluate(mdp, pi)
    return V[0] if mdp.episodic else V


def optimal_value(mdp: TabularMDP) -> float:
    """eta(pi*) = rho0 . V* (first-step value for a finite-horizon MDP)."""
    V, _ = value_iteration(mdp)
    return float(mdp.rho0 @ (V[0] if mdp.episodic else V))


def cumulative_regret(values: np.ndarray, v_star: float | np.ndarray) -> np.ndarray:
    """Reg(k) = sum_{j <= k} (v_star - values_j) for k = 1..K (v_star may vary per episode)."""
    return np.cumsum(np.asarray(v_star) - np.asarray(values, dtype=float))


def loglog_slope(
    K: np.ndarray, reg: np.ndarray, k_min: float | None = None, k_max: float | None = None
) -> float:
    """OLS slope of log reg against log K restricted to k_min <= K <= k_max (reg > 0 only)."""
    K, reg = np.asarray(K, dtype=float), np.asarray(reg, dtype=float)
    keep = (reg > 0) & (K >= (k_min or 0)) & (K <= (k_max or np.inf))
    if keep.sum() < 2:
        raise ValueError(f"need >= 2 points with reg > 0 in [{k_min}, {k_max}], got {keep.sum()}")
    return float(np.polyfit(np.log(K[keep]), np.log(reg[keep]), 1)[0])


def log_grid(k_min: int, k_max: int, per_octave: int = 8) -> np.ndarray:
    """Distinct integers log-spaced over [k_min, k_max]: every octave weighs the same in a fit
    (evenly spaced k would put half the points in the top octave)."""
    octaves = np.log2(k_max / k_min)
    num = max(int(round(octaves * per_octave)) + 1, 2)
    return np.unique(np.round(np.geomspace(k_min, k_max, num)).astype(int))


def octave_slopes(reg: np.ndarray, k_min: int, k_max: int) -> np.ndarray:
    """log2(Reg(2k) / Reg(k)) for k = k_min, 2 k_min, ... up to k_max; reg[k - 1] = Reg(k)."""
    ks = k_min * 2 ** np.arange(int(np.log2(k_max / k_min)) + 1)
    reg = np.asarray(reg, dtype=float)
    return np.log2(reg[ks[1:] - 1] / reg[ks[:-1] - 1])


def fit_log(K: np.ndarray, reg: np.ndarray) -> tuple[float, float, float]:
    """Least-squares fit reg ~ a + b log K; returns (a, b, R^2)."""
    x, y = np.log(np.asarray(K, dtype=float)), np.asarray(reg, dtype=float)
    b, a = np.polyfit(x, y, 1)
    resid = y - (a + b * x)
    r2 = 1.0 - resid.var() / y.var() if y.var() > 0 else 1.0
    return float(a), float(b), float(r2)


def fit_sqrt(K: np.ndarray, reg: np.ndarray) -> tuple[float, float, float]:
    """Least-squares fit reg ~ a + c sqrt(K); returns (a, c, RMSE)."""
    x = np.sqrt(np.asarray(K, dtype=float))
    y = np.asarray(reg, dtype=float)
    c, a = np.polyfit(x, y, 1)
    return float(a), float(c), float(np.sqrt(np.mean((y - a - c * x) ** 2)))


def bootstrap_slope_ci(
    K: np.ndarray,
    regs: np.ndarray,
    k_min: float,
    k_max: float,
    rng: np.random.Generator,
    n_boot: int = 1000,
    level: float = 0.95,
) -> tuple[float, float, float]:
    """Slope of log mean-over-seeds regret and a bootstrap CI over seeds; regs is [seeds, K]."""
    regs = np.asarray(regs, dtype=float)
    slope = loglog_slope(K, regs.mean(axis=0), k_min, k_max)
    idx = rng.integers(regs.shape[0], size=(n_boot, regs.shape[0]))
    boots = [loglog_slope(K, regs[i].mean(axis=0), k_min, k_max) for i in idx]
    lo, hi = np.quantile(boots, [(1 - level) / 2, (1 + level) / 2])
    return slope, float(lo), float(hi)
