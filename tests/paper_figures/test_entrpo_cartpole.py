"""The EnTRPO figure (paper_figures/entrpo_cartpole.py): a toy run pairs the two variants seed by
seed, and its metrics are the run's own final evaluation and the mean of its evaluations."""

import csv
import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location(
    "entrpo_cartpole", ROOT / "paper_figures/entrpo_cartpole.py"
)
fig = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = fig
spec.loader.exec_module(fig)


@pytest.mark.slow  # the figure script end to end at toy size
def test_toy_run(tmp_path):
    sweeps = tmp_path / "sweeps"
    fig.main(["--toy", "--seeds", "1", "--out", str(tmp_path), "--sweeps-root", str(sweeps)])
    with open(tmp_path / "entrpo_cartpole.csv") as f:
        rows = list(csv.DictReader(f))
    assert [(r["variant"], r["seed"]) for r in rows] == [("trpo", "1"), ("entrpo", "1")]
    for r in rows:
        run = sweeps / f"{r['variant']}_2048" / "runs" / "trpo" / "CartPole-v1" / "seed1"
        config = json.loads((run / "config.json").read_text())["args"]
        assert config["entropy_coef"] == float(r["entropy_coef"])
        assert config["replay_rollouts"] == int(r["replay_rollouts"])
        final = json.loads((run / "final_eval.json").read_text())["eval_return_mean"]
        assert float(r["final_eval_return"]) == final
        with open(run / "metrics.csv") as f:
            evals = [float(m["eval/return"]) for m in csv.DictReader(f)]
        evals = [e for e in evals if np.isfinite(e)]
        assert int(r["evaluations"]) == len(evals) == 2
        assert abs(float(r["mean_eval_return"]) - np.mean(evals)) < 1e-4 * max(1, np.mean(evals))
    assert rows[1]["entropy_coef"] != "0" and rows[0]["replay_rollouts"] == "0"
