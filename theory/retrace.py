"""Off-policy return operators as exact matrices (Munos et al. 2016, "Safe and Efficient
Off-Policy Reinforcement Learning").

For traces c[S, A] the expected operator is R Q = Q + (I - gamma P^{c mu})^-1 (T^pi Q - Q) with
(P^{c mu} Q)(x, a) = sum_x' P(x'|x, a) sum_a' mu(a'|x') c(x', a') Q(x', a'). It is affine in the
flattened Q[S * A]: R Q = M Q + b. Its sup-norm Lipschitz constant is the max absolute row sum of
M, which is what `contraction_factor` returns (<= gamma whenever 0 <= c <= pi / mu).
"""

from __future__ import annotations

import numpy as np

from theory.mdp import TabularMDP, evaluate, greedy, value_iteration

TRACE_KINDS = ("retrace", "is", "tree_backup", "q_lambda", "watkins")


def traces(pi: np.ndarray, mu: np.ndarray, lam: float, kind: str = "retrace") -> np.ndarray:
    """Trace coefficients c[S, A]: retrace lam min(1, pi/mu), is lam pi/mu, tree_backup lam pi,
    q_lambda lam (uncorrected), watkins lam 1{a = argmax pi}."""
    if kind == "retrace":
        return lam * np.minimum(1.0, pi / mu)
    if kind == "is":
        return lam * pi / mu
    if kind == "tree_backup":
        return lam * pi
    if kind == "q_lambda":
        return np.full_like(pi, lam, dtype=float)
    if kind == "watkins":
        return lam * greedy(pi)
    raise ValueError(f"kind = {kind!r}, expected one of {TRACE_KINDS}")


def _expectation_matrix(policy: np.ndarray) -> np.ndarray:
    """E_policy as a matrix [S, S * A]: (E Q)(x) = sum_a policy(a|x) Q(x, a)."""
    S, A = policy.shape
    E = np.zeros((S, S, A))
    E[np.arange(S), np.arange(S), :] = policy
    return E.reshape(S, S * A)


