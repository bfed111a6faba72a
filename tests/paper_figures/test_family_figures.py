"""The trust-region family figure at toy size: train, plot, write the CSVs."""

import csv
import importlib.util
import shutil
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


def test_family_keeps_committed_rows_and_curves(tmp_path):
    """--keep-committed: an algorithm not rerun comes back from the CSVs with its rows and the
    curves write_curves stored (NaN cells dropped), the others from their runs."""
    import numpy as np

    fam = _load("trust_region_family")

    row = {"algo": "ppo", "env_id": "Hopper-v5", "seed": "3", "steps": 4096}
    row.update(final_train_return=12.5, kl_max=float("nan"))
    curves = {"episode_return": (np.array([2048.0, 4096.0]), np.array([1.0, 2.5]))}
    curves["kl_max"] = (np.array([4096.0]), np.array([0.03]))
    other = {"row": {**row, "algo": "spo"}, "curves": {}}
    fam.write_curves(tmp_path / "trust_region_family_curves.csv", [{"row": row, "curves": curves}])
    with (tmp_path / "trust_region_family.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(row))
        writer.writeheader()
        writer.writerows([row, other["row"]])
    (back,) = fam.committed(tmp_path, ["ppo"])
    assert back["row"]["algo"] == "ppo" and back["row"]["steps"] == 4096
    assert back["row"]["final_train_return"] == 12.5 and np.isnan(back["row"]["kl_max"])
    assert back["curves"].keys() == curves.keys()
    for col, (steps, values) in curves.items():
        np.testing.assert_allclose(back["curves"][col][0], steps)
        np.testing.assert_allclose(back["curves"][col][1], values, rtol=1e-5)
    assert [r["row"]["algo"] for r in fam.committed(tmp_path, ["ppo", "spo"])] == ["ppo", "spo"]


FIVE = ["--algos", "ppo,trpo,spo,fixpo,bpo"]
COMMITTED = {  # the committed family figures and the flags that made them
    "trust_region_family": [*FIVE, "--envs", "Hopper-v5,HalfCheetah-v5,Walker2d-v5", "--seeds",
                            "7", "--total-timesteps", "300000"],
    "trust_region_family_49k": ["--seeds", "5", "--total-timesteps", "49152"],
    "trust_region_family_1m": [*FIVE, "--envs", "Hopper-v5", "--seeds", "7", "--total-timesteps",
                               "1000000"],
}  # fmt: skip


def test_a_figure_names_the_flags_that_changed_its_setting_from_the_protocol():
    fam = _load("trust_region_family")
    assert fam.setting_flags(["--num-minibatches", "32", "--eval-episodes", "10"]) == (
        " + --num-minibatches 32"
    )
    assert fam.setting_flags(["--eval-episodes", "10", "--eval-every=0"]) == ""
    assert fam.setting_flags(["--eval-every=0", "--num-envs", "1"]) == " + --num-envs 1"


@pytest.mark.parametrize("name", sorted(COMMITTED))
def test_committed_family_figure_redraws_from_its_csvs_alone(name, tmp_path):
    """--keep-committed with a sweep directory without runs redraws the PNG from the committed
    CSVs and writes them back byte for byte: the figure shows the runs the CSVs hold."""
    out = ROOT / "paper_figures" / "out"
    files = [f"{name}.csv", f"{name}_curves.csv", f"{name}_iqm.csv"]
    for f in files:
        shutil.copy(out / f, tmp_path / f)
    fam = _load("trust_region_family")
    fam.main([*COMMITTED[name], "--keep-committed", "--name", name, "--out", str(tmp_path),
              "--sweep-dir", str(tmp_path / "none")])  # fmt: skip
    assert (tmp_path / f"{name}.png").stat().st_size > 5000
    for f in files:
        assert (tmp_path / f).read_bytes() == (out / f).read_bytes(), f


def test_runs_of_a_backend_id_are_found_where_the_sweep_writes_them(tmp_path):
    """An 'envpool:<id>' run lives in the directory the sweep runner plans for it: the family
    script reads it back from there (a colon is no path character)."""
    import argparse
    import json

    from controlrl import experiment

    env = "envpool:Hopper-v5"
    config = experiment.SweepConfig(["ppo"], [env], 1, 4096)
    (task,) = experiment.plan(config, tmp_path / "ppo")
    run = Path(task.run_dir)
    run.mkdir(parents=True)
    (run / "final_eval.json").write_text(json.dumps({"step": 4096, "eval_return_mean": 7.0}))
    (run / "metrics.csv").write_text(
        "step,train/episode_return,train/episodes,train/ratio_dev_mean,train/ratio_dev_max,"
        "train/kl_max\n4096,5.0,2,0.1,0.2,0.01\n"
    )
    (run / "timing.csv").write_text("step,time/rollout_s,time/update_s\n4096,1.0,2.0\n")
    fam = _load("trust_region_family")
    args = argparse.Namespace(sweep_dir=tmp_path, final_window=4096)
    (found,) = fam.collect(args, ["ppo"], [env])
    assert found["row"]["env_id"] == env and found["row"]["final_eval_return"] == 7.0


def _load(name: str):
    """paper_figures/<name>.py, a script, not in a package."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "paper_figures" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _script(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "paper_figures" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_keep_committed_grows_the_study_by_tasks_and_refuses_another_budget(tmp_path):
    """keep(): committed (algorithm, env) pairs the sweep has no run of come back, envs outside
    the sweep's included; a pair the sweep ran is the sweep's; another step count is refused."""
    fam = _script("trust_region_family")
    committed = [{"algo": a, "env_id": e, "seed": "1", "steps": 4096, "final_train_return": 1.0}
                 for a in ("ppo", "trpo") for e in ("Hopper-v5", "Walker2d-v5")]  # fmt: skip
    with (tmp_path / "fam.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(committed[0]))
        writer.writeheader()
        writer.writerows(committed)
    swept = [{"row": {"algo": "ppo", "env_id": "Walker2d-v5", "seed": "1", "steps": 4096}}]
    kept = fam.keep(swept, tmp_path, ["ppo", "trpo"], "fam")
    pairs = sorted((r["row"]["algo"], r["row"]["env_id"]) for r in kept)
    assert pairs == [("ppo", "Hopper-v5"), ("trpo", "Hopper-v5"), ("trpo", "Walker2d-v5")]
    assert [r["row"]["algo"] for r in fam.keep([], tmp_path, ["trpo"], "fam")] == ["trpo"] * 2
    other = [{"row": {**swept[0]["row"], "steps": 8192}}]
    with pytest.raises(SystemExit, match="ppo runs of \\[4096\\] steps"):
        fam.keep(other, tmp_path, ["ppo", "trpo"], "fam")
