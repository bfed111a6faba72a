"""Statistics over seeds, the one place figures and the claims ledger take them from.

Conventions (what every table and verdict of the repository states):
- spread is the sample standard deviation (ddof = 1), called "sample SD";
- an interval is computed only from >= 5 seeds (MIN_SEEDS); with fewer, the min-max range is
  reported and called a range;
- seeds that pair (same seed, same data, two methods) are compared per seed: the mean of the
  differences, an exact sign-flip permutation test, and the smallest mean difference the
  experiment could detect (paired t, two-sided alpha 0.05, power 0.8);
- IQM and the stratified bootstrap follow rliable (google-research/rliable, rliable/metrics.py
  `aggregate_iqm` = scipy.stats.trim_mean(x, 0.25) over all runs and tasks; rliable/library.py
  `StratifiedBootstrap`: runs resampled with replacement within each task, percentile interval).
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import optimize
from scipy import stats as sps

MIN_SEEDS = 5
"""Fewest seeds an interval is computed from; below it the range is reported."""


def sample_sd(values) -> float:
    """Sample standard deviation (ddof = 1); nan for fewer than two values."""
    x = np.asarray(values, np.float64).ravel()
    return float(x.std(ddof=1)) if x.size >= 2 else math.nan


def _percentile_interval(stats: np.ndarray, ci: float) -> tuple[np.ndarray, np.ndarray]:
    alpha = (1 - ci) / 2
    lo, hi = np.quantile(stats, [alpha, 1 - alpha], axis=0)
    return lo, hi


def bootstrap_ci(
    samples, n_boot: int = 2000, ci: float = 0.95, seed: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean over axis 0 of [seeds, points] and its percentile bootstrap interval over seeds.

    Refuses fewer than MIN_SEEDS seeds: use `band` where a range is acceptable."""
    samples = np.asarray(samples, np.float64)
    if samples.shape[0] < MIN_SEEDS:
        raise ValueError(f"an interval needs >= {MIN_SEEDS} seeds, got {samples.shape[0]}")
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, samples.shape[0], size=(n_boot, samples.shape[0]))
    lo, hi = _percentile_interval(samples[idx].mean(axis=1), ci)  # [n_boot, points] -> [points]
    return samples.mean(axis=0), lo, hi


def band(samples, n_boot: int = 2000, ci: float = 0.95, seed: int = 0):
    """(mean, lo, hi, kind) over axis 0 of [seeds, points]: the bootstrap interval from
    >= MIN_SEEDS seeds, else the min-max range; kind names which ("95% CI" or "range")."""
    samples = np.asarray(samples, np.float64)
    if samples.shape[0] >= MIN_SEEDS:
        mean, lo, hi = bootstrap_ci(samples, n_boot, ci, seed)
        return mean, lo, hi, f"{ci:.0%} CI"
    return samples.mean(axis=0), samples.min(axis=0), samples.max(axis=0), "range"


@dataclass(frozen=True)
class Summary:
    """A statistic over seeds with its spread and its interval (or range, below MIN_SEEDS)."""

    n: int
    mean: float
    sd: float  # sample SD
    lo: float
    hi: float
    kind: str  # "95% CI" or "range"

    def text(self, fmt: str = ".3g") -> str:
        """'mean (sample SD sd; 95% CI lo to hi; n seeds)' with the interval's kind named."""
        sd = "n/a" if math.isnan(self.sd) else format(self.sd, fmt)
        return (
            f"{self.mean:{fmt}} (sample SD {sd}; {self.kind} {self.lo:{fmt}} to {self.hi:{fmt}};"
            f" n={self.n})"
        )


def summarize(values, n_boot: int = 10000, ci: float = 0.95, seed: int = 0) -> Summary:
    """Mean, sample SD and the percentile-bootstrap interval of the mean (range below 5 seeds)."""
    x = np.asarray(values, np.float64).ravel()
    if x.size == 0:
        raise ValueError("no values to summarize")
    mean, lo, hi, kind = band(x[:, None], n_boot, ci, seed)
    return Summary(int(x.size), float(mean[0]), sample_sd(x), float(lo[0]), float(hi[0]), kind)


