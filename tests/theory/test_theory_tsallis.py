"""Tsallis KL and MVI(q) (Zhu, White et al. 2023): the q-logarithm tends to ln as q -> 1, the
Tsallis KL to KL, the Tsallis greedy step against numerical optimisation over the simplex,
MVI(q = 1) against soft value iteration at temperature (1 - alpha) tau (an independent oracle of
MVI's limit), and MVI(q)'s solution smooth in q up to q = 1."""

import numpy as np
import pytest
from scipy.optimize import minimize

from theory import tsallis as ts
from theory.mdp import random_mdp


def test_log_q_tends_to_log_at_first_order():
    x = np.geomspace(1e-3, 1e3, 25)
    np.testing.assert_array_equal(ts.log_q(x, 1.0), np.log(x))
    for h in [1e-3, -1e-3]:
        q = 1.0 + h
        # ln_q x = ln x - (q - 1) (ln x)^2 / 2 + O((q - 1)^2)
        first = (ts.log_q(x, q) - np.log(x)) / (q - 1)
        np.testing.assert_allclose(first, -(np.log(x) ** 2) / 2, rtol=0.05, atol=1e-6)
    for q in [0.3, 0.7, 1.5]:
        np.testing.assert_allclose(ts.exp_q(ts.log_q(x, q), q), x, rtol=1e-12)
    assert ts.log_q(0.0, 0.5) == pytest.approx(-2.0)  # ln_q(0) = -1 / (1 - q), finite below 1


def test_tsallis_kl_is_a_divergence_that_tends_to_kl():
    rng = np.random.default_rng(0)
    pi, mu = rng.dirichlet(np.ones(5), size=200), rng.dirichlet(np.ones(5), size=200)
    kl = np.sum(pi * np.log(pi / mu), axis=-1)
    np.testing.assert_allclose(ts.tsallis_kl(pi, mu, 1.0), kl, rtol=1e-14)
    for q in [0.3, 0.8, 1.3]:
        assert np.all(ts.tsallis_kl(pi, mu, q) > 0)
        np.testing.assert_allclose(ts.tsallis_kl(pi, pi, q), 0.0, atol=1e-14)
    gaps = [np.max(np.abs(ts.tsallis_kl(pi, mu, 1 + h) - kl)) for h in [1e-2, 1e-3, 1e-4]]
    assert gaps[0] > 5 * gaps[1] > 25 * gaps[2] > 0  # first order in q - 1


@pytest.mark.parametrize("q", [0.3, 0.7, 1.0])
def test_tsallis_greedy_maximises_the_regularised_objective(q):
    rng = np.random.default_rng(1)
    tau = 0.4
    for _ in range(5):
        Q = rng.normal(size=4)
        pi = ts.tsallis_greedy(Q, tau, q)

        def neg(p, Q=Q):
            p = np.clip(p, 0.0, None)
            return -(
                p @ Q - tau * np.sum(np.where(p > 0, p * ts.log_q(np.where(p > 0, p, 1), q), 0))
            )

        res = minimize(
            neg,
            np.full(4, 0.25),
            method="SLSQP",
            bounds=[(0, 1)] * 4,
            constraints=[{"type": "eq", "fun": lambda p: p.sum() - 1}],
            options={"ftol": 1e-14, "maxiter": 500},
        )
        assert -neg(pi) >= -res.fun - 1e-9  # no point of the simplex does better
        np.testing.assert_allclose(pi, np.clip(res.x, 0, None), atol=2e-4)
    if q < 1:  # sparse: a clearly worse action gets no mass
        assert ts.tsallis_greedy(np.array([0.0, -10.0, 1.0]), tau, q)[1] == 0.0


def _mdp():
    return random_mdp(5, 3, np.random.default_rng(2), gamma=0.8)


def test_mvi_at_q_one_converges_to_the_entropy_regularised_optimum():
    mdp, tau, alpha = _mdp(), 0.5, 0.9
    _, pi, _ = ts.mvi(mdp, tau, alpha, q=1.0)
    _, pi_soft = ts.soft_value_iteration(mdp, (1 - alpha) * tau)
    np.testing.assert_allclose(pi, pi_soft, atol=1e-10)
    _, pi_wrong = ts.soft_value_iteration(mdp, tau)  # not the temperature without the bonus
    assert np.max(np.abs(pi - pi_wrong)) > 1e-2


def test_mvi_solution_is_smooth_in_q_up_to_one():
    mdp, tau, alpha = _mdp(), 0.5, 0.9
    _, pi_one, _ = ts.mvi(mdp, tau, alpha, q=1.0)
    pis = {q: ts.mvi(mdp, tau, alpha, q=q)[1] for q in [0.3, 0.5, 0.7, 0.9, 0.96, 0.98, 0.99]}
    quotient = {h: (pis[1 - h] - pi_one) / h for h in [0.04, 0.02, 0.01]}
    # differentiable at q = 1: the difference quotient converges at first order in h (halving h
    # halves its change), to a nonzero derivative
    far = np.max(np.abs(quotient[0.02] - quotient[0.04]))
    near = np.max(np.abs(quotient[0.01] - quotient[0.02]))
    assert 0.4 * far < near < 0.6 * far and np.max(np.abs(quotient[0.01])) > 0.1
    # ... and the solution path is Lipschitz over (0.3, 1]
    qs = sorted(pis)
    steps = [np.max(np.abs(pis[b] - pis[a])) / (b - a) for a, b in zip(qs, qs[1:])]
    assert max(steps) < 5.0 and np.max(np.abs(pis[0.3] - pi_one)) > 0.05
    assert np.any(pis[0.3] == 0.0)  # small q: sparse policies
