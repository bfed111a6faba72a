"""controlrl.stats: sample SD, intervals only from >= 5 seeds, paired tests, detectable effects,
and IQM / stratified bootstrap pinned to rliable's definitions on fixed numbers."""

import numpy as np
import pytest
from scipy import stats as sps

from controlrl import stats

# a fixed [runs, tasks] score matrix for the rliable pins
SCORES = np.array(
    [[0.1, 0.5, 0.9], [0.2, 0.4, 0.8], [0.3, 0.35, 0.95], [0.05, 0.6, 0.7], [0.25, 0.45, 0.85]]
)


def test_sample_sd_is_ddof_one():
    assert stats.sample_sd([1.0, 2.0, 3.0, 4.0]) == pytest.approx(np.sqrt(5 / 3), rel=1e-15)
    assert np.isnan(stats.sample_sd([3.0]))


def test_no_interval_from_fewer_than_five_seeds():
    with pytest.raises(ValueError, match=">= 5 seeds"):
        stats.bootstrap_ci(np.ones((4, 2)))
    mean, lo, hi, kind = stats.band(np.array([[1.0], [4.0], [2.0]]))
    assert kind == "range" and (lo[0], mean[0], hi[0]) == (1.0, 7 / 3, 4.0)
    few = stats.summarize([1.0, 2.0, 3.0])
    assert (few.kind, few.lo, few.hi, few.sd) == ("range", 1.0, 3.0, 1.0)
    assert "range 1 to 3" in few.text() and "sample SD" in few.text()
    five = stats.summarize([1.0, 2.0, 3.0, 4.0, 5.0])
    assert five.kind == "95% CI" and 1.0 < five.lo < 3.0 < five.hi < 5.0


def test_bootstrap_interval_matches_the_normal_interval_for_many_seeds():
    rng = np.random.default_rng(0)
    data = rng.normal(0, 1, size=(400, 3))
    mean, lo, hi = stats.bootstrap_ci(data)
    np.testing.assert_allclose(mean, data.mean(0))
    half = 1.96 * data.std(0, ddof=1) / np.sqrt(400)
    np.testing.assert_allclose(hi - lo, 2 * half, rtol=0.12)


def test_sign_flip_p_exact_enumeration():
    # diffs 1, 2, 3: |mean| over the 8 sign patterns is 2, 4/3, 2/3, 0, 0, 2/3, 4/3, 2
    assert stats.sign_flip_p([1.0, 2.0, 3.0]) == 0.25
    assert stats.sign_flip_p([1.0] * 5) == 2 / 32
    assert stats.sign_flip_p([0.0, 0.0]) == 1.0


def test_paired_uses_per_seed_differences():
    a = np.array([10.0, 20.0, 30.0, 40.0, 50.0, 60.0])
    b = a - np.array([1.0, 2.0, 1.0, 2.0, 1.0, 2.0])  # a large shift between seeds, small pairs
    result = stats.paired(a, b)
    assert result.diff.mean == pytest.approx(1.5)
    assert result.diff.sd == pytest.approx(stats.sample_sd([1, 2, 1, 2, 1, 2]))
    assert result.p == 2 / 64  # every difference positive
    with pytest.raises(ValueError, match="same seeds"):
        stats.paired([1.0, 2.0], [1.0])


def test_detectable_paired_effect_has_the_stated_power():
    n, sd = 10, 1.0
    delta = stats.detectable_paired(sd, n)
    # simulate the paired t-test at that true difference: it rejects 80% of the time
    rng = np.random.default_rng(1)
    d = rng.normal(delta, sd, size=(40000, n))
    t = d.mean(1) / (d.std(1, ddof=1) / np.sqrt(n))
    rejected = np.abs(t) > sps.t.ppf(0.975, n - 1)
    assert rejected.mean() == pytest.approx(0.8, abs=0.01)
    assert stats.detectable_paired(sd, 40) < delta  # more seeds detect smaller effects
    assert stats.detectable_paired(0.0, 5) == 0.0