def sign_flip_p(diffs, n_perm: int = 20000, seed: int = 0) -> float:
    """Two-sided p of the paired sign-flip permutation test on the mean difference (exact
    enumeration of all 2^n sign patterns up to n = 16, else n_perm random patterns)."""
    d = np.asarray(diffs, np.float64).ravel()
    observed = abs(d.mean())
    if d.size <= 16:  # every pattern once: bit j of k flips the sign of difference j
        signs = 1.0 - 2.0 * (np.arange(2**d.size)[:, None] >> np.arange(d.size) & 1)
    else:
        signs = np.random.default_rng(seed).choice((1.0, -1.0), size=(n_perm, d.size))
    extreme = np.abs(signs @ d) / d.size >= observed - 1e-12 * max(1.0, observed)
    if d.size <= 16:
        return float(np.mean(extreme))
    return float((np.sum(extreme) + 1) / (n_perm + 1))  # the observed signs count once


SIGN_FLIP_EXACT_MAX = 20
"""Most pairs the sign-flip tests enumerate every sign pattern for; above, Monte-Carlo."""

_PATTERN_CHUNK = 2**16  # sign patterns per block: [65536, 20] float64 is 10 MB, 2^20 is 168 MB


@dataclass(frozen=True)
class TestResult:
    """A permutation test's p, its method, and how many sign patterns or splits it counted."""

    __test__ = False  # not a pytest class, though its name starts with Test

    p: float
    method: str  # "exact" or "Monte-Carlo"
    draws: int


SignFlip = TestResult


def _sign_patterns(start: int, stop: int, n: int) -> np.ndarray:
    # bit j of k flips the sign of difference j; k = 0 keeps every sign (the observed pattern)
    return 1.0 - 2.0 * (np.arange(start, stop)[:, None] >> np.arange(n) & 1)


@functools.lru_cache(maxsize=8)
def _random_signs(n_perm: int, n: int, seed: int) -> np.ndarray:
    # the same draws sign_flip_p makes; drawn once per (n_perm, n, seed), as a ledger tests many
    # claims of the same size (read-only: every caller only multiplies by it)
    signs = np.random.default_rng(seed).choice((1.0, -1.0), size=(n_perm, n))
    signs.setflags(write=False)
    return signs


def _sign_flip(e: np.ndarray, two_sided: bool, n_perm: int, seed: int) -> TestResult:
    """p of the sign-flip test on mean(e): |mean| (two-sided) or mean (one-sided, larger)."""
    n = e.size
    observed = abs(e.mean()) if two_sided else e.mean()
    floor = observed - 1e-12 * max(1.0, abs(observed))  # ties with the observed mean count

    def extreme(signs: np.ndarray) -> int:
        means = signs @ e / n
        return int(np.sum((np.abs(means) if two_sided else means) >= floor))

    if n <= SIGN_FLIP_EXACT_MAX:  # blocks of patterns; up to n = 16 one block, as sign_flip_p
        total = 2**n
        count = sum(
            extreme(_sign_patterns(k, min(k + _PATTERN_CHUNK, total), n))
            for k in range(0, total, _PATTERN_CHUNK)
        )
        return TestResult(count / total, "exact", total)
    signs = _random_signs(n_perm, n, seed)
    return TestResult((extreme(signs) + 1) / (n_perm + 1), "Monte-Carlo", n_perm)  # observed once


def _differences(diffs) -> np.ndarray:
    d = np.asarray(diffs, np.float64).ravel()
    if d.size == 0 or not np.all(np.isfinite(d)):
        raise ValueError(f"a sign-flip test needs finite differences, got {d.size} values: {d}")
    return d


def sign_flip(diffs, n_perm: int = 20000, seed: int = 0) -> TestResult:
    """Two-sided paired sign-flip test on the mean difference (exact up to 20 pairs)."""
    return _sign_flip(_differences(diffs), True, n_perm, seed)


