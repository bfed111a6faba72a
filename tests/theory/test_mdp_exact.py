"""theory/mdp.py, exactly: whole error messages, generator matrices written out by hand, values
and occupancies on batches, and sampling driven by chosen uniforms (a stub generator).

Written against the mutants `make mutation` found alive: each test pins a value that a one-token
change of the module would alter."""

import re

import numpy as np
import pytest

from theory import mdp as M


def _mdp(P=None, R=None, rho0=None, gamma=0.9, horizon=None):
    P = np.full((2, 2, 2), 0.5) if P is None else P
    R = np.zeros((2, 2)) if R is None else R
    rho0 = np.full(2, 0.5) if rho0 is None else rho0
    return M.TabularMDP(P=P, R=R, rho0=rho0, gamma=gamma, horizon=horizon)


def _raises(message, **kwargs):
    with pytest.raises(ValueError, match="^" + re.escape(message) + "$"):
        _mdp(**kwargs)


def test_whole_validation_messages():
    _raises(
        "give exactly one of gamma (discounted) or horizon (finite horizon)",
        gamma=None,
    )
    _raises("P has shape (2, 2), expected [S, A, S] or [H, S, A, S]", P=np.full((2, 2), 0.5))
    # ndim passes, last axis does not match the state axis
    _raises(
        "P has shape (2, 2, 3), expected [S, A, S] or [H, S, A, S]", P=np.full((2, 2, 3), 1 / 3)
    )
    _raises("gamma = 1.0 is outside [0, 1)", gamma=1.0)
    _raises(
        "P has shape (3, 2, 2, 2), expected (2, 2, 2) (discounted MDP)",
        P=np.full((3, 2, 2, 2), 0.5),
    )
    _raises("R has shape (2,), expected (2, 2) (discounted MDP, matching P)", R=np.zeros(2))
    _raises("horizon = 0 must be a positive integer", gamma=None, horizon=0)
    _raises("horizon = 1.5 must be a positive integer", gamma=None, horizon=1.5)
    _raises(
        "P has shape (2, 2, 2, 2), expected (2, 2, 2) or (3, 2, 2, 2) (finite horizon)",
        P=np.full((2, 2, 2, 2), 0.5),
        gamma=None,
        horizon=3,
    )
    _raises(
        "R has shape (2,), expected (2, 2) or (3, 2, 2) (finite horizon, matching P)",
        R=np.zeros(2),
        gamma=None,
        horizon=3,
    )
    _raises("rho0 has shape (3,), expected (2,) (one entry per state of P)", rho0=np.full(3, 1 / 3))
    R = np.zeros((2, 2))
    R[0, 1], R[1, 0] = np.inf, np.nan
    _raises("R[0, 1] is not finite", R=R)  # the first bad entry, no trailing colon


def test_edge_values_that_are_valid():
    assert _mdp(gamma=0.0).gamma == 0.0  # gamma = 0 is inside [0, 1)
    one_step = _mdp(gamma=None, horizon=1)
    assert one_step.P.shape == (1, 2, 2, 2)


def test_stored_arrays_are_float_and_broadcast():
    P = np.zeros((2, 2, 2), dtype=np.int64)
    P[:, :, 1] = 1
    mdp = M.TabularMDP(P=P, R=[[1, 2], [3, 4]], rho0=[0, 1], gamma=0.5)
    for arr in (mdp.P, mdp.R, mdp.rho0):
        assert isinstance(arr, np.ndarray) and arr.dtype == np.float64
    finite = M.TabularMDP(P=P, R=np.ones((2, 2)), rho0=[1, 0], horizon=3)
    assert finite.P.shape == (3, 2, 2, 2) and finite.R.shape == (3, 2, 2)


