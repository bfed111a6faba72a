"""Every on-policy algorithm runs unchanged on the dmc:, brax:, envpool: and bandit: backends."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from timeouts import scaled

ROOT = Path(__file__).resolve().parents[2]
QUIET = ["--no-progress", "--no-tensorboard", "--eval-episodes", "2"]
MINIBATCHED = {"ppo", "spo", "fixpo", "bpo"}


def run_algo(algo: str, env_id: str, run_dir: Path, *extra: str) -> subprocess.CompletedProcess:
    argv = [sys.executable, f"algos/{algo}.py", "--env-id", env_id, "--run-dir", str(run_dir)]
    argv += ["--num-envs", "2", "--num-steps", "64", "--total-timesteps", "256", *QUIET, *extra]
    if algo in MINIBATCHED:
        argv += ["--num-minibatches", "2", "--update-epochs", "2"]
    env = {**os.environ, "MUJOCO_GL": "egl"}
    out = subprocess.run(
        argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=scaled(300)
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return out


def check_run(run_dir: Path) -> None:
    steps = [int(line.split(",")[0]) for line in (run_dir / "metrics.csv").read_text().split()[1:]]
    assert steps == [128, 256]
    final = json.loads((run_dir / "final_eval.json").read_text())
    assert final["step"] == 256 and final["eval_return_mean"] == final["eval_return_mean"]


@pytest.mark.parametrize("algo", ["ppo", "trpo", "gae", "spo", "fixpo", "bpo"])
def test_every_algorithm_on_dm_control(algo, tmp_path):
    run_algo(algo, "dmc:cartpole-balance", tmp_path / algo)
    check_run(tmp_path / algo)


@pytest.mark.parametrize("algo", ["ppo", "trpo"])
def test_brax_tiny_env(algo, tmp_path):
    pytest.importorskip("brax")
    out = run_algo(algo, "brax:inverted_pendulum", tmp_path / algo, "--brax-pipeline", "spring")
    check_run(tmp_path / algo)
    config = json.loads((tmp_path / algo / "config.json").read_text())
    assert config["args"]["brax_pipeline"] == "spring"
    assert "brax:inverted_pendulum: compiled in" in out.stderr + out.stdout


@pytest.mark.parametrize("algo", ["ppo", "spo"])
def test_envpool(algo, tmp_path):
    pytest.importorskip("envpool")
    run_algo(algo, "envpool:Hopper-v5", tmp_path / algo)
    check_run(tmp_path / algo)


@pytest.mark.parametrize(
    "algo, env_id, length",
    [("ppo", "bandit:sequence-reverse-2-4", 4), ("trpo", "bandit:bimodal", 1)],
)
def test_bandits(algo, env_id, length, tmp_path):
    """Discrete token steps and one-step continuous pulls, through the shared on-policy path."""
    run_algo(algo, env_id, tmp_path / algo)
    check_run(tmp_path / algo)
    header, *rows = (tmp_path / algo / "metrics.csv").read_text().split()
    column = header.split(",").index("train/episode_length")
    assert {float(row.split(",")[column]) for row in rows} == {length}


def test_video_only_where_the_backend_renders(tmp_path):
    argv = [sys.executable, "algos/ppo.py", "--env-id", "brax:inverted_pendulum"]
    out = subprocess.run(
        [*argv, "--capture-video", "--run-dir", str(tmp_path / "v")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=scaled(120),
    )
    assert out.returncode == 2 and "--capture-video is not supported for brax" in out.stderr
    assert not (tmp_path / "v").exists()
