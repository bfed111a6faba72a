"""The PPO-vs-SB3 comparison: its statistics against independent computations, and a toy run."""

import csv
import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import stats
from timeouts import scaled

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("ppo_vs_sb3", ROOT / "paper_figures/ppo_vs_sb3.py")
ppo_vs_sb3 = importlib.util.module_from_spec(_spec)  # a script, not in a package
_spec.loader.exec_module(ppo_vs_sb3)
permutation_test, bootstrap_median_diff = (
    ppo_vs_sb3.permutation_test,
    ppo_vs_sb3.bootstrap_median_diff,
)


def test_permutation_test_by_hand():
    # splits of {1,2,3,4} into pairs: mean differences -2, -1, 0, 0, 1, 2 -> |d| >= 2 in 2 of 6
    assert permutation_test(np.array([1.0, 2.0]), np.array([3.0, 4.0]), np.mean) == (-2.0, 1 / 3)
    # identical groups: every split is at least as extreme as 0
    assert permutation_test(np.ones(3), np.ones(3), np.mean) == (0.0, 1.0)


def test_permutation_test_matches_scipy_exact():
    rng = np.random.default_rng(3)
    a, b = rng.normal(0.0, 1.0, 6), rng.normal(2.0, 1.0, 6)
    diff, p = permutation_test(a, b, np.mean)
    ref = stats.permutation_test(
        (a, b),
        lambda x, y: np.mean(x) - np.mean(y),
        permutation_type="independent",
        n_resamples=np.inf,
    )
    # equal group sizes: the null distribution is symmetric, so 2 min(tails) = P(|T| >= |t|)
    assert diff == pytest.approx(ref.statistic, abs=1e-12)
    assert p == pytest.approx(ref.pvalue, abs=1e-12)
    assert p < 0.05  # a shift of 2 sd is not invisible (guards a p fixed at 1)


def test_bootstrap_median_diff_covers_the_shift():
    rng = np.random.default_rng(0)
    a, b = rng.normal(5.0, 1.0, 40), rng.normal(0.0, 1.0, 40)
    med, lo, hi = bootstrap_median_diff(a, b)
    assert med == pytest.approx(np.median(a) - np.median(b))
    assert lo < med < hi and lo > 3.5 and hi < 6.5


@pytest.mark.slow
def test_ppo_vs_sb3_toy(tmp_path):
    cmd = [sys.executable, "paper_figures/ppo_vs_sb3.py", "--train", "--seeds", "2"]
    cmd += ["--total-timesteps", "4096", "--sweeps-root", str(tmp_path / "sweeps")]
    cmd += ["--out", str(tmp_path / "out"), "--", "--eval-episodes", "1"]
    subprocess.run(cmd, cwd=ROOT, check=True, timeout=scaled(600))
    rows = list(csv.DictReader((tmp_path / "out" / "ppo_vs_sb3.csv").open()))
    assert sorted((r["side"], r["seed"], r["steps"]) for r in rows) == [
        ("SB3", "1", "4096"),
        ("SB3", "2", "4096"),
        ("controlrl", "1", "4096"),
        ("controlrl", "2", "4096"),
    ]
    tests = list(csv.DictReader((tmp_path / "out" / "ppo_vs_sb3_tests.csv").open()))
    assert [t["metric"] for t in tests] == ["final_train_return", "final_eval_return"]
    assert (tmp_path / "out" / "ppo_vs_sb3.png").stat().st_size > 5000
