"""Exact tabular checks: the performance-difference identity, TRPO's lower bound and its
minorize-maximize monotonicity (Schulman et al. 2015, "Trust Region Policy Optimization"), softmax
NPG rising monotonically to the optimum, PPO's clip gradient table (Schulman et al. 2017), SPO's
argmax r* = 1 + sign(A) eps (Xie et al. 2024), BPO's analytic target (Ao et al. 2026), TPO's
target (Kaddour 2026), the KL-regularised closed form pi* ~ pi_ref exp(r / beta)."""

import numpy as np
import pytest
from scipy.optimize import linprog, minimize, minimize_scalar

from theory import mdp as M
from theory import policy_opt as po


def _setup(seed, S=5, A=3, gamma=0.9):
    rng = np.random.default_rng(seed)
    return rng, M.random_mdp(S, A, rng, gamma=gamma)


def test_performance_difference_identity():
    rng, mdp = _setup(0)
    pi = rng.dirichlet(np.ones(3), size=(200, 5))
    pi_new = rng.dirichlet(np.ones(3), size=(200, 5))
    lhs = M.expected_return(mdp, pi_new) - M.expected_return(mdp, pi)
    adv = M.advantage(mdp, pi)
    rhs = np.sum(M.occupancy(mdp, pi_new) * np.einsum("nsa,nsa->ns", pi_new, adv), -1)
    assert np.max(np.abs(lhs - rhs)) < 1e-10
    assert np.max(np.abs(lhs)) > 0.1  # the identity is not 0 = 0


@pytest.mark.parametrize("divergence", ["kl", "tv2"])
def test_lower_bound_has_no_violations(divergence):
    violations, n_pairs, tightest = 0, 0, np.inf
    for seed, gamma in enumerate([0.5, 0.7, 0.9, 0.95, 0.99]):
        rng, mdp = _setup(10 + seed, gamma=gamma)
        n = 2000
        pi = rng.dirichlet(np.full(3, 0.7), size=(n, 5))
        delta = np.exp(rng.uniform(np.log(1e-3), np.log(5.0), size=(n, 1, 1)))  # near and far
        pi_new = po.softmax(np.log(pi) + delta * rng.normal(size=(n, 5, 3)))
        eta_new = M.expected_return(mdp, pi_new)
        bound = po.trpo_lower_bound(mdp, pi, pi_new, divergence)
        violations += int(np.sum(eta_new < bound - 1e-12))
        n_pairs += n
        tightest = min(tightest, np.min(eta_new - bound))
    assert n_pairs >= 10_000
    assert violations == 0
    assert tightest < 1e-4  # pairs near pi make the bound nearly tight, so it is really tested


def test_surrogate_error_is_second_order():
    rng, mdp = _setup(3)
    pi = rng.dirichlet(np.ones(3), size=5)
    z = rng.normal(size=(5, 3))
    deltas = np.geomspace(1e-3, 1e-1, 12)
    pis = po.softmax(np.log(pi)[None] + deltas[:, None, None] * z[None])
    err = np.abs(M.expected_return(mdp, pis) - po.surrogate(mdp, pi[None], pis))
    slope = np.polyfit(np.log(deltas), np.log(err), 1)[0]
    assert 1.9 < slope < 2.1, slope


def test_minorize_maximize_never_decreases_eta():
    rng, mdp = _setup(4, gamma=0.8)
    pi = rng.dirichlet(np.ones(3), size=5)
    etas = [M.expected_return(mdp, pi)]
    for _ in range(40):
        pi, m = po.mm_step(mdp, pi)
        etas.append(M.expected_return(mdp, pi))
        assert etas[-1] >= m - 1e-12  # eta(pi') >= M(pi') (the bound) ...
    assert np.all(np.diff(etas) >= -1e-12)  # ... and M(pi') >= M(pi) = eta(pi)
    assert etas[-1] > etas[0] + 1e-3


