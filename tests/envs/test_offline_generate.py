"""The dataset generator end to end: a tiny random dataset through the CLI whose every
transition obeys Pendulum's equations of motion (so s' is the true successor, the final
observation at a timeout included), and a tiny PPO-based run: snapshots, the medium pick,
medium-expert = medium + expert, medium-replay's size, the cached behaviour run reused."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from timeouts import scaled

pytest.importorskip("h5py")

from envs.offline import load  # noqa: E402
from envs.offline.generate import (  # noqa: E402
    behaviour_dir,
    generate,
    pick_medium,
    ppo_command,
    train_behaviour,
)

REPO = Path(__file__).resolve().parents[2]
ARRAYS = ("observations", "actions", "rewards", "next_observations", "terminals", "timeouts")


def pendulum_step(obs: np.ndarray, action: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Gymnasium's Pendulum-v1 dynamics (g=10, m=l=1, dt=0.05): (next obs, reward)."""
    th = np.arctan2(obs[:, 1], obs[:, 0])
    thdot = obs[:, 2]
    u = np.clip(action[:, 0], -2.0, 2.0)
    norm_th = ((th + np.pi) % (2 * np.pi)) - np.pi
    reward = -(norm_th**2 + 0.1 * thdot**2 + 0.001 * u**2)
    new_thdot = np.clip(thdot + (3 * 10.0 / 2 * np.sin(th) + 3.0 * u) * 0.05, -8, 8)
    new_th = th + new_thdot * 0.05
    return np.stack([np.cos(new_th), np.sin(new_th), new_thdot], 1), reward


def test_random_dataset_cli_end_to_end(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "envs.offline", "generate", "--env", "Pendulum-v1", "--kind",
         "random", "--steps", "500", "--num-envs", "2", "--seed", "3", "--out", str(tmp_path),
         "--no-progress"],
        capture_output=True, text=True, cwd=REPO,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    path = tmp_path / "pendulum-random-v1-s3-n500.hdf5"
    assert f"wrote {path}: 500 transitions" in proc.stdout
    data = load(path)
    assert len(data) == 500 and data.env_id == "Pendulum-v1"
    # two envs x 250 steps, env by env: each hits the 200-step limit once, then is cut
    assert np.flatnonzero(data.timeouts).tolist() == [199, 249, 449, 499]
    assert not data.terminals.any()
    # every stored (s, a, r, s') obeys the dynamics: s' is the true successor, also at the
    # time limit (where the env was reset and the next row starts elsewhere)
    nxt, reward = pendulum_step(data.observations, data.actions)
    np.testing.assert_allclose(data.next_observations, nxt, atol=2e-5)
    np.testing.assert_allclose(data.rewards, reward, rtol=1e-5, atol=1e-5)
    assert not np.allclose(data.next_observations[199], data.observations[200], atol=1e-3)
    inside = np.flatnonzero(~data.timeouts[:-1])
    np.testing.assert_array_equal(data.next_observations[inside], data.observations[inside + 1])
    assert np.abs(data.actions).max() <= 2.0  # the clipped actions the env executed
    assert data.metadata["recipe"].startswith(
        "python -m envs.offline generate --env Pendulum-v1 --kind random --steps 500 --seed 3"
    )
    minari = tmp_path / "minari" / "controlrl" / "pendulum-random-v1-s3-n500-v0"
    if minari.exists():  # written when the offline extra's minari is installed
        copy = load(minari)
        for key in ARRAYS:
            np.testing.assert_array_equal(getattr(copy, key), getattr(data, key), err_msg=key)


