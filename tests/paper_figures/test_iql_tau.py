"""The IQL tau figure at toy size: a random-kind dataset generated into the sweep directory,
BC, IQL at two taus and the offline-to-online run, end to end; the CSVs hold what the runs
wrote (the scores read back from each run's final_eval.json and metrics.csv)."""

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow  # about 20 s of CPU (5 processes start torch and MuJoCo), minutes here
def test_iql_tau_toy(tmp_path):
    sweep, out = tmp_path / "sweep", tmp_path / "out"
    cmd = [sys.executable, "paper_figures/iql_tau.py", "--toy", "--train"]
    cmd += ["--sweep-dir", str(sweep), "--out", str(out)]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert (
        "generating: python -m envs.offline generate --env Hopper-v5 --kind random" in done.stdout
    )
    assert "command: python paper_figures/iql_tau.py --toy" in done.stdout
    rows = list(csv.DictReader((out / "iql_tau.csv").open()))
    name = "hopper-random-v5-s0-n2000"
    keys = [(r["dataset"], r["method"], r["tau"], r["online_steps"], r["seed"]) for r in rows]
    assert keys == [
        (name, "bc", "", "0", "1"),
        (name, "iql", "0.5", "0", "1"),
        (name, "iql", "0.9", "0", "1"),
        (name, "iql", "0.7", "100", "1"),
    ]
    labels = ["bc", "iql_tau0.5", "iql_tau0.9", "iql_tau0.7_online100"]
    for row, label in zip(rows, labels):
        run = sweep / name / label / "runs" / "iql" / "Hopper-v5" / "seed1"
        final = json.loads((run / "final_eval.json").read_text())
        assert float(row["final_normalized_score"]) == final["eval_normalized_score"]
        assert float(row["final_return"]) == final["eval_return_mean"]
        assert int(row["steps"]) == final["step"] == 100 + int(row["online_steps"])
        config = json.loads((run / "config.json").read_text())["args"]
        assert config["bc"] == (label == "bc") and config["online_steps"] == int(
            row["online_steps"]
        )
        if label != "bc":
            assert config["tau"] == float(row["tau"])
    curves = list(csv.DictReader((out / "iql_tau_curves.csv").open()))
    online = [r for r in curves if r["online_steps"] == "100"]
    assert [int(r["step"]) for r in online] == [50, 100, 150, 200]  # offline, then online
    assert float(online[-1]["score"]) == pytest.approx(
        float(rows[-1]["final_normalized_score"]), rel=1e-5
    )
    assert (out / "iql_tau.png").stat().st_size > 5000
