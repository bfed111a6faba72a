"""max@k on a bandit, exactly: the expected best reward of k i.i.d. draws (pass@k when rewards are
binary) and its gradient in the logits, with two unbiased score-function estimators from one
group of k draws: REINFORCE on the group's max, and the same with each draw's baseline the max
of the other k - 1 draws (independent of that draw, so the mean is unchanged; derived here).
Arms pay fixed rewards r[a]; expectations over groups enumerate the multinomial counts.
"""

from __future__ import annotations

import numpy as np

from theory.group_po import multinomial_counts

ESTIMATORS = ("reinforce", "leave_one_out")


def max_at_k(pi: np.ndarray, r: np.ndarray, k: int) -> float:
    """E[max(r[a_1], ..., r[a_k])], a_i ~ pi: sum over reward levels u of u (F(u)^k - F(u-)^k)."""
    levels = np.unique(r)
    cdf = np.array([pi[r <= u].sum() for u in levels])  # one entry per distinct reward
    below = np.concatenate([[0.0], cdf[:-1]])
    return float(levels @ (cdf**k - below**k))


def max_at_k_gradient(pi: np.ndarray, r: np.ndarray, k: int) -> np.ndarray:
    """d max_at_k / d logits for pi = softmax(logits) [K]: the gradient in pi,
    d/d pi_a = sum_u u k (F(u)^(k-1) 1[r_a <= u] - F(u-)^(k-1) 1[r_a < u]), times the softmax
    Jacobian diag(pi) - pi pi^T."""
    levels = np.unique(r)
    cdf = np.array([pi[r <= u].sum() for u in levels])
    below = np.concatenate([[0.0], cdf[:-1]])
    at_or_below = r[:, None] <= levels[None, :]  # [K, U]
    strictly_below = r[:, None] < levels[None, :]
    d_pi = k * (at_or_below * cdf ** (k - 1) - strictly_below * below ** (k - 1)) @ levels
    return pi * (d_pi - pi @ d_pi)


def group_estimates(pi: np.ndarray, r: np.ndarray, k: int, estimator: str):
    """Every group of k draws up to order: probabilities [M] and the estimate of the max@k
    gradient [M, K]: sum_i w_i (e_{a_i} - pi), w_i = max ("reinforce") or max - max of the
    others ("leave_one_out", k >= 2)."""
    if estimator not in ESTIMATORS:
        raise ValueError(f"estimator = {estimator!r}, expected one of {ESTIMATORS}")
    if estimator == "leave_one_out" and k < 2:
        raise ValueError(f"k = {k}: the leave-one-out baseline needs k >= 2")
    K = len(pi)
    counts, log_coef = multinomial_counts(k, K)
    with np.errstate(divide="ignore"):
        prob = np.exp(log_coef + counts @ np.log(pi))
    present = np.where(counts > 0, r[None, :], -np.inf)
    best = present.max(axis=1)  # [M]
    weight = np.broadcast_to(best[:, None], counts.shape).copy()  # per arm drawn
    if estimator == "leave_one_out":
        # without one draw of arm a: arm a stays present iff it was drawn twice or more
        others = np.empty(counts.shape)
        for a in range(K):  # K arms, each vectorised over all M groups
            without = present.copy()
            without[:, a] = np.where(counts[:, a] >= 2, r[a], -np.inf)
            others[:, a] = without.max(axis=1)
        weight = np.where(counts > 0, best[:, None] - others, 0.0)
    score = np.eye(K) - pi  # grad log pi(a) = e_a - pi, one row per arm
    return prob, (counts * weight) @ score
