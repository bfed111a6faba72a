"""KL-regularised optima beyond one step, exact on tiny problems: REBEL's pairwise regression
(its solution is the mirror-descent step), DPO's population loss (its tabular optimum is the
KL-regularised one), VIMPO's path-independent implied value on a tree, and control as inference
(soft value iteration vs the exact trajectory posterior).
"""

from __future__ import annotations

import itertools

import numpy as np
from scipy.special import expit, log_expit, logsumexp

from theory.policy_opt import softmax

# ---------------------------------------------------------------------------------------------
# REBEL (Gao et al. 2024, "REBEL: Reinforcement Learning via Regressing Relative Rewards",
# arXiv 2404.16767)
# ---------------------------------------------------------------------------------------------


def rebel_loss(
    logits: np.ndarray, logits_t: np.ndarray, r: np.ndarray, eta: float, pair_weights: np.ndarray
) -> float:
    """sum_{a, a'} w(a, a') [(1/eta)(log pi(a)/pi_t(a) - log pi(a')/pi_t(a')) - (r(a) - r(a'))]^2
    for pi = softmax(logits), pi_t = softmax(logits_t) over K arms, pair weights [K, K]."""
    h = (logits - logsumexp(logits)) - (logits_t - logsumexp(logits_t))
    resid = (h[:, None] - h[None, :]) / eta - (r[:, None] - r[None, :])
    return float(np.sum(pair_weights * resid**2))


# ---------------------------------------------------------------------------------------------
# DPO (Rafailov et al. 2023, "Direct Preference Optimization", arXiv 2305.18290) with
# Bradley-Terry preferences from a reward; EXO (Ji et al. 2024, "Towards Efficient Exact
# Optimization of Language Model Alignment", arXiv 2402.00856) minimises KL(pi || pi*) instead
# ---------------------------------------------------------------------------------------------


def dpo_population_loss(
    logits: np.ndarray, logits_ref: np.ndarray, r: np.ndarray, beta: float
) -> float:
    """-sum_{a != a'} P(a > a') log sigmoid(beta (h(a) - h(a'))), h = log pi - log pi_ref and
    P(a > a') = sigmoid(r(a) - r(a')): DPO's loss over every ordered pair, in expectation over
    Bradley-Terry labels."""
    h = (logits - logsumexp(logits)) - (logits_ref - logsumexp(logits_ref))
    margin = beta * (h[:, None] - h[None, :])
    pref = expit(r[:, None] - r[None, :])
    off_diagonal = ~np.eye(len(r), dtype=bool)
    return float(-np.sum((pref * log_expit(margin))[off_diagonal]))


# ---------------------------------------------------------------------------------------------
# VIMPO's implied value on a deterministic tree (a KL-regularised MDP with terminal reward)
# ---------------------------------------------------------------------------------------------


