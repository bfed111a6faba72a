"""The q-logarithm, Tsallis KL and Munchausen value iteration with the q-logarithm, MVI(q).

Zhu, White et al. (NeurIPS 2023, "Generalized Munchausen Reinforcement Learning using Tsallis KL
Divergence") replace the KL to the previous policy by the Tsallis KL, built on the q-logarithm
ln_q(x) = (x^(1-q) - 1) / (1 - q); q = 1 is the ordinary logarithm and KL. Here, on tabular
MDPs (0 < q < 2):

- the Tsallis-entropy greedy step argmax_pi <pi, Q> - tau <pi, ln_q pi> (0 < q <= 1), exact
  from its KKT conditions (sparse for q < 1);
- MVI(q): Munchausen value iteration (Vieillard, Pietquin, Geist 2020) with ln_q in place of ln
  in both the Munchausen bonus alpha tau ln_q pi_k and the soft backup, pi_k the Tsallis greedy
  policy of Q_k. q = 1 is MVI itself, whose limit policy is the entropy-regularised optimum at
  temperature (1 - alpha) tau (MVI is mirror-descent VI with KL weight alpha tau and entropy
  weight (1 - alpha) tau: Vieillard et al. 2020, Theorem 1).
"""

from __future__ import annotations

import numpy as np

from theory.mdp import TabularMDP


def log_q(x: np.ndarray, q: float) -> np.ndarray:
    """ln_q(x) = (x^(1-q) - 1) / (1 - q) (ln x at q = 1); ln_q(0) = -1 / (1 - q) for q < 1."""
    x = np.asarray(x, dtype=float)
    if q == 1.0:
        with np.errstate(divide="ignore"):
            return np.log(x)
    with np.errstate(divide="ignore"):
        return (np.power(x, 1.0 - q) - 1.0) / (1.0 - q)


def exp_q(x: np.ndarray, q: float) -> np.ndarray:
    """The inverse of ln_q: [1 + (1 - q) x]_+^(1 / (1 - q)) (exp x at q = 1)."""
    x = np.asarray(x, dtype=float)
    if q == 1.0:
        return np.exp(x)
    return np.power(np.maximum(1.0 + (1.0 - q) * x, 0.0), 1.0 / (1.0 - q))


def tsallis_kl(pi: np.ndarray, mu: np.ndarray, q: float) -> np.ndarray:
    """D_q(pi || mu) = E_pi[-ln_q(mu / pi)] along the last axis (KL(pi || mu) at q = 1)."""
    pi, mu = np.asarray(pi, dtype=float), np.asarray(mu, dtype=float)
    safe = np.where(pi > 0, pi, 1.0)
    return np.sum(np.where(pi > 0, -pi * log_q(mu / safe, q), 0.0), axis=-1)


def tsallis_greedy(Q: np.ndarray, tau: float, q: float, iters: int = 100) -> np.ndarray:
    """argmax_pi <pi, Q> - tau <pi, ln_q pi> along the last axis, 0 < q <= 1 (softmax(Q / tau)
    at q = 1; sparse below).

    KKT: pi(a) = [(1 + (1 - q)(Q(a) - lam) / tau) / (2 - q)]_+^(1 / (1 - q)) with one multiplier
    lam per row; sum_a pi(a) - 1 is convex and decreasing in lam, so Newton's method from a lam
    where the sum is >= 1 climbs to the root without overshooting.
    """
    if not 0.0 < q <= 1.0:
        raise ValueError(f"q = {q} must lie in (0, 1]")
    Q = np.asarray(Q, dtype=float)
    if q == 1.0:
        e = np.exp((Q - Q.max(axis=-1, keepdims=True)) / tau)
        return e / e.sum(axis=-1, keepdims=True)
    k = 1.0 / (1.0 - q)
    lam = Q.max(axis=-1, keepdims=True) - tau  # the top action alone has mass 1: the sum is >= 1
    for _ in range(iters):
        base = np.maximum((1.0 + (Q - lam) / (tau * k)) / (2.0 - q), 0.0)
        f = np.sum(base**k, axis=-1, keepdims=True) - 1.0
        slope = -np.sum(base ** (k - 1.0), axis=-1, keepdims=True) / (tau * (2.0 - q))
        step = f / slope
        lam = lam - step
        if np.all(np.abs(step) <= 1e-15 * (1.0 + np.abs(lam))):
            break
    pi = _mass(Q, lam, tau, q)
    return pi / pi.sum(axis=-1, keepdims=True)


def _mass(Q: np.ndarray, lam: np.ndarray, tau: float, q: float) -> np.ndarray:
    base = np.maximum((1.0 + (1.0 - q) * (Q - lam) / tau) / (2.0 - q), 0.0)
    return base ** (1.0 / (1.0 - q))


def mvi(
    mdp: TabularMDP,
    tau: float,
    alpha: float,
    q: float = 1.0,
    tol: float = 1e-12,
    max_iter: int = 100_000,
) -> tuple[np.ndarray, np.ndarray, int]:
    """MVI(q), 0 < q <= 1, on a discounted MDP from Q = 0 to sup-norm change tol; returns
    (Q, pi, iterations).

    Q_{k+1} = R + alpha tau ln_q pi_k + gamma P sum_a' pi_k(a'|s') [Q_k(s', a') - tau ln_q
    pi_k(a'|s')], pi_k = tsallis_greedy(Q_k, tau, q). For q < 1, ln_q(0) = -1 / (1 - q) is finite
    and policies may be sparse. For q > 1 in this convention ln_q(x) falls like -x^(1-q) as x -> 0
    and the bonus drives the iteration to diverge (seen at q = 1.1 and 1.5); papers that write
    the exponent as q - 1 use our 2 - q, so their q >= 1 is this range.
    """
    Q = np.zeros((mdp.S, mdp.A))
    for it in range(1, max_iter + 1):
        pi = tsallis_greedy(Q, tau, q)
        lq = log_q(pi, q)
        soft_v = np.sum(pi * (Q - tau * lq), axis=-1)
        Q_new = mdp.R + alpha * tau * lq + mdp.gamma * mdp.P @ soft_v
        done = np.max(np.abs(Q_new - Q)) <= tol
        Q = Q_new
        if done:
            return Q, tsallis_greedy(Q, tau, q), it
    raise RuntimeError(f"MVI(q = {q}) did not converge to {tol} in {max_iter} iterations")


def soft_value_iteration(
    mdp: TabularMDP, tau: float, tol: float = 1e-13, max_iter: int = 100_000
) -> tuple[np.ndarray, np.ndarray]:
    """Entropy-regularised optimum (temperature tau): Q = R + gamma P tau logsumexp(Q / tau)."""
    Q = np.zeros((mdp.S, mdp.A))
    for _ in range(max_iter):
        top = Q.max(axis=-1)
        V = top + tau * np.log(np.sum(np.exp((Q - top[:, None]) / tau), axis=-1))
        Q_new = mdp.R + mdp.gamma * mdp.P @ V
        done = np.max(np.abs(Q_new - Q)) <= tol
        Q = Q_new
        if done:
            break
    e = np.exp((Q - Q.max(axis=-1, keepdims=True)) / tau)
    return Q, e / e.sum(axis=-1, keepdims=True)
