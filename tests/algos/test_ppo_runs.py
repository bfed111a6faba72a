"""ppo.py end to end: smoke runs, identical metrics for the same seed, SIGKILL + --resume."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from timeouts import scaled

from controlrl import checkpoint

ROOT = Path(__file__).resolve().parents[2]
FAST = ["--num-minibatches", "4", "--update-epochs", "2", "--no-progress", "--no-tensorboard"]


def ppo(*argv, check=True, **kw):
    env = {**os.environ, "MUJOCO_GL": "egl"}
    out = subprocess.run(
        [sys.executable, "algos/ppo.py", *argv],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=scaled(300),
        **kw,
    )
    if check:
        assert out.returncode == 0, out.stderr[-2000:]
    return out


def read_steps(run_dir: Path) -> list[int]:
    lines = (run_dir / "metrics.csv").read_text().splitlines()[1:]
    return [int(line.split(",")[0]) for line in lines]


def test_smoke_cartpole_discrete(tmp_path):
    run = tmp_path / "cp"
    ppo(
        "--env-id",
        "CartPole-v1",
        "--num-envs",
        "2",
        "--num-steps",
        "128",
        "--total-timesteps",
        "512",
        "--eval-episodes",
        "2",
        "--run-dir",
        str(run),
        *FAST,
    )
    assert read_steps(run) == [256, 512]
    config = json.loads((run / "config.json").read_text())
    assert config["algo"] == "ppo" and config["args"]["env_id"] == "CartPole-v1"
    assert json.loads((run / "final_eval.json").read_text())["eval_return_mean"] > 0


def test_smoke_mujoco_with_tensorboard_and_video(tmp_path):
    run = tmp_path / "hop"
    ppo(
        "--env-id",
        "Hopper-v5",
        "--num-steps",
        "128",
        "--total-timesteps",
        "256",
        "--eval-every",
        "256",
        "--eval-episodes",
        "1",
        "--capture-video",
        "--run-dir",
        str(run),
        "--num-minibatches",
        "4",
        "--update-epochs",
        "2",
        "--no-progress",
    )
    assert read_steps(run) == [128, 256]
    header = (run / "metrics.csv").read_text().splitlines()[0]
    for column in ("train/approx_kl", "train/clip_frac", "train/explained_variance", "eval/return"):
        assert column in header
    assert "time/sps" in (run / "timing.csv").read_text()
    assert any((run / "tb").iterdir())
    videos = list((run / "videos").glob("*.mp4"))
    assert videos and all(v.stat().st_size > 1000 for v in videos)
    state = checkpoint.load(run / "checkpoints" / "latest.pt")
    assert state["step"] == 256 and state["obs_normalizer"]["count"] > 256


def test_same_seed_gives_identical_metrics(tmp_path):
    args = [
        "--env-id",
        "Pendulum-v1",
        "--num-steps",
        "256",
        "--total-timesteps",
        "768",
        "--eval-every",
        "0",
        "--eval-episodes",
        "1",
        *FAST,
    ]
    a, b = tmp_path / "a", tmp_path / "b"
    ppo(*args, "--seed", "7", "--run-dir", str(a))
    # b: the same run as a kill before its first checkpoint leaves it (config.json and rows, no
    # checkpoint); --resume runs it again from step 0, dropping the rows, in a second process
    b.mkdir()
    for name in ("config.json", "metrics.csv", "timing.csv"):
        (b / name).write_bytes((a / name).read_bytes())
    ppo("--resume", str(b))
    ppo(*args, "--seed", "8", "--run-dir", str(tmp_path / "c"))
    rows = (a / "metrics.csv").read_bytes()
    assert rows == (b / "metrics.csv").read_bytes()
    assert rows != (tmp_path / "c" / "metrics.csv").read_bytes()


def test_sigkill_then_resume_continues_from_checkpoint(tmp_path):
    run = tmp_path / "run"
    argv = [
        "--env-id",
        "Hopper-v5",
        "--num-envs",
        "2",
        "--num-steps",
        "128",
        "--total-timesteps",
        "8192",
        "--checkpoint-every",
        "2",
        "--eval-every",
        "0",
        "--eval-episodes",
        "1",
        "--run-dir",
        str(run),
        *FAST,
    ]
    proc = subprocess.Popen(
        [sys.executable, "algos/ppo.py", *argv],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    latest = run / "checkpoints" / "latest.pt"
    deadline = time.time() + scaled(120)
    while time.time() < deadline:
        if latest.exists() and checkpoint.load(latest)["step"] >= 1024:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    killed = checkpoint.load(latest)
    assert 1024 <= killed["step"] < 8192, "the run finished before it could be killed"
    ppo("--resume", str(run))
    steps = read_steps(run)
    assert steps == list(range(256, 8193, 256)), steps  # every iteration exactly once
    final = checkpoint.load(latest)
    assert final["step"] == 8192 and final["iteration"] == 32
    config = json.loads((run / "config.json").read_text())["args"]
    assert config["resume"] is None
    # the normalisers continued from the checkpoint with the envs put back mid-episode, as
    # README's resume section says: no env restarts, so one observation and one discounted
    # return per env step after it, and nothing else
    steps_after = 8192 - killed["step"]
    obs_count = killed["obs_normalizer"]["count"] + steps_after
    assert abs(float(final["obs_normalizer"]["count"]) - obs_count) < 0.5
    return_count = killed["reward_scaler"]["count"] + steps_after
    assert abs(float(final["reward_scaler"]["count"]) - return_count) < 0.5
    # and the killed-and-resumed run is the uninterrupted one, byte for byte
    whole = tmp_path / "whole"
    ppo(*argv[: argv.index("--run-dir")], "--run-dir", str(whole), *FAST)
    assert (run / "metrics.csv").read_bytes() == (whole / "metrics.csv").read_bytes()