def one_sided_sign_flip_p(
    diffs, shift: float = 0.0, greater: bool = True, n_perm: int = 20000, seed: int = 0
) -> TestResult:
    """One-sided sign-flip test of H0 mean(d) <= shift (greater; else H0 mean(d) >= shift)."""
    d = _differences(diffs)
    # flipping the signs of d - shift is the null distribution with the mean at shift
    e = d - shift if greater else shift - d
    return _sign_flip(e, False, n_perm, seed)


def equivalence_sign_flip(diffs, margin: float, n_perm: int = 20000, seed: int = 0) -> TestResult:
    """Equivalence (TOST) sign-flip test of -margin < mean(d) < margin: the larger one-sided p."""
    if not 0 < margin < math.inf:
        raise ValueError(f"an equivalence margin must be positive and finite, got {margin}")
    lower = one_sided_sign_flip_p(diffs, -margin, True, n_perm, seed)
    upper = one_sided_sign_flip_p(diffs, margin, False, n_perm, seed)
    return TestResult(max(lower.p, upper.p), lower.method, lower.draws)


def min_sign_flip_p(n: int) -> float:
    """Smallest two-sided p the exact sign-flip test can give with n pairs."""
    if n < 0:
        raise ValueError(f"a number of pairs is >= 0, got {n}")
    return min(1.0, 2.0 ** (1 - n))  # the observed signs and their mirror


DETECT_DRAWS = 4000
"""Normal samples per effect size in detectable_sign_flip's simulation (n <= 10)."""


@functools.lru_cache(maxsize=256)
def _standardised_detectable_sign_flip(
    n: int, alpha: float, power: float, one_sided: bool
) -> float:
    """detectable_sign_flip for SD 1 (the test is scale-invariant)."""
    if n <= 10:
        # the exact test on DETECT_DRAWS fixed N(delta, 1) samples; the draws are common to every
        # delta, so the estimated power is a deterministic function that bisection can invert
        z = np.random.default_rng(0).standard_normal((DETECT_DRAWS, n))
        signs = _sign_patterns(0, 2**n, n)  # row 0 is the observed pattern
        flipped, weight = signs @ z.T / n, signs.sum(1)[:, None] / n

        def power_at(delta: float) -> float:
            means = flipped + delta * weight  # [patterns, draws]: flipped means of z + delta
            if not one_sided:
                means = np.abs(means)
            floor = means[0] - 1e-12 * np.maximum(1.0, np.abs(means[0]))
            return float(np.mean(np.mean(means >= floor, axis=0) < alpha))

        if power_at(0.0) >= power:
            return 0.0
        lo, hi = 0.0, 1.0
        while power_at(hi) < power:  # all pairs of one sign reject, so the power reaches 1
            lo, hi = hi, 2 * hi
            if hi > 2**20:  # unless no pattern reaches p < alpha (detectable_sign_flip's inf)
                return math.inf
        while hi - lo > 1e-6 * hi:
            mid = (lo + hi) / 2
            lo, hi = (lo, mid) if power_at(mid) >= power else (mid, hi)
        return hi
    # the sign-flip distribution of sum d given |d| has variance sum d^2, so the test rejects
    # where |sum d| / sqrt(sum d^2) > z; that is |t| > c for the one-sample t, whose power is a
    # noncentral t tail with noncentrality sqrt(n) delta
    z = sps.norm.ppf(1 - (alpha if one_sided else alpha / 2))
    if n <= z**2:  # |sum d| / sqrt(sum d^2) <= sqrt(n) never exceeds z
        return math.inf
    df, c = n - 1, z * math.sqrt((n - 1) / (n - z**2))

    def missing_power(nc: float) -> float:
        reject = sps.nct.sf(c, df, nc) + (0.0 if one_sided else sps.nct.cdf(-c, df, nc))
        return reject - power

    if missing_power(0.0) >= 0:
        return 0.0
    hi = 1.0
    while missing_power(hi) < 0:
        hi *= 2
        if hi > 1024 or not np.isfinite(missing_power(hi)):
            return math.nan
    return float(optimize.brentq(missing_power, 0.0, hi) / math.sqrt(n))


