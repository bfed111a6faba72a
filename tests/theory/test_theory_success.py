"""Success conditioning is a chi-square trust region: per state, relative improvement = chi2
policy change = action influence Var_pi[Q] / V^2; and eta(pi+) >= eta(pi) on the whole MDP."""

import numpy as np

from theory import mdp as M
from theory import success as sc


def test_per_state_identity():
    rng = np.random.default_rng(0)
    for _ in range(20):
        mdp = sc.success_mdp(6, 4, 5, rng)
        pi = M.random_policy(mdp, rng, 0.5)
        V, Q = M.evaluate(mdp, pi)
        V = V[:-1]  # [H, S]; Q [H, S, A] are success probabilities
        assert np.all((Q >= 0) & (Q <= 1))
        pi_plus = sc.success_conditioned(pi, Q)
        improvement = np.sum(pi_plus * Q, axis=-1) / V - 1
        change = sc.chi2(pi_plus, pi)
        influence = (np.sum(pi * Q**2, axis=-1) - V**2) / V**2  # Var_{a~pi}[Q] / V^2
        np.testing.assert_allclose(improvement, change, rtol=0, atol=1e-12)
        np.testing.assert_allclose(change, influence, rtol=0, atol=1e-12)
        assert np.max(change) > 1e-2  # not 0 = 0


def test_chi2_matches_definition():
    rng = np.random.default_rng(1)
    p, q = rng.dirichlet(np.ones(5), size=2)
    assert abs(sc.chi2(p, q) - np.sum((p - q) ** 2 / q)) < 1e-12  # textbook form
    assert sc.chi2(q, q) == 0.0


def test_no_degradation_on_the_full_mdp():
    rng = np.random.default_rng(2)
    gains = []
    for _ in range(200):
        mdp = sc.success_mdp(5, 3, 4, rng)
        pi = M.random_policy(mdp, rng, rng.choice([0.2, 1.0, 5.0]))
        V, Q = M.evaluate(mdp, pi)
        V_plus, _ = M.evaluate(mdp, sc.success_conditioned(pi, Q))
        assert np.all(V_plus >= V - 1e-12)  # at every step and state, not only from rho0
        gains.append(M.expected_return(mdp, sc.success_conditioned(pi, Q)) - mdp.rho0 @ V[0])
    assert min(gains) >= -1e-12 and np.median(gains) > 1e-3
    # the same holds for a discounted MDP with rewards in [0, 1] (Q >= 0 is all that is used)
    for _ in range(50):
        mdp = M.random_mdp(6, 3, rng, gamma=0.9)
        pi = M.random_policy(mdp, rng)
        V, Q = M.evaluate(mdp, pi)
        V_plus, _ = M.evaluate(mdp, sc.success_conditioned(pi, Q))
        assert np.all(V_plus >= V - 1e-12) and np.max(V_plus - V) > 0
