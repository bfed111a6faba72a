"""Forked runs (controlrl.launch) against exec'd ones: the same files, the same failures, the same
torch threads, and no run outliving a killed sweep."""

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from timeouts import scaled

from controlrl import experiment, launch
from controlrl.experiment import Arm, SweepConfig, SweepError, plan, run_sweep, task_command

ROOT = Path(__file__).resolve().parents[2]
GRPO = ["--num-envs", "64", "--group-size", "16", "--update-epochs", "1"]
PPO = ["--num-steps", "64", "--num-envs", "2", "--num-minibatches", "2", "--update-epochs", "1"]
PPO += ["--hidden-sizes", "8", "--eval-episodes", "2", "--checkpoint-every", "1"]
COMMON = ["--eval-every", "0", "--no-tensorboard"]
SWEEPS = (  # grpo on a bandit, 2 seeds; ppo on CartPole, 1 seed
    SweepConfig([], ["bandit:bernoulli-10"], 2, 512, COMMON, arms=[Arm("grpo", "grpo", GRPO)]),
    SweepConfig([], ["CartPole-v1"], 1, 256, COMMON, arms=[Arm("ppo", "ppo", PPO)]),
)

FAILING = {  # script: (what it does, exit status, what its log must show)
    "raises": ("import sys\nprint('started')\n1 / 0\n", 1, "ZeroDivisionError: division by zero"),
    "exits": ("import sys\nprint('quit')\nsys.exit('gave up: deliberate')\n", 1, "gave up"),
    "bad_flag": (
        "import argparse\nargparse.ArgumentParser().parse_args()\n",
        2,
        "unrecognized arguments: --env-id",
    ),
}
THREADS = """
import torch
print("threads", torch.get_num_threads(), flush=True)
torch.set_num_threads(2)
x = torch.randn(512, 512)
print("threads", torch.get_num_threads(), float((x @ x).sum().isfinite()), float(x.exp().sum() > 0))
"""
SLEEPER = """
import os, sys, time
from pathlib import Path
Path(sys.argv[sys.argv.index("--run-dir") + 1] + ".pid").write_text(str(os.getpid()))
time.sleep(600)
"""


def _sweep(config, out, launcher, algos_dir=experiment.ALGOS_DIR):
    runs = run_sweep(config, out, workers=2, launcher=launcher, algos_dir=algos_dir)
    return {k: v["status"] for k, v in runs.items()}, runs


def _log(task, out) -> str:
    """A run's log with its sweep directory written as OUT (the two launchers' sweeps differ)."""
    return (
        (Path(task.run_dir).parent / f"{Path(task.run_dir).name}.log")
        .read_text()
        .replace(str(out), "OUT")
    )


def test_forked_and_execed_sweeps_write_the_same_bytes(tmp_path):
    for config in SWEEPS:
        outs = {m: tmp_path / m / config.columns()[0].name for m in launch.MODES}
        for mode, out in outs.items():
            statuses, _ = _sweep(config, out, mode)
            assert set(statuses.values()) == {"done"}, (mode, statuses)
        for fork, exe in zip(plan(config, outs["fork"]), plan(config, outs["exec"])):
            for name in ("metrics.csv", "final_eval.json", "config.json"):
                a, b = Path(fork.run_dir, name).read_bytes(), Path(exe.run_dir, name).read_bytes()
                if name == "config.json":  # it names the run directory
                    a = a.replace(str(outs["fork"]).encode(), b"OUT")
                    b = b.replace(str(outs["exec"]).encode(), b"OUT")
                assert a == b, (fork.run_id, name)
            log = _log(fork, outs["fork"])
            assert log == _log(exe, outs["exec"])
            assert log.splitlines()[0] == "$ " + " ".join(task_command(fork)).replace(
                str(outs["fork"]), "OUT"
            )