def test_detectable_two_sample_effect_has_the_stated_power():
    n, sd = 20, 2.0
    delta = stats.detectable_two_sample(sd, n, sd, n)
    rng = np.random.default_rng(2)
    a = rng.normal(delta, sd, size=(20000, n))
    b = rng.normal(0.0, sd, size=(20000, n))
    welch = sps.ttest_ind(a, b, axis=1, equal_var=False)
    assert np.mean(welch.pvalue < 0.05) == pytest.approx(0.8, abs=0.015)


def test_permutation_p_two_sample():
    # fully separated groups of 5: only the observed split and its mirror are as extreme (2/252)
    assert stats.permutation_p([0.0] * 5, [10.0] * 5) == pytest.approx(2 / 252, abs=0.002)
    assert stats.permutation_p([1.0, 2.0, 3.0], [1.0, 2.0, 3.0]) == 1.0


def test_two_sample_interval_resamples_each_side_and_is_a_range_below_five():
    rng = np.random.default_rng(3)
    a, b = rng.normal(1.0, 1.0, 400), rng.normal(0.0, 2.0, 300)
    t = stats.two_sample(a, b)
    # many seeds: the bootstrap interval is the normal one with the unpooled standard error
    se = np.sqrt(a.var(ddof=1) / a.size + b.var(ddof=1) / b.size)
    assert t.diff == pytest.approx(a.mean() - b.mean())
    assert (t.lo, t.hi) == pytest.approx((t.diff - 1.96 * se, t.diff + 1.96 * se), abs=0.03)
    assert t.kind == "95% CI" and (t.a.n, t.b.n) == (400, 300)
    shifted = stats.two_sample(a + 5.0, b)  # the difference and its interval move with a shift
    assert (shifted.lo, shifted.hi) == pytest.approx((t.lo + 5.0, t.hi + 5.0))
    few = stats.two_sample([1.0, 2.0, 4.0, 5.0, 6.0], [0.0, 3.0, 3.5, 2.0])
    assert (few.lo, few.hi, few.kind) == (1.0 - 3.5, 6.0 - 0.0, "range")
    assert few.text(".2f").startswith("diff 1.48 (range -2.50 to 6.00; n=5 vs 4)")
    with pytest.raises(ValueError, match="both sides"):
        stats.two_sample([], [1.0])


def test_two_sample_sides_are_each_samples_own_summary():
    # a row quoting one side beside the difference shows the interval that sample has everywhere
    a, b = [61.0, 55.2, 70.3, 58.8, 62.1], [45.0, 44.0, 69.4, 43.6, 54.9]
    t = stats.two_sample(a, b)
    assert t.a == stats.summarize(a) and t.b == stats.summarize(b)
    assert stats.two_sample(b, a).a == t.b


def test_iqm_is_rliables_trimmed_mean():
    # rliable.metrics.aggregate_iqm(scores) = scipy.stats.trim_mean(scores, 0.25, axis=None)
    assert stats.iqm(SCORES) == pytest.approx(0.48333333333333334, abs=1e-15)
    assert stats.iqm(SCORES) == pytest.approx(sps.trim_mean(SCORES, 0.25, axis=None), abs=4e-16)
    assert stats.iqm(np.arange(1, 9)) == 4.5  # middle 50% of 1..8 is 3, 4, 5, 6
    assert stats.iqm(np.array([1.0, 1, 1, 1, 2, 9, 9, 9])) == 3.25  # 1, 1, 2, 9 kept