def detectable_sign_flip(
    sd_diff: float, n: int, alpha: float = 0.05, power: float = 0.8, one_sided: bool = False
) -> float:
    """Smallest true mean difference the sign-flip test on n pairs detects at p < alpha with power.

    Differences are normal with SD sd_diff; the test is two-sided, or one-sided in the difference's
    direction; inf where no n pairs can reach p < alpha. The test is scale-invariant, so delta / sd
    is found once per (n, alpha, power, one_sided). Method: for n <= 10, simulation of the exact
    test (all 2^n patterns) on DETECT_DRAWS normal samples with a fixed seed, bisecting on delta;
    above, the normal approximation to the sign-flip distribution, which rejects where
    |sum d| / sqrt(sum d^2) > z (z_(1 - alpha/2), one-sided z_(1 - alpha)), i.e. where the
    one-sample t has |t| > z sqrt((n - 1) / (n - z^2)): a noncentral-t tail, root-found."""
    if n < 2 or not np.isfinite(sd_diff):
        return math.nan
    if sd_diff < 0 or not (0 < alpha < 1 and 0 < power < 1):
        raise ValueError(f"need sd >= 0 and alpha, power in (0, 1): {sd_diff}, {alpha}, {power}")
    smallest_p = min_sign_flip_p(n) / 2 if one_sided else min_sign_flip_p(n)
    if smallest_p >= alpha:
        return math.inf
    if sd_diff == 0:
        return 0.0
    return float(_standardised_detectable_sign_flip(n, alpha, power, one_sided) * sd_diff)


def bh_adjust(pvalues) -> np.ndarray:
    """Benjamini-Hochberg q-values in the input's order (nan stays nan, not counted in m)."""
    p = np.asarray(pvalues, np.float64)
    flat = p.ravel()
    known = ~np.isnan(flat)
    x = flat[known]
    if np.any((x < 0) | (x > 1)):
        raise ValueError(f"p-values lie in [0, 1], got {x[(x < 0) | (x > 1)]}")
    order = np.argsort(x, kind="stable")
    scaled = x[order] * x.size / np.arange(1, x.size + 1)
    # step-up: the i-th smallest is rejected at alpha when any rank >= i passes m p_(j) / j <=
    # alpha; the largest q is p_(m) itself, so none exceeds 1
    q = np.empty_like(x)
    q[order] = np.minimum.accumulate(scaled[::-1])[::-1]
    out = np.full_like(flat, np.nan)
    out[known] = q
    return out.reshape(p.shape)


def detectable_paired(sd_diff: float, n: int, alpha: float = 0.05, power: float = 0.8) -> float:
    """Smallest true mean difference a two-sided paired t-test on n pairs with this SD of the
    differences detects with the given power (noncentral t, exact)."""
    if n < 2 or not np.isfinite(sd_diff):
        return math.nan
    if sd_diff == 0:
        return 0.0
    df = n - 1
    t_crit = sps.t.ppf(1 - alpha / 2, df)

    def missing_power(nc: float) -> float:
        reject = sps.nct.sf(t_crit, df, nc) + sps.nct.cdf(-t_crit, df, nc)
        return reject - power

    hi = 1.0
    while missing_power(hi) < 0:  # bracket the root; nct is nan far out, where n is tiny
        hi *= 2
        if hi > 64 or not np.isfinite(missing_power(hi)):
            return math.nan
    nc = optimize.brentq(missing_power, 0.0, hi)
    return float(nc * sd_diff / math.sqrt(n))


@dataclass(frozen=True)
class Paired:
    """Per-seed differences a - b: their summary, the sign-flip p and the detectable effect."""

    diff: Summary
    p: float
    detectable: float

    def text(self, fmt: str = ".3g") -> str:
        """One line for a table: the mean difference, its interval, p and the detectable effect."""
        return (
            f"diff {self.diff.text(fmt)}; sign-flip p={self.p:.3g};"
            f" detectable {self.detectable:{fmt}}"
        )


