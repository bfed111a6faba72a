"""The `rise:<column>` metric (the fraction of a column's consecutive values that rise) and the
bandit suite's exact claim that reads it (bandit-suite/analysis.py: E11-entropy holds only when
no seed's entropy ever rises)."""

from __future__ import annotations

import math

import numpy as np

from paper_figures.lab import judge, metrics, protocol, spec


def test_rise_counts_the_consecutive_values_that_go_up():
    assert metrics.rise_frac(np.array([3.0, 2.0, 2.5, 1.0, 1.5])) == 0.5
    assert metrics.rise_frac(np.array([3.0, 2.0, np.nan, 1.0])) == 0.0
    assert metrics.rise_frac(np.array([1.0, 1.0, 0.5])) == 0.0  # a flat step is no rise
    assert math.isnan(metrics.rise_frac(np.array([1.0])))
    metrics.check_name("rise:train/entropy")
    rows = [{"train/entropy": v} for v in ("2.3", "2.1", "", "2.2")]
    assert metrics._one("rise:train/entropy", rows, 0.0, "bandit:bernoulli-10", 1) == 0.5


def test_entropy_claim_holds_only_when_no_seed_rises():
    exp = spec.load(spec.FIGURES / "bandit-suite")
    analysis = judge.analysis_module(exp)
    rows = [{"env": "bandit:bernoulli-10", "arm": "grpo", "rise:train/entropy": 0.0}] * 3
    assert analysis.judge(exp, rows)["E11-entropy"].verdict == protocol.HOLDS
    rows = rows + [{"env": "bandit:bernoulli-10", "arm": "grpo", "rise:train/entropy": 0.01}]
    assert analysis.judge(exp, rows)["E11-entropy"].verdict == protocol.FAILS
