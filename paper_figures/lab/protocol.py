"""The one verdict protocol: each comparison kind, the statistic it computes and the verdict it
gives. Its rules are stated once, in RULES, which the ledger's header prints.

Every test is two-sided at ALPHA on the scale the ledger adjusts (Benjamini-Hochberg over the
ledger's decisive rows, q on each line): a claimed direction holds when the test rejects with the
effect on the claimed side and does not hold when it rejects on the other. A shifted test (the
null at a declared margin) is the same sign-flip test on the differences minus the shift.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from controlrl import stats

ALPHA = 0.05
HOLDS, FAILS, INCONCLUSIVE = "holds", "does not hold", "inconclusive"
CANNOT, NOT_RUN = "cannot run here", "not run yet"
# what "inconclusive" means on a line
UNDERPOWERED = "underpowered"
EQUIVALENT = "no difference beyond the margin"
CEILING = "at ceiling"
GUARD = "guard not met"
NO_TEST = "too few pairs to reject"
UNDEFINED = "precondition not met"

RULES = [
    "superior / inferior: paired per seed (same seed, same env); the mean difference a - b, its "
    "95% percentile-bootstrap interval (seeds in a canonical order: env, then seed), and the "
    "two-sided sign-flip test of mean 0 (exact by enumeration up to 20 pairs, else Monte-Carlo "
    "with the draws stated); the sign decides. With a declared shift the null is the margin "
    "(superior by more than it).",
    "non-inferior (margin m): the same test with the null at -m (a is not worse than b by more "
    "than m); holds when it rejects above -m, does not hold when it rejects below.",
    "equivalent (margin m): two one-sided sign-flip tests at -m and +m, p the larger of the two "
    "doubled; does not hold when the difference lies beyond a margin (the shifted test rejects).",
    "above / below a bar: the one-sample sign-flip test of the runs' mean against the bar.",
    "unpaired: runs that do not pair (declared so before running): the two-sample permutation "
    "test of the difference of means (exact by enumeration where the splits number at most "
    "200,000), the 95% interval by resampling each side.",
    "all-of: a conjunction of the experiment's other claims: holds when all hold, does not hold "
    "when one does not.",
    "exact: an exact computation (theory, a recurrence) decides; no p-value.",
    "minmax-pair normalisation: per env, (a - b) divided by the spread (max - min) of both arms' "
    "runs there, so that no task's scale dominates a pooled comparison.",
]
RULES.append(
    "contrast (an interaction of two cells, a - b against c - d): per seed and env the "
    "difference (a - b) - (c - d), judged as superior (the claim: it is above 0); with "
    "minmax-pair each env's contrast is divided by the spread of all four arms' runs there."
)
RULES.append(
    "ratio difference (where a claim declares it): the paired kinds on a / b - 1 per pair, a "
    "relative gain, in place of a - b."
)
RULES.append(
    "unpaired with a margin m (non-inferiority of runs that do not pair): the same permutation "
    "test of a against b moved onto the null, b - m (with a ratio difference, mean(a) / mean(b) "
    "- 1 against -m: (1 - m) b); holds when it rejects with the effect above -m."
)
INCONCLUSIVE_RULES = [
    f"{UNDERPOWERED}: the test did not reject; 'detectable' is the smallest true difference the "
    "test used detects with power 0.8 at these pairs and this spread (normal differences)",
    f"{EQUIVALENT}: the test did not reject and both one-sided tests place the difference "
    "within the declared margin",
    f"{CEILING}: every pair identical (both arms at the same value on every seed)",
    f"{NO_TEST}: the exact test cannot reach p < 0.05 with this many pairs",
    "undecided by its exact rule: an exact claim whose rule, stated on its page, decides "
    "neither way",
]
INCONCLUSIVE_RULES.append(
    f"{UNDEFINED}: the metric is undefined on some of the runs (a fit with too few points): no "
    "test is run"
)
INCONCLUSIVE_RULES.append(
    f"{GUARD}: a claim's declared guard is not met (neither arm's mean of the metric reaches it, "
    "so neither learns at this budget): the test is shown and adjusted but decides nothing"
)


@dataclass
class Judgement:
    """What a comparison gives: the effect, its interval, the p-value and the verdict before the
    ledger's multiplicity adjustment (`verdict_at` applies the adjusted q)."""

    kind: str
    effect: float = math.nan
    lo: float = math.nan
    hi: float = math.nan
    interval: str = "95% CI"
    n: str = ""
    p: float = math.nan  # the row's two-sided p (nan for exact and all-of)
    method: str = ""  # how p was computed
    direction: int = 0  # +1: a rejection says holds, -1: does not hold, 0: no rejection possible
    detectable: float = math.nan
    cause: str = ""  # why inconclusive when the test does not reject
    verdict: str = INCONCLUSIVE  # exact / all-of kinds decide here
    text: str = ""  # the full statistic, for the page

    def verdict_at(self, q: float) -> tuple[str, str]:
        """(verdict, inconclusive cause) when the adjusted q is `q`."""
        if self.kind in ("exact", "all-of") or math.isnan(self.p):
            return self.verdict, self.cause
        if q <= ALPHA and self.direction:
            return (HOLDS if self.direction > 0 else FAILS), ""
        return INCONCLUSIVE, self.cause


