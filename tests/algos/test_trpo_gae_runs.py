"""trpo.py and gae.py end to end: smoke runs on MuJoCo and CartPole, a run stopped part-way and
resumed, bad flags. Also the in-process stop-and-resume helper that test_fixpo.py uses."""

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from timeouts import scaled

from algos import gae, trpo
from controlrl import checkpoint
from controlrl.cli import parse
from controlrl.session import Session
from controlrl.training import Run

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
        timeout=scaled(300),
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


# --- a run stopped part-way, then resumed: compared with the same run left uninterrupted ---

# Restarted on resume by design (fresh env episodes fold their reset observation in; what the
# reward scaler keeps is being changed elsewhere), so not compared bit for bit.
RESTARTED = ("obs_normalizer", "reward_scaler")
_COLLECT, _END_ITERATION = Run.collect, Session.end_iteration


class Stopped(Exception):
    """Raised right after an iteration's checkpoint: the run stops there, as if killed."""


def run_in_process(module, argv: list[str], monkeypatch, stop_after: int | None = None):
    """module.main(parse(module.Args, argv)) in this process. Returns, for every iteration, what
    the checkpoint holds (less RESTARTED) at its start, keyed by the env steps done before it.
    With stop_after=k the run stops right after iteration k (its checkpoint written)."""
    states: dict[int, dict] = {}

    def collect(self, *args, **kwargs):
        states[self.step] = {
            k: copy.deepcopy(v.state_dict()) for k, v in self.stateful.items() if k not in RESTARTED
        }
        return _COLLECT(self, *args, **kwargs)

    def end_iteration(self, iteration, *args, **kwargs):
        _END_ITERATION(self, iteration, *args, **kwargs)
        if iteration == stop_after:
            raise Stopped

    monkeypatch.setattr(Run, "collect", collect)
    monkeypatch.setattr(Session, "end_iteration", end_iteration)
    try:
        module.main(parse(module.Args, argv))
    except Stopped:
        pass
    return states


def assert_same_state(a, b, where: str = "") -> None:
    """Nested state dicts (tensors, numbers, lists) equal bit for bit."""
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and torch.equal(a, b), where
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for key in a:
            assert_same_state(a[key], b[key], f"{where}/{key}")
    elif isinstance(a, list | tuple):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same_state(x, y, f"{where}[{i}]")
    else:
        assert a == b, where


def metrics_rows(run_dir: Path) -> list[str]:
    return (run_dir / "metrics.csv").read_text().splitlines()


def stop_and_resume(module, argv, tmp_path, monkeypatch, batch: int, n: int = 2, k: int = 1):
    """Run n iterations uninterrupted and, separately, stop after iteration k and --resume; assert
    what a correct resume gives whatever the environments do after the reload (they start fresh
    episodes): the iterations after k start from exactly the uninterrupted run's parameters,
    optimiser and other checkpointed state; rows 1..k are the uninterrupted run's bytes; every
    step is logged once; the LR schedule continues; something trained after the reload.
    Returns (final checkpoint, metrics rows of the resumed run)."""
    full_dir, cut_dir = tmp_path / "full", tmp_path / "cut"
    full = run_in_process(module, [*argv, "--run-dir", str(full_dir)], monkeypatch)
    run_in_process(module, [*argv, "--run-dir", str(cut_dir)], monkeypatch, stop_after=k)
    latest = Session.checkpoint_path(cut_dir)
    assert checkpoint.load(latest)["iteration"] == k and not (cut_dir / "final_eval.json").exists()
    resumed = run_in_process(module, ["--resume", str(cut_dir)], monkeypatch)
    assert sorted(full) == [i * batch for i in range(n)]
    assert sorted(resumed) == [i * batch for i in range(k, n)]  # only what was left ran
    assert_same_state(resumed[k * batch], full[k * batch], "state after the reload")
    rows, rows_full = metrics_rows(cut_dir), metrics_rows(full_dir)
    assert rows[: k + 1] == rows_full[: k + 1]  # header and rows 1..k, byte for byte
    assert [int(r.split(",")[0]) for r in rows[1:]] == [(i + 1) * batch for i in range(n)]
    header = rows[0].split(",")
    if "train/learning_rate" in header:  # the schedule continued, not restarted
        col = header.index("train/learning_rate")
        assert [r.split(",")[col] for r in rows] == [r.split(",")[col] for r in rows_full]
    final = checkpoint.load(latest)
    assert final["iteration"] == n and final["step"] == n * batch
    assert (cut_dir / "final_eval.json").exists()
    moved = [
        not torch.equal(final["policy"][p], v) for p, v in resumed[k * batch]["policy"].items()
    ]
    assert any(moved)  # the policy trained after the reload
    return final, rows


TINY = ["--env-id", "Pendulum-v1", "--total-timesteps", "256", "--checkpoint-every", "1"]
TINY += ["--num-steps", "64", "--num-envs", "2", "--eval-every", "0", "--eval-episodes", "1"]
TINY += ["--no-progress", "--no-tensorboard", "--cg-max-steps", "3"]


def test_trpo_stopped_part_way_resumes_where_it_stopped(tmp_path, monkeypatch):
    argv = [*TINY, "--n-critic-updates", "2", "--critic-batch-size", "64"]
    final, _ = stop_and_resume(trpo, argv, tmp_path, monkeypatch, batch=128)
    # the critic's Adam continued its count: 2 iterations x 2 passes x 2 minibatches
    assert int(final["critic_optimizer"]["state"][0]["step"]) == 8


def test_gae_stopped_part_way_resumes_where_it_stopped(tmp_path, monkeypatch):
    stop_and_resume(gae, TINY, tmp_path, monkeypatch, batch=128)


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
