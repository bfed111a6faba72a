"""Sweep runner: failures recorded without stopping others, bad input, kill + re-run, Ray."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from controlrl import experiment, sweep

ROOT = Path(__file__).resolve().parents[2]

# a fake algorithm script with the common flags: logs 4 rows, checkpoints, evaluates
OK_SCRIPT = """
import argparse, json, sys
from pathlib import Path
p = argparse.ArgumentParser()
for f in ("--env-id", "--seed", "--total-timesteps", "--run-dir", "--resume", "--tag"):
    p.add_argument(f)
p.add_argument("--no-progress", action="store_true")
a = p.parse_args()
run = Path(a.resume or a.run_dir)
run.mkdir(parents=True, exist_ok=True)
(run / "config.json").write_text(json.dumps({"algo": "ok", "args": vars(a)}))
(run / "metrics.csv").write_text("step,train/episode_return\\n" +
                                 "".join(f"{s},{s}\\n" for s in range(1, 5)))
(run / "final_eval.json").write_text('{"step": 4, "eval_return_mean": 1.0}')
print("ok run", a.seed, a.tag)
"""
FAIL_SCRIPT = """
import sys
print("something broke: deliberate failure", file=sys.stderr)
sys.exit(3)
"""


@pytest.fixture
def fake_algos(tmp_path):
    algos = tmp_path / "algos"
    algos.mkdir()
    (algos / "ok.py").write_text(OK_SCRIPT)
    (algos / "fail.py").write_text(FAIL_SCRIPT)
    return algos


def test_task_function_runs_and_skips_done_runs(tmp_path, fake_algos):
    config = experiment.SweepConfig(["ok"], ["CartPole-v1"], 1, 100, ["--tag", "x"])
    (task,) = experiment.plan(config, tmp_path / "out", fake_algos)
    result = experiment.run_task(task)
    assert result["status"] == "done" and result["returncode"] == 0
    log = Path(task.run_dir).parent / "seed1.log"
    assert "ok run 1 x" in log.read_text()
    again = experiment.run_task(task)
    assert again["status"] == "done" and again["seconds"] == 0.0


def test_failing_run_is_recorded_and_others_finish(tmp_path, fake_algos):
    out = tmp_path / "sweep"
    config = experiment.SweepConfig(["fail", "ok"], ["CartPole-v1"], 2, 100)
    runs = experiment.run_sweep(config, out, workers=2, algos_dir=fake_algos)
    assert {k: v["status"] for k, v in runs.items()} == {
        "fail/CartPole-v1/seed1": "failed",
        "fail/CartPole-v1/seed2": "failed",
        "ok/CartPole-v1/seed1": "done",
        "ok/CartPole-v1/seed2": "done",
    }
    assert "deliberate failure" in runs["fail/CartPole-v1/seed1"]["error"]
    saved = json.loads((out / "sweep.json").read_text())
    assert saved["runs"]["fail/CartPole-v1/seed2"]["returncode"] == 3
    summary = experiment.summarize(out)
    assert summary["counts"] == {"queued": 0, "running": 0, "done": 2, "failed": 2}
    assert sweep.main(["status", str(out)]) == 0


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["--algos", "nope", "--envs", "CartPole-v1"], "unknown algorithm 'nope'"),
        (["--algos", "ok", "--envs", "CartPol-v1"], "closest: CartPole-v1"),
        (["--algos", "ok", "--envs", "CartPole-v1", "--seeds", "0"], "--seeds must be > 0"),
    ],
)
def test_bad_input_exits_2_and_starts_nothing(argv, fragment, tmp_path, fake_algos, capsys):
    out = tmp_path / "sweep"
    code = sweep.main([*argv, "--out", str(out), "--algos-dir", str(fake_algos)])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and fragment in err[0]
    assert not out.exists()


def test_out_dir_of_another_configuration_is_refused(tmp_path, fake_algos, capsys):
    out = tmp_path / "sweep"
    base = [
        "--algos",
        "ok",
        "--envs",
        "CartPole-v1",
        "--out",
        str(out),
        "--algos-dir",
        str(fake_algos),
    ]
    assert sweep.main([*base, "--seeds", "1"]) == 0
    assert sweep.main([*base, "--seeds", "2"]) == 2
    assert "different sweep configuration" in capsys.readouterr().err
    assert sorted(p.name for p in (out / "runs" / "ok" / "CartPole-v1").iterdir()) == [
        "seed1",
        "seed1.log",
    ]


def test_killed_sweep_resumes_every_run_exactly_once(tmp_path):
    out = tmp_path / "sweep"
    cmd = [
        sys.executable,
        "-m",
        "controlrl.sweep",
        "--algos",
        "ppo",
        "--envs",
        "Pendulum-v1",
        "--seeds",
        "3",
        "--total-timesteps",
        "3072",
        "--workers",
        "2",
        "--out",
        str(out),
        "--",
        "--num-steps",
        "256",
        "--num-minibatches",
        "4",
        "--update-epochs",
        "1",
        "--checkpoint-every",
        "1",
        "--eval-every",
        "0",
        "--eval-episodes",
        "1",
        "--no-tensorboard",
    ]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    seed1 = out / "runs" / "ppo" / "Pendulum-v1" / "seed1" / "metrics.csv"
    deadline = time.time() + 180
    while time.time() < deadline:
        if seed1.exists() and len(seed1.read_text().splitlines()) >= 4:
            break
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    status = json.loads((out / "sweep.json").read_text())["runs"]
    assert any(v["status"] != "done" for v in status.values()), "sweep finished before the kill"
    time.sleep(0.5)  # the runs die with their sweep (PDEATHSIG)
    subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True, timeout=300)
    status = json.loads((out / "sweep.json").read_text())["runs"]
    assert all(v["status"] == "done" for v in status.values()), status
    for seed in (1, 2, 3):
        lines = out / "runs" / "ppo" / "Pendulum-v1" / f"seed{seed}" / "metrics.csv"
        steps = [int(x.split(",")[0]) for x in lines.read_text().splitlines()[1:]]
        assert steps == list(range(256, 3073, 256)), (seed, steps)


@pytest.mark.slow
def test_ray_backend_on_loopback(tmp_path, fake_algos, monkeypatch):
    # read when ray is imported; ray_init sets it too, but here ray is imported first
    monkeypatch.setenv("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    pytest.importorskip("ray")
    import ray

    out = tmp_path / "sweep"
    config = experiment.SweepConfig(["ok", "fail"], ["CartPole-v1"], 2, 100)
    try:
        runs = experiment.run_sweep(config, out, backend="ray", workers=2, algos_dir=fake_algos)
        assert [n["NodeManagerAddress"] for n in ray.nodes()] == ["127.0.0.1"]
    finally:
        ray.shutdown()
    assert sorted(v["status"] for v in runs.values()) == ["done", "done", "failed", "failed"]


def test_apply_toy_keeps_what_the_command_line_gave():
    import argparse

    from controlrl.experiment import apply_toy

    args = argparse.Namespace(steps=100, seeds=3, eval_every=10)
    apply_toy(args, ["--steps=7", "--train"], {"steps": 2, "seeds": 1, "eval_every": 5})
    assert (args.steps, args.seeds, args.eval_every) == (100, 1, 5)  # --steps=7 was given
    args = argparse.Namespace(steps=100, seeds=3, eval_every=10)
    apply_toy(args, ["--eval-every", "9"], {"steps": 2, "seeds": 1, "eval_every": 5})
    assert (args.steps, args.seeds, args.eval_every) == (2, 1, 10)


def test_write_rows_fields_order_and_float_format(tmp_path):
    from controlrl.experiment import write_rows

    rows = [{"b": 1.0 / 3.0, "a": "x", "n": 7}, {"b": 123456789.0, "a": "y", "n": 8}]
    write_rows(tmp_path / "given.csv", rows, ["a", "b", "n"])
    assert (tmp_path / "given.csv").read_text().splitlines() == [
        "a,b,n",
        "x,0.333333,7",
        "y,1.23457e+08,8",
    ]
    write_rows(tmp_path / "first.csv", rows)  # default: the first row's keys, in order
    assert (tmp_path / "first.csv").read_text().splitlines()[0] == "b,a,n"