def test_npg_monotone_to_optimum():
    rng, mdp = _setup(5)
    v_star = mdp.rho0 @ M.value_iteration(mdp)[0]
    pi = M.uniform_policy(mdp)
    etas = []
    for _ in range(300):
        etas.append(M.expected_return(mdp, pi))
        pi = po.npg_step(pi, M.advantage(mdp, pi), step=1.0, gamma=0.9)
    assert np.all(np.diff(etas) >= -1e-12)
    assert v_star - etas[-1] < 1e-6 < v_star - etas[0]


def test_softmax_policy_gradient_matches_finite_differences():
    rng, mdp = _setup(6)
    logits = rng.normal(size=(5, 3))
    g = po.softmax_policy_gradient(mdp, logits)
    h, fd = 1e-6, np.zeros_like(logits)
    for idx in np.ndindex(*logits.shape):
        e = np.zeros_like(logits)
        e[idx] = h
        up = M.expected_return(mdp, po.softmax(logits + e))
        fd[idx] = (up - M.expected_return(mdp, po.softmax(logits - e))) / (2 * h)
    np.testing.assert_allclose(g, fd, atol=1e-7)


def test_clip_gradient_table():
    rng = np.random.default_rng(7)
    eps = 0.2
    ratio = rng.uniform(0.3, 1.8, size=5000)
    adv = rng.normal(size=5000)
    ratio = ratio[np.abs(np.abs(ratio - 1) - eps) > 1e-3]  # away from the kinks
    adv = adv[: ratio.size]
    h = 1e-7
    fd = po.ppo_clip_objective(ratio + h, adv, eps) - po.ppo_clip_objective(ratio - h, adv, eps)
    fd /= 2 * h
    grad = po.ppo_clip_grad(ratio, adv, eps)
    np.testing.assert_allclose(grad, fd, atol=1e-6)
    dead = ((adv > 0) & (ratio > 1 + eps)) | ((adv < 0) & (ratio < 1 - eps))
    assert np.all(grad[dead] == 0) and np.all(grad[~dead] == adv[~dead])
    assert np.any((adv > 0) & (ratio < 1 - eps) & (grad != 0))  # not zero on the other side
    tgt = po.ppo_target_ratio(adv, eps)
    np.testing.assert_allclose(
        po.ppo_clip_objective(tgt, adv, eps), po.ppo_clip_objective(tgt + np.sign(adv), adv, eps)
    )


def test_argmax_is_eps_aligned():
    eps = 0.2
    for adv in [-3.0, -0.1, 0.05, 1.0, 7.0]:
        res = minimize_scalar(
            lambda r, adv=adv: -po.spo_objective(r, adv, eps),
            bounds=(-5, 5),
            method="bounded",
            options={"xatol": 1e-12},
        )
        assert abs(res.x - po.spo_target_ratio(np.array(adv), eps)) < 1e-8
        r = np.linspace(0, 2, 7)
        second = np.diff(po.spo_objective(r, adv, eps), 2) / (r[1] - r[0]) ** 2
        np.testing.assert_allclose(second, -abs(adv) / eps, rtol=1e-9)
        assert po.spo_objective(1 + np.sign(adv) * eps, adv, eps) == pytest.approx(
            adv + abs(adv) * eps / 2
        )


def test_bpo_target_is_the_brrl_optimum_on_a_bandit():
    rng = np.random.default_rng(8)
    eps = 0.3
    for _ in range(50):
        A = rng.integers(2, 7)
        pi0 = rng.dirichlet(np.ones(A))
        q = rng.normal(size=A)
        tgt = po.bpo_target(pi0, q, eps)
        lp = linprog(
            -q,
            A_eq=np.ones((1, A)),
            b_eq=[1.0],
            bounds=list(zip((1 - eps) * pi0, (1 + eps) * pi0)),
            method="highs",
        )
        assert tgt @ q == pytest.approx(-lp.fun, abs=1e-12)
        np.testing.assert_allclose(tgt, lp.x, atol=1e-9)  # unique optimum for distinct q
        ratio = tgt / pi0
        assert tgt.sum() == pytest.approx(1.0) and np.all(np.abs(ratio - 1) <= eps + 1e-12)
        # ratios are 1 + eps above the pi0-weighted median of q and 1 - eps below it
        order = np.argsort(-q)
        above = np.cumsum(pi0[order]) <= 0.5
        np.testing.assert_allclose(ratio[order][above], 1 + eps)
        below = (np.cumsum(pi0[order]) - pi0[order]) >= 0.5
        np.testing.assert_allclose(ratio[order][below], 1 - eps)
        w = q - pi0 @ q
        assert po.bpo_loss(tgt, pi0, q, w, eps) == pytest.approx(0.0, abs=1e-12)
        other = rng.dirichlet(np.ones(A))
        assert po.bpo_loss(other, pi0, q, w, eps) > 0


