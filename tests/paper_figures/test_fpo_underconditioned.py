"""The under-conditioned FPO figure end to end at toy size: one run per (task, algorithm), the
CSV rows what each run's final evaluation and metrics hold, the PNG drawn."""

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest
from timeouts import scaled

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow  # four processes, two of them FPO on MuJoCo
def test_toy_run_writes_what_the_runs_hold(tmp_path):
    sweep, out = tmp_path / "sweep", tmp_path / "out"
    cmd = [sys.executable, "paper_figures/fpo_underconditioned.py", "--toy", "--train"]
    cmd += ["--sweep-dir", str(sweep), "--out", str(out)]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=scaled(600))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    rows = list(csv.DictReader((out / "fpo_underconditioned.csv").open()))
    assert sorted((r["env"], r["algo"]) for r in rows) == [
        ("Reacher-v5", "fpo"), ("Reacher-v5", "ppo"),
        ("ReacherPartialGoal-v5", "fpo"), ("ReacherPartialGoal-v5", "ppo"),
    ]  # fmt: skip
    curves = list(csv.DictReader((out / "fpo_underconditioned_curves.csv").open()))
    for r in rows:
        run = sweep / "runs" / r["algo"] / r["env"] / f"seed{r['seed']}"
        final = json.loads((run / "final_eval.json").read_text())
        assert float(r["final_eval_return"]) == pytest.approx(final["eval_return_mean"], rel=1e-5)
        assert json.loads((run / "config.json").read_text())["args"]["env_id"] == r["env"]
        mine = [
            float(c["eval_return"])
            for c in curves
            if (c["algo"], c["env"]) == (r["algo"], r["env"])
        ]
        assert [
            int(c["step"]) for c in curves if (c["algo"], c["env"]) == (r["algo"], r["env"])
        ] == [128, 256]
        assert float(r["mean_eval_return"]) == pytest.approx(sum(mine) / 2, rel=1e-4)
    assert (out / "fpo_underconditioned.png").stat().st_size > 5000
