"""TabularMDP: validation errors, exact values against independent computations, sampling."""

import itertools

import numpy as np
import pytest

from theory import mdp as M


def _rng(seed=0):
    return np.random.default_rng(seed)


def test_bad_rows_name_array_and_index():
    P = _rng().dirichlet(np.ones(4), size=(4, 2))
    P[2, 1] *= 0.93
    with pytest.raises(ValueError, match=r"P\[2, 1, :\] sums to 0.93, expected 1"):
        M.TabularMDP(P=P, R=np.zeros((4, 2)), rho0=np.full(4, 0.25), gamma=0.9)


def test_negative_probability_named():
    P = np.full((3, 2, 3), 1 / 3)
    P[1, 0] = [0.6, 0.6, -0.2]
    with pytest.raises(ValueError, match=r"P\[1, 0, 2\] = -0.2 is negative"):
        M.TabularMDP(P=P, R=np.zeros((3, 2)), rho0=np.full(3, 1 / 3), gamma=0.9)


@pytest.mark.parametrize("gamma", [1.0, -0.1, 1.5])
def test_gamma_outside_range(gamma):
    with pytest.raises(ValueError, match=r"gamma = .* outside \[0, 1\)"):
        M.TabularMDP(np.full((2, 2, 2), 0.5), np.zeros((2, 2)), np.full(2, 0.5), gamma=gamma)


def test_mismatched_shapes_named():
    P = np.full((3, 2, 3), 1 / 3)
    with pytest.raises(ValueError, match=r"^R has shape \(3, 3\)"):
        M.TabularMDP(P, np.zeros((3, 3)), np.full(3, 1 / 3), gamma=0.9)
    with pytest.raises(ValueError, match=r"^rho0 has shape \(2,\)"):
        M.TabularMDP(P, np.zeros((3, 2)), np.full(2, 0.5), gamma=0.9)
    with pytest.raises(ValueError, match=r"^P has shape"):
        M.TabularMDP(np.full((3, 2, 4), 0.25), np.zeros((3, 2)), np.full(3, 1 / 3), gamma=0.9)
    with pytest.raises(ValueError, match=r"rho0\[:\] sums to 0.9"):
        M.TabularMDP(P, np.zeros((3, 2)), np.array([0.3, 0.3, 0.3]), gamma=0.9)
    mdp = M.random_mdp(3, 2, _rng())
    with pytest.raises(ValueError, match=r"pi\[1, :\] sums to"):
        M.evaluate(mdp, np.array([[0.5, 0.5], [0.2, 0.2], [1.0, 0.0]]))


def test_discounted_values_satisfy_bellman_and_match_power_series():
    rng = _rng(1)
    mdp = M.random_mdp(6, 3, rng, gamma=0.9)
    pi = M.random_policy(mdp, rng)
    V, Q = M.evaluate(mdp, pi)
    P_pi, r_pi = M.policy_matrices(mdp, pi)
    series = sum(np.linalg.matrix_power(0.9 * P_pi, t) @ r_pi for t in range(400))
    np.testing.assert_allclose(V, series, atol=1e-10)
    np.testing.assert_allclose((pi * Q).sum(1), V, atol=1e-12)
    d = M.occupancy(mdp, pi)
    assert d.sum() == pytest.approx(1 / (1 - 0.9), abs=1e-10)
    assert d @ r_pi == pytest.approx(M.expected_return(mdp, pi), abs=1e-10)


def test_finite_horizon_matches_trajectory_enumeration():
    rng = _rng(2)
    mdp = M.random_mdp(3, 2, rng, gamma=None, horizon=3)
    pi = M.random_policy(mdp, rng)
    total = 0.0
    for traj in itertools.product(
        range(3), range(2), range(3), range(2), range(3), range(2), range(3)
    ):
        s0, a0, s1, a1, s2, a2, _ = traj
        if s0 != 0:
            continue
        p = pi[0, s0, a0] * mdp.P[0, s0, a0, s1] * pi[1, s1, a1] * mdp.P[1, s1, a1, s2]
        p *= pi[2, s2, a2] * mdp.P[2, s2, a2, traj[6]]
        total += p * (mdp.R[0, s0, a0] + mdp.R[1, s1, a1] + mdp.R[2, s2, a2])
    assert M.expected_return(mdp, pi) == pytest.approx(total, abs=1e-12)


def test_value_iteration_is_optimal():
    rng = _rng(3)
    mdp = M.random_mdp(5, 3, rng, gamma=0.95)
    V, Q = M.value_iteration(mdp)
    np.testing.assert_allclose(V, (mdp.R + 0.95 * mdp.P @ V).max(1), atol=1e-10)
    pis = rng.dirichlet(np.ones(3), size=(500, 5))
    assert np.all(M.evaluate(mdp, pis)[0] <= V + 1e-10)  # batched evaluation, 500 policies
    ep = M.random_mdp(4, 2, rng, gamma=None, horizon=4)
    Vh, _ = M.value_iteration(ep)
    for pi in rng.dirichlet(np.ones(2), size=(100, 4, 4)):
        assert M.evaluate(ep, pi)[0][0, 0] <= Vh[0, 0] + 1e-12


def test_sampling_matches_occupancy():
    rng = _rng(4)
    mdp = M.random_mdp(4, 2, rng, gamma=None, horizon=3)
    pi = M.random_policy(mdp, rng)
    d = M.occupancy(mdp, pi)
    n = 4000
    counts = np.zeros((3, 4))
    ret = 0.0
    for _ in range(n):
        s, a, r = M.sample_episode(mdp, pi, rng)
        counts[np.arange(3), s[:-1]] += 1
        ret += r.sum()
    # 5-sigma binomial band
    assert np.all(np.abs(counts / n - d) <= 5 * np.sqrt(d * (1 - d) / n) + 1e-12)
    assert abs(ret / n - M.expected_return(mdp, pi)) < 5 * 3 / np.sqrt(n)


@pytest.mark.parametrize(
    "make",
    [
        lambda: M.chain(6),
        lambda: M.river_swim(6),
        lambda: M.gridworld(4),
        lambda: M.combination_lock(6, 6, 2),
        lambda: M.random_mdp(5, 3, _rng(), horizon=5, gamma=None),
    ],
)
def test_generators_are_valid_and_solvable(make):
    mdp = make()
    V, _ = M.value_iteration(mdp)
    pi_unif = M.uniform_policy(mdp)
    v_unif = M.expected_return(mdp, pi_unif)
    v_star = mdp.rho0 @ (V[0] if mdp.episodic else V)
    assert v_star >= v_unif - 1e-12


def test_combination_lock_structure():
    mdp = M.combination_lock(6, 6, 2, seed=3)
    V, Q = M.value_iteration(mdp)
    assert V[0, 0] == pytest.approx(1.0)
    # the uniform policy opens the lock with probability 2^-5 (correct at steps 1..5), times 1/2
    assert M.expected_return(mdp, M.uniform_policy(mdp)) == pytest.approx(2.0**-6)