def test_check_distribution_messages_and_tolerance_edge():
    bad = np.array([[0.5, np.nan], [np.inf, 0.5]])
    with pytest.raises(ValueError, match=r"^x\[0, 1\] is not finite$"):
        M.check_distribution("x", bad)
    # a zero before the negative entry: only entries < 0 are named
    neg = np.array([[1.0, 0.0], [1.5, -0.5]])
    with pytest.raises(ValueError, match=r"^x\[1, 1\] = -0.5 is negative$"):
        M.check_distribution("x", neg)
    M.check_distribution("x", np.array([0.75, 0.0]), tol=0.25)  # |sum - 1| == tol passes
    with pytest.raises(ValueError, match=r"^x\[:\] sums to 0.7, expected 1$"):
        M.check_distribution("x", np.array([0.7, 0.0]), tol=0.25)


def test_check_policy_message_and_float_result():
    mdp = _mdp()
    with pytest.raises(ValueError, match=r"^pi has shape \(3, 2\), expected \(2, 2\)$"):
        M.check_policy(mdp, np.full((3, 2), 0.5))
    pi = M.check_policy(mdp, np.array([[1, 0], [0, 1]]))
    assert pi.dtype == np.float64


def test_advantage_is_q_minus_v_both_kinds():
    rng = np.random.default_rng(3)
    mdp = M.random_mdp(3, 2, rng, gamma=0.8)
    pi = M.random_policy(mdp, rng)
    V, Q = M.evaluate(mdp, pi)
    np.testing.assert_allclose(M.advantage(mdp, pi), Q - V[:, None], atol=1e-14)
    assert abs((pi * M.advantage(mdp, pi)).sum(-1)).max() < 1e-12
    fin = M.random_mdp(3, 2, rng, horizon=4)
    pi = M.random_policy(fin, rng)
    V, Q = M.evaluate(fin, pi)
    A = M.advantage(fin, pi)
    assert A.shape == (4, 3, 2)
    np.testing.assert_allclose(A, Q - V[:4, :, None], atol=1e-14)


def test_finite_horizon_values_exact():
    # 2 states, H = 2: hand-computed backward induction
    P = np.zeros((2, 2, 2))
    P[:, 0, 0] = 1.0  # action 0 -> state 0
    P[:, 1, 1] = 1.0  # action 1 -> state 1
    R = np.array([[1.0, 0.0], [0.0, 2.0]])
    mdp = M.TabularMDP(P=P, R=R, rho0=[1.0, 0.0], horizon=2)
    pi = np.full((2, 2, 2), 0.5)
    V, Q = M.evaluate(mdp, pi)
    assert V.shape == (3, 2)
    np.testing.assert_array_equal(V[2], 0.0)
    np.testing.assert_allclose(Q[1], R)
    np.testing.assert_allclose(V[1], [0.5, 1.0])
    np.testing.assert_allclose(Q[0], R + [[0.5, 1.0], [0.5, 1.0]])
    Vs, Qs = M.value_iteration(mdp)
    assert Vs.shape == (3, 2)
    np.testing.assert_array_equal(Vs[2], 0.0)
    np.testing.assert_allclose(Vs[1], [1.0, 2.0])  # per-state max, not the max over all
    np.testing.assert_allclose(Vs[0], [2.0, 4.0])


def test_value_iteration_is_optimal_against_every_deterministic_policy():
    # state 0: stay for 0.5 or move for 0 to the absorbing state 1 that pays 0.56; the move wins
    # by a margin that value iteration only resolves close to convergence
    P = np.zeros((2, 2, 2))
    P[0, 0, 0] = P[0, 1, 1] = P[1, :, 1] = 1.0
    R = np.array([[0.5, 0.0], [0.56, 0.56]])
    mdp = M.TabularMDP(P=P, R=R, rho0=[1.0, 0.0], gamma=0.9)
    V, Q = M.value_iteration(mdp)
    np.testing.assert_allclose(V, [0.9 * 5.6, 5.6], atol=1e-12)
    rng = np.random.default_rng(0)
    for _ in range(3):
        mdp = M.random_mdp(4, 3, rng, gamma=0.99)
        V, _ = M.value_iteration(mdp)
        values = [M.evaluate(mdp, np.eye(3)[np.array(a)])[0] for a in np.ndindex(3, 3, 3, 3)]
        best = np.max(values, axis=0)  # V* dominates every policy state by state
        np.testing.assert_allclose(V, best, atol=1e-9)