def soft_tree(
    pi_ref: list[np.ndarray], leaf_reward: np.ndarray, beta: float
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Soft-optimal values and policy of a complete A-ary tree of depth H: level h has A^h nodes,
    child a of node i is node i A + a; pi_ref[h] is [A^h, A]; leaf_reward [A^H]. Returns V*[h]
    [A^h] for h = 0..H and pi*[h] [A^h, A] maximising E[R] - beta KL(pi || pi_ref) per path."""
    depth, A = len(pi_ref), pi_ref[0].shape[-1]
    values = [None] * depth + [np.asarray(leaf_reward, float)]
    policy = [None] * depth
    for h in range(depth - 1, -1, -1):  # backward over levels, vectorised within a level
        child = values[h + 1].reshape(-1, A)  # [A^h, A]
        with np.errstate(divide="ignore"):
            logits = np.log(pi_ref[h]) + child / beta
        values[h] = beta * logsumexp(logits, axis=-1)
        policy[h] = softmax(logits)
    return values, policy


def implied_values(
    pi: list[np.ndarray], pi_ref: list[np.ndarray], leaf_reward: np.ndarray, beta: float
) -> np.ndarray:
    """R(tau) - beta sum_t log(pi(a_t|s_t) / pi_ref(a_t|s_t)) for every root-to-leaf path tau
    [A^H], leaf l's path being the base-A digits of l."""
    A = pi_ref[0].shape[-1]
    out = np.asarray(leaf_reward, float).copy()
    leaves = np.arange(len(out))
    for h in range(len(pi)):
        step = A ** (len(pi) - h)
        node, action = leaves // step, (leaves // (step // A)) % A  # node at level h, its action
        out -= beta * (np.log(pi[h][node, action]) - np.log(pi_ref[h][node, action]))
    return out


# ---------------------------------------------------------------------------------------------
# control as inference (Levine 2018, "Reinforcement Learning and Control as Probabilistic
# Inference: Tutorial and Review", arXiv 1805.00909): finite horizon, uniform action prior
# ---------------------------------------------------------------------------------------------


def soft_value_iteration(
    P: np.ndarray, R: np.ndarray, alpha: float
) -> tuple[np.ndarray, np.ndarray]:
    """Soft value iteration: Q_h = R_h + E_P[V_{h+1}], V_h = alpha log mean_a exp(Q_h / alpha),
    pi_h = softmax(Q_h / alpha), the maximiser of E[sum r] - alpha KL(pi || uniform) per step.
    P [H, S, A, S'], R [H, S, A]; returns (Q [H, S, A], pi [H, S, A])."""
    H, S, A, _ = P.shape
    V = np.zeros(S)
    Q = np.zeros((H, S, A))
    for h in range(H - 1, -1, -1):
        Q[h] = R[h] + P[h] @ V
        V = alpha * (logsumexp(Q[h] / alpha, axis=-1) - np.log(A))
    return Q, softmax(Q / alpha)


def posterior_backward(
    P: np.ndarray, R: np.ndarray, alpha: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The exact posterior given optimality, p(tau | O) proportional to p(tau) exp(sum r / alpha):
    Q_h = R_h + alpha log E_P[exp(V_{h+1} / alpha)] (optimistic about the dynamics), the same
    V and policy p(a_h | s_h, O) = softmax(Q_h / alpha). Returns (Q, pi, V [H + 1, S])."""
    H, S, A, _ = P.shape
    V = np.zeros((H + 1, S))
    Q = np.zeros((H, S, A))
    for h in range(H - 1, -1, -1):
        with np.errstate(divide="ignore"):
            Q[h] = R[h] + alpha * logsumexp(np.log(P[h]) + V[h + 1] / alpha, axis=-1)
        V[h] = alpha * (logsumexp(Q[h] / alpha, axis=-1) - np.log(A))
    return Q, softmax(Q / alpha), V


def trajectories(S: int, A: int, H: int) -> tuple[np.ndarray, np.ndarray]:
    """Every (s_0, a_0, ..., s_{H-1}, a_{H-1}) as rows of states [M, H] and actions [M, H]."""
    rows = np.array(list(itertools.product(range(S), range(A), repeat=H)), dtype=np.int64)
    return rows[:, 0::2], rows[:, 1::2]


def trajectory_probabilities(
    P: np.ndarray, pi: np.ndarray, s0: int, states: np.ndarray, actions: np.ndarray
) -> np.ndarray:
    """p(tau) = 1[s_0 = s0] prod_h pi_h(a_h|s_h) P_h(s_{h+1}|s_h, a_h) (the last transition
    summed out) [M]."""
    H = P.shape[0]
    prob = (states[:, 0] == s0).astype(float)
    for h in range(H):
        prob = prob * pi[h, states[:, h], actions[:, h]]
        if h + 1 < H:
            prob = prob * P[h, states[:, h], actions[:, h], states[:, h + 1]]
    return prob


def trajectory_returns(R: np.ndarray, states: np.ndarray, actions: np.ndarray) -> np.ndarray:
    """sum_h R_h(s_h, a_h) for every trajectory [M]."""
    return sum(R[h, states[:, h], actions[:, h]] for h in range(R.shape[0]))
