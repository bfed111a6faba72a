"""theory/group_po.py's statements, exactly (each function there cites the paper it checks).

KL optimum: the KL-regularised optimum vs SLSQP on the simplex; JitRL's additive logits; A*-PO's
    estimate biased downward, shrinking like its delta-method asymptote.
GRPO's success dynamics (Mroueh 2025): exact iterates (mean / mean+std, KL to previous and
    reference) vs scipy per iterate on a 12-armed categorical; the fixed points of the
    probability-of-success recurrence (0.409, 0.524, none at beta2 0.5); beta1 sets the speed
    only; the existence threshold (beta2* ~ 1.200 at p_ref 0.361).
Zero-variance groups: p^G + (1-p)^G by enumeration and Monte Carlo; zero advantages.
Rollout allocation: marginal gains non-increasing from G = 1 (not from 0: a finding); greedy ==
    brute force.
Group estimators: RLOO and constant baselines unbiased; the including-self mean shrinks by
    (G-1)/G; GRPO's expected gradient is exactly c_G(J) grad J, c_G(J) sqrt(J(1-J)) -> 1 from below.
Optimal baseline: it minimises the variance; equality iff ||g||^2 and R are uncorrelated.
TPO: the logit gradient p - q; fitting reaches q on a sampled set of distinct arms for every
    stable learning rate (with repeated arms, the merged target: a finding); beta(0.1) = 0.73.
Entropy (Cui et al. 2025): the first-order change -Cov(log pi, dz) has an O(eta^2) error.
Guidance (CFGRL): it never lowers the optimality probability: d/dw E[f] = Cov(f, log f) >= 0.
"""

import itertools
import math
import warnings

import numpy as np
import pytest
import torch
from scipy.optimize import minimize, minimize_scalar

from controlrl import group as torch_group
from theory import group_po as gp
from theory import policy_opt as po

# ---------------------------------------------------------------------------------------------
# KL-regularised optimum: closed form, JitRL, A*-PO
# ---------------------------------------------------------------------------------------------


def _simplex_argmax(pi_ref, r, beta):
    """argmax of E_pi[r] - beta KL(pi || pi_ref) by SLSQP directly on the simplex."""
    K = len(r)

    def objective(x):
        return po.kl_regularized_objective(x, pi_ref, r, beta)

    cons = ({"type": "eq", "fun": lambda x: x.sum() - 1.0},)
    res = minimize(
        lambda x: -objective(x),
        pi_ref,
        method="SLSQP",
        bounds=[(1e-12, 1.0)] * K,
        constraints=cons,
        options={"ftol": 1e-15, "maxiter": 500},
    )
    return res.x


def test_kl_optimum_matches_simplex_optimisation_and_jitrl():
    rng = np.random.default_rng(0)
    for beta in (0.1, 0.5, 2.0):
        pi_ref, r = rng.dirichlet(np.ones(6)), rng.normal(size=6)
        pi_star, v_star = po.kl_regularized_optimum(pi_ref, r, beta)
        num = _simplex_argmax(pi_ref, r, beta)
        np.testing.assert_allclose(num, pi_star, atol=1e-5)
        assert v_star == pytest.approx(beta * np.log(pi_ref @ np.exp(r / beta)), abs=1e-12)
        # JitRL: logits_ref + A / beta with A = Q - V_ref (any shift of A cancels)
        adv = r - pi_ref @ r
        np.testing.assert_allclose(gp.jitrl_policy(np.log(pi_ref), adv, beta), pi_star, atol=1e-14)
        np.testing.assert_allclose(
            gp.jitrl_policy(np.log(pi_ref) + 3.0, r, beta), pi_star, atol=1e-14
        )
    # not a tautology: the unregularised argmax differs from pi*
    assert np.max(np.abs(pi_star - np.eye(6)[np.argmax(r)])) > 0.05


def test_astarpo_estimate_is_biased_down_and_converges():
    pi_ref, r, beta = np.array([0.5, 0.3, 0.2]), np.array([1.0, 0.0, 0.5]), 0.5
    _, v_star = po.kl_regularized_optimum(pi_ref, r, beta)
    ns = [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64]
    bias = np.array([gp.astarpo_expected_estimate(pi_ref, r, beta, n) - v_star for n in ns])
    assert bias[0] == pytest.approx(pi_ref @ r - v_star, abs=1e-12)  # N = 1: E_ref[r]
    assert np.all(bias < 0) and np.all(np.diff(bias) > 0)  # Jensen: below, shrinking
    asym = np.array([gp.astarpo_bias_asymptote(pi_ref, r, beta, n) for n in ns])
    rel = np.abs(bias / asym - 1)
    assert rel[-1] < 0.015 and np.all(np.diff(rel) < 0)  # O(1/N) with the delta-method constant
    # the enumeration against sampling: 40k estimates at N = 4 (4 standard errors)
    rng = np.random.default_rng(1)
    draws = r[rng.choice(3, size=(40_000, 4), p=pi_ref)]
    est = gp.astarpo_value_estimate(draws, beta)
    exact = gp.astarpo_expected_estimate(pi_ref, r, beta, 4)
    assert abs(est.mean() - exact) < 4 * est.std() / math.sqrt(len(est))