def paired(a, b, n_boot: int = 10000, seed: int = 0) -> Paired:
    """Compare two methods on the same seeds (a[i] and b[i] share seed i)."""
    a = np.asarray(a, np.float64).ravel()
    b = np.asarray(b, np.float64).ravel()
    if a.shape != b.shape:
        raise ValueError(f"paired comparison needs the same seeds: {a.size} vs {b.size} values")
    d = a - b
    summary = summarize(d, n_boot, seed=seed)
    return Paired(summary, sign_flip_p(d, seed=seed), detectable_paired(summary.sd, d.size))


def detectable_two_sample(
    sd_a: float, n_a: int, sd_b: float, n_b: int, alpha: float = 0.05, power: float = 0.8
) -> float:
    """Smallest true difference of means a two-sided Welch test detects with the given power
    (normal approximation with Welch's degrees of freedom in the t quantiles)."""
    if min(n_a, n_b) < 2:
        return math.nan
    va, vb = sd_a**2 / n_a, sd_b**2 / n_b
    se = math.sqrt(va + vb)
    if se == 0:
        return 0.0
    df = (va + vb) ** 2 / (va**2 / (n_a - 1) + vb**2 / (n_b - 1))
    return float((sps.t.ppf(1 - alpha / 2, df) + sps.t.ppf(power, df)) * se)


def permutation_p(a, b, n_perm: int = 20000, seed: int = 0) -> float:
    """Two-sided p of the two-sample permutation test on the difference of means."""
    a = np.asarray(a, np.float64).ravel()
    b = np.asarray(b, np.float64).ravel()
    pooled = np.concatenate([a, b])
    observed = abs(a.mean() - b.mean())
    rng = np.random.default_rng(seed)
    perms = np.argsort(rng.random((n_perm, pooled.size)), axis=1)
    shuffled = pooled[perms]
    diffs = np.abs(shuffled[:, : a.size].mean(1) - shuffled[:, a.size :].mean(1))
    # the observed labelling counts as one permutation (p is never 0)
    return float((np.sum(diffs >= observed - 1e-12 * max(1.0, observed)) + 1) / (n_perm + 1))


PERMUTATION_EXACT_MAX = 200_000
"""Most splits permutation_test enumerates; above, Monte-Carlo as permutation_p."""


def permutation_test(a, b, n_perm: int = 20000, seed: int = 0) -> TestResult:
    """Two-sided two-sample permutation test on the mean difference (exact up to 200k splits)."""
    a = np.asarray(a, np.float64).ravel()
    b = np.asarray(b, np.float64).ravel()
    if a.size == 0 or b.size == 0:
        raise ValueError(f"a two-sample test needs values on both sides: {a.size}, {b.size}")
    splits = math.comb(a.size + b.size, a.size)
    if splits > PERMUTATION_EXACT_MAX:
        return TestResult(permutation_p(a, b, n_perm, seed), "Monte-Carlo", n_perm)
    # |mean(a) - mean(b)| is the same from either side: enumerate the smaller side's members
    small, large = (a, b) if a.size <= b.size else (b, a)
    x = np.concatenate([small, large])
    x = x - x.mean()  # the statistic ignores a shift; centred sums round less
    k, total = small.size, x.sum()
    members = itertools.chain.from_iterable(itertools.combinations(range(x.size), k))
    idx = np.fromiter(members, np.int64, splits * k).reshape(splits, k)
    inside = x[idx].sum(1)
    diffs = np.abs(inside / k - (total - inside) / (x.size - k))
    observed = diffs[0]  # combination 0, 1, .., k - 1 is the observed split, computed alike
    return TestResult(
        float(np.mean(diffs >= observed - 1e-12 * max(1.0, observed))), "exact", splits
    )


