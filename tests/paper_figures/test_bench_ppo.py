"""`make bench` script at toy size: every contender yields a row with positive rates."""

import csv
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "paper_figures" / "bench_ppo.py"


def test_bench_ppo_toy(tmp_path):
    pytest.importorskip("stable_baselines3")
    out = tmp_path / "b.csv"
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--toy", "--out", str(out)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    with out.open() as f:
        rows = {r["contender"]: r for r in csv.DictReader(f)}
    assert set(rows) == {"ours", "sb3", "floor"}
    for row in rows.values():
        assert row["num_envs"] == "1" and row["steps_per_iter"] == "256"
        assert float(row["sps"]) > 0 and float(row["iter_s"]) > 0
        assert float(row["rollout_s"]) > 0 and float(row["update_s"]) > 0
    for key in ("env_step_s", "actor_fwd_s", "batched_fwd_s", "train_s"):
        assert float(rows["floor"][key]) > 0, key
    assert "| envs | ours steps/s | SB3 steps/s | ours/SB3 |" in proc.stdout
    assert "command: python " in proc.stdout


def test_bench_ppo_rejects_bad_flags(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--toy",
            "--num-minibatches",
            "7",
            "--out",
            str(tmp_path / "b.csv"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and "--num-minibatches 7 must divide" in proc.stderr
    assert not (tmp_path / "b.csv").exists()


def test_trpo_toy_benchmark_runs_both_contenders(tmp_path):
    out = tmp_path / "t.csv"
    subprocess.run(
        [sys.executable, str(SCRIPT), "--algo", "trpo", "--toy", "--out", str(out)],
        cwd=tmp_path,
        check=True,
        timeout=300,
        capture_output=True,
    )
    rows = list(csv.DictReader(out.open()))
    assert sorted(r["contender"] for r in rows) == ["ours", "sb3"]
    assert all(r["algo"] == "trpo" and float(r["sps"]) > 0 for r in rows)