def test_a_relative_out_directory_writes_both_copies(tmp_path):
    """--out relative to the working directory: the HDF5 file and the Minari copy (whose path
    the Minari writer joined onto itself, always failing) are written there."""
    pytest.importorskip("minari")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    proc = subprocess.run(
        [sys.executable, "-m", "envs.offline", "generate", "--env", "Pendulum-v1", "--kind",
         "random", "--steps", "300", "--seed", "1", "--out", "data/sets", "--no-progress"],
        capture_output=True, text=True, cwd=tmp_path, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / "data" / "sets"
    data = load(out / "pendulum-random-v1-s1-n300.hdf5")
    copy = load(out / "minari" / "controlrl" / "pendulum-random-v1-s1-n300-v0")
    for key in ARRAYS:
        np.testing.assert_array_equal(getattr(copy, key), getattr(data, key), err_msg=key)
    assert sorted(p.name for p in (out / ".partial").glob("*.tmp")) == []


def test_pick_medium_first_snapshot_reaching_a_third_of_expert(tmp_path):
    curve = [(1000 * k, r) for k, r in enumerate([5, float("nan"), 10, 20, 60, 80, 90, 300], 1)]
    info = {"expert_return": 150.0, "curve": curve}
    snaps = [(s, tmp_path / f"{s}.pt") for s in (2000, 4000, 6000, 7000, 8000)]
    # target 50: the mean of the finite returns of the last 5 rows first reaches it at step 7000
    # ((10 + 20 + 60 + 80 + 90) / 5 = 52; at 6000 it is (10 + 20 + 60 + 80) / 4 = 42.5)
    step, path, target = pick_medium(info, snaps, 1 / 3)
    assert (step, target) == (7000, 50.0) and path == tmp_path / "7000.pt"
    info["expert_return"] = 3000.0  # never reached: the last snapshot
    assert pick_medium(info, snaps, 1 / 3)[0] == 8000


TINY_PPO = "--num-steps 256 --num-minibatches 4 --update-epochs 1 --eval-episodes 1"


def test_tiny_ppo_behaviour_run_and_kinds(tmp_path):
    """medium-expert trains the behaviour run (4 PPO iterations), rolls out medium and expert
    and concatenates them; medium-replay then reuses the cached run."""
    kw = dict(steps=300, seed=1, ppo_budget=1024, ppo_args=TINY_PPO, num_envs=1, progress=False)
    kw["score_episodes"] = 8
    path = generate("Pendulum-v1", "medium-expert", tmp_path, **kw)
    behaviour = next((tmp_path / "behaviour").iterdir())
    info = json.loads((behaviour / "behaviour.json").read_text())
    snaps = sorted(p.name for p in (behaviour / "ppo" / "checkpoints").glob("step_*.pt"))
    assert snaps == [f"step_{256 * k:09d}.pt" for k in (1, 2, 3, 4)]
    assert [s for s, _ in info["curve"]] == [256, 512, 768, 1024]
    both = load(path)
    medium, expert = (load(str(path).replace("medium-expert", k)) for k in ("medium", "expert"))
    for key in ARRAYS:
        np.testing.assert_array_equal(
            getattr(both, key), np.concatenate([getattr(medium, key), getattr(expert, key)])
        )
    assert len(medium) == len(expert) == 300 and len(both) == 600
    assert expert.metadata["policy_step"] == 1024
    refs = (info["random_return"], info["expert_return"])
    assert (both.ref_min_score, both.ref_max_score) == refs and info["score_episodes"] == 8
    target = medium.metadata["behaviour"]["medium_target_return"]  # expert x (1/3): rounding
    assert target == pytest.approx(info["expert_return"] / 3, rel=1e-12)
    ppo_log = (behaviour / "ppo.log").read_bytes()
    replay = load(generate("Pendulum-v1", "medium-replay", tmp_path, **{**kw, "score_episodes": 9}))
    assert (behaviour / "ppo.log").read_bytes() == ppo_log  # no second PPO run
    rescored = json.loads((behaviour / "behaviour.json").read_text())
    assert rescored["score_episodes"] == 9 and rescored["curve"] == info["curve"]
    assert (replay.ref_min_score, replay.ref_max_score) == (
        rescored["random_return"],
        rescored["expert_return"],
    )
    iterations = replay.metadata["ppo_iterations"]
    assert iterations == max(1, medium.metadata["policy_step"] // 256)
    assert len(replay) == 256 * iterations  # PPO's 1 env x 256 steps per iteration


def test_interrupted_behaviour_run_resumes_and_keeps_its_step_files(tmp_path):
    """The generator's PPO run killed after its first kept checkpoint; the next generator call
    resumes it (--resume) and the step files already kept survive, the rest are added."""
    run = behaviour_dir(tmp_path, "Pendulum-v1", 2, 1024, TINY_PPO)
    run.mkdir(parents=True)
    first = run / "ppo" / "checkpoints" / f"step_{256:09d}.pt"
    cmd = ppo_command(run / "ppo", "Pendulum-v1", 2, 1024, TINY_PPO)
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + scaled(60)
        while not first.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.005)
    finally:
        proc.kill()
        proc.wait()
    assert first.exists() and not (run / "ppo" / "final_eval.json").exists()
    inode = first.stat().st_ino
    assert "--resume" in ppo_command(run / "ppo", "Pendulum-v1", 2, 1024, TINY_PPO)
    info = train_behaviour(run, "Pendulum-v1", 2, 1024, TINY_PPO, False, score_episodes=2)
    kept = sorted(p.name for p in (run / "ppo" / "checkpoints").glob("step_*.pt"))
    assert kept == [f"step_{256 * k:09d}.pt" for k in (1, 2, 3, 4)]
    assert first.stat().st_ino == inode  # the interrupted run's file, not a new one
    assert "--resume" in info["ppo_command"] and info["expert_step"] == 1024
    assert [s for s, _ in info["curve"]][-1] == 1024


@pytest.mark.parametrize(
    "flags, words",
    [
        (["--env", "Hoper-v5", "--kind", "random"], "closest: Hopper-v5"),
        (["--env", "CartPole-v1", "--kind", "random"], "Box (continuous) actions"),
        (["--env", "Hopper-v5", "--kind", "random", "--steps", "0"], "--steps must be >= 1"),
        (["--env", "Hopper-v5", "--kind", "medium", "--medium-fraction", "1.5"], "(0, 1)"),
    ],
)
def test_generate_bad_flags_one_line_exit_2(tmp_path, capsys, flags, words):
    from envs.offline.__main__ import main

    assert main(["generate", *flags, "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and words in err[0], err
    assert not any(tmp_path.iterdir())  # nothing started, nothing written