def test_a_failing_run_fails_alike_through_both_launchers(tmp_path):
    """Failed, its exit status as the interpreter's, its log tail (a traceback from the script's
    frame on) the same."""
    algos = tmp_path / "algos"
    algos.mkdir()
    for name, (code, *_) in FAILING.items():
        (algos / f"{name}.py").write_text(code)
    config = SweepConfig(list(FAILING), ["CartPole-v1"], 1, 100)
    errors = {}
    for mode in launch.MODES:
        _, runs = _sweep(config, tmp_path / mode, mode, algos)
        for name, (_, status, shown) in FAILING.items():
            run = runs[f"{name}/CartPole-v1/seed1"]
            assert (run["status"], run["returncode"]) == ("failed", status), (mode, name, run)
            assert shown in run["error"], (mode, name, run["error"])
            errors[mode, name] = run["error"].replace(str(tmp_path / mode), "OUT")
    for name in FAILING:
        assert errors["fork", name] == errors["exec", name], name
    assert "Traceback" in errors["fork", "raises"] and "runpy" not in errors["fork", "raises"]


def test_a_fork_has_a_fresh_interpreters_torch_threads(tmp_path):
    """The server ran no torch op: a fork's thread count is a fresh process's, and a run that
    sets its own threads computes (an OpenMP pool copied by fork would hang here)."""
    algos = tmp_path / "algos"
    algos.mkdir()
    (algos / "threads.py").write_text(THREADS)
    config = SweepConfig(["threads"], ["CartPole-v1"], 1, 100)
    logs = {}
    for mode in launch.MODES:
        (task,) = plan(config, tmp_path / mode, algos)
        run = {"target": experiment.run_task, "args": (task,), "kwargs": {"launcher": mode}}
        worker = threading.Thread(**run)
        worker.start()
        worker.join(scaled(60))
        assert not worker.is_alive(), f"{mode}: the run hangs"
        logs[mode] = _log(task, tmp_path / mode).splitlines()[1:]
    assert logs["fork"] == logs["exec"] and logs["exec"][1] == "threads 2 1.0 1.0", logs


def test_preloaded_modules_leave_jax_out():
    code = f"import sys\nfor m in {launch.PRELOAD!r}: __import__(m)\nprint('jax' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert out.stdout.strip() == "False", out.stderr


def test_launcher_is_chosen_by_argument_or_environment(tmp_path, monkeypatch):
    monkeypatch.setenv(launch.MODE_ENV, "exec")
    assert launch.default_mode() == "exec"
    monkeypatch.setenv(launch.MODE_ENV, "spawn")
    config = SweepConfig(["ppo"], ["CartPole-v1"], 1, 100)
    with pytest.raises(SweepError, match="CONTROLRL_SWEEP_LAUNCH must be one of fork, exec"):
        run_sweep(config, tmp_path / "a")
    with pytest.raises(SweepError, match="launcher must be one of fork, exec"):
        run_sweep(config, tmp_path / "b", launcher="vfork")
    monkeypatch.delenv(launch.MODE_ENV)
    assert launch.default_mode() == "fork"


def test_a_killed_driver_takes_its_forked_runs_with_it(tmp_path):
    algos = tmp_path / "algos"
    algos.mkdir()
    (algos / "sleeper.py").write_text(SLEEPER)
    out = tmp_path / "sweep"
    driver = (
        "from controlrl.experiment import SweepConfig, run_sweep\n"
        f"run_sweep(SweepConfig(['sleeper'], ['CartPole-v1'], 2, 100), {str(out)!r}, "
        f"algos_dir={str(algos)!r}, launcher='fork')\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", driver], cwd=ROOT, env=env)
    pids = [out / "runs" / "sleeper" / "CartPole-v1" / f"seed{k}.pid" for k in (1, 2)]
    deadline = time.time() + scaled(60)
    while not all(p.exists() and p.read_text() for p in pids) and time.time() < deadline:
        time.sleep(0.05)
    runs = [int(p.read_text()) for p in pids]
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    deadline = time.time() + scaled(1.0)  # the server notices at once; a loaded machine lags
    try:
        while any(_alive(pid) for pid in runs) and time.time() < deadline:
            time.sleep(0.05)
        assert not any(_alive(pid) for pid in runs), "a forked run outlived its sweep"
    finally:
        for pid in filter(_alive, runs):
            os.kill(pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    """Running (a zombie waiting to be reaped by init counts as gone)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
