"""controlrl.stats, the verdict protocol's tests: exact and Monte-Carlo sign-flip tests (two-sided,
one-sided, equivalence), the floor of the exact p, the sign-flip test's detectable effect,
Benjamini-Hochberg q-values and the exact two-sample permutation test, each against hand counts or
an independent computation."""

import itertools
import math

import numpy as np
import pytest
from scipy import stats as sps

from controlrl import stats


def binomial_two_sided_p(n: int, plus: int) -> float:
    # diffs of +-1 with `plus` positive: sum(s d) = 2K - n with K ~ Binomial(n, 1/2)
    extreme = [k for k in range(n + 1) if abs(2 * k - n) >= abs(2 * plus - n)]
    return sum(math.comb(n, k) for k in extreme) / 2**n


def test_sign_flip_exact_by_hand_and_as_sign_flip_p():
    # diffs 1, 2, 3: |mean| over the 8 sign patterns is 2, 4/3, 2/3, 0, 0, 2/3, 4/3, 2
    assert stats.sign_flip([1.0, 2.0, 3.0]) == stats.SignFlip(0.25, "exact", 8)
    assert stats.sign_flip([0.0, 0.0]).p == 1.0
    rng = np.random.default_rng(0)
    for n in range(1, 17):  # the enumeration sign_flip_p does, to the last bit
        d = rng.normal(0.4, 1.0, n)
        assert stats.sign_flip(d).p == stats.sign_flip_p(d)
    for bad in ([], [1.0, np.nan]):
        with pytest.raises(ValueError, match="finite differences"):
            stats.sign_flip(bad)


@pytest.mark.parametrize("n, plus", [(18, 13), (20, 15)])
def test_sign_flip_exact_above_sixteen_counts_every_pattern(n, plus):
    # 2^18 and 2^20 patterns come in blocks; +-1 diffs make the count a binomial tail
    d = np.array([1.0] * plus + [-1.0] * (n - plus))
    assert stats.sign_flip(d) == stats.SignFlip(binomial_two_sided_p(n, plus), "exact", 2**n)


def test_sign_flip_monte_carlo_above_twenty_is_sign_flip_ps():
    d = np.random.default_rng(1).normal(0.1, 1.0, 25)  # p near 0.56, where the draws show
    result = stats.sign_flip(d, n_perm=2000, seed=3)
    assert result == stats.SignFlip(stats.sign_flip_p(d, 2000, 3), "Monte-Carlo", 2000)
    # no random pattern of 21 signs is all +1 or all -1: only the observed signs count
    assert stats.sign_flip(np.ones(21), n_perm=999).p == 1 / 1000


def test_one_sided_sign_flip_by_hand():
    # d - 1.5 = -0.5, 0.5, 1.5: the 8 flipped sums are 1.5, 2.5, 0.5, 1.5, -1.5, -0.5, -2.5, -1.5
    assert stats.one_sided_sign_flip_p([1.0, 2.0, 3.0], shift=1.5) == stats.SignFlip(
        3 / 8, "exact", 8
    )
    assert stats.one_sided_sign_flip_p([1.0, 2.0, 3.0], shift=1.5, greater=False).p == 7 / 8
    assert stats.one_sided_sign_flip_p([1.0, 2.0, 3.0]).p == 1 / 8  # only the observed signs
    assert stats.one_sided_sign_flip_p([1.0, 2.0, 3.0], greater=False).p == 1.0


def test_one_sided_sign_flip_halves_the_two_sided_p():
    d = np.random.default_rng(2).normal(0.5, 1.0, 12)
    up = stats.one_sided_sign_flip_p(d)
    down = stats.one_sided_sign_flip_p(d, greater=False)
    # the patterns split by symmetry: |sum| >= |observed| is sum >= observed or its mirror
    assert stats.sign_flip(d).p == 2 * up.p
    assert up.p + down.p == 1 + 2**-12  # the observed pattern is in both tails
    far = stats.one_sided_sign_flip_p(np.full(30, 2.0) + np.arange(30) / 100, shift=1.0, n_perm=99)
    assert far == stats.SignFlip(1 / 100, "Monte-Carlo", 99)