def test_greedy_on_a_batch_and_integer_q():
    Q = np.array([[[1, 3, 2], [2, 0, 1]], [[5, 4, 6], [0, 9, 1]]])  # [B=2, S=2, A=3] integers
    pi = M.greedy(Q)
    assert pi.dtype == np.float64
    np.testing.assert_array_equal(pi, [[[0, 1, 0], [1, 0, 0]], [[0, 0, 1], [0, 1, 0]]])


def test_batched_occupancy_equals_one_at_a_time():
    rng = np.random.default_rng(5)
    mdp = M.random_mdp(3, 2, rng, gamma=0.7)
    pis = np.stack([M.random_policy(mdp, rng) for _ in range(2)])
    d = M.occupancy(mdp, pis)
    assert d.shape == (2, 3)
    for b in range(2):
        P_pi, _ = M.policy_matrices(mdp, pis[b])
        expected = mdp.rho0 @ np.linalg.inv(np.eye(3) - 0.7 * P_pi)
        np.testing.assert_allclose(d[b], expected, atol=1e-12)


def test_chain_matrices():
    mdp = M.chain()
    assert mdp.S == 5 and mdp.gamma == 0.9 and mdp.horizon is None
    c = M.chain(n=4, slip=0.25, small=0.3)
    expected = np.zeros((4, 2, 4))
    for s in range(4):
        expected[s, 0, max(s - 1, 0)] = 1.0
        expected[s, 1, min(s + 1, 3)] += 0.75
        expected[s, 1, max(s - 1, 0)] += 0.25
    np.testing.assert_allclose(c.P, expected)
    R = np.zeros((4, 2))
    R[0, 0], R[3, 1] = 0.3, 1.0
    np.testing.assert_array_equal(c.R, R)
    np.testing.assert_array_equal(c.rho0, [1, 0, 0, 0])
    np.testing.assert_array_equal(M.chain().R[0], [0.1, 0.0])  # default small
    np.testing.assert_array_equal(M.chain(n=1).P, np.ones((1, 2, 1)))  # both moves stay
    fin = M.chain(n=3, horizon=4)
    assert fin.gamma is None and fin.horizon == 4 and fin.P.shape == (4, 3, 2, 3)


def test_river_swim_matrices():
    mdp = M.river_swim()
    assert mdp.S == 6 and mdp.gamma == 0.95
    r = M.river_swim(n=4)
    expected = np.zeros((4, 2, 4))
    for s in range(4):
        expected[s, 0, max(s - 1, 0)] = 1.0
        expected[s, 1, min(s + 1, 3)] += 0.35
        expected[s, 1, s] += 0.6
        expected[s, 1, max(s - 1, 0)] += 0.05
    np.testing.assert_allclose(r.P, expected, atol=1e-15)
    R = np.zeros((4, 2))
    R[0, 0], R[3, 1] = 0.005, 1.0
    np.testing.assert_array_equal(r.R, R)
    np.testing.assert_array_equal(r.rho0, [1, 0, 0, 0])
    fin = M.river_swim(n=3, horizon=2)
    assert fin.gamma is None and fin.horizon == 2


def test_gridworld_matrices():
    mdp = M.gridworld()
    assert mdp.S == 16 and mdp.gamma == 0.9
    g = M.gridworld(n=3, slip=0.2)
    # state = 3 * row + col; actions up/right/down/left, blocked moves stay
    moves = [(-1, 0), (0, 1), (1, 0), (0, -1)]
    det = np.zeros((9, 4, 9))
    for s in range(9):
        r, c = divmod(s, 3)
        for a, (dr, dc) in enumerate(moves):
            det[s, a, 3 * min(max(r + dr, 0), 2) + min(max(c + dc, 0), 2)] = 1.0
    expected = 0.8 * det + 0.2 * det.mean(axis=1, keepdims=True)
    np.testing.assert_allclose(g.P, expected, atol=1e-15)
    np.testing.assert_allclose(
        g.P[4, 0], 0.85 * np.eye(9)[1] + 0.05 * (np.eye(9)[[5, 7, 3]].sum(0))
    )
    R = np.zeros((9, 4))
    R[8] = 1.0
    np.testing.assert_array_equal(g.R, R)
    np.testing.assert_array_equal(g.rho0, np.eye(9)[0])
    # default slip 0.1: from the centre of the 4x4 grid's (1, 1), "up" lands up w.p. 0.925
    assert M.gridworld().P[5, 0, 1] == pytest.approx(0.9 + 0.1 / 4)
    fin = M.gridworld(n=2, horizon=3)
    assert fin.gamma is None and fin.horizon == 3


