"""Taylor expansion of the return around a policy (Tang, Valko, Rowland, Munos, Azar, Pires 2020,
"Taylor Expansion Policy Optimization", TayPO), exact on a discounted tabular MDP.

eta(pi') - eta(pi) = rho0^T (I - gamma P_pi')^-1 Delta, Delta(s) = sum_a (pi' - pi)(a|s) Q_pi(s, a).
With G = (I - gamma P_pi)^-1 and E = gamma (P_pi' - P_pi), (I - gamma P_pi')^-1 = G sum_k (E G)^k;
keeping k = 0..K-1 gives the K-th order objective (K = 1 is TRPO's surrogate minus eta(pi)).
"""

from __future__ import annotations

import numpy as np

from theory.mdp import TabularMDP, check_policy, evaluate, policy_matrices


def taylor_terms(mdp: TabularMDP, pi: np.ndarray, pi_new: np.ndarray, K: int) -> np.ndarray:
    """The K terms rho0^T G (E G)^k Delta, k = 0..K-1, of eta(pi_new) - eta(pi) [K]."""
    if K < 1:
        raise ValueError(f"K = {K} must be at least 1")
    pi = check_policy(mdp, pi)
    pi_new = check_policy(mdp, pi_new, "pi_new")
    _, Q = evaluate(mdp, pi)
    P_pi, _ = policy_matrices(mdp, pi)
    P_new, _ = policy_matrices(mdp, pi_new)
    G = np.linalg.inv(np.eye(mdp.S) - mdp.gamma * P_pi)
    EG = mdp.gamma * (P_new - P_pi) @ G
    delta = np.sum((pi_new - pi) * Q, axis=-1)  # [S]
    row = mdp.rho0 @ G  # rho0^T G (EG)^k, updated in place of a matrix power
    terms = np.empty(K)
    for k in range(K):  # K is small (the expansion order)
        terms[k] = row @ delta
        row = row @ EG
    return terms


def taylor_objective(mdp: TabularMDP, pi: np.ndarray, pi_new: np.ndarray, K: int) -> float:
    """The K-th order approximation of eta(pi_new) - eta(pi)."""
    return float(np.sum(taylor_terms(mdp, pi, pi_new, K)))
