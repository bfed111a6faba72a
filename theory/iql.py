"""IQL in exact tabular form: expectiles and in-sample (expectile) value iteration (Kostrikov et al.
2021). The in-sample iteration only ever indexes Q at dataset (state, action) pairs.
"""

from __future__ import annotations

import numpy as np


def expectile(x: np.ndarray, tau: float, weights: np.ndarray | None = None) -> np.ndarray:
    """m_tau solving tau E[(X - m)_+] = (1 - tau) E[(m - X)_+] along the last axis (exact).

    g(m) = tau E[(X - m)_+] - (1 - tau) E[(m - X)_+] is decreasing and linear between sorted
    sample points: find the bracketing pair, then solve the linear piece. Vectorised over rows.
    """
    if not (0.0 < tau < 1.0):
        raise ValueError(f"tau = {tau} is outside (0, 1)")
    x = np.asarray(x, dtype=float)
    w = np.ones_like(x) if weights is None else np.broadcast_to(weights, x.shape).astype(float)
    order = np.argsort(x, axis=-1)
    xs, ws = np.take_along_axis(x, order, -1), np.take_along_axis(w, order, -1)
    diff = xs[..., None, :] - xs[..., :, None]  # [..., j, i] = x_i - x_j
    g = np.sum(
        ws[..., None, :] * (tau * np.maximum(diff, 0) - (1 - tau) * np.maximum(-diff, 0)), -1
    )
    j = np.sum(g >= 0, axis=-1, keepdims=True) - 1  # last sorted point with g >= 0
    x_j = np.take_along_axis(xs, j, -1)[..., 0]
    g_j = np.take_along_axis(g, j, -1)[..., 0]
    below = np.sum(ws * (xs <= x_j[..., None]), -1)
    above = np.sum(ws, -1) - below
    slope = tau * above + (1 - tau) * below
    return x_j + np.where(g_j > 0, g_j / np.where(slope > 0, slope, 1.0), 0.0)


def expectile_loss(x: np.ndarray, m: float, tau: float) -> float:
    """Mean asymmetric squared loss |tau - 1(x - m < 0)| (x - m)^2 (IQL's value loss)."""
    u = np.asarray(x, dtype=float) - m
    return float(np.mean(np.abs(tau - (u < 0)) * u**2))


def in_sample_value_iteration(
    states: np.ndarray,
    actions: np.ndarray,
    rewards: np.ndarray,
    next_states: np.ndarray,
    S: int,
    gamma: float,
    tau: float,
    n_iter: int = 2000,
    tol: float = 1e-13,
) -> tuple[np.ndarray, np.ndarray]:
    """Expectile VI over the distinct dataset pairs (deterministic transitions).

    V(s) <- expectile_tau of {Q(s, a) : (s, a) in data}; Q(s, a) <- r + gamma V(s').
    Every state must have at least one dataset action. Returns (V [S], Q over the pairs [N]).
    """
    n = len(states)
    counts = np.bincount(states, minlength=S)
    if np.any(counts == 0):
        raise ValueError(f"state {int(np.argmin(counts))} has no dataset action")
    # ragged rows padded to a [S, max_count] table of pair indices; padding has weight 0
    order = np.argsort(states, kind="stable")
    start = np.cumsum(counts) - counts
    col = np.arange(n) - start[states[order]]
    table = np.zeros((S, counts.max()), dtype=np.int64)
    mask = np.zeros((S, counts.max()))
    table[states[order], col] = order
    mask[states[order], col] = 1.0
    V = np.zeros(S)
    q = rewards + gamma * V[next_states]
    for _ in range(n_iter):
        q = rewards + gamma * V[next_states]
        # padded cells copy a real pair of the same state (weight 0), never an unseen action
        x = np.where(mask > 0, q[table], q[table[:, :1]])
        V_new = expectile(x, tau, mask)
        if np.max(np.abs(V_new - V)) <= tol:
            V = V_new
            break
        V = V_new
    return V, rewards + gamma * V[next_states]


def in_sample_optimal_value(
    states: np.ndarray,
    rewards: np.ndarray,
    next_states: np.ndarray,
    S: int,
    gamma: float,
    tol: float = 1e-13,
) -> np.ndarray:
    """Value iteration with the max restricted to dataset actions (the tau -> 1 limit)."""
    V = np.zeros(S)
    for _ in range(100_000):
        q = rewards + gamma * V[next_states]
        V_new = np.full(S, -np.inf)
        np.maximum.at(V_new, states, q)
        if np.max(np.abs(V_new - V)) <= tol:
            return V_new
        V = V_new
    return V


def empirical_policy(states: np.ndarray, actions: np.ndarray, S: int, A: int) -> np.ndarray:
    """mu_hat(a|s) = n(s, a) / n(s) [S, A]; every state must appear in the data."""
    counts = np.zeros((S, A))
    np.add.at(counts, (states, actions), 1.0)
    if np.any(counts.sum(1) == 0):
        raise ValueError(f"state {int(np.argmin(counts.sum(1)))} has no dataset action")
    return counts / counts.sum(1, keepdims=True)


def awr_policy(mu_hat: np.ndarray, adv: np.ndarray, beta: float) -> np.ndarray:
    """The closed-form optimum of weighted-NLL extraction: pi ~ mu_hat exp(beta A) per state.

    Only dataset actions (mu_hat > 0) get mass; A is never read elsewhere (it may be NaN there).
    """
    seen = mu_hat > 0
    logits = np.where(
        seen, np.log(np.where(seen, mu_hat, 1.0)) + beta * np.where(seen, adv, 0), -np.inf
    )
    logits -= logits.max(axis=1, keepdims=True)
    w = np.exp(logits)
    return w / w.sum(axis=1, keepdims=True)


def fit_weighted_nll(
    states: np.ndarray,
    actions: np.ndarray,
    adv: np.ndarray,
    beta: float,
    S: int,
    A: int,
    steps: int = 5000,
    lr: float = 1.0,
) -> np.ndarray:
    """Gradient descent on softmax logits for -mean_i exp(beta A(s_i, a_i)) log pi(a_i|s_i)
    (IQL's extraction loss over the dataset, tabular class); returns pi [S, A]."""
    w = np.exp(beta * adv[states, actions])  # only dataset pairs are read
    target = np.zeros((S, A))  # sum of weights per (s, a)
    np.add.at(target, (states, actions), w)
    total = target.sum(1, keepdims=True)
    logits = np.zeros((S, A))
    for _ in range(steps):  # d loss / d logits(s) = (total_s pi(.|s) - target_s) / n
        pi = np.exp(logits - logits.max(1, keepdims=True))
        pi /= pi.sum(1, keepdims=True)
        logits -= lr * (total * pi - target) / total  # per-state step normalised by its weight
    pi = np.exp(logits - logits.max(1, keepdims=True))
    return pi / pi.sum(1, keepdims=True)