# ---------------------------------------------------------------------------------------------
# GRPO's probability-of-success dynamics
# ---------------------------------------------------------------------------------------------


def _bandit(p_ref=0.361, K=12, seed=2):
    """A K-armed categorical reference with binary rewards and success probability p_ref."""
    rng = np.random.default_rng(seed)
    r = np.zeros(K)
    r[rng.choice(K, 5, replace=False)] = 1.0
    w = rng.dirichlet(np.ones(K))
    pi_ref = np.where(r == 1, p_ref * w / w[r == 1].sum(), (1 - p_ref) * w / w[r == 0].sum())
    return pi_ref, r


@pytest.mark.parametrize("scale", gp.SCALES)
@pytest.mark.parametrize("beta1, beta2", [(1.0, 10.0), (0.5, 3.0), (2.0, 0.5), (0.0, 3.0)])
def test_grpo_iterates_match_numerical_maximisation(scale, beta1, beta2):
    pi_ref, r = _bandit()
    pos = gp.grpo_pos_recurrence(0.361, beta1, beta2, scale, 6)
    pi = pi_ref
    for n in range(1, 7):

        def neg(z, prev=pi):
            return -gp.grpo_iterate_objective(po.softmax(z), prev, pi_ref, r, beta1, beta2, scale)

        res = minimize(neg, np.log(pi), method="BFGS", options={"gtol": 1e-11})
        closed = gp.grpo_iterate(pi, pi_ref, r, beta1, beta2, scale)
        np.testing.assert_allclose(po.softmax(res.x), closed, atol=2e-6)
        assert closed @ r == pytest.approx(pos[n], abs=1e-12)
        # pi_n = pi_ref exp(c_n r) / Z: the log-ratio to pi_ref is constant on each reward level
        log_ratio = np.log(closed / pi_ref)
        assert np.ptp(log_ratio[r == 1]) < 1e-12 and np.ptp(log_ratio[r == 0]) < 1e-12
        pi = closed
    assert pos[-1] > 0.361 + 0.02


def test_grpo_fixed_points_of_the_recurrence():
    # mean + std, p_ref 0.361: beta2 10 -> 0.409, beta2 3 -> 0.524, beta2 0.5 -> none (PoS -> 1)
    (p10, _), (p3, _) = (gp.grpo_pos_fixed_points(0.361, b, "mean_std") for b in (10.0, 3.0))
    assert round(p10, 3) == 0.409 and round(p3, 3) == 0.524
    assert gp.grpo_pos_fixed_points(0.361, 0.5, "mean_std") == []
    for beta2, p_star in ((10.0, p10), (3.0, p3)):
        for beta1 in (0.0, 1.0, 5.0):  # beta1 changes the speed, not the limit
            assert gp.grpo_pos_recurrence(0.361, beta1, beta2, "mean_std", 400)[-1] == (
                pytest.approx(p_star, abs=1e-10)
            )
    steps = [
        np.argmax(np.abs(gp.grpo_pos_recurrence(0.361, b1, 3.0, "mean_std", 400) - p3) < 1e-6)
        for b1 in (0.0, 1.0, 5.0)
    ]
    assert steps[0] < steps[1] < steps[2]
    assert gp.grpo_pos_recurrence(0.361, 1.0, 0.5, "mean_std", 200)[-1] > 1 - 1e-9
    assert gp.grpo_pos_recurrence(0.361, 1.0, 0.0, "mean_std", 200)[-1] > 1 - 1e-9
    # mean only: logit(p*) = logit(p_ref) + 1 / beta2, always there, always reached
    for beta2 in (0.5, 3.0, 10.0):
        (p_star,) = gp.grpo_pos_fixed_points(0.361, beta2, "mean")
        assert gp.logit(p_star) == pytest.approx(gp.logit(0.361) + 1 / beta2, abs=1e-12)
        assert gp.grpo_pos_recurrence(0.361, 1.0, beta2, "mean", 2000)[-1] == (
            pytest.approx(p_star, abs=1e-10)
        )


