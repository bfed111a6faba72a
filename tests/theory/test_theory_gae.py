"""GAE (Schulman et al. 2015, "High-Dimensional Continuous Control Using Generalized Advantage
Estimation"): unbiased with the true V for all lambda; exact gradient at lambda = 1 only."""

import numpy as np
import pytest

from theory import gae_exact as ge
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


# --- GAE's bias with a wrong value (exact at lambda = 1 only), every trajectory enumerated ---

LAMS = [0.0, 0.25, 0.5, 0.75, 0.9, 1.0]


def _episodic(rng):
    mdp = M.random_mdp(3, 2, rng, horizon=4)
    pi = M.random_policy(mdp, rng)
    V, _ = M.evaluate(mdp, pi)  # V [H + 1, S], V[H] = 0
    true_grad = (M.occupancy(mdp, pi)[..., None] * pi * M.advantage(mdp, pi)).reshape(-1)
    return mdp, pi, V, true_grad


def _gae_moments(mdp, pi, V, lam):
    return ge.moments(*ge.gae_gradient_distribution(mdp, pi, V, lam))


def test_enumerated_true_gradient_matches_finite_differences():
    rng = np.random.default_rng(20)
    mdp, pi, V, true_grad = _episodic(rng)
    logits = np.log(pi)
    h, fd = 1e-6, np.zeros(logits.size)
    for i in range(logits.size):
        e = np.zeros(logits.size)
        e[i] = h
        up = M.expected_return(mdp, po.softmax(logits + e.reshape(logits.shape)))
        down = M.expected_return(mdp, po.softmax(logits - e.reshape(logits.shape)))
        fd[i] = (up - down) / (2 * h)
    np.testing.assert_allclose(true_grad, fd, atol=1e-8)
    prob, _ = ge.gae_gradient_distribution(mdp, pi, V, 0.5)
    assert prob.size == 3 * 6**4 and abs(prob.sum() - 1) < 1e-12


def test_wrong_value_bias_exact_by_enumeration():
    rng = np.random.default_rng(21)
    for _ in range(5):
        mdp, pi, V, true_grad = _episodic(rng)
        e = rng.normal(scale=0.5, size=V.shape)
        e[-1] = 0.0  # the terminal value is known
        for lam in LAMS:
            mean_true_v, _ = _gae_moments(mdp, pi, V, lam)
            assert np.linalg.norm(mean_true_v - true_grad) < 1e-12  # true V: unbiased, any lambda
            bias = np.linalg.norm(_gae_moments(mdp, pi, V + e, lam)[0] - true_grad)
            if lam == 1.0:
                assert bias < 1e-12  # the error is only a state baseline
            else:
                assert bias > 1e-3


def test_variance_against_lambda():
    """ "Variance generally increases with lambda" holds for an exact critic, not a wrong one.

    Measured (exact, 40 random MDPs per row, S=3, A=2, H=4, rewards U[0, 1], V + N(0, sigma^2)):
    sigma = 0: variance strictly increasing in lambda in 40/40; sigma = 0.1: 21/40 (Var(1) >
    Var(0) in 38/40); sigma = 0.3: 0/40 (14/40); sigma = 1: 0/40 (3/40). With a wrong V, TD
    residuals at lambda < 1 carry the critic's noise e(s') - e(s); at lambda = 1 it telescopes to
    the baseline -e(s_h), so variance falls with lambda once the critic error is large.
    """
    rng = np.random.default_rng(22)
    falls = 0
    for _ in range(10):
        mdp, pi, V, _ = _episodic(rng)
        exact = [_gae_moments(mdp, pi, V, lam)[1] for lam in LAMS]
        assert np.all(np.diff(exact) > 0)  # the claim holds with V = V^pi
        e = rng.normal(scale=1.0, size=V.shape)
        e[-1] = 0.0
        wrong = [_gae_moments(mdp, pi, V + e, lam)[1] for lam in LAMS]
        falls += wrong[-1] < wrong[0]
    assert falls >= 8  # the claim fails: with this critic error lambda = 1 has lower variance


def test_enumeration_refuses_bad_inputs():
    rng = np.random.default_rng(23)
    mdp, pi, V, _ = _episodic(rng)
    bad_v = V.copy()
    bad_v[-1] = 1.0
    with pytest.raises(ValueError, match="V\\[H\\] must be 0"):
        ge.gae_gradient_distribution(mdp, pi, bad_v, 0.5)
    discounted = M.random_mdp(3, 2, rng, gamma=0.9)
    with pytest.raises(ValueError, match="finite-horizon"):
        ge.enumerate_trajectories(discounted, M.random_policy(discounted, rng))