def test_bpo_target_improves_the_mdp_return():
    rng, mdp = _setup(9)
    for _ in range(50):
        pi = rng.dirichlet(np.ones(3), size=5)
        _, Q = M.evaluate(mdp, pi)
        tgt = po.bpo_target(pi, Q, 0.2)
        assert M.expected_return(mdp, tgt) >= M.expected_return(mdp, pi) - 1e-12


def test_kl_regularised_closed_form():
    rng = np.random.default_rng(10)
    beta = 0.5
    pi_ref = rng.dirichlet(np.ones(4))
    r = rng.normal(size=4)
    pi_star, v_star = po.kl_regularized_optimum(pi_ref, r, beta)
    res = minimize(
        lambda z: -po.kl_regularized_objective(po.softmax(z), pi_ref, r, beta),
        np.zeros(4),
        method="BFGS",
        options={"gtol": 1e-10},
    )
    np.testing.assert_allclose(po.softmax(res.x), pi_star, atol=1e-5)
    assert po.kl_regularized_objective(pi_star, pi_ref, r, beta) == pytest.approx(v_star, abs=1e-12)
    assert v_star == pytest.approx(beta * np.log(pi_ref @ np.exp(r / beta)), abs=1e-12)
    # JitRL: additive logit update with the advantage reproduces pi*
    adv = r - pi_ref @ r
    np.testing.assert_allclose(po.softmax(np.log(pi_ref) + adv / beta), pi_star, atol=1e-12)
    # A*-PO's estimate beta log mean exp(r_i / beta) is biased downward, shrinking with N
    biases = []
    for n in [1, 4, 16, 64]:
        a = rng.choice(4, p=pi_ref, size=(20_000, n))
        est = beta * np.log(np.mean(np.exp(r[a] / beta), axis=1))
        biases.append(est.mean() - v_star)
    assert all(b < 0 for b in biases)
    assert all(abs(b1) > abs(b2) for b1, b2 in zip(biases, biases[1:]))


def test_tpo_target_maximises_regularised_objective():
    rng = np.random.default_rng(11)
    p_old = rng.dirichlet(np.ones(6))
    u = po.standardize(rng.normal(size=6))
    eta = 1.0
    q = po.tpo_target(p_old, u, eta)
    best = q @ u - eta * po.kl(q, p_old)
    others = rng.dirichlet(np.ones(6), size=20_000)
    assert np.all(others @ u - eta * po.kl(others, p_old) <= best + 1e-12)
    np.testing.assert_allclose(po.tpo_target(p_old, np.zeros(6), eta), p_old)


# --- BPO's lower bound and its PPO / CEM limits (Ao et al. 2026, "Bounded Ratio Reinforcement
# Learning") ---


def test_asymmetric_target_is_the_lp_optimum():
    rng = np.random.default_rng(40)
    for _ in range(50):
        A = rng.integers(2, 7)
        pi0, q = rng.dirichlet(np.ones(A)), rng.normal(size=A)
        c_low, c_high = rng.uniform(0, 1), rng.uniform(1, 4)
        tgt = po.bounded_ratio_target(pi0, q, c_low, c_high)
        lp = linprog(
            -q,
            A_eq=np.ones((1, A)),
            b_eq=[1.0],
            bounds=list(zip(c_low * pi0, c_high * pi0)),
            method="highs",
        )
        assert tgt @ q == pytest.approx(-lp.fun, abs=1e-12)
        assert tgt.sum() == pytest.approx(1.0, abs=1e-12)
        eps = rng.uniform(0.05, 0.9)
        np.testing.assert_allclose(
            po.bounded_ratio_target(pi0, q, 1 - eps, 1 + eps),
            po.bpo_target(pi0, q, eps),
            atol=1e-15,
        )