@dataclass(frozen=True)
class TwoSample:
    """Unpaired a - b (seeds that do not pair, e.g. two trainers with their own random streams):
    the difference of means with its interval (or range), the permutation p, the detectable
    difference (Welch) and each side's summary."""

    a: Summary
    b: Summary
    diff: float
    lo: float
    hi: float
    kind: str  # "95% CI" or "range"
    p: float
    detectable: float

    def text(self, fmt: str = ".3g") -> str:
        """'diff d (95% CI lo to hi; n=na vs nb); permutation p=..; detectable ..'."""
        return (
            f"diff {self.diff:{fmt}} ({self.kind} {self.lo:{fmt}} to {self.hi:{fmt}};"
            f" n={self.a.n} vs {self.b.n}); permutation p={self.p:.3g};"
            f" detectable {self.detectable:{fmt}}"
        )


def two_sample(a, b, n_boot: int = 10000, ci: float = 0.95, seed: int = 0) -> TwoSample:
    """Difference of means of two independent samples. The interval resamples each side with
    replacement on its own (percentile bootstrap) when both have >= MIN_SEEDS values; with fewer,
    the range of the difference, min(a) - max(b) to max(a) - min(b), called a range."""
    a = np.asarray(a, np.float64).ravel()
    b = np.asarray(b, np.float64).ravel()
    if a.size == 0 or b.size == 0:
        raise ValueError(f"a two-sample comparison needs values on both sides: {a.size}, {b.size}")
    # each side's summary is the one `summarize` gives that sample alone, so a table that
    # quotes one side beside the difference shows the same interval as everywhere else
    sa, sb = summarize(a, n_boot, ci, seed), summarize(b, n_boot, ci, seed)
    if min(a.size, b.size) >= MIN_SEEDS:
        rng = np.random.default_rng(seed)
        ia = rng.integers(0, a.size, size=(n_boot, a.size))
        ib = rng.integers(0, b.size, size=(n_boot, b.size))
        lo, hi = _percentile_interval(a[ia].mean(1) - b[ib].mean(1), ci)
        lo, hi, kind = float(lo), float(hi), f"{ci:.0%} CI"
    else:
        lo, hi, kind = float(a.min() - b.max()), float(a.max() - b.min()), "range"
    detectable = detectable_two_sample(sa.sd, a.size, sb.sd, b.size)
    diff = float(a.mean() - b.mean())
    return TwoSample(sa, sb, diff, lo, hi, kind, permutation_p(a, b, seed=seed), detectable)


def iqm(scores) -> float:
    """Interquartile mean of all scores [runs, tasks]: mean of the middle 50% (trimming
    floor(n/4) from each end, as scipy.stats.trim_mean(x, 0.25) and rliable do)."""
    x = np.sort(np.asarray(scores, np.float64).ravel())
    cut = int(0.25 * x.size)
    return float(x[cut : x.size - cut].mean())


def stratified_resamples(runs: int, tasks: int, n_boot: int, seed: int = 0) -> np.ndarray:
    """Run indices [n_boot, runs, tasks], drawn with replacement independently per task."""
    return np.random.default_rng(seed).integers(0, runs, size=(n_boot, runs, tasks))


def stratified_bootstrap_ci(
    scores, statistic: Callable, n_boot: int = 2000, ci: float = 0.95, seed: int = 0
) -> tuple[float, float, float]:
    """(statistic, lo, hi) over [runs, tasks] scores, resampling runs within each task (refuses
    fewer than MIN_SEEDS runs per task)."""
    scores = np.asarray(scores, np.float64)
    runs, tasks = scores.shape
    if runs < MIN_SEEDS:
        raise ValueError(f"an interval needs >= {MIN_SEEDS} runs per task, got {runs}")
    idx = stratified_resamples(runs, tasks, n_boot, seed)
    resampled = scores[idx, np.arange(tasks)]  # [n_boot, runs, tasks]
    values = np.array([statistic(r) for r in resampled])
    lo, hi = _percentile_interval(values, ci)
    return float(statistic(scores)), float(lo), float(hi)


