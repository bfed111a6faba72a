"""paper_figures/success_injection.py end to end at toy size: every arm's seeds in the CSV, no
injection logged for GRPO, and on the first iteration (the same rollout for every arm: same
seeds, same initial policy) the ungated arm injects into at least the groups the gate lets
through."""

from __future__ import annotations

import csv
import math

import pytest

from paper_figures import success_injection


@pytest.mark.slow  # the figure script end to end at toy size
def test_toy_run_writes_every_arm_and_the_gate_injects_a_subset(tmp_path):
    out = tmp_path / "out"
    success_injection.main(
        ["--toy", "--train", "--sweep-dir", str(tmp_path / "runs"), "--out", str(out)]
    )
    with (out / "success_injection.csv").open() as f:
        rows = list(csv.DictReader(f))
    by_arm = {a: {r["seed"]: r for r in rows if r["arm"] == a} for a in success_injection.ARMS}
    assert all(sorted(v) == ["1", "2", "3"] for v in by_arm.values())
    assert all(math.isnan(float(r["inject_first"])) for r in by_arm["grpo"].values())
    for seed, forced in by_arm["forced"].items():
        assert float(forced["inject_first"]) >= float(by_arm["hapo"][seed]["inject_first"])
    assert any(float(r["inject_first"]) > 0 for r in by_arm["forced"].values())
    assert (out / "success_injection.png").exists()