def _fmt(x: float) -> str:
    return "n/a" if x is None or math.isnan(x) else format(x, ".3g")


def _interval(d: np.ndarray) -> tuple[float, float, str]:
    s = stats.summarize(d)
    return s.lo, s.hi, ("95% CI" if s.kind != "range" else "range")


def _test(d: np.ndarray, null: float, claimed: int) -> tuple[stats.SignFlip, int]:
    """The two-sided sign-flip test of mean(d) = null, and which way a rejection points
    relative to the claimed sign (+1 claimed side, -1 the other)."""
    result = stats.sign_flip(d - null)
    side = 1 if (d.mean() - null) * claimed > 0 else -1
    return result, side


def _undefined(kind: str, x: np.ndarray, what: str) -> Judgement:
    """A line whose metric is undefined (NaN) on some runs: no test, inconclusive."""
    j = Judgement(kind, n=f"{x.size} {what}", cause=UNDEFINED)
    j.text = f"the metric is undefined on {np.sum(~np.isfinite(x))} of {x.size} {what}: no test"
    return j


def paired(d: np.ndarray, kind: str, margin: float | None, shift: str) -> Judgement:
    """Kinds superior, inferior, non-inferior, equivalent on per-seed differences a - b."""
    d = np.asarray(d, np.float64)
    if not np.isfinite(d).all():
        return _undefined(kind, d, "pairs")
    n = d.size
    lo, hi, interval = _interval(d)
    j = Judgement(kind, float(d.mean()), lo, hi, interval, f"{n} pairs")
    sd = stats.sample_sd(d)
    if kind == "equivalent":
        tost = stats.equivalence_sign_flip(d, margin)
        p_in = min(1.0, 2 * tost.p)
        low, _ = _test(d, -margin, 1)
        high, _ = _test(d, margin, -1)
        p_out = min(low.p if d.mean() < -margin else 1.0, high.p if d.mean() > margin else 1.0)
        j.p, j.method = min(p_in, p_out), f"{tost.method} ({tost.draws:,} sign patterns)"
        j.direction = 1 if p_in <= p_out else -1
        j.detectable = stats.detectable_sign_flip(sd, n)
    else:
        claimed = -1 if kind == "inferior" else 1
        null = 0.0
        if kind == "non-inferior":
            null = -margin * claimed
        elif shift == "margin":
            null = margin * claimed
        result, side = _test(d, null, claimed)
        j.p, j.method = result.p, f"{result.method} ({result.draws:,} sign patterns)"
        j.direction = side
        j.detectable = stats.detectable_sign_flip(sd, n)
    if n and np.all(d == 0):
        j.cause = CEILING
    elif n and stats.min_sign_flip_p(n) > ALPHA:
        j.cause = NO_TEST
    elif margin is not None and kind != "equivalent" and n >= 2:
        tost = stats.equivalence_sign_flip(d, margin)
        j.cause = EQUIVALENT if 2 * tost.p <= ALPHA else UNDERPOWERED
    else:
        j.cause = UNDERPOWERED
    j.text = (
        f"diff {_fmt(j.effect)} (sample SD {_fmt(sd)}; {interval} {_fmt(lo)} to {_fmt(hi)}; "
        f"n={n}); sign-flip p={j.p:.3g} ({j.method}); detectable {_fmt(j.detectable)}"
    )
    return j


