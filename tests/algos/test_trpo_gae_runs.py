"""trpo.py and gae.py end to end: smoke runs on MuJoCo and CartPole, resume, bad flags."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from algos import gae, trpo
from controlrl import checkpoint
from controlrl.cli import parse

ROOT = Path(__file__).resolve().parents[2]
SMALL = [
    "--num-steps",
    "128",
    "--num-envs",
    "2",
    "--eval-episodes",
    "1",
    "--no-progress",
    "--no-tensorboard",
]


def run(script, *argv):
    out = subprocess.run(
        [sys.executable, f"algos/{script}.py", *argv],
        cwd=ROOT,
        env={**os.environ, "MUJOCO_GL": "egl"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]


@pytest.mark.parametrize("script", ["trpo", "gae"])
@pytest.mark.parametrize("env_id", ["Hopper-v5", "CartPole-v1"])
def test_smoke(script, env_id, tmp_path):
    run(
        script,
        "--env-id",
        env_id,
        "--total-timesteps",
        "512",
        "--run-dir",
        str(tmp_path / "r"),
        "--checkpoint-every",
        "1",
        *SMALL,
    )
    lines = (tmp_path / "r" / "metrics.csv").read_text().splitlines()
    assert [int(x.split(",")[0]) for x in lines[1:]] == [256, 512]
    header = lines[0].split(",")
    for column in ("train/kl_mean", "train/kl_max", "train/accepted", "train/ratio_dev_frac"):
        assert column in header
    if script == "gae":
        assert "train/vf_constraint" in header
    state = checkpoint.load(tmp_path / "r" / "checkpoints" / "latest.pt")
    assert state["step"] == 512
    config = json.loads((tmp_path / "r" / "config.json").read_text())
    assert config["algo"] == script
    # resuming a finished run only re-runs the final evaluation
    run(script, "--resume", str(tmp_path / "r"))
    assert len((tmp_path / "r" / "metrics.csv").read_text().splitlines()) == 3


@pytest.mark.parametrize(
    "module, argv, fragment",
    [
        (trpo, ["--max-kl", "0"], "--max-kl must be > 0"),
        (trpo, ["--line-search-shrinking-factor", "1.5"], "must be in (0, 1)"),
        (trpo, ["--cg-damping", "-1"], "--cg-damping must be >= 0"),
        (gae, ["--vf-max-kl", "0"], "--vf-max-kl must be > 0"),
        (gae, ["--env-id", "Hopper-v9"], "closest: Hopper-v5"),
    ],
)
def test_bad_flags(module, argv, fragment, capsys):
    with pytest.raises(SystemExit) as exc:
        parse(module.Args, argv)
    assert exc.value.code == 2
    assert fragment in capsys.readouterr().err