def operator(
    mdp: TabularMDP, pi: np.ndarray, mu: np.ndarray, c: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The expected operator R Q = M Q + b on flattened Q[S * A]; returns (M, b)."""
    S, A, g = mdp.S, mdp.A, mdp.gamma
    P = mdp.P.reshape(S * A, S)  # [(x, a), x']
    P_pi = P @ _expectation_matrix(pi)  # [(x, a), (x', a')]
    P_cmu = P @ _expectation_matrix(mu * c)
    G = np.linalg.inv(np.eye(S * A) - g * P_cmu)
    M = np.eye(S * A) + G @ (g * P_pi - np.eye(S * A))
    b = G @ mdp.R.reshape(S * A)
    return M, b


def contraction_factor(M: np.ndarray) -> float:
    """sup_Q ||M Q||_inf / ||Q||_inf = max absolute row sum of M."""
    return float(np.max(np.abs(M).sum(axis=1)))


def q_pi(mdp: TabularMDP, pi: np.ndarray) -> np.ndarray:
    """Q^pi flattened to [S * A]."""
    return evaluate(mdp, pi)[1].reshape(-1)


def iterations_to_tol(
    M: np.ndarray,
    b: np.ndarray,
    target: np.ndarray,
    Q0: np.ndarray,
    tol: float,
    max_iter: int = 10_000,
) -> int:
    """Applications of Q <- M Q + b from Q0 until ||Q - target||_inf <= tol (max_iter if never)."""
    Q = Q0.copy()
    for k in range(max_iter + 1):
        if np.max(np.abs(Q - target)) <= tol:
            return k
        Q = M @ Q + b
    return max_iter


def control_iteration(
    mdp: TabularMDP,
    mu: np.ndarray,
    lam: float,
    Q0: np.ndarray | None = None,
    n_iter: int = 200,
    kind: str = "retrace",
) -> np.ndarray:
    """Retrace control: Q_{k+1} = R_k Q_k with pi_k greedy in Q_k and a fixed behaviour mu.

    Returns the history of Q_k, shape [n_iter + 1, S, A].
    """
    S, A = mdp.S, mdp.A
    Q = np.zeros((S, A)) if Q0 is None else np.asarray(Q0, dtype=float).copy()
    hist = [Q]
    for _ in range(n_iter):
        pi = greedy(Q)
        M, b = operator(mdp, pi, mu, traces(pi, mu, lam, kind))
        Q = (M @ Q.reshape(-1) + b).reshape(S, A)
        hist.append(Q)
    return np.stack(hist)


def optimal_q(mdp: TabularMDP) -> np.ndarray:
    """Q* of value iteration, [S, A]."""
    return value_iteration(mdp)[1]


def sample_paths(
    mdp: TabularMDP,
    mu: np.ndarray,
    x: np.ndarray,
    a: np.ndarray,
    length: int,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:
    """Paths from fixed (x_0, a_0) [n], then behaviour mu: states and actions [n, length + 1]."""
    n = len(x)
    states = np.empty((n, length + 1), dtype=np.int64)
    actions = np.empty((n, length + 1), dtype=np.int64)
    states[:, 0], actions[:, 0] = x, a
    cum_P, cum_mu = np.cumsum(mdp.P, axis=-1), np.cumsum(mu, axis=-1)
    for t in range(length):  # sequential in time, vectorised over the n paths
        u_s, u_a = rng.random((2, n, 1))
        s = np.minimum((cum_P[states[:, t], actions[:, t]] < u_s).sum(-1), mdp.S - 1)
        states[:, t + 1] = s
        actions[:, t + 1] = np.minimum((cum_mu[s] < u_a).sum(-1), mdp.A - 1)
    return states, actions


def sampled_targets(
    mdp: TabularMDP,
    pi: np.ndarray,
    Q: np.ndarray,
    c: np.ndarray,
    states: np.ndarray,
    actions: np.ndarray,
) -> np.ndarray:
    """The online off-policy target of each path [n] (Munos et al. 2016, eq. 3), truncated:
    Q(x_0, a_0) + sum_t gamma^t (c_1 ... c_t) (r_t + gamma E_pi Q(x_{t+1}, .) - Q(x_t, a_t))."""
    g = mdp.gamma
    s, act, s2 = states[:, :-1], actions[:, :-1], states[:, 1:]
    delta = mdp.R[s, act] + g * np.sum(pi[s2] * Q[s2], axis=-1) - Q[s, act]  # [n, T]
    trace = np.cumprod(c[states[:, 1:-1], actions[:, 1:-1]], axis=1)  # c_1 ... c_t, t >= 1
    weight = np.concatenate([np.ones((len(states), 1)), trace], axis=1)
    discount = g ** np.arange(delta.shape[1])
    return Q[states[:, 0], actions[:, 0]] + np.sum(discount * weight * delta, axis=1)


def truncated_expectation(
    mdp: TabularMDP, pi: np.ndarray, mu: np.ndarray, c: np.ndarray, Q: np.ndarray, length: int
) -> np.ndarray:
    """E_mu of `sampled_targets` over paths of `length` steps, exactly [S, A]:
    Q + sum_{t < length} (gamma P^{c mu})^t (T^pi Q - Q) (-> R Q as length -> infinity)."""
    S, A, g = mdp.S, mdp.A, mdp.gamma
    P = mdp.P.reshape(S * A, S)
    P_cmu = P @ _expectation_matrix(mu * c)
    td = mdp.R.reshape(-1) + g * P @ np.sum(pi * Q, axis=-1) - Q.reshape(-1)  # T^pi Q - Q
    out, term = Q.reshape(-1).copy(), td
    for _ in range(length):  # a finite Neumann series
        out += term
        term = g * P_cmu @ term
    return out.reshape(S, A)


def target_moments(
    mdp: TabularMDP, pi: np.ndarray, mu: np.ndarray, c: np.ndarray, Q: np.ndarray, length: int
) -> tuple[np.ndarray, np.ndarray]:
    """Exact mean and variance [S, A] of `sampled_targets` over paths of `length` steps under mu.

    Backward over t of Y_t = delta_t + gamma c_{t+1} Y_{t+1} (Y_{length-1} = delta_{length-1}),
    whose first two moments given (x_t, a_t) need only the next pair's: exact even where the
    sample variance is too heavy-tailed to estimate (importance sampling far off-policy)."""
    g = mdp.gamma
    delta = mdp.R[:, :, None] + g * np.sum(pi * Q, axis=-1) - Q[:, :, None]  # [S, A, S']
    m1, m2 = np.zeros_like(Q), np.zeros_like(Q)  # E[Y_{t+1} | x, a], E[Y_{t+1}^2 | x, a]
    for _ in range(length):
        e1 = np.sum(mu * c * m1, axis=-1)  # [S'] E_mu[c Y_{t+1} | x']
        e2 = np.sum(mu * c**2 * m2, axis=-1)
        m1_next = np.einsum("xay,xay->xa", mdp.P, delta + g * e1)
        m2 = np.einsum("xay,xay->xa", mdp.P, delta**2 + 2 * g * delta * e1 + g**2 * e2)
        m1 = m1_next
    return Q + m1, m2 - m1**2
