"""The entropy law on a bandit (paper_figures/entropy_law_bandit.py): per-seed fits on exact
curves, the reading of a population's metrics.csv, and the script end to end at toy size."""

import csv
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from paper_figures import entropy_law_bandit as elb

ROOT = Path(__file__).resolve().parents[2]


def test_seed_row_prefers_the_law_on_exponential_points_and_the_line_on_linear_ones():
    h = np.linspace(2.3, 0.05, 40)
    exponential = elb.seed_row("m", "1", h, 5.0 - 2.0 * np.exp(h))
    assert exponential["r2"] == pytest.approx(1.0)
    assert exponential["r2"] > exponential["r2_linear"] + 0.01
    # fitted on the first half (high entropy), the law extrapolates the last quarter exactly
    assert exponential["late_error"] < 1e-6 < exponential["late_error_linear"]
    linear = elb.seed_row("m", "1", h, 3.0 - 0.5 * h)
    assert linear["r2_linear"] == pytest.approx(1.0)
    assert linear["r2"] < linear["r2_linear"] - 0.01
    assert linear["late_error_linear"] < 1e-9 < linear["late_error"]
    assert exponential["entropy_first"] == h[0] and exponential["entropy_last"] == h[-1]


def test_read_population_splits_rows_by_seed_in_order_and_skips_empty_returns(tmp_path):
    rows = [
        ("64", "1", "2.0", "0.1"), ("64", "2", "2.1", "0.2"), ("128", "1", "1.5", ""),
        ("128", "2", "1.4", "0.5"), ("192", "1", "1.0", "0.7"),
    ]  # fmt: skip
    with (tmp_path / "metrics.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["step", "seed", "train/entropy", "train/episode_return"])
        w.writerows(rows)
    runs = elb.read_population(tmp_path)
    np.testing.assert_array_equal(runs["1"]["entropy"], [2.0, 1.0])
    np.testing.assert_array_equal(runs["1"]["return"], [0.1, 0.7])
    np.testing.assert_array_equal(runs["2"]["entropy"], [2.1, 1.4])


@pytest.mark.slow  # the figure script end to end at toy size
def test_toy_run_writes_one_row_per_method_and_seed(tmp_path):
    out = tmp_path / "out"
    cmd = [sys.executable, "paper_figures/entropy_law_bandit.py", "--toy", "--train"]
    cmd += ["--sweep-dir", str(tmp_path / "sweep"), "--out", str(out)]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = list(csv.DictReader((out / "entropy_law_bandit.csv").open()))
    assert sorted({(r["method"], r["seed"]) for r in rows}) == [
        (m, str(s)) for m in sorted(elb.METHODS) for s in range(1, 6)
    ]
    assert all(int(r["points"]) == 8 for r in rows)  # 512 samples / 64 per update
    assert (out / "entropy_law_bandit.png").stat().st_size > 5_000


def test_unknown_method_is_refused():
    cmd = [sys.executable, "paper_figures/entropy_law_bandit.py", "--methods", "ppo"]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "--methods" in done.stderr