def test_fixed_point_exceeds_p_ref_and_its_threshold():
    for p_ref in (0.05, 0.361, 0.5, 0.8):
        for beta2 in (0.3, 1.0, 3.0, 10.0, 30.0):
            for scale in gp.SCALES:
                for p_star in gp.grpo_pos_fixed_points(p_ref, beta2, scale):
                    assert p_star > p_ref
    # below beta2* ~ 1.2002 (p_ref 0.361) no fixed point: the PoS runs to 1; above, it stops
    b_star = gp.grpo_fixed_point_threshold(0.361)
    assert b_star == pytest.approx(1.2002, abs=1e-4)
    assert gp.grpo_pos_fixed_points(0.361, 0.99 * b_star, "mean_std") == []
    low, _ = gp.grpo_pos_fixed_points(0.361, 1.05 * b_star, "mean_std")
    assert gp.grpo_pos_recurrence(0.361, 0.0, 1.05 * b_star, "mean_std", 5000)[-1] == (
        pytest.approx(low, abs=1e-9)
    )
    assert gp.grpo_pos_recurrence(0.361, 0.0, 0.95 * b_star, "mean_std", 5000)[-1] > 1 - 1e-9


# ---------------------------------------------------------------------------------------------
# Zero-variance groups
# ---------------------------------------------------------------------------------------------


def test_numpy_twin_equals_controlrl_group():
    rng = np.random.default_rng(3)
    rewards = np.concatenate([rng.normal(size=(40, 5)), (rng.random((40, 5)) < 0.3) * 1.0])
    rewards[:3] = 0.7  # flat groups whose float mean is not exactly 0.7
    for scale in gp.SCALES:
        want = torch_group.group_advantages(torch.from_numpy(rewards), scale, 1e-4).numpy()
        np.testing.assert_allclose(gp.group_advantages(rewards, scale, 1e-4), want, atol=1e-13)


@pytest.mark.parametrize("G", [2, 3, 5, 8])
def test_zero_variance_groups_by_enumeration(G):
    outcomes = np.array(list(itertools.product([0.0, 1.0], repeat=G)))  # all 2^G groups
    adv = gp.group_advantages(outcomes)
    flat = np.all(outcomes == outcomes[:, :1], axis=1)
    assert np.all(adv[flat] == 0.0) and np.all(np.abs(adv[~flat]).min(axis=1) > 0)
    for p in (0.05, 0.361, 0.5, 0.9):
        prob = np.prod(np.where(outcomes == 1, p, 1 - p), axis=1)
        assert prob[flat].sum() == pytest.approx(gp.zero_variance_probability(p, G), abs=1e-14)
    # and the gradient of those groups, for every arm they pulled, is exactly zero
    pi, mu = np.array([0.5, 0.3, 0.2]), np.array([0.7, 0.2, 0.4])
    counts, _, arms, rewards = gp.group_outcomes(pi, mu, G)
    grads = gp.group_gradient(pi, counts, arms, rewards, "mean_std", eps=1e-4)
    succ = counts @ rewards
    assert np.all(grads[(succ == 0) | (succ == G)] == 0.0)


def test_zero_variance_frequency_by_monte_carlo():
    rng = np.random.default_rng(4)
    for p, G in ((0.2, 8), (0.05, 16), (0.6, 4)):
        groups = torch.from_numpy((rng.random((50_000, G)) < p).astype(np.float64))
        freq = torch_group.zero_variance_fraction(groups)
        exact = gp.zero_variance_probability(p, G)
        assert abs(freq - exact) < 4 * math.sqrt(exact * (1 - exact) / 50_000)


# ---------------------------------------------------------------------------------------------
# Rollout allocation
# ---------------------------------------------------------------------------------------------


def test_marginal_gains_non_increasing_from_one():
    p = np.linspace(0.01, 0.99, 99)[:, None]
    G = np.arange(1, 60)[None, :]
    gains = gp.marginal_gain(p, G)
    np.testing.assert_allclose(gains, p**G * (1 - p) + (1 - p) ** G * p, atol=1e-15)
    assert np.all(np.diff(gains, axis=1) <= 1e-15)
    # finding: from G = 0 the gains are not concave; the first pull alone is worth nothing
    assert np.all(gp.marginal_gain(p, 0) == 0) and np.all(gp.marginal_gain(p, 1) > 0)