def test_cem_limit_is_the_elite_distribution():
    """c_low = 0, c_high = 1/rho: pi0 conditioned on the top-rho mass of Q (CEM's refit target)."""
    rng = np.random.default_rng(41)
    for _ in range(50):
        A = rng.integers(3, 9)
        pi0, q = rng.dirichlet(np.ones(A)), rng.normal(size=A)
        k = rng.integers(1, A)
        elite = np.argsort(-q)[:k]
        rho = pi0[elite].sum()  # an elite fraction that falls on an action boundary
        cem = np.zeros(A)
        cem[elite] = pi0[elite] / rho
        np.testing.assert_allclose(po.bounded_ratio_target(pi0, q, 0.0, 1.0 / rho), cem, atol=1e-12)
        # in between, the boundary action is kept in part: the (1 - rho)-quantile split
        rho_mid = rho + 0.5 * pi0[np.argsort(-q)[k]]
        mid = po.bounded_ratio_target(pi0, q, 0.0, 1.0 / rho_mid)
        assert mid[np.argsort(-q)[k]] == pytest.approx(0.5 * pi0[np.argsort(-q)[k]] / rho_mid)


def test_ppo_loss_is_a_one_sided_bpo_loss():
    """-min(r A, clip(r) A) = |A| max(0, sign(A)(r* - r)) - A r*, r* = 1 + eps sign(A)."""
    rng = np.random.default_rng(42)
    eps = 0.2
    ratio, adv = rng.uniform(0, 2.5, size=10_000), rng.normal(size=10_000)
    ppo_loss = -po.ppo_clip_objective(ratio, adv, eps)
    target = 1 + eps * np.sign(adv)
    np.testing.assert_allclose(
        ppo_loss - po.ppo_hinge_loss(ratio, adv, eps), -adv * target, rtol=0, atol=1e-12
    )
    # where the pi0-mass above the mean V is exactly 1/2, the median threshold is the mean one and
    # BRRL's pi* zeroes the one-sided loss: it minimises PPO's expected loss
    pi0 = np.full(4, 0.25)
    q = np.array([2.0, 0.5, -0.7, -1.8])
    adv_q = q - pi0 @ q
    pi_star = po.bpo_target(pi0, q, eps)
    np.testing.assert_allclose(pi_star / pi0, 1 + eps * np.sign(adv_q), atol=1e-15)
    hinge = pi0 @ po.ppo_hinge_loss(pi_star / pi0, adv_q, eps)
    assert hinge == 0.0
    # ... but not uniquely: PPO's loss is flat past r*, BPO's two-sided loss is zero only at pi*
    others = rng.dirichlet(np.ones(4), size=2000)
    flat = po.ppo_hinge_loss(others / pi0, adv_q, eps) @ pi0 == 0
    assert flat.any()
    assert np.all(others[flat][:, adv_q > 0] >= (1 + eps) * 0.25 - 1e-15)
    assert np.all(po.bpo_loss(others, pi0, q, adv_q, eps) > 0)