def test_combination_lock_structure():
    lock = M.combination_lock(seed=1, distractor=0.3)
    S, H = 6, 6
    assert lock.S == S and lock.A == 2 and lock.horizon == H
    np.testing.assert_array_equal(lock.rho0, np.eye(S)[0])
    P = lock.P[0]
    np.testing.assert_array_equal(P[S - 1, :, S - 1], 1.0)  # dead state absorbs
    correct = []
    for i in range(S - 1):
        nxt = min(i + 1, S - 2)
        good = [a for a in range(2) if P[i, a, nxt] == 1.0]
        assert len(good) == 1  # one action advances, the other falls to the dead state
        correct.append(good[0])
        np.testing.assert_array_equal(P[i, 1 - good[0], S - 1], 1.0)
    R = np.zeros((H, S, 2))
    R[:, S - 1, :] = 0.3
    R[H - 1, S - 2, correct[S - 2]] = 1.0
    np.testing.assert_array_equal(lock.R, R)
    assert correct[S - 3] != correct[S - 2]  # seed 1 tells the last two lock states apart
    # the default seed is 0, fixed: the same lock every call
    np.testing.assert_array_equal(M.combination_lock().P, M.combination_lock(seed=0).P)
    assert not np.array_equal(M.combination_lock(seed=0).P, lock.P)
    assert M.combination_lock().P.shape == (6, 6, 2, 6)
    M.combination_lock(S=2, horizon=3)  # one lock state and the dead state
    with pytest.raises(ValueError, match=r"^S = 1 must be at least 2 \(one lock state"):
        M.combination_lock(S=1)


def test_random_mdp_and_policy_draws():
    mdp = M.random_mdp(3, 2, np.random.default_rng(7))
    rng = np.random.default_rng(7)
    np.testing.assert_array_equal(mdp.P, rng.dirichlet(np.ones(3), size=(3, 2)))
    np.testing.assert_array_equal(mdp.R, rng.random((3, 2)))  # reward_power 1
    sq = M.random_mdp(3, 2, np.random.default_rng(7), reward_power=2.0)
    np.testing.assert_allclose(sq.R, mdp.R**2)
    fin = M.random_mdp(3, 2, np.random.default_rng(7), horizon=2, reward_power=3.0)
    rng = np.random.default_rng(7)
    rng.dirichlet(np.ones(3), size=(2, 3, 2))
    np.testing.assert_allclose(fin.R, rng.random((2, 3, 2)) ** 3)
    pi = M.random_policy(mdp, np.random.default_rng(8))
    np.testing.assert_array_equal(pi, np.random.default_rng(8).dirichlet(np.ones(2), size=(3,)))


class _Uniforms:
    """A generator stub: random(shape) returns the top-left block of a chosen matrix."""

    def __init__(self, u):
        self.u = np.asarray(u, dtype=float)

    def random(self, shape):
        return self.u[: shape[0], : shape[1]].copy()


