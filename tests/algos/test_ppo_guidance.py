"""ppo.py's guidance options: --start-states puts the training episodes (not the evaluation's)
at the file's states, --bc-demos clones the demonstrations before RL; bad files exit 2 naming
the flag."""

import csv
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from timeouts import scaled

ROOT = Path(__file__).resolve().parents[2]
FAST = ["--env-id", "SparseMountainCar-v0", "--num-envs", "2", "--num-steps", "64",
        "--num-minibatches", "2", "--update-epochs", "1", "--total-timesteps", "256",
        "--eval-episodes", "2", "--no-progress", "--no-tensorboard"]  # fmt: skip


def ppo(*argv):
    return subprocess.run(
        [sys.executable, "algos/ppo.py", *argv], cwd=ROOT, capture_output=True, text=True,
        timeout=scaled(300),
    )  # fmt: skip


def test_start_states_place_the_training_episodes(tmp_path):
    np.save(tmp_path / "goal.npy", np.array([[0.49, 0.05]]))  # one step right of the goal
    run = tmp_path / "run"
    out = ppo(*FAST, "--start-states", str(tmp_path / "goal.npy"), "--run-dir", str(run))
    assert out.returncode == 0, out.stderr[-2000:]
    with open(run / "metrics.csv") as f:
        rows = list(csv.DictReader(f))
    # every training episode started there: each one ends in at most two steps, with reward 1
    for r in rows:
        assert int(r["train/episodes"]) >= 64
        assert float(r["train/episode_length"]) <= 2 and float(r["train/episode_return"]) > 0.5
    # the evaluation keeps the env's own starts, in the valley: from there it arrives nowhere
    assert json.loads((run / "final_eval.json").read_text())["eval_return_mean"] == 0.0


def test_bc_demos_clone_before_rl(tmp_path):
    rng = np.random.default_rng(0)
    obs = np.stack([rng.uniform(-1.2, 0.5, 200), rng.uniform(-0.07, 0.07, 200)], 1)
    pump = np.where(obs[:, 1] >= 0, 2, 0)  # push along the velocity
    np.savez(tmp_path / "demos.npz", obs=obs.astype(np.float32), actions=pump)
    run = tmp_path / "run"
    out = ppo(*FAST, "--bc-demos", str(tmp_path / "demos.npz"), "--bc-steps", "200",
              "--eval-episodes", "4", "--run-dir", str(run))  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    # pushing along the velocity (the demonstrations' rule) brings the hard starts to the
    # goal; the same run without the clone does not, at this budget
    plain = tmp_path / "plain"
    assert ppo(*FAST, "--eval-episodes", "4", "--run-dir", str(plain)).returncode == 0
    solved = {r: json.loads((r / "final_eval.json").read_text())["eval_return_mean"]
              for r in (run, plain)}  # fmt: skip
    assert solved[run] >= 0.75 and solved[plain] == 0.0


@pytest.mark.parametrize(
    "flag, content, words",
    [
        ("--start-states", np.array([[0.0, 0.5]]), "outside"),
        ("--start-states", np.zeros((2, 3)), "observes 2"),
        ("--bc-demos", None, "not a readable .npz"),
    ],
)
def test_bad_files_exit_2_naming_the_flag(tmp_path, flag, content, words):
    path = tmp_path / ("f.npy" if content is not None else "missing.npz")
    if content is not None:
        np.save(path, content)
    out = ppo(*FAST, flag, str(path), "--run-dir", str(tmp_path / "r"))
    assert out.returncode == 2
    assert out.stderr.strip().startswith(f"error: {flag}: ") and words in out.stderr
    assert not (tmp_path / "r").exists()