def test_greedy_allocation_equals_brute_force():
    rng = np.random.default_rng(5)
    for _ in range(150):
        k = int(rng.integers(2, 5))
        ps, w = rng.uniform(0.01, 0.99, k), rng.uniform(0.1, 2.0, k)
        budget = int(rng.integers(k, 4 * k + 3))
        greedy = gp.greedy_allocation(ps, w, budget, minimum=1)
        assert greedy.sum() == budget and greedy.min() >= 1
        _, best = gp.best_allocation(ps, w, budget, minimum=1)
        assert gp.allocation_value(ps, w, greedy) == pytest.approx(best, abs=1e-12)
    # from zero the greedy piles onto the first context (gain 0 ties): not optimal
    ps, w = np.array([0.5, 0.5]), np.ones(2)
    greedy = gp.greedy_allocation(ps, w, 4, minimum=0)
    alloc, best = gp.best_allocation(ps, w, 4, minimum=0)
    assert greedy.tolist() == [4, 0] and alloc.tolist() == [2, 2]
    assert gp.allocation_value(ps, w, greedy) < best - 0.1


# ---------------------------------------------------------------------------------------------
# Group estimators' bias and variance, the optimal baseline
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("G", [2, 3, 5, 8])
def test_group_estimators_bias_and_variance(G):
    pi, mu = np.array([0.45, 0.3, 0.15, 0.1]), np.array([0.7, 0.2, 0.4, 0.9])
    counts, prob, arms, rewards = gp.group_outcomes(pi, mu, G)
    assert prob.sum() == pytest.approx(1.0, abs=1e-12)
    true = gp.true_gradient(pi, mu)

    def moments(estimator, **kw):
        return gp.exact_moments(prob, gp.group_gradient(pi, counts, arms, rewards, estimator, **kw))

    for b in (0.0, 0.3):
        mean, var = moments("constant", baseline=b)
        np.testing.assert_allclose(mean, true, atol=1e-14)
        assert var == pytest.approx(gp.single_sample_variance(pi, mu, b) / G, rel=1e-10)
    rloo_mean, rloo_var = moments("rloo")
    np.testing.assert_allclose(rloo_mean, true, atol=1e-14)
    self_mean, self_var = moments("mean")
    np.testing.assert_allclose(self_mean, (G - 1) / G * true, atol=1e-14)
    assert self_var == pytest.approx(((G - 1) / G) ** 2 * rloo_var, rel=1e-10)
    # GRPO (std-normalised): exactly a multiple c_G(J) of the true gradient
    J = pi @ mu
    grpo_mean, _ = moments("mean_std", eps=1e-4)
    np.testing.assert_allclose(grpo_mean, gp.grpo_gradient_scale(J, G, 1e-4) * true, atol=1e-14)


@pytest.mark.parametrize("G", [2, 3, 4])
def test_counts_enumeration_equals_enumerating_every_sequence(G):
    """The counts shortcut against all (2K)^G ordered groups, each scored sample by sample with
    the numpy twin of controlrl.group (an independent path to the same moments)."""
    pi, mu = np.array([0.5, 0.3, 0.2]), np.array([0.7, 0.2, 0.4])
    counts, prob, arms, rewards = gp.group_outcomes(pi, mu, G)
    seqs = np.array(list(itertools.product(range(6), repeat=G)))  # outcome 2a + r per sample
    seq_arms, seq_r = seqs // 2, (seqs % 2).astype(float)
    seq_prob = np.prod(np.where(seq_r == 1, mu[seq_arms], 1 - mu[seq_arms]) * pi[seq_arms], 1)
    score = np.eye(3)[seq_arms] - pi  # [M, G, K]
    for scale in gp.SCALES:
        adv = gp.group_advantages(seq_r, scale, eps=0.0)
        seq_grads = np.einsum("mg,mgk->mk", adv, score) / G
        want_mean, want_var = gp.exact_moments(seq_prob, seq_grads)
        got_mean, got_var = gp.exact_moments(
            prob, gp.group_gradient(pi, counts, arms, rewards, scale)
        )
        np.testing.assert_allclose(got_mean, want_mean, atol=1e-14)
        assert got_var == pytest.approx(want_var, rel=1e-12)


def test_grpo_scale_approaches_one_over_sigma_from_below():
    for J in (0.05, 0.361, 0.7):
        scaled = [gp.grpo_gradient_scale(J, G) * math.sqrt(J * (1 - J)) for G in (2, 8, 32, 512)]
        assert np.all(np.diff(scaled) > 0) and scaled[-1] < 1 and scaled[-1] > 0.99