def test_sampling_is_the_half_open_inverse_cdf():
    P = np.zeros((2, 2, 2))
    P[:, 0] = [0.0, 1.0]  # action 0 -> state 1
    P[:, 1] = [0.5, 0.5 - 1e-9]  # sums to 1 - 1e-9 (inside the tolerance)
    mdp = M.TabularMDP(P=P, R=[[1.0, 2.0], [3.0, 4.0]], rho0=[0.0, 1.0], gamma=0.9)
    pi = np.array([[0.0, 1.0], [0.5, 0.5]])
    # u = 0 never picks a zero-probability entry; u above the rounded-down cdf picks the last
    s, a, r = M.sample_episode(mdp, pi, _Uniforms([[0.0, 0.0], [0.0, 0.0]]), length=1)
    np.testing.assert_array_equal(s, [1, 1])  # rho0 = [0, 1]; P[1, 0] = [0, 1]
    np.testing.assert_array_equal(a, [0])  # pi[1] = [0.5, 0.5] at u = 0
    assert a.dtype == np.int64 and r.tolist() == [3.0]
    s, a, _ = M.sample_episode(mdp, pi, _Uniforms([[0.0, 0.75], [0.9999999995, 0]]), length=1)
    np.testing.assert_array_equal(s, [1, 1])
    np.testing.assert_array_equal(a, [1])  # u = 0.75 in [0.5, 1)
    s, _, _ = M.sample_episode(mdp, pi, _Uniforms([[0.0, 0.5], [0.25, 0]]), length=1)
    np.testing.assert_array_equal(s, [1, 0])  # u exactly at the cdf step 0.5 picks action 1
    # a policy row short of 1 by rounding: u beyond its sum still picks a valid action
    pi_short = np.array([[0.5, 0.5 - 1e-9], [0.5, 0.5 - 1e-9]])
    s, a, _ = M.sample_episode(mdp, pi_short, _Uniforms([[0.0, 0.9999999995], [0.0, 0]]), 1)
    np.testing.assert_array_equal(a, [1])
    np.testing.assert_array_equal(s, [1, 0])


def test_sampling_start_state_last_and_rounded_rho0():
    P = np.full((3, 1, 3), 1 / 3)
    rho0 = np.array([0.25, 0.25, 0.5 - 1e-9])
    mdp = M.TabularMDP(P=P, R=np.zeros((3, 1)), rho0=rho0, gamma=0.5)
    s, _, _ = M.sample_episode(mdp, np.ones((3, 1)), _Uniforms([[0.9999999995, 0.0]]), length=0)
    np.testing.assert_array_equal(s, [2])
    s, _, _ = M.sample_episode(mdp, np.ones((3, 1)), _Uniforms([[0.8, 0.0], [0.9999999, 0]]), 1)
    np.testing.assert_array_equal(s, [2, 2])


def test_sampling_uses_a_fresh_uniform_for_every_draw():
    # all rows uniform over 2 states and 2 actions: s0, a0, s1, s2 must be independent
    mdp = M.TabularMDP(np.full((2, 2, 2), 0.5), np.zeros((2, 2)), np.full(2, 0.5), gamma=0.5)
    pi = np.full((2, 2), 0.5)
    rng = np.random.default_rng(0)
    eps = [M.sample_episode(mdp, pi, rng, length=2) for _ in range(800)]
    s = np.array([e[0] for e in eps])
    a = np.array([e[1] for e in eps])
    for x, y in [(s[:, 0], a[:, 0]), (s[:, 0], s[:, 1]), (s[:, 0], s[:, 2]), (a[:, 1], s[:, 2])]:
        assert 0.4 < np.mean(x == y) < 0.6


def test_sampling_errors_and_episodic_indexing():
    mdp = _mdp()
    with pytest.raises(ValueError, match=r"^length is required for a discounted MDP$"):
        M.sample_episode(mdp, np.full((2, 2), 0.5), np.random.default_rng(0))
    # finite horizon: step-dependent policy and reward are read at step t
    P = np.zeros((2, 2, 2, 2))
    P[..., 0] = 1.0
    R = np.array([[[1.0, 2.0], [0, 0]], [[3.0, 4.0], [0, 0]]])
    fin = M.TabularMDP(P=P, R=R, rho0=[1.0, 0.0], horizon=2)
    pi = np.array([[[1.0, 0.0], [1.0, 0.0]], [[0.0, 1.0], [1.0, 0.0]]])
    s, a, r = M.sample_episode(fin, pi, np.random.default_rng(0))
    np.testing.assert_array_equal(a, [0, 1])
    np.testing.assert_array_equal(r, [1.0, 4.0])
    np.testing.assert_array_equal(s, [0, 0, 0])
