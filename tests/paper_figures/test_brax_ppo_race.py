"""paper_figures/brax_ppo_race.py at toy size: all trainers run and leave sane rows and curves."""

import csv
import math
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "paper_figures" / "brax_ppo_race.py"


@pytest.mark.slow  # compiles brax's trainer (about a minute on 2 cores)
def test_brax_ppo_race_toy(tmp_path):
    pytest.importorskip("brax")
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--toy", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    with (tmp_path / "brax_ppo_race.csv").open() as f:
        rows = {r["trainer"]: r for r in csv.DictReader(f)}
    assert set(rows) == {"brax", "ours", "ours_jax"}
    for row in rows.values():
        assert row["seed"] == "1" and row["env"] == "inverted_pendulum"
        assert row["status"] == "ok" and row["command"].endswith(
            "brax_ppo_race.py --toy --out " + str(tmp_path)
        )
        assert int(row["total_steps"]) == 2048  # 2 evaluation intervals of 4 rollouts of 16x16
        total, startup = float(row["total_wall_s"]), float(row["startup_s"])
        assert 0 < startup < total
        assert float(row["train_compile_s"]) >= 0 and float(row["train_sps"]) > 0
        assert 0 < float(row["final_return"]) <= 1000
        if row["step_at_target"]:  # a toy run rarely balances, but may
            assert float(row["train_to_target_s"]) <= float(row["wall_to_target_s"]) <= total
        else:
            assert math.isnan(float(row["wall_to_target_s"]))
    with (tmp_path / "brax_ppo_race_curves.csv").open() as f:
        curves = list(csv.DictReader(f))
    expected = {"brax": [0, 1024, 2048], "ours": [1024, 2048], "ours_jax": [1024, 2048]}
    for trainer, evals in expected.items():
        points = [r for r in curves if r["trainer"] == trainer]
        assert [int(r["step"]) for r in points] == evals
        walls = [float(r["wall_s"]) for r in points]
        trains = [float(r["train_s"]) for r in points]
        assert walls == sorted(walls) and trains == sorted(trains)
        assert all(0 <= t <= w for t, w in zip(trains, walls))
    assert (tmp_path / "brax_ppo_race.png").stat().st_size > 0
    assert "command: python paper_figures/brax_ppo_race.py --toy" in proc.stdout