def test_equivalence_sign_flip_is_the_larger_one_sided_p():
    # margin 2.5: below, d + 2.5 all > 0 (p 1/8); above, 2.5 - d = 1.5, 0.5, -0.5 (p 3/8)
    assert stats.equivalence_sign_flip([1.0, 2.0, 3.0], 2.5) == stats.SignFlip(3 / 8, "exact", 8)
    d = np.random.default_rng(4).normal(0.1, 0.3, 10)
    lower = stats.one_sided_sign_flip_p(d, -0.4).p
    upper = stats.one_sided_sign_flip_p(d, 0.4, greater=False).p
    assert lower != upper
    assert stats.equivalence_sign_flip(d, 0.4).p == max(lower, upper)
    for margin in (0.0, -1.0, math.nan):
        with pytest.raises(ValueError, match="margin"):
            stats.equivalence_sign_flip(d, margin)


def test_min_sign_flip_p_is_what_the_exact_test_gives_at_best():
    for n in range(1, 9):  # every difference of one sign is the most extreme outcome
        assert stats.min_sign_flip_p(n) == stats.sign_flip(np.ones(n)).p
    assert stats.min_sign_flip_p(5) == 0.0625 >= 0.05 > stats.min_sign_flip_p(6)
    assert stats.min_sign_flip_p(0) == 1.0


def exact_test_power(n: int, delta: float, one_sided: bool, n_sims: int, seed: int) -> float:
    # the exact sign-flip test at p < 0.05 on N(delta, 1) samples, enumerated here on its own
    signs = np.array(list(itertools.product((1.0, -1.0), repeat=n)))
    d = np.random.default_rng(seed).normal(delta, 1.0, (n_sims, n))
    flipped, observed = signs @ d.T, d.sum(1)
    if one_sided:
        p = np.mean(flipped >= observed - 1e-9, axis=0)
    else:
        p = np.mean(np.abs(flipped) >= np.abs(observed) - 1e-9, axis=0)
    return float(np.mean(p < 0.05))


@pytest.mark.parametrize("n, one_sided", [(8, False), (12, False), (12, True)])
def test_detectable_sign_flip_effect_has_the_stated_power(n, one_sided):
    # n = 8 comes from the simulation, n = 12 from the noncentral-t approximation
    delta = stats.detectable_sign_flip(1.0, n, one_sided=one_sided)
    assert exact_test_power(n, delta, one_sided, 2000, seed=n) == pytest.approx(0.8, abs=0.035)
    assert stats.detectable_sign_flip(2.5, n, one_sided=one_sided) == pytest.approx(2.5 * delta)


def test_detectable_sign_flip_where_only_one_sign_rejects():
    # 6 pairs two-sided, 5 one-sided: only differences all of one sign reach p < 0.05, so the
    # power is Phi(delta)^6 + Phi(-delta)^6, resp. Phi(delta)^5
    two = stats.detectable_sign_flip(1.0, 6)
    assert sps.norm.cdf(two) ** 6 + sps.norm.cdf(-two) ** 6 == pytest.approx(0.8, abs=0.015)
    one = stats.detectable_sign_flip(1.0, 5, one_sided=True)
    assert one == pytest.approx(sps.norm.ppf(0.8**0.2), rel=0.03)
    assert math.isinf(stats.detectable_sign_flip(1.0, 5))  # 2/32 >= 0.05
    assert math.isinf(stats.detectable_sign_flip(0.0, 4, one_sided=True))  # 1/16 >= 0.05
    assert stats.detectable_sign_flip(0.0, 6) == 0.0
    assert math.isnan(stats.detectable_sign_flip(1.0, 1))
    assert math.isnan(stats.detectable_sign_flip(math.nan, 8))
    assert stats.detectable_sign_flip(1.0, 40) < stats.detectable_sign_flip(1.0, 12) < two


def test_bh_adjust_by_hand():
    # m = 5 known: sorted 0.01, 0.02, 0.021, 0.9, 0.95 -> m p / rank 0.05, 0.05, 0.035, 1.125,
    # 0.95 -> the least at that rank or above: 0.035, 0.035, 0.035, 0.95, 0.95
    q = stats.bh_adjust([0.02, np.nan, 0.01, 0.9, 0.021, 0.95])
    np.testing.assert_allclose(q, [0.035, np.nan, 0.035, 0.95, 0.035, 0.95], rtol=1e-15)
    assert stats.bh_adjust([]).shape == (0,)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        stats.bh_adjust([0.5, 1.5])