def test_stratified_bootstrap_pinned_to_rliables_scheme():
    # rliable's StratifiedBootstrap: per task, runs drawn with replacement; percentile interval
    value, lo, hi = stats.stratified_bootstrap_ci(SCORES, stats.iqm, n_boot=200, seed=0)
    idx = stats.stratified_resamples(5, 3, 200, seed=0)
    by_hand = [
        sps.trim_mean(np.stack([SCORES[idx[k, :, t], t] for t in range(3)], 1), 0.25, axis=None)
        for k in range(200)
    ]
    np.testing.assert_allclose((lo, hi), np.percentile(by_hand, [2.5, 97.5]), atol=4e-16)
    assert (value, lo, hi) == pytest.approx((0.48333333, 0.43319444, 0.52791667), abs=1e-8)
    # one task, runs 0,0,0,1,1,1: the resampled mean is k/6 with k ~ Binomial(6, 1/2), whose
    # quartiles are 2 and 4 (P(k <= 1) = 7/64, P(k <= 2) = 22/64, P(k <= 4) = 57/64)
    value, lo, hi = stats.stratified_bootstrap_ci(
        np.array([[0.0]] * 3 + [[1.0]] * 3), np.mean, 4000, 0.5
    )
    assert (value, lo, hi) == pytest.approx((0.5, 1 / 3, 2 / 3))
    with pytest.raises(ValueError, match=">= 5 runs"):
        stats.stratified_bootstrap_ci(SCORES[:4], stats.iqm)


def test_iqm_band_gives_no_interval_below_five_runs():
    value, lo, hi, kind = stats.iqm_band(SCORES[:4])
    assert kind == "no interval" and np.isnan(lo) and np.isnan(hi)
    assert value == stats.iqm(SCORES[:4])
    value, lo, hi, kind = stats.iqm_band(SCORES, n_boot=200)
    assert kind == "95% CI" and (value, lo, hi) == stats.stratified_bootstrap_ci(
        SCORES, stats.iqm, 200
    )


def test_performance_profile():
    prof = stats.performance_profile(np.array([[0.1, 0.9], [0.5, 0.6]]), np.array([0.0, 0.3, 1]))
    np.testing.assert_allclose(prof, [1.0, 0.75, 0.0])


def test_probability_of_improvement_is_rliables_mann_whitney_average():
    # rliable.metrics.probability_of_improvement: per task U / (n m) (ties 1/2), tasks averaged
    x, y = SCORES, SCORES[::-1] * 0.9 + 0.05
    want = np.mean(
        [sps.mannwhitneyu(x[:, t], y[:, t]).statistic / (x.shape[0] * y.shape[0]) for t in range(3)]
    )
    assert stats.probability_of_improvement(x, y) == pytest.approx(want, abs=1e-15)
    assert stats.probability_of_improvement([[1.0], [2.0]], [[1.0], [0.0]]) == 0.875  # 3.5 / 4
    a, b = np.array([[0.0, 1.0]] * 6), np.array([[1.0, 0.0]] * 6)  # task 1 lost, task 2 won
    assert stats.probability_of_improvement(a, b) == 0.5
    p, lo, hi = stats.probability_of_improvement_ci(x, y, n_boot=300)
    ix, iy = stats.stratified_resamples(5, 3, 300, 0), stats.stratified_resamples(5, 3, 300, 1)

    def by_pairs(xs, ys):  # P(X > Y) pair by pair, as rliable counts it
        wins = (xs[:, None] > ys[None]) + 0.5 * (xs[:, None] == ys[None])
        return wins.mean(axis=(0, 1)).mean()

    pairs = [by_pairs(x[ix[k], np.arange(3)], y[iy[k], np.arange(3)]) for k in range(300)]
    np.testing.assert_allclose((lo, hi), np.percentile(pairs, [2.5, 97.5]), atol=1e-15)
    assert p == pytest.approx(want) and lo <= p <= hi and lo < hi
    assert stats.probability_of_improvement_ci(a, a, n_boot=50) == (0.5, 0.5, 0.5)
    with pytest.raises(ValueError, match="same tasks"):
        stats.probability_of_improvement(x, y[:, :2])
