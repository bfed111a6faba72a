"""GAE (Schulman et al. 2015, "High-Dimensional Continuous Control Using Generalized Advantage
Estimation"): unbiased with the true V for all lambda; exact gradient at lambda = 1 only."""

import numpy as np

from theory import mdp as M
from theory import policy_opt as po


def _series_gae(mdp, pi, V, lam, n_terms=600):
    """Reference: sum_l (gamma lam)^l E[delta_{t+l} | s, a] by explicit matrix powers."""
    P_pi, _ = M.policy_matrices(mdp, pi)
    delta = mdp.R + mdp.gamma * mdp.P @ V - V[:, None]
    dbar = (pi * delta).sum(1)
    out = delta.copy()
    dist = mdp.P.copy()  # [S, A, S']: distribution of s_{t+1} given (s_t, a_t)
    for l in range(1, n_terms):
        out += (mdp.gamma * lam) ** l * dist @ dbar
        dist = dist @ P_pi
    return out


def test_unbiased_with_true_value_for_every_lambda():
    rng = np.random.default_rng(0)
    mdp = M.random_mdp(6, 3, rng, gamma=0.9)
    pi = M.random_policy(mdp, rng)
    V, Q = M.evaluate(mdp, pi)
    for lam in [0.0, 0.3, 0.7, 0.95, 1.0]:
        exp_adv = po.expected_gae_advantage(mdp, pi, V, lam)
        np.testing.assert_allclose(exp_adv, Q - V[:, None], atol=1e-10)
        # the closed form agrees with the explicit series for an arbitrary V as well
        W = rng.normal(size=6)
        np.testing.assert_allclose(
            po.expected_gae_advantage(mdp, pi, W, lam), _series_gae(mdp, pi, W, lam), atol=1e-10
        )


def test_wrong_value_biases_gradient_except_at_lambda_one():
    rng = np.random.default_rng(1)
    mdp = M.random_mdp(6, 3, rng, gamma=0.9)
    pi = M.random_policy(mdp, rng)
    V, Q = M.evaluate(mdp, pi)
    true_grad = po.expected_policy_gradient(mdp, pi, Q - V[:, None])
    np.testing.assert_allclose(true_grad, po.softmax_policy_gradient(mdp, np.log(pi)), atol=1e-12)
    for _ in range(5):
        e = rng.normal(size=6)
        bias = {}
        for lam in [0.0, 0.5, 0.9, 1.0]:
            adv = po.expected_gae_advantage(mdp, pi, V + e, lam)
            bias[lam] = np.linalg.norm(po.expected_policy_gradient(mdp, pi, adv) - true_grad)
        assert bias[1.0] < 1e-10
        assert min(bias[0.0], bias[0.5], bias[0.9]) > 1e-3
        # at lambda = 1 the error enters only as the state baseline -e(s)
        np.testing.assert_allclose(
            po.expected_gae_advantage(mdp, pi, V + e, 1.0),
            Q - V[:, None] - e[:, None],
            atol=1e-10,
        )
