"""The trust-region family and depth-sweep figures at toy size: train, plot, write the CSVs."""

import csv
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOY = ["--num-steps", "256", "--num-minibatches", "4", "--update-epochs", "1"]
TOY += ["--eval-episodes", "1"]


@pytest.mark.slow
def test_trust_region_family_toy(tmp_path):
    cmd = [sys.executable, "paper_figures/trust_region_family.py", "--train"]
    cmd += ["--algos", "ppo,spo,fixpo,bpo", "--envs", "Hopper-v5,InvertedPendulum-v5"]
    cmd += ["--seeds", "2", "--total-timesteps", "512", "--final-window", "512"]
    cmd += ["--sweep-dir", str(tmp_path / "sweep"), "--out", str(tmp_path / "out"), "--", *TOY]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "command: python paper_figures/trust_region_family.py" in out.stdout
    rows = list(csv.DictReader((tmp_path / "out" / "trust_region_family.csv").open()))
    assert len(rows) == 4 * 2 * 2
    fix = [r for r in rows if r["algo"] == "fixpo"]
    assert all(0 <= float(r["fixup_share"]) < 1 for r in fix)
    assert all(float(r["kl_max"]) >= float(r["kl_mean"]) >= 0 for r in rows)
    iqm = list(csv.DictReader((tmp_path / "out" / "trust_region_family_iqm.csv").open()))
    assert [r["algo"] for r in iqm] == ["ppo", "spo", "fixpo", "bpo"]
    assert (tmp_path / "out" / "trust_region_family.png").stat().st_size > 5000


@pytest.mark.slow
def test_depth_sweep_toy(tmp_path):
    cmd = [sys.executable, "paper_figures/depth_sweep.py", "--train", "--envs", "Hopper-v5"]
    cmd += ["--depths", "2,7", "--seeds", "2", "--total-timesteps", "512"]
    cmd += ["--final-window", "512", "--sweep-dir", str(tmp_path / "sweep")]
    cmd += ["--out", str(tmp_path / "out"), "--", *TOY]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    rows = list(csv.DictReader((tmp_path / "out" / "depth_sweep.csv").open()))
    assert sorted({(r["algo"], r["depth"]) for r in rows}) == [
        ("ppo", "2"),
        ("ppo", "7"),
        ("spo", "2"),
        ("spo", "7"),
    ]
    assert {r["hidden_sizes"] for r in rows if r["depth"] == "7"} == {"256-256-128-128-64-64-64"}
    assert (tmp_path / "out" / "depth_sweep.png").stat().st_size > 5000
