"""The `last10:<column>` metric (the mean of a column's last 10 logged values: a final window of
10 updates) and a claim's guard (tpo-token-reversal: a paired claim is inconclusive, 'guard not
met', when neither arm's mean of the metric reaches the guard, i.e. neither learns)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from paper_figures.lab import judge, metrics, protocol, spec

ENV = "bandit:sequence-reverse-2-10"
METRIC = "last10:train/episode_return"


def test_last10_averages_the_last_ten_logged_values():
    assert metrics.last10(np.arange(20.0)) == 14.5
    assert metrics.last10(np.array([1.0, np.nan, 3.0])) == 2.0  # fewer than 10: all of them
    assert math.isnan(metrics.last10(np.array([np.nan])))
    metrics.check_name(METRIC)
    rows = [{"train/episode_return": str(v)} for v in [0.0] * 5 + [1.0] * 10]
    assert metrics._one(METRIC, rows, 0.0, ENV, 1) == 1.0


def _rows(a: float, b: float) -> list[dict]:
    """tpo at `a` and grpo at `b` (+ a small per-seed spread) on 12 seeds: tpo ahead on each."""
    out = []
    for seed in range(12):
        for arm, value in (("tpo", a), ("grpo", b)):
            out.append({"env": ENV, "arm": arm, "seed": seed, METRIC: value + 1e-4 * seed})
    return out


@pytest.mark.parametrize("tpo, verdict", [(0.03, protocol.INCONCLUSIVE), (0.06, protocol.HOLDS)])
def test_a_claim_is_inconclusive_when_neither_arm_reaches_its_guard(tpo, verdict):
    exp = spec.load(spec.FIGURES / "tpo-token-reversal")
    claim = next(c for c in exp.claims if c.id == "E11-TPO-reverse-L10-vs-GRPO")
    assert claim.guard == 0.05
    j = judge.compare(exp, claim, _rows(tpo, 0.01), [ENV])
    assert j.verdict_at(0.001) == (verdict, protocol.GUARD if verdict != protocol.HOLDS else "")
    assert ("not met" in j.text) == (verdict != protocol.HOLDS)
    # without the guard the same runs decide
    bare = judge.compare(exp, dataclasses.replace(claim, guard=None), _rows(tpo, 0.01), [ENV])
    assert bare.verdict_at(0.001)[0] == protocol.HOLDS


def test_a_guard_needs_its_reason_and_a_paired_kind(tmp_path):
    folder = tmp_path / "guarded"
    folder.mkdir()
    text = (spec.FIGURES / "tpo-token-reversal" / spec.DECLARATION).read_text()
    (folder / spec.DECLARATION).write_text(text.replace("guard_why = ", "# guard_why = ", 1))
    with pytest.raises(spec.SpecError, match="guard needs guard_why"):
        spec.load(folder)


def test_a_bar_claim_on_a_metric_undefined_on_some_runs_runs_no_test():
    """A fit with too few points is NaN: the line says 'precondition not met', never a p-value
    from the runs that have one."""
    j = protocol.bar(np.array([0.2, 0.3, np.nan, 0.25, 0.4, 0.3, 0.2]), "above", 0.0)
    assert math.isnan(j.p) and j.cause == protocol.UNDEFINED
    assert j.verdict_at(0.001) == (protocol.INCONCLUSIVE, protocol.UNDEFINED)
    assert "undefined on 1 of 7 runs" in j.text
    whole = protocol.bar(np.array([0.2, 0.3, 0.35, 0.25, 0.4, 0.3, 0.2]), "above", 0.0)
    assert whole.verdict_at(whole.p) == (protocol.HOLDS, "")
    pairs = protocol.paired(np.array([0.1, np.nan, 0.2, 0.3, 0.1, 0.2]), "superior", None, "")
    assert pairs.cause == protocol.UNDEFINED and "undefined on 1 of 6 pairs" in pairs.text