def _linear_softmax_fits(mdp, pi0, eps, rng, n_fits=30, d=4):
    """Policies softmax(phi . theta) fit by gradient descent on the exact BPO loss, stopped at a
    random step from a random start (a low-dimensional class: pi* is not representable)."""
    V, Q = M.evaluate(mdp, pi0)
    adv, rho = Q - V[:, None], M.occupancy(mdp, pi0)
    r_star = po.bpo_target(pi0, Q, eps) / pi0
    phi = rng.normal(size=(mdp.S, mdp.A, d))
    theta = rng.normal(size=(n_fits, d))
    stop = rng.integers(0, 300, size=(n_fits, 1))
    for step in range(300):  # all fits at once; each stops at its own step
        pi = po.softmax(np.einsum("sad,nd->nsa", phi, theta))
        g_pi = rho[:, None] * np.abs(adv) * np.sign(pi / pi0 - r_star)  # d L / d pi
        g_logits = pi * (g_pi - np.sum(pi * g_pi, axis=-1, keepdims=True))
        theta -= 0.05 * (step < stop) * np.einsum("nsa,sad->nd", g_logits, phi)
    return list(po.softmax(np.einsum("sad,nd->nsa", phi, theta)))


def test_bpo_lower_bound_holds_for_random_fits():
    """The bound of `bpo_lower_bound` (derived: the paper's statement was not available to us)."""
    rng = np.random.default_rng(43)
    slack, slack_without_penalty, slack_without_loss = [], [], []
    for seed in range(4):
        _, mdp = _setup(50 + seed)
        pi0 = M.random_policy(mdp, rng)
        for eps in [0.1, 0.3]:
            _, Q = M.evaluate(mdp, pi0)
            pi_star = po.bpo_target(pi0, Q, eps)
            deltas = np.geomspace(1e-3, 3.0, 40)[:, None, None]
            near_star = po.softmax(np.log(pi_star) + deltas * rng.normal(size=(40, 5, 3)))
            near_pi0 = po.softmax(np.log(pi0) + deltas * rng.normal(size=(40, 5, 3)))
            fits = _linear_softmax_fits(mdp, pi0, eps, rng)
            for pi in [pi_star, *near_star, *near_pi0, *fits]:
                bound, parts = po.bpo_lower_bound(mdp, pi0, pi, eps)
                eta = M.expected_return(mdp, pi)
                slack.append(eta - bound)
                slack_without_penalty.append(eta - bound - parts["penalty"])
                slack_without_loss.append(eta - bound - parts["loss"])
            assert po.bpo_lower_bound(mdp, pi0, pi_star, eps)[1]["loss"] == 0.0
    assert len(slack) >= 800
    assert min(slack) >= -1e-12  # zero violations
    assert min(slack) < 1e-3  # nearly attained (near pi0, where median and mean splits agree)
    # both terms are needed: without either, the "bound" is violated
    assert min(slack_without_penalty) < 0 and min(slack_without_loss) < 0


@pytest.mark.parametrize("c_low, c_high", [(1.2, 2.0), (0.5, 0.9), (-0.1, 1.5)])
def test_bad_ratio_bounds_are_refused(c_low, c_high):
    with pytest.raises(ValueError, match="need 0 <= c_low <= 1 <= c_high"):
        po.bounded_ratio_target(np.full(3, 1 / 3), np.arange(3.0), c_low, c_high)


def test_bpo_improvement_is_eps_times_the_median_spread():
    """BRRL's Theorem 4.2 form: eta(pi*) - eta(pi0) = eps B >= 0, B the occupancy-weighted
    E_pi0 |Q - median|; B = 0 exactly when no visited state has a nonzero median advantage."""
    rng, mdp = _setup(60)
    for eps in [0.05, 0.2, 0.5]:
        for _ in range(20):
            pi0 = M.random_policy(mdp, rng)
            gain, bound = po.bpo_improvement(mdp, pi0, eps)
            assert gain == pytest.approx(bound, abs=1e-12) and bound > 0
    # Q constant in the action at every state (rewards and transitions ignore the action): B = 0
    flat = M.TabularMDP(
        P=np.repeat(mdp.P[:, :1], 3, axis=1),
        R=np.repeat(mdp.R[:, :1], 3, axis=1),
        rho0=mdp.rho0,
        gamma=mdp.gamma,
    )
    assert po.bpo_improvement(flat, M.random_policy(flat, rng), 0.3) == pytest.approx(
        (0, 0), abs=1e-12
    )