def iqm_band(scores, n_boot: int = 2000, ci: float = 0.95, seed: int = 0):
    """(IQM, lo, hi, kind) of [runs, tasks] scores: the stratified-bootstrap interval from
    >= MIN_SEEDS runs per task; below, no interval (lo = hi = nan, kind "no interval")."""
    scores = np.asarray(scores, np.float64)
    if scores.shape[0] < MIN_SEEDS:
        return iqm(scores), math.nan, math.nan, "no interval"
    value, lo, hi = stratified_bootstrap_ci(scores, iqm, n_boot, ci, seed)
    return value, lo, hi, f"{ci:.0%} CI"


def performance_profile(scores, taus) -> np.ndarray:
    """Fraction of runs with score > tau, averaged over tasks, for each tau ([runs, tasks])."""
    scores = np.asarray(scores, np.float64)
    return (scores[None] > np.asarray(taus)[:, None, None]).mean(axis=1).mean(axis=1)


def _poi(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """P(X > Y) per leading index of x [..., n, tasks] and y [..., m, tasks], tasks averaged:
    the Mann-Whitney U of each task from mid-ranks (a tie counts one half) over n m."""
    n, m = x.shape[-2], y.shape[-2]
    ranks = sps.rankdata(np.concatenate([x, y], axis=-2), axis=-2)  # mid-ranks over n + m
    u = ranks[..., :n, :].sum(-2) - n * (n + 1) / 2
    return (u / (n * m)).mean(-1)


def probability_of_improvement(x, y) -> float:
    """P(X > Y) of [runs, tasks] scores x and y, averaged over tasks (rliable/metrics.py
    `probability_of_improvement`: per task the Mann-Whitney U statistic of x over y divided by
    n_x n_y, a tie counting one half)."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    if x.ndim != 2 or y.ndim != 2 or x.shape[1] != y.shape[1]:
        raise ValueError(f"x and y must be [runs, tasks] of the same tasks: {x.shape}, {y.shape}")
    return float(_poi(x, y))


def probability_of_improvement_ci(
    x, y, n_boot: int = 2000, ci: float = 0.95, seed: int = 0
) -> tuple[float, float, float]:
    """(P(X > Y), lo, hi): the percentile interval of rliable's stratified independent
    bootstrap (library.py `StratifiedIndependentBootstrap`: x's and y's runs resampled apart,
    within each task; >= MIN_SEEDS runs per task on each side)."""
    value = probability_of_improvement(x, y)
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    if min(x.shape[0], y.shape[0]) < MIN_SEEDS:
        raise ValueError(f"an interval needs >= {MIN_SEEDS} runs per task on each side")
    ix = stratified_resamples(x.shape[0], x.shape[1], n_boot, seed)
    iy = stratified_resamples(y.shape[0], y.shape[1], n_boot, seed + 1)
    lo, hi = _percentile_interval(_poi_resampled(x, y, ix, iy), ci)
    return value, float(lo), float(hi)


def _counts(index: np.ndarray, runs: int) -> np.ndarray:
    """How often each of `runs` runs is drawn in each resample: index [B, k] -> [B, runs]."""
    B = index.shape[0]
    flat = (index + runs * np.arange(B)[:, None]).ravel()
    return np.bincount(flat, minlength=B * runs).reshape(B, runs).astype(np.float64)


def _poi_resampled(x: np.ndarray, y: np.ndarray, ix: np.ndarray, iy: np.ndarray) -> np.ndarray:
    """_poi(x[ix, tasks], y[iy, tasks]) without materialising the resamples: per task the
    pair matrix [x_i > y_j] + [x_i = y_j] / 2 weighted by how often each run is drawn (the
    Mann-Whitney U of the resampled multisets; integer and half sums, so the same floats)."""
    n, m = x.shape[0], y.shape[0]
    per_task = []
    for t in range(x.shape[1]):
        pairs = (x[:, t, None] > y[None, :, t]) + 0.5 * (x[:, t, None] == y[None, :, t])
        cx, cy = _counts(ix[:, :, t], n), _counts(iy[:, :, t], m)
        per_task.append(((cx @ pairs) * cy).sum(-1) / (n * m))
    return np.stack(per_task, -1).mean(-1)
