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
