"""Success conditioning as a chi-square trust region, exact on tabular MDPs.

With Q(s, a) the success probability under pi and V(s) = sum_a pi(a|s) Q(s, a), the
success-conditioned policy is pi+(a|s) = pi(a|s) Q(s, a) / V(s) (Bayes' rule for "a given success").
Per state: sum_a pi+ Q / V - 1 = chi2(pi+ || pi) = Var_{a~pi}[Q] / V^2, and since every state's
one-step improvement is >= 0, eta(pi+) >= eta(pi) (policy improvement theorem).
"""

from __future__ import annotations

import numpy as np

from theory.mdp import TabularMDP


def success_conditioned(pi: np.ndarray, Q: np.ndarray) -> np.ndarray:
    """pi+(a|s) = pi(a|s) Q(s, a) / sum_a' pi(a'|s) Q(s, a') (Q >= 0, not all zero where pi > 0)."""
    weighted = pi * Q
    return weighted / weighted.sum(axis=-1, keepdims=True)


def chi2(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Per-row chi-square divergence sum_a p^2 / q - 1 (q > 0 wherever p > 0)."""
    return np.sum(np.where(p > 0, p**2 / np.where(q > 0, q, 1.0), 0.0), axis=-1) - 1.0


def success_mdp(S: int, A: int, horizon: int, rng: np.random.Generator) -> TabularMDP:
    """Finite-horizon MDP whose return is a success probability.

    Dirichlet transitions; the only reward is at the last step, R[H-1, s, a] in [0, 1], the
    probability that the final action succeeds. So Q_h(s, a) = P(success | s_h = s, a_h = a).
    """
    P = rng.dirichlet(np.ones(S), size=(horizon, S, A))
    R = np.zeros((horizon, S, A))
    R[-1] = rng.random((S, A))
    return TabularMDP(P=P, R=R, rho0=rng.dirichlet(np.ones(S)), horizon=horizon)