def test_optimal_baseline_minimises_variance():
    rng = np.random.default_rng(6)
    for _ in range(20):
        pi, mu = rng.dirichlet(np.ones(5)), rng.random(5)
        b_star = gp.optimal_baseline(pi, mu)
        res = minimize_scalar(lambda b, pi=pi, mu=mu: gp.single_sample_variance(pi, mu, b))
        assert res.x == pytest.approx(b_star, abs=1e-6)
        assert gp.single_sample_variance(pi, mu, b_star) <= gp.single_sample_variance(
            pi, mu, pi @ mu
        )
    # equality iff ||grad log pi||^2 is uncorrelated with R: uniform pi makes it constant
    pi, mu = np.full(5, 0.2), rng.random(5)
    assert gp.optimal_baseline(pi, mu) == pytest.approx(pi @ mu, abs=1e-15)
    pi = np.array([0.6, 0.1, 0.1, 0.1, 0.1])  # ||g||^2 small on arm 0, which pays most
    mu = np.array([0.9, 0.1, 0.1, 0.1, 0.1])
    gap = gp.single_sample_variance(pi, mu, pi @ mu) - gp.single_sample_variance(
        pi, mu, gp.optimal_baseline(pi, mu)
    )
    assert gap > 1e-3
    # the single-sample formula against the G = 1 enumeration
    counts, prob, arms, rewards = gp.group_outcomes(pi, mu, 1)
    grads = gp.group_gradient(pi, counts, arms, rewards, "constant", baseline=0.4)
    assert gp.exact_moments(prob, grads)[1] == pytest.approx(
        gp.single_sample_variance(pi, mu, 0.4), rel=1e-12
    )


# ---------------------------------------------------------------------------------------------
# TPO's cross-entropy fit
# ---------------------------------------------------------------------------------------------


def test_tpo_logit_gradient_is_p_minus_q():
    rng = np.random.default_rng(7)
    for _ in range(10):
        logits, u = rng.normal(size=8), rng.normal(size=8)
        q = po.tpo_target(po.softmax(rng.normal(size=8)), u, 1.0)
        l_t = torch.tensor(logits, requires_grad=True)
        loss = -(torch.from_numpy(q) * torch.log_softmax(l_t, -1)).sum()
        loss.backward()
        np.testing.assert_allclose(gp.tpo_logit_gradient(logits, q), l_t.grad.numpy(), atol=1e-14)
        assert loss.item() == pytest.approx(gp.tpo_cross_entropy(logits, q), abs=1e-12)
        np.testing.assert_allclose(gp.tpo_logit_gradient(np.log(q) + 2.0, q), 0.0, atol=1e-15)


def test_tpo_fit_reaches_the_target_whatever_the_learning_rate():
    rng = np.random.default_rng(8)
    logits = 0.5 * rng.normal(size=10)
    sampled = np.array([1, 4, 7, 8])
    p_old = po.softmax(logits[sampled])
    q = po.tpo_target(p_old, po.standardize(np.array([1.0, 0.0, 0.0, 1.0])), 1.0)
    for lr in (0.05, 0.5, 2.0):
        z = gp.tpo_fit(logits, sampled, q, lr, int(1000 / lr))
        np.testing.assert_allclose(po.softmax(z[sampled]), q, atol=1e-10)
        rest = np.setdiff1d(np.arange(10), sampled)
        assert np.array_equal(z[rest], logits[rest])  # unsampled arms are never touched
    # finding: with a repeated arm the target is not reachable on group indices; the fit
    # reaches the merged target, mass (q_i + q_j) / 2 on each copy
    sampled = np.array([1, 4, 4, 8])
    q = np.array([0.1, 0.5, 0.1, 0.3])
    z = gp.tpo_fit(logits, sampled, q, 1.0, 4000)
    np.testing.assert_allclose(po.softmax(z[sampled]), [0.1, 0.3, 0.3, 0.3], atol=1e-10)


def test_population_updates_on_a_one_hot_bandit():
    # K = 10, score = one-hot of the correct arm y, standardised over the action set
    K, y = 10, 3
    for p in (0.1, 0.3, 0.7):
        pi = np.full(K, (1 - p) / (K - 1))
        pi[y] = p
        q = po.tpo_target(pi, po.standardize(np.eye(K)[y]), 1.0)
        beta = gp.tpo_onehot_coefficient(p, K)
        np.testing.assert_allclose(q - pi, beta * (np.eye(K)[y] - pi), atol=1e-15)
        # GRPO's population update E[(r - p) / sigma * (e_a - pi)] = sqrt(p / (1 - p)) (e_y - pi)
        r = np.eye(K)[y]
        grpo = np.sum(
            pi[:, None] * ((r - p) / math.sqrt(p * (1 - p)))[:, None] * (np.eye(K) - pi), 0
        )
        np.testing.assert_allclose(grpo, math.sqrt(p / (1 - p)) * (r - pi), atol=1e-15)
    assert round(gp.tpo_onehot_coefficient(0.1, 10), 2) == 0.73  # vs 0.33 for GRPO
    assert round(math.sqrt(0.1 / 0.9), 2) == 0.33


