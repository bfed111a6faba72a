"""The MuJoCo results figure at toy size: sweeps, plots, writes the CSV."""

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["ppo", "trpo"])
def test_mujoco_results_toy(algo, tmp_path):
    cmd = [
        sys.executable,
        "paper_figures/mujoco_results.py",
        "--algo",
        algo,
        "--train",
        "--envs",
        "Hopper-v5,HalfCheetah-v5",
        "--seeds",
        "2",
        "--total-timesteps",
        "1024",
        "--sweeps-root",
        str(tmp_path / "sweeps"),
        "--out",
        str(tmp_path / "out"),
        "--",
        "--num-steps",
        "256",
        "--num-envs",
        "2",
        "--eval-episodes",
        "1",
    ]
    if algo == "ppo":
        cmd += ["--num-minibatches", "4", "--update-epochs", "1"]
    subprocess.run(cmd, cwd=ROOT, check=True, timeout=600)
    rows = list(csv.DictReader((tmp_path / "out" / f"{algo}_mujoco.csv").open()))
    assert sorted((r["env_id"], r["seed"]) for r in rows) == [
        ("HalfCheetah-v5", "1"),
        ("HalfCheetah-v5", "2"),
        ("Hopper-v5", "1"),
        ("Hopper-v5", "2"),
    ]
    assert (tmp_path / "out" / f"{algo}_mujoco.png").stat().st_size > 5000
    if algo == "trpo":  # RL Zoo's HalfCheetah target_kl went to its own sweep
        assert (tmp_path / "sweeps" / "trpo_mujoco_HalfCheetah-v5" / "sweep.json").exists()


@pytest.mark.slow
def test_gae_lambda_gamma_toy(tmp_path):
    cmd = [
        sys.executable,
        "paper_figures/gae_lambda_gamma.py",
        "--env-id",
        "Pendulum-v1",
        "--total-timesteps",
        "512",
        "--seeds",
        "1",
        "--lambdas",
        "0.0,1.0",
        "--gammas",
        "0.9,0.99",
        "--sweeps-root",
        str(tmp_path / "sweeps"),
        "--out",
        str(tmp_path / "out"),
        "--name",
        "grid",
        "--",
        "--num-steps",
        "128",
    ]
    subprocess.run(cmd, cwd=ROOT, check=True, timeout=600)
    rows = list(csv.DictReader((tmp_path / "out" / "grid.csv").open()))
    assert len(rows) == 4 and all(r["status"] == "done" for r in rows)
    for r in rows:  # the run's own final evaluation and its budget
        final = json.loads(
            next(
                (tmp_path / "sweeps").glob(f"*gamma{r['gamma']}_lambda{r['lambda']}/runs/*/*/seed1")
            )
            .joinpath("final_eval.json")
            .read_text()
        )
        assert float(r["final_eval_return"]) == final["eval_return_mean"]
        assert int(r["steps"]) == final["step"] >= 512
        assert float(r["train_s"]) > 0  # the run's seconds collecting and updating
    assert {(r["gamma"], r["lambda"]) for r in rows} == {
        ("0.9", "0.0"),
        ("0.9", "1.0"),
        ("0.99", "0.0"),
        ("0.99", "1.0"),
    }
    assert (tmp_path / "out" / "grid.png").stat().st_size > 5000  # --name is the stem of both


@pytest.mark.slow
def test_dmc_suite_toy(tmp_path):
    cmd = [sys.executable, "paper_figures/mujoco_results.py", "--algo", "ppo", "--suite", "dmc"]
    cmd += ["--train", "--seeds", "1", "--total-timesteps", "512"]
    cmd += ["--sweeps-root", str(tmp_path / "sweeps"), "--out", str(tmp_path / "out"), "--"]
    cmd += ["--num-steps", "256", "--num-envs", "2", "--eval-episodes", "1"]
    cmd += ["--num-minibatches", "4", "--update-epochs", "1"]
    subprocess.run(cmd, cwd=ROOT, check=True, timeout=600)
    rows = list(csv.DictReader((tmp_path / "out" / "ppo_dmc.csv").open()))
    assert sorted(r["env_id"] for r in rows) == ["dmc:cheetah-run", "dmc:walker-walk"]
    assert {r["reference"] for r in rows} == {"472.0", "306.0"}
