"""Kind unpaired with a margin: a non-inferiority test of runs that do not pair (the permutation
test of a against b moved onto the null), on a - b or, with a ratio difference, on
mean(a) / mean(b) - 1; and a guard on an unpaired claim (brax-locomotion-410k)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from paper_figures.lab import judge, protocol, spec

B = np.array([1000.0, 1010.0, 990.0, 1005.0, 995.0])


@pytest.mark.parametrize(
    "a, verdict",
    [
        (B * 0.97, protocol.HOLDS),  # 3% behind: within a 10% margin, tight spread
        (B * 0.80, protocol.FAILS),  # 20% behind: beyond it
        (B * 0.90, protocol.INCONCLUSIVE),  # on the margin itself
    ],
)
def test_a_ratio_margin_tests_non_inferiority_of_unpaired_runs(a, verdict):
    j = protocol.unpaired(a, B, margin=0.1, ratio=True)
    assert j.effect == pytest.approx(a.mean() / B.mean() - 1)
    assert j.lo <= j.effect <= j.hi and j.interval == "95% CI"
    assert j.verdict_at(j.p)[0] == verdict
    assert "(1 - 0.1) x b" in j.text
    # without the margin 3% behind is a difference, not parity
    if verdict == protocol.HOLDS:
        assert protocol.unpaired(a, B).verdict_at(0.01)[0] == protocol.FAILS


def test_an_absolute_margin_moves_b_by_the_margin():
    j = protocol.unpaired(B - 30, B, margin=50.0)
    assert j.effect == pytest.approx(-30.0) and j.direction == 1
    assert j.verdict_at(j.p)[0] == protocol.HOLDS
    assert protocol.unpaired(B - 30, B, margin=10.0).verdict_at(0.01)[0] == protocol.FAILS


def test_a_ratio_below_five_runs_a_side_gives_the_range():
    j = protocol.unpaired(B[:2], B[:3], margin=0.1, ratio=True)
    assert j.interval == "range"
    assert j.lo == pytest.approx(1000 / 1010 - 1) and j.hi == pytest.approx(1010 / 990 - 1)


def test_an_unpaired_claim_takes_a_guard():
    exp = spec.load(spec.FIGURES / "brax-locomotion-410k")
    claim = next(c for c in exp.claims if c.id == "Brax-ant")
    assert claim.kind == "unpaired" and claim.guard == 2000.0 and claim.difference == "ratio"
    rows = [{"env": "ant", "arm": arm, "seed": s, "return_at_budget": v * (1 + 0.001 * s)}
            for s in range(1, 6) for arm, v in (("ours", 1000.0), ("brax", 1000.0))]  # fmt: skip
    j = judge.compare(exp, claim, rows, ["ant"])
    assert j.direction == 0 and j.cause == protocol.GUARD and "not met" in j.text
    learned = [dict(r, return_at_budget=r["return_at_budget"] * 3) for r in rows]
    assert judge.compare(exp, claim, learned, ["ant"]).verdict_at(0.01)[0] == protocol.HOLDS
    bare = dataclasses.replace(claim, guard=None)
    assert judge.compare(exp, bare, rows, ["ant"]).verdict_at(0.01)[0] == protocol.HOLDS


def test_a_ratio_claims_page_names_its_difference():
    from paper_figures.lab import pages, results

    exp = spec.load(spec.FIGURES / "brax-locomotion-2m")
    line = judge.lines(exp, results.rows_of(exp))[0]
    block = "\n".join(pages._claim_block(line, {}))
    assert "metric: return_at_budget, ours / brax - 1 (of the means); envs: ant" in block
