"""The entropy law and its covariance mechanism (Cui et al., arXiv 2505.22617) on one run's rows,
as named metrics (paper_figures/lab/metrics.py).

The law: the return follows R = -a exp(H) + b in the policy entropy H. It is linear in (a, b), so
its least-squares fit is exact; it is set against a straight line R = c H + d on the same points
(over a narrow entropy range exp(H) is nearly linear and the two cannot be told apart). The
mechanism: an update changes the entropy by -eta Cov(log pi(a|s), A(s, a)) to first order; PPO
logs each update's entropy change and that covariance over its batch (controlrl.diagnostics).
"""

from __future__ import annotations

import math

import numpy as np

LAW = ("entropy-law-r2-gain", "entropy-law-late-gain")
COVARIANCE = ("entropy-cov-corr", "entropy-cov-sign-gain")
COLUMNS = ("train/entropy_change", "train/logp_adv_cov")
MIN_POINTS = 4  # a fit of two parameters on each half needs a few points


def r_squared(y: np.ndarray, fitted: np.ndarray) -> float:
    """1 - SS_res / SS_tot (nan when y is constant)."""
    total = float(np.sum((y - y.mean()) ** 2))
    return math.nan if total == 0 else 1.0 - float(np.sum((y - fitted) ** 2)) / total


def fit(h: np.ndarray, r: np.ndarray, law: bool) -> np.ndarray:
    """Least-squares coefficients of R = -a exp(H) + b (law) or R = c H + d on the points."""
    design = np.stack([-np.exp(h) if law else h, np.ones_like(h)], axis=1)
    return np.linalg.lstsq(design, r, rcond=None)[0]


def predict(coef: np.ndarray, h: np.ndarray, law: bool) -> np.ndarray:
    return coef[0] * (-np.exp(h) if law else h) + coef[1]


def law_gains(h: np.ndarray, r: np.ndarray) -> dict[str, float]:
    """On one seed's points in iteration order: the law's R^2 minus the line's
    (entropy-law-r2-gain), and, both fitted on the first half, the line's absolute error on the
    last quarter's mean return minus the law's (entropy-law-late-gain). NaN with too few points."""
    if h.size < 2 * MIN_POINTS:
        return dict.fromkeys(LAW, math.nan)
    r2 = [r_squared(r, predict(fit(h, r, law), h, law)) for law in (True, False)]
    half, quarter = h.size // 2, max(1, h.size // 4)
    late = r[-quarter:].mean()
    err = [abs(predict(fit(h[:half], r[:half], law), h[-quarter:], law).mean() - late)
           for law in (True, False)]  # fmt: skip
    return {LAW[0]: r2[0] - r2[1], LAW[1]: float(err[1] - err[0])}


def covariance_gains(change: np.ndarray, cov: np.ndarray) -> dict[str, float]:
    """How one run's updates follow the mechanism (the entropy falls where Cov(log pi, A) is
    positive): the Pearson correlation of the entropy change with -Cov (entropy-cov-corr), and the
    share of updates whose entropy moved the way -Cov points minus that share by chance, the two
    signs drawn independently with the run's own frequencies (entropy-cov-sign-gain): a run whose
    entropy mostly falls while Cov is mostly positive does not score by that alone. Updates where
    either is 0 are not counted in the share. NaN for a run that logs neither."""
    keep = np.isfinite(change) & np.isfinite(cov)
    change, cov = change[keep], cov[keep]
    moved = (change != 0) & (cov != 0)
    if moved.sum() < MIN_POINTS:
        return dict.fromkeys(COVARIANCE, math.nan)
    share = np.mean(np.sign(change[moved]) == -np.sign(cov[moved]))
    falls, positive = np.mean(change[moved] < 0), np.mean(cov[moved] > 0)
    chance = falls * positive + (1 - falls) * (1 - positive)
    return {COVARIANCE[0]: float(np.corrcoef(change, -cov)[0, 1]),
            COVARIANCE[1]: float(share - chance)}  # fmt: skip