# ---------------------------------------------------------------------------------------------
# First-order entropy change, classifier-free guidance
# ---------------------------------------------------------------------------------------------


def test_first_order_entropy_change():
    rng = np.random.default_rng(9)
    for _ in range(10):
        z, r = rng.normal(size=7), rng.normal(size=7)
        pi = po.softmax(z)
        adv = r - pi @ r
        for direction in (adv, pi * adv):  # natural PG step, vanilla softmax PG step
            errors = []
            for eta in (0.04, 0.02, 0.01):
                exact = gp.entropy(z + eta * direction) - gp.entropy(z)
                pred = gp.entropy_change_first_order(z, eta * direction)
                assert pred == pytest.approx(
                    -eta * np.sum(pi * np.log(pi) * (direction - pi @ direction)), abs=1e-15
                )
                errors.append(abs(exact - pred))
            slopes = np.log2(np.array(errors[:-1]) / np.array(errors[1:]))
            assert np.all((slopes > 1.8) & (slopes < 2.2))  # O(eta^2)
    # entropy falls when the likely actions have positive advantage
    z = np.array([2.0, 1.0, 0.0, -1.0])
    adv = np.array([1.0, 0.5, -0.5, -1.0])
    assert gp.entropy_change_first_order(z, 0.01 * adv) < 0
    assert gp.entropy(z + 0.01 * adv) < gp.entropy(z)


def test_guidance_never_lowers_the_optimality_probability():
    rng = np.random.default_rng(10)
    for _ in range(20):
        pi_beta, f = rng.dirichlet(np.ones(6)), rng.uniform(0.01, 1.0, 6)
        ws = np.linspace(0.0, 5.0, 51)
        values = np.array([gp.guided_policy(pi_beta, f, w) @ f for w in ws])
        assert np.all(np.diff(values) >= 0)
        for w in (0.0, 1.0, 3.0):
            d = gp.guidance_derivative(pi_beta, f, w)
            fd = (
                gp.guided_policy(pi_beta, f, w + 1e-5) @ f
                - gp.guided_policy(pi_beta, f, w - 1e-5) @ f
            ) / 2e-5
            assert d >= 0 and d == pytest.approx(fd, abs=1e-8)


def test_argument_errors():
    with pytest.raises(ValueError, match=r"^scale = 'std', expected one of"):
        gp.grpo_advantage_weight(0.3, "std")
    with pytest.raises(ValueError, match=r"^scale = 'std', expected one of"):
        gp.group_advantages(np.zeros((2, 3)), "std")
    with pytest.raises(ValueError, match=r"^beta1 = 0.0, beta2 = 0.0: need both >= 0"):
        gp.grpo_iterate(np.full(2, 0.5), np.full(2, 0.5), np.array([0.0, 1.0]), 0.0, 0.0, "mean")
    with pytest.raises(ValueError, match=r"^estimator = 'grpo', expected one of"):
        gp.group_gradient(np.full(2, 0.5), np.ones((1, 4)), np.zeros(4, int), np.zeros(4), "grpo")
    with pytest.raises(ValueError, match=r"^budget = 2 is below minimum x contexts = 3$"):
        gp.greedy_allocation([0.5] * 3, [1.0] * 3, 2)
    with pytest.raises(ValueError, match=r"^scale = 'std', expected one of"):
        gp.grpo_pos_fixed_points(0.3, 1.0, "std")


# ---------------------------------------------------------------------------------------------
# contracts the statements above do not reach: batches, defaults, edges (mutation gaps)
# ---------------------------------------------------------------------------------------------


