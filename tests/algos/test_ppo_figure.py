"""The PPO results figure at toy size: trains, plots, writes the CSV."""

import csv
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_ppo_mujoco_figure_toy(tmp_path):
    cmd = [
        sys.executable,
        "paper_figures/ppo_mujoco.py",
        "--train",
        "--envs",
        "Hopper-v5",
        "--seeds",
        "2",
        "--total-timesteps",
        "2048",
        "--sweep-dir",
        str(tmp_path / "sweep"),
        "--out",
        str(tmp_path / "out"),
        "--",
        "--num-steps",
        "512",
        "--num-minibatches",
        "4",
        "--update-epochs",
        "1",
        "--eval-episodes",
        "1",
    ]
    subprocess.run(cmd, cwd=ROOT, check=True, timeout=600)
    rows = list(csv.DictReader((tmp_path / "out" / "ppo_mujoco.csv").open()))
    assert [r["seed"] for r in rows] == ["1", "2"]
    assert all(float(r["final_train_return"]) == float(r["final_train_return"]) for r in rows)
    assert (tmp_path / "out" / "ppo_mujoco.png").stat().st_size > 5000
