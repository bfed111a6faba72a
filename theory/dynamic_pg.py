"""Exact softmax policy gradient on finite-horizon MDPs: simultaneous vs dynamic (backward in time).

Dynamic PG (Klein, Weissmann, Doering, ICLR 2024, "Beyond Stationarity: Convergence Analysis of
Stochastic Softmax Policy Gradient Methods") trains the non-stationary policy's epochs one at a
time, last epoch first: epoch h is a one-step problem on Q_h built from the already trained epochs
h + 1 .. H - 1. Simultaneous PG ascends the return in all epochs' logits at once. Both use exact
gradients of tabular softmax policies theta[H, S, A]; the start distribution mu has full support
(the papers' assumption). "eps-optimal" here is the finite-horizon sense: V*_h(s) - V^pi_h(s) <= eps
at every epoch h and state s.
"""

from __future__ import annotations

import numpy as np

from theory.mdp import TabularMDP, evaluate_finite, value_iteration


def softmax(z: np.ndarray) -> np.ndarray:
    """Softmax along the last axis."""
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def state_distributions(P: np.ndarray, pi: np.ndarray, mu: np.ndarray) -> np.ndarray:
    """d_h(s) = Pr(s_h = s) under pi from s_0 ~ mu, [H, S]."""
    d = np.empty(pi.shape[:2])
    d[0] = mu
    for h in range(pi.shape[0] - 1):
        d[h + 1] = np.einsum("s,sa,sat->t", d[h], pi[h], P[h])
    return d


def return_gradient(mdp: TabularMDP, theta: np.ndarray, mu: np.ndarray) -> np.ndarray:
    """d/d theta of mu . V_0 for pi = softmax(theta): d_h(s) pi_h(a|s) A_h(s, a), [H, S, A]."""
    pi = softmax(theta)
    V, Q = evaluate_finite(mdp.P, mdp.R, pi)
    d = state_distributions(mdp.P, pi, mu)
    return d[..., None] * pi * (Q - V[:-1, :, None])


def optimality_gap(mdp: TabularMDP, pi: np.ndarray) -> float:
    """max over epochs and states of V*_h(s) - V^pi_h(s)."""
    V_star, _ = value_iteration(mdp)
    V, _ = evaluate_finite(mdp.P, mdp.R, pi)
    return float(np.max(V_star[:-1] - V[:-1]))


def simultaneous_pg(
    mdp: TabularMDP, mu: np.ndarray, lr: float, eps: float, max_iter: int = 1_000_000
) -> tuple[int, np.ndarray]:
    """Gradient ascent on mu . V_0 in every epoch's logits from theta = 0 until the policy is
    eps-optimal at every (h, s); returns (iterations, theta). max_iter reached: an error."""
    V_star, _ = value_iteration(mdp)
    theta = np.zeros(mdp.R.shape)
    for it in range(max_iter + 1):
        pi = softmax(theta)
        V, Q = evaluate_finite(mdp.P, mdp.R, pi)
        if np.max(V_star[:-1] - V[:-1]) <= eps:
            return it, theta
        d = state_distributions(mdp.P, pi, mu)
        theta = theta + lr * d[..., None] * pi * (Q - V[:-1, :, None])
    raise RuntimeError(f"simultaneous PG not eps-optimal after {max_iter} iterations")


def dynamic_pg(
    mdp: TabularMDP, mu: np.ndarray, lr: float, eps: float, max_iter: int = 1_000_000
) -> tuple[int, np.ndarray]:
    """Backward-in-time PG: for h = H-1 .. 0, ascend mu . V_h in epoch h's logits (later epochs
    frozen) until max_s (max_a Q_h - V_h) <= eps / H; returns (total iterations, theta).

    The stage tolerance eps / H makes the result eps-optimal at every (h, s): by induction
    V*_h - V^pi_h <= (H - h) eps / H."""
    H = mdp.horizon
    theta = np.zeros(mdp.R.shape)
    V_next = np.zeros(mdp.S)
    total = 0
    for h in range(H - 1, -1, -1):
        Q_h = mdp.R[h] + mdp.P[h] @ V_next  # [S, A] with the trained future
        for it in range(max_iter + 1):  # noqa: B007 (it counts the steps, read below)
            pi_h = softmax(theta[h])
            V_h = np.sum(pi_h * Q_h, axis=-1)
            if np.max(Q_h.max(axis=-1) - V_h) <= eps / H:
                break
            theta[h] = theta[h] + lr * mu[:, None] * pi_h * (Q_h - V_h[:, None])
        else:
            raise RuntimeError(f"dynamic PG epoch {h} not eps/H-optimal after {max_iter} steps")
        total += it
        V_next = V_h
    return total, theta
