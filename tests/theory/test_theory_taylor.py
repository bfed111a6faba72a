"""TayPO (Tang et al. 2020, "Taylor Expansion Policy Optimization"): the K-th order expansion of
eta(pi') - eta(pi) has a residual of order delta^(K + 1); K = 1 is TRPO's surrogate."""

import numpy as np
import pytest

from theory import mdp as M
from theory import policy_opt as po
from theory import taylor as ty


def _setup(seed, S=6, A=3):
    rng = np.random.default_rng(seed)
    mdp = M.random_mdp(S, A, rng, gamma=0.9)
    return rng, mdp, M.random_policy(mdp, rng), rng.normal(size=(S, A))


def _residual(mdp, pi, z, delta, K):
    pi_new = po.softmax(np.log(pi) + delta * z)
    exact = M.expected_return(mdp, pi_new) - M.expected_return(mdp, pi)
    return abs(exact - ty.taylor_objective(mdp, pi, pi_new, K))


def test_first_order_is_trpo_surrogate():
    rng, mdp, pi, z = _setup(0)
    for delta in [0.01, 0.3, 2.0]:
        pi_new = po.softmax(np.log(pi) + delta * z)
        first = ty.taylor_objective(mdp, pi, pi_new, 1)
        surrogate_gain = po.surrogate(mdp, pi, pi_new) - M.expected_return(mdp, pi)
        assert first == pytest.approx(surrogate_gain, abs=1e-12)


def test_full_series_is_exact():
    rng, mdp, pi, z = _setup(1)
    pi_new = po.softmax(np.log(pi) + 0.5 * z)
    exact = M.expected_return(mdp, pi_new) - M.expected_return(mdp, pi)
    assert abs(exact) > 1e-2
    assert ty.taylor_objective(mdp, pi, pi_new, 400) == pytest.approx(exact, abs=1e-12)


@pytest.mark.parametrize("K", [1, 2, 3])
def test_halving_delta_divides_residual_by_two_to_the_k_plus_one(K):
    for seed in range(5):
        rng, mdp, pi, z = _setup(seed)
        ratio = _residual(mdp, pi, z, 0.025, K) / _residual(mdp, pi, z, 0.0125, K)
        # 4, 8, 16 up to the O(delta) relative correction of the next order
        assert abs(ratio / 2 ** (K + 1) - 1) < 0.15, (seed, ratio)
        deltas = np.geomspace(0.0125, 0.05, 5)
        errs = [_residual(mdp, pi, z, d, K) for d in deltas]
        slope = np.polyfit(np.log(deltas), np.log(errs), 1)[0]
        assert abs(slope - (K + 1)) < 0.25, (seed, slope)


def test_bad_order_is_refused():
    rng, mdp, pi, _ = _setup(2)
    with pytest.raises(ValueError, match="K = 0 must be at least 1"):
        ty.taylor_objective(mdp, pi, pi, 0)
    with pytest.raises(ValueError, match="pi_new has shape"):
        ty.taylor_objective(mdp, pi, pi[:, :2], 1)