def test_bh_adjust_rejects_what_the_step_up_rejects():
    rng = np.random.default_rng(5)
    p = np.concatenate([rng.uniform(0, 0.02, 15), rng.uniform(0, 1, 45)])
    rng.shuffle(p)
    q = stats.bh_adjust(p)
    np.testing.assert_allclose(q, sps.false_discovery_control(p), rtol=1e-12)
    assert np.all((p <= q) & (q <= 1))
    ranked = np.sort(p)
    for alpha in (0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5):
        # step-up: reject the k smallest, k the largest rank with p_(k) <= k alpha / m
        passing = np.nonzero(ranked <= np.arange(1, p.size + 1) * alpha / p.size)[0]
        k = passing[-1] + 1 if passing.size else 0
        rejected = p <= ranked[k - 1] if k else np.zeros(p.size, bool)
        np.testing.assert_array_equal(q <= alpha, rejected)


def brute_force_permutation_p(a, b) -> float:
    pooled = np.concatenate([a, b])
    observed = abs(np.mean(a) - np.mean(b))
    count = total = 0
    for members in itertools.combinations(range(pooled.size), len(a)):
        inside = np.zeros(pooled.size, bool)
        inside[list(members)] = True
        count += abs(pooled[inside].mean() - pooled[~inside].mean()) >= observed - 1e-9
        total += 1
    return count / total


def test_permutation_test_exact_by_hand_and_brute_force():
    # splits of {1,2,3,4} into pairs: |mean differences| 2, 1, 0, 0, 1, 2 -> 2 of 6 as extreme
    assert stats.permutation_test([1.0, 2.0], [3.0, 4.0]) == stats.SignFlip(1 / 3, "exact", 6)
    # one value against three: |x - mean(rest)| is 2, 2/3, 2/3, 2 for x = 0, 1, 2, 3
    assert stats.permutation_test([0.0], [1.0, 2.0, 3.0]).p == 0.5
    assert stats.permutation_test([1.0, 2.0, 3.0], [0.0]).p == 0.5
    rng = np.random.default_rng(6)
    a, b = rng.normal(0.0, 1.0, 4), rng.normal(1.5, 1.0, 7)
    assert stats.permutation_test(a, b).p == pytest.approx(brute_force_permutation_p(a, b))
    a, b = rng.normal(0.0, 1.0, 6), rng.normal(1.5, 1.0, 6) + 1e4
    scipy_p = sps.permutation_test(
        (a, b), lambda x, y: np.mean(x) - np.mean(y), n_resamples=np.inf
    ).pvalue  # equal sizes: the null is symmetric, so scipy's 2 min(tails) is P(|T| >= |t|)
    assert stats.permutation_test(a, b).p == pytest.approx(scipy_p, abs=1e-12)
    # 3 vs 3 fully separated: the observed split and its mirror, 2 of 20, even where the sums
    # of values near 1e7 round (centred, the mirror's difference ties the observed one)
    offset = 1e7 + 0.1
    assert stats.permutation_test(np.arange(3.0) + offset, np.arange(3.0, 6.0) + offset).p == 0.1
    with pytest.raises(ValueError, match="both sides"):
        stats.permutation_test([], [1.0])


def test_permutation_test_monte_carlo_beyond_the_exact_limit():
    rng = np.random.default_rng(7)
    a, b = rng.normal(0.5, 1.0, 12), rng.normal(0.0, 1.0, 12)  # C(24, 12) = 2.7M splits
    result = stats.permutation_test(a, b, n_perm=500, seed=2)
    assert result == stats.SignFlip(stats.permutation_p(a, b, 500, 2), "Monte-Carlo", 500)
    # C(200000, 1) splits is the limit and still enumerated; one more is sampled
    assert stats.permutation_test([0.0], np.arange(199_999.0), n_perm=5).method == "exact"
    assert stats.permutation_test([0.0], np.arange(200_000.0), n_perm=5).method == "Monte-Carlo"
