"""IQL (Kostrikov, Nair, Levine 2022, "Offline Reinforcement Learning with Implicit Q-Learning"):
expectile limits; in-sample expectile VI tends to the in-sample optimum."""

import numpy as np
import pytest
from scipy.optimize import minimize_scalar

from theory import iql


def test_expectiles():
    rng = np.random.default_rng(0)
    x = rng.exponential(size=50)
    taus = [0.1, 0.3, 0.5, 0.7, 0.9, 0.99, 0.999, 0.9999]
    m = np.array([iql.expectile(x, t) for t in taus])
    assert m[2] == pytest.approx(x.mean(), abs=1e-12)
    assert np.all(np.diff(m) > 0)
    assert x.max() - m[-1] < 0.02 * (x.max() - x.min())
    for t, mt in zip(taus, m):
        lhs = t * np.maximum(x - mt, 0).mean()
        rhs = (1 - t) * np.maximum(mt - x, 0).mean()
        assert lhs == pytest.approx(rhs, abs=1e-12)
        res = minimize_scalar(
            lambda v, t=t: iql.expectile_loss(x, v, t),
            bounds=(x.min(), x.max()),
            method="bounded",
            options={"xatol": 1e-12},
        )
        assert res.x == pytest.approx(mt, abs=1e-6)
    assert iql.expectile_loss(x, 1.3, 0.5) == pytest.approx(0.5 * np.mean((x - 1.3) ** 2))


def _dataset(seed, S=8, A=4, gamma=0.9):
    rng = np.random.default_rng(seed)
    nxt_table = rng.integers(S, size=(S, A))  # deterministic transitions
    R = rng.random((S, A))
    covered = rng.random((S, A)) < 0.5
    covered[np.arange(S), rng.integers(A, size=S)] = True  # >= 1 dataset action per state
    s, a = np.nonzero(covered)
    # out-of-dataset cells are poisoned: reading one would turn every value into NaN
    R_poisoned = np.where(covered, R, np.nan)
    return S, A, gamma, s, a, R_poisoned[s, a], nxt_table[s, a], R, nxt_table


def test_in_sample_value_iteration():
    for seed in range(3):
        S, A, gamma, s, a, r, s2, R, nxt = _dataset(seed)
        v_in = iql.in_sample_optimal_value(s, r, s2, S, gamma)
        vs = []
        for tau in [0.5, 0.7, 0.9, 0.99, 0.999, 0.9999]:
            V, q = iql.in_sample_value_iteration(s, a, r, s2, S, gamma, tau)
            assert np.all(np.isfinite(V)) and np.all(np.isfinite(q))
            vs.append(V)
        vs = np.array(vs)
        assert np.all(np.diff(vs, axis=0) >= -1e-10)
        gaps = np.max(np.abs(vs - v_in), axis=1)
        assert np.all(np.diff(gaps) < 0) and gaps[-1] < 1e-2
        assert np.all(vs <= v_in + 1e-10)
        # the in-sample optimum is below the true optimum (dataset actions only)
        V = np.zeros(S)
        for _ in range(2000):
            V = (R + gamma * V[nxt]).max(1)
        assert np.all(v_in <= V + 1e-9)


# --- IQL's policy extraction by advantage-weighted NLL: pi ~ mu_hat exp(beta A) ---


def _extraction_data(seed, S=6, A=4, n=300):
    rng = np.random.default_rng(seed)
    mu = rng.dirichlet(np.ones(A), size=S) * (rng.random((S, A)) < 0.6)  # some actions unseen
    mu[np.arange(S), rng.integers(A, size=S)] += 0.2
    mu /= mu.sum(1, keepdims=True)
    states = rng.integers(S, size=n)
    states[:S] = np.arange(S)  # every state appears
    actions = np.array([rng.choice(A, p=mu[s]) for s in states])
    mu_hat = iql.empirical_policy(states, actions, S, A)
    adv = rng.normal(size=(S, A))
    adv[mu_hat == 0] = np.nan  # out-of-dataset actions: reading one would poison the result
    return states, actions, mu_hat, adv


def _weighted_nll(pi, states, actions, adv, beta):
    return -np.mean(np.exp(beta * adv[states, actions]) * np.log(pi[states, actions]))


def test_extraction_closed_form_is_the_weighted_nll_optimum():
    rng = np.random.default_rng(30)
    for seed in range(3):
        states, actions, mu_hat, adv = _extraction_data(seed)
        for beta in [0.0, 0.5, 3.0]:
            closed = iql.awr_policy(mu_hat, adv, beta)
            assert np.all(np.isfinite(closed)) and np.all(closed[mu_hat == 0] == 0)
            fit = iql.fit_weighted_nll(states, actions, adv, beta, *mu_hat.shape)
            np.testing.assert_allclose(fit, closed, atol=2e-3)  # gradient descent gets there
            best = _weighted_nll(closed, states, actions, adv, beta)
            others = rng.dirichlet(np.ones(mu_hat.shape[1]), size=(200,) + mu_hat.shape[:1])
            assert all(best <= _weighted_nll(p, states, actions, adv, beta) for p in others)
            # the closed form, by hand: pi ~ mu_hat exp(beta A) on dataset actions
            w = np.where(mu_hat > 0, mu_hat * np.exp(beta * np.nan_to_num(adv)), 0.0)
            np.testing.assert_allclose(closed, w / w.sum(1, keepdims=True), atol=1e-12)
        np.testing.assert_allclose(iql.awr_policy(mu_hat, adv, 0.0), mu_hat, atol=1e-12)


def test_extraction_concentrates_on_best_in_support_action():
    states, actions, mu_hat, adv = _extraction_data(3)
    best = np.nanargmax(adv, axis=1)  # best dataset action (NaN = unseen is skipped)
    full = np.where(mu_hat > 0, adv, 10.0)  # an unseen action that looks better everywhere
    for beta in [1.0, 10.0, 100.0, 1000.0]:
        pi = iql.awr_policy(mu_hat, full, beta)
        mass = pi[np.arange(len(best)), best]
        assert np.all(pi[mu_hat == 0] == 0)
    assert np.all(mass > 1 - 1e-9)
    masses = [iql.awr_policy(mu_hat, adv, b)[np.arange(len(best)), best] for b in [0, 1, 10]]
    assert np.all(np.diff(masses, axis=0) >= 0)  # monotone in beta


def test_empirical_policy_refuses_unseen_state():
    with pytest.raises(ValueError, match="state 2 has no dataset action"):
        iql.empirical_policy(np.array([0, 1, 1]), np.array([0, 1, 0]), 3, 2)