def test_batched_inputs_are_computed_row_by_row():
    """Functions documented along the last axis give, on a [2, 3, K] batch, each row's own
    value (3-D so that the last axis is not also axis 1)."""
    rng = np.random.default_rng(11)
    logits, other = rng.normal(size=(2, 3, 5)), rng.normal(size=(2, 3, 5))
    q = po.softmax(other)
    rewards = (rng.random((2, 3, 4)) < 0.5) * 1.0
    rewards[0, 0] = 1.0  # a flat group in the batch
    rows = list(itertools.product(range(2), range(3)))
    cases = [
        (gp.entropy, (logits,)),
        (gp.entropy_change_first_order, (logits, other)),
        (gp.tpo_cross_entropy, (logits, q)),
        (lambda r: gp.astarpo_value_estimate(r, 0.5), (rewards,)),
        (gp.group_advantages, (rewards,)),
        (lambda r: gp.group_advantages(r, "mean"), (rewards,)),
    ]
    for fn, args in cases:
        batch = fn(*args)
        for i, j in rows:
            np.testing.assert_allclose(batch[i, j], fn(*(a[i, j] for a in args)), atol=1e-14)
    # one group given alone as a 1-D array, as controlrl.group takes it
    np.testing.assert_allclose(
        gp.group_advantages(rewards[1, 2]), gp.group_advantages(rewards)[1, 2]
    )
    # grpo_iterate_objective on a batch of policies [M, K]
    pi_ref, r = _bandit()
    pis = po.softmax(rng.normal(size=(4, 12)))
    batch = gp.grpo_iterate_objective(pis, pi_ref, pi_ref, r, 1.0, 2.0, "mean_std")
    single = [gp.grpo_iterate_objective(p, pi_ref, pi_ref, r, 1.0, 2.0, "mean_std") for p in pis]
    np.testing.assert_allclose(batch, single, atol=1e-14)


def test_defaults_are_the_documented_ones():
    rng = np.random.default_rng(12)
    rewards = rng.normal(size=(6, 5))
    # the numpy twin's default eps is controlrl.group's
    want = torch_group.group_advantages(torch.from_numpy(rewards)).numpy()
    np.testing.assert_allclose(gp.group_advantages(rewards), want, atol=1e-13)
    # REINFORCE's default baseline is 0: A = r
    pi, mu = np.array([0.5, 0.3, 0.2]), np.array([0.7, 0.2, 0.4])
    counts, _, arms, rew = gp.group_outcomes(pi, mu, 3)
    np.testing.assert_array_equal(
        gp.group_gradient(pi, counts, arms, rew, "constant"),
        gp.group_gradient(pi, counts, arms, rew, "constant", baseline=0.0),
    )
    # best_allocation's default floor is 0: a hopeless context gets nothing
    alloc, value = gp.best_allocation(np.array([0.5, 0.01]), np.ones(2), 2)
    assert alloc.tolist() == [2, 0] and value == pytest.approx(0.5, abs=1e-15)
    assert alloc.dtype.kind == "i"  # allocations are whole numbers of rollouts


def test_group_gradient_of_one_group_is_its_row():
    """counts may hold a single group [1, 2K]: G is read from it, the same row results."""
    pi, mu = np.array([0.5, 0.3, 0.2]), np.array([0.7, 0.2, 0.4])
    counts, _, arms, rewards = gp.group_outcomes(pi, mu, 4)
    full = gp.group_gradient(pi, counts, arms, rewards, "mean_std")
    for m in (0, 7, len(counts) - 1):
        one = gp.group_gradient(pi, counts[m : m + 1], arms, rewards, "mean_std")
        np.testing.assert_allclose(one, full[m : m + 1], atol=1e-15)  # matmul order


def test_edge_inputs_give_no_numpy_warnings():
    """Flat groups with eps 0, zero-probability outcomes, groups of one and a PoS that reaches 1
    are handled (masked or stopped), not left to warn."""
    pi, mu = np.array([0.5, 0.3, 0.2]), np.array([0.0, 1.0, 0.4])  # outcomes of probability 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        counts, prob, arms, rewards = gp.group_outcomes(pi, mu, 3)
        # finding: counts @ log(cell) made every probability NaN here (0 * log 0); now exact
        assert prob.sum() == pytest.approx(1.0, abs=1e-14)
        assert np.all(prob[(counts[:, 1] > 0) | (counts[:, 2] > 0)] == 0.0)  # 0 pays, 1 always
        assert np.all(prob[(counts[:, 1] == 0) & (counts[:, 2] == 0)] > 0)
        grads = gp.group_gradient(pi, counts, arms, rewards, "mean_std", eps=0.0)
        assert np.all(np.isfinite(grads))
        assert np.isfinite(gp.grpo_gradient_scale(0.3, 4, eps=0.0))
        flat = np.zeros((2, 4))
        assert np.all(gp.group_advantages(flat, eps=0.0) == 0.0)
        assert np.all(gp.group_advantages(np.ones((3, 1))) == 0.0)  # G = 1: no baseline
        assert np.isfinite(gp.astarpo_expected_estimate(np.array([0.5, 0.5]), mu[:2], 0.5, 3))
        pos = gp.grpo_pos_recurrence(0.361, 1.0, 0.0, "mean_std", 200)
    # reaching 1, the recurrence pads with exact ones up to steps + 1 values
    assert len(pos) == 201 and pos[-1] == 1.0
    first = int(np.argmax(pos == 1.0))
    assert 0 < first < 200 and np.all(pos[first:] == 1.0) and np.all(pos[:first] < 1.0)