def bar(x: np.ndarray, kind: str, level: float) -> Judgement:
    """Kinds above / below: the runs' mean against a declared bar."""
    x = np.asarray(x, np.float64)
    if not np.isfinite(x).all():
        return _undefined(kind, x, "runs")
    lo, hi, interval = _interval(x)
    claimed = 1 if kind == "above" else -1
    result, side = _test(x, level, claimed)
    j = Judgement(kind, float(x.mean()), lo, hi, interval, f"{x.size} runs", result.p)
    j.method = f"{result.method} ({result.draws:,} sign patterns)"
    j.direction = side
    j.detectable = stats.detectable_sign_flip(stats.sample_sd(x), x.size)
    j.cause = NO_TEST if stats.min_sign_flip_p(x.size) > ALPHA else UNDERPOWERED
    j.text = (
        f"mean {_fmt(j.effect)} against the bar {level:g} ({interval} {_fmt(lo)} to {_fmt(hi)}; "
        f"n={x.size}); sign-flip p={j.p:.3g} ({j.method}); detectable {_fmt(j.detectable)}"
    )
    return j


def unpaired(a: np.ndarray, b: np.ndarray, margin: float | None = None, ratio: bool = False,
             ) -> Judgement:  # fmt: skip
    """Kind unpaired: a two-sample permutation test, declared so before running. With a margin m
    it is a non-inferiority test: the null mean(a) - mean(b) = -m (ratio: mean(a) / mean(b) - 1 =
    -m), a tested against b moved onto the null (b - m, or (1 - m) b)."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    m = margin or 0.0
    t = stats.two_sample(a, b)
    result = stats.permutation_test(a, (1 - m) * b if ratio else b - m)
    effect, lo, hi, interval, detectable = t.diff, t.lo, t.hi, t.kind, t.detectable
    if ratio:
        effect, lo, hi, interval = _ratio_interval(a, b)
        detectable = t.detectable / abs(b.mean())
    j = Judgement("unpaired", effect, lo, hi, interval, f"{t.a.n} vs {t.b.n} runs", result.p)
    j.method = f"{result.method} ({result.draws:,} splits)"
    j.direction = 1 if effect > -m else -1
    j.detectable = detectable
    j.cause = UNDERPOWERED
    j.text = t.text().replace("permutation p", f"permutation ({j.method}) p")
    if ratio or margin is not None:
        null = f"(1 - {m:g}) x b" if ratio else f"b - {m:g}"
        j.text = (f"{'ratio - 1' if ratio else 'diff'} {_fmt(effect)} ({interval} {_fmt(lo)} to "
                  f"{_fmt(hi)}; n={t.a.n} vs {t.b.n}); permutation ({j.method}) of a against "
                  f"{null}: p={j.p:.3g}; detectable {_fmt(detectable)}")  # fmt: skip
    return j


def _ratio_interval(a: np.ndarray, b: np.ndarray) -> tuple[float, float, float, str]:
    """mean(a) / mean(b) - 1 and its 95% interval, each side resampled on its own (the range of
    the ratio below 5 runs a side)."""
    effect = float(a.mean() / b.mean() - 1)
    if min(a.size, b.size) < stats.MIN_SEEDS:
        corners = [x / y - 1 for x in (a.min(), a.max()) for y in (b.min(), b.max())]
        return effect, float(min(corners)), float(max(corners)), "range"
    rng = np.random.default_rng(0)
    ra = a[rng.integers(0, a.size, (10_000, a.size))].mean(1)
    rb = b[rng.integers(0, b.size, (10_000, b.size))].mean(1)
    lo, hi = np.percentile(ra / rb - 1, [2.5, 97.5])
    return effect, float(lo), float(hi), "95% CI"


def all_of(parts: list[str]) -> Judgement:
    """Kind all-of: the verdicts of the claims it joins (after their adjustment)."""
    verdict = FAILS if FAILS in parts else HOLDS if all(p == HOLDS for p in parts) else INCONCLUSIVE
    j = Judgement("all-of", verdict=verdict, n=f"{len(parts)} claims")
    j.cause = "" if verdict != INCONCLUSIVE else "a part is inconclusive"
    return j
