"""ppo.py's command line: --help, and one clear line with exit code 2 for bad input."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from timeouts import scaled

from algos.ppo import Args
from controlrl import checkpoint
from controlrl.cli import config_dict, parse

ROOT = Path(__file__).resolve().parents[2]


def parse_error(argv, capsys) -> str:
    with pytest.raises(SystemExit) as exc:
        parse(Args, argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: "), err
    return err[0]


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["--env-id", "Hoper-v5"], "closest: Hopper-v5"),
        (["--num-envs", "0"], "--num-envs must be > 0"),
        (["--total-timesteps", "-5"], "--total-timesteps must be > 0"),
        (["--num-steps", "0"], "--num-steps must be > 0"),
        (["--learning-rate", "0"], "--learning-rate must be > 0"),
        (["--learning-rate", "-1e-3"], "--learning-rate must be > 0"),
        (["--num-minibatches", "7"], "must divide the batch num_steps * num_envs = 2048"),
        (["--gamma", "1.5"], "--gamma must be in [0, 1]"),
        (["--total-timesteps", "100"], "must be >= one batch"),
        (["--resume", "{tmp}/absent"], "no config.json"),  # a directory that does not exist
    ],
)
def test_bad_flags_fail_before_anything_starts(argv, fragment, capsys, tmp_path):
    run_dir = tmp_path / "run"
    argv = [a.format(tmp=tmp_path) for a in argv]
    line = parse_error([*argv, "--run-dir", str(run_dir)], capsys)
    assert fragment in line
    assert not run_dir.exists()


def test_missing_and_corrupt_checkpoints_on_resume(capsys, tmp_path):
    run_dir = tmp_path / "run"
    (run_dir / "checkpoints").mkdir(parents=True)
    config = config_dict(Args(env_id="Hopper-v5"), "ppo")
    (run_dir / "config.json").write_text(json.dumps(config))
    # no checkpoint yet (killed before the first): accepted, it restarts from step 0
    assert parse(Args, ["--resume", str(run_dir)]).resume == str(run_dir)
    (run_dir / "checkpoints" / "latest.pt").write_bytes(b"not a checkpoint")
    assert "corrupt" in parse_error(["--resume", str(run_dir)], capsys)
    checkpoint.save(run_dir / "checkpoints" / "latest.pt", {"step": 0})
    (run_dir / "config.json").write_text(json.dumps({**config, "algo": "spo"}))
    assert "that run is 'spo'" in parse_error(["--resume", str(run_dir)], capsys)


def test_existing_run_dir_is_not_overwritten(capsys, tmp_path):
    (tmp_path / "config.json").write_text("{}")
    assert "already holds a run" in parse_error(["--run-dir", str(tmp_path)], capsys)


def test_help_documents_every_flag_and_exit_code_is_2():
    out = subprocess.run(
        [sys.executable, "algos/ppo.py", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=scaled(120),
    )
    assert out.returncode == 0
    for flag in (
        "--env-id",
        "--seed",
        "--total-timesteps",
        "--num-envs",
        "--run-dir",
        "--resume",
        "--clip-coef",
        "--target-kl",
        "--capture-video",
        "--truncation-as-terminal",
        "--norm-obs",
        "--anneal-lr",
    ):
        assert flag in out.stdout, flag
    assert "ratio clip eps (CleanRL 0.2)" in out.stdout
    bad = subprocess.run(
        [sys.executable, "algos/ppo.py", "--env-id", "Nope-v0"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=scaled(120),
    )
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines()[-1].startswith("error: --env-id")


def test_resume_refuses_a_flag_that_conflicts_with_the_run(capsys, tmp_path):
    """--resume continues a run with the flags of its config.json: another value of any flag is
    refused in one line (it was silently ignored), the run's own value is accepted, and
    --progress / --no-progress applies."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    config = config_dict(Args(env_id="Hopper-v5", progress=True), "ppo")
    (run_dir / "config.json").write_text(json.dumps(config))
    for argv, fragment in (
        (["--total-timesteps", "5000"], "--total-timesteps 5000 conflicts with --resume"),
        (["--env-id", "Pendulum-v1"], "--env-id Pendulum-v1 conflicts"),
        (["--seed=7"], "--seed 7 conflicts"),
        (["--no-tensorboard"], "--tensorboard False conflicts"),
        (["--hidden-sizes", "8", "8"], "--hidden-sizes (8, 8) conflicts"),
        (["--run-dir", str(tmp_path / "other")], "is not the resumed directory"),
    ):
        line = parse_error(["--resume", str(run_dir), *argv], capsys)
        assert fragment in line, (argv, line)
    same = ["--env-id", "Hopper-v5", "--seed", "1", "--run-dir", str(run_dir), "--no-progress"]
    args = parse(Args, ["--resume", str(run_dir), *same])
    assert (args.env_id, args.total_timesteps, args.progress) == ("Hopper-v5", 1_000_000, False)
    assert args.run_dir == str(run_dir)


def test_a_checkpoint_resumes_only_the_algorithm_that_wrote_it(capsys, tmp_path):
    """A checkpoint names the algorithm that wrote it: another's (a dpo checkpoint in a ppo run
    directory) is refused in one line, as is a step or iteration that is not an integer >= 0
    (accepted, or a traceback, before)."""
    run_dir = tmp_path / "run"
    (run_dir / "checkpoints").mkdir(parents=True)
    (run_dir / "config.json").write_text(json.dumps(config_dict(Args(env_id="Hopper-v5"), "ppo")))
    latest = run_dir / "checkpoints" / "latest.pt"
    checkpoint.save(latest, {"algo": "dpo", "step": 2048, "iteration": 1})
    assert "written by 'dpo', not 'ppo'" in parse_error(["--resume", str(run_dir)], capsys)
    for key, bad in (("step", -2048), ("step", "2048"), ("step", 1.5), ("iteration", -1)):
        checkpoint.save(latest, {"algo": "ppo", "step": 2048, "iteration": 1, key: bad})
        line = parse_error(["--resume", str(run_dir)], capsys)
        assert f"[{key}] is {bad!r}, expected an integer >= 0" in line, line
    checkpoint.save(latest, {"algo": "ppo", "step": 2048, "iteration": 1})
    assert parse(Args, ["--resume", str(run_dir)]).resume == str(run_dir)