def test_both_fixed_points_solve_the_fixed_point_equation():
    """The lower and the upper root of beta2 (L - L_ref) = 2 cosh(L / 2), also near the
    existence threshold where they are close, and for a p_ref whose threshold is below 1."""
    for p_ref, beta2 in ((0.361, 3.0), (0.361, 10.0), (0.01, None), (0.361, None)):
        if beta2 is None:
            beta2 = 1.05 * gp.grpo_fixed_point_threshold(p_ref)
        low, high = gp.grpo_pos_fixed_points(p_ref, beta2, "mean_std")
        assert p_ref < low < high < 1
        for p in (low, high):
            L = gp.logit(p)
            assert 2 * math.cosh(L / 2) == pytest.approx(beta2 * (L - gp.logit(p_ref)), rel=1e-12)
        assert gp.grpo_pos_recurrence(p_ref, 10.0, beta2, "mean_std", 3000)[-1] == (
            pytest.approx(low, abs=1e-9)
        )
    assert gp.grpo_fixed_point_threshold(0.01) < 0.5  # not bracketed by [1, ...]
    # a huge beta2: the upper root, ~2 ln(L / 2) above l_min = 2 asinh(beta2), is still found
    # (in p it rounds to 1: L ~ 63), the lower one hugs p_ref
    low, high = gp.grpo_pos_fixed_points(0.361, 1e12, "mean_std")
    assert 0.361 < low < 0.361 + 1e-9 and high == 1.0
    for scale in gp.SCALES:  # no KL to the reference: no fixed point
        assert gp.grpo_pos_fixed_points(0.361, 0.0, scale) == []


@pytest.mark.parametrize("beta1, beta2", [(0.2, 0.3), (1.0, 0.0)])
def test_grpo_iterate_with_small_or_no_reference_kl(beta1, beta2):
    """Any beta1, beta2 >= 0 not both 0 (the total below 1; beta2 = 0, mirror descent only)."""
    pi_ref, r = _bandit()
    pi = po.softmax(np.log(pi_ref) + 0.3 * r)

    def neg(z):
        return -gp.grpo_iterate_objective(po.softmax(z), pi, pi_ref, r, beta1, beta2, "mean")

    res = minimize(neg, np.log(pi), method="BFGS", options={"gtol": 1e-11})
    closed = gp.grpo_iterate(pi, pi_ref, r, beta1, beta2, "mean")
    np.testing.assert_allclose(po.softmax(res.x), closed, atol=2e-6)
    # the objective's value: E_pi[A] = 0 and both KLs 0 when pi = pi_prev = pi_ref
    assert gp.grpo_iterate_objective(pi_ref, pi_ref, pi_ref, r, beta1, beta2, "mean") == (
        pytest.approx(0.0, abs=1e-15)
    )


def test_small_beta1_can_overshoot_an_existing_fixed_point():
    """Finding against "the recurrence reaches its fixed point when one exists" (and "beta1 sets
    the speed only"): at p_ref 0.01, beta2 = 1.05 beta2*, the first step from a(p_ref) ~ 10 jumps
    past the upper, unstable fixed point and the PoS runs to 1 for beta1 <= 1; beta1 = 10
    damps the step and reaches the lower one. What holds: convergence from p_ref below the
    lower root needs no overshoot past the upper one."""
    beta2 = 1.05 * gp.grpo_fixed_point_threshold(0.01)
    low, high = gp.grpo_pos_fixed_points(0.01, beta2, "mean_std")
    for beta1 in (0.0, 1.0):
        pos = gp.grpo_pos_recurrence(0.01, beta1, beta2, "mean_std", 3000)
        assert pos[1] > high and pos[-1] == 1.0
    for beta1 in (10.0, 100.0):
        pos = gp.grpo_pos_recurrence(0.01, beta1, beta2, "mean_std", 20000)
        assert np.all(pos < high) and pos[-1] == pytest.approx(low, abs=1e-9)
