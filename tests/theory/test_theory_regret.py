"""Regret utilities and the regret rate of optimistic PO (Shani, Efroni, Rosenberg, Mannor 2020,
"Optimistic Policy Optimization with Bandit Feedback": regret O~(sqrt(S^2 A H^4 K))): log-log
slope of the pseudo-regret on a random 5x3x5 MDP and on combination locks."""

import numpy as np
import pytest

from algos.optimistic_po import Args, run
from theory import regret as rg
from theory.mdp import combination_lock, evaluate, random_mdp, value_iteration


def test_rate_fitting_recovers_known_rates():
    K = np.arange(1, 2**14 + 1)
    assert rg.loglog_slope(K, 3.0 * K**0.5, 2**10, 2**14) == pytest.approx(0.5, abs=1e-12)
    a, b, r2 = rg.fit_log(K, 2.0 + 5.0 * np.log(K))
    assert (a, b, r2) == pytest.approx((2.0, 5.0, 1.0), abs=1e-9)
    regs = 3.0 * K[None, :] ** 0.5 * np.random.default_rng(0).uniform(0.9, 1.1, size=(5, 1))
    slope, lo, hi = rg.bootstrap_slope_ci(K, regs, 2**10, 2**14, np.random.default_rng(1), 200)
    assert lo <= slope <= hi and slope == pytest.approx(0.5, abs=1e-9)


def test_cumulative_regret_of_policy_sequence():
    rng = np.random.default_rng(0)
    mdp = random_mdp(4, 2, rng, gamma=None, horizon=3)
    V_star, Q_star = value_iteration(mdp)
    pis = rng.dirichlet(np.ones(2), size=(10, 3, 4))
    vals = rg.policy_values(mdp, pis)
    np.testing.assert_allclose(vals, [evaluate(mdp, p)[0][0] @ mdp.rho0 for p in pis])
    reg = rg.cumulative_regret(vals, rg.optimal_value(mdp))
    assert np.all(np.diff(reg) >= 0) and reg[-1] > 0
    opt = np.stack([np.eye(2)[Q_star.argmax(-1)]] * 3)
    assert rg.cumulative_regret(rg.policy_values(mdp, opt), V_star[0, 0])[-1] == pytest.approx(0)


def _mean_regret(K, seeds, **kw):
    return np.mean(
        [run(Args(episodes=K, seed=s, progress=False, **kw))["regret"] for s in seeds], 0
    )


def test_optimistic_po_sqrt_rate_short():
    """Random 5x3x5 MDP, c_b = 0.1, anytime eta: slope in [0.35, 0.65] over [2^10, 2^13]."""
    K = 2**13
    reg = _mean_regret(K, range(3), c_b=0.1)
    slope = rg.loglog_slope(np.arange(1, K + 1), reg, 2**10, K)
    assert 0.35 <= slope <= 0.65, slope


@pytest.mark.slow
def test_optimistic_po_sqrt_rate_long():
    """Same instance, K in [2^10, 2^16], 4 seeds."""
    K = 2**16
    reg = _mean_regret(K, range(4), c_b=0.1)
    slope = rg.loglog_slope(np.arange(1, K + 1), reg, 2**10, K)
    assert 0.35 <= slope <= 0.65, slope
    assert reg[-1] / K < 0.5 * reg[2**10 - 1] / 2**10  # average regret falls


def test_theory_constant_bonus_looks_linear_at_small_k():
    """c_b = 1 saturates the truncation H - h until n ~ 4 S L: near-linear regret at K = 2^12."""
    K = 2**12
    reg = _mean_regret(K, range(2), c_b=1.0)
    assert rg.loglog_slope(np.arange(1, K + 1), reg, 2**9, K) > 0.9


def test_lock_without_bonus_is_linear_and_bonus_fixes_it():
    """Deep lock (S = H = 10, A = 2, dead-state reward 0.05): --no-bonus locks into the trap."""
    K = 2**13
    kw = dict(mdp="lock", S=10, A=2, H=10, lock_distractor=0.05)
    off = _mean_regret(K, range(2), bonus=False, **kw)
    on = _mean_regret(K, range(2), c_b=0.01, **kw)
    k = np.arange(1, K + 1)
    assert rg.loglog_slope(k, off, 2**10, K) > 0.9
    assert rg.loglog_slope(k, on, 2**10, K) < 0.7
    assert on[-1] < 0.5 * off[-1]


def test_shallow_lock_without_bonus_is_not_linear():
    """Finding: on the plain lock with S = H = 6, A = 2 bonus-off regret is NOT near-linear."""
    K = 2**12
    reg = _mean_regret(K, range(2), bonus=False, mdp="lock", S=6, A=2, H=6)
    assert rg.loglog_slope(np.arange(1, K + 1), reg, 2**9, K) < 0.5
    mdp = combination_lock(6, 6, 2)
    assert value_iteration(mdp)[0][0, 0] == 1.0
