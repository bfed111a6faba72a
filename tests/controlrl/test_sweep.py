"""Sweep runner: failures recorded without stopping others, bad input, kill + re-run, Ray."""

import json
import math
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from timeouts import scaled

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
    assert sweep.main([*base, "--seeds", "2"]) == 0
    assert sweep.main([*base, "--seeds", "1"]) == 2  # fewer seeds: another sweep
    assert sweep.main([*base, "--seeds", "2", "--total-timesteps", "99"]) == 2
    assert "different sweep configuration" in capsys.readouterr().err
    assert sorted(p.name for p in (out / "runs" / "ok" / "CartPole-v1").iterdir()) == [
        "seed1",
        "seed1.log",
        "seed2",
        "seed2.log",
    ]


def test_a_sweep_grows_by_more_seeds_keeping_its_finished_runs(tmp_path, fake_algos):
    out = tmp_path / "sweep"
    base = ["--algos", "ok", "--envs", "CartPole-v1", "--out", str(out)]
    base += ["--algos-dir", str(fake_algos)]
    assert sweep.main([*base, "--seeds", "1"]) == 0
    first = (out / "runs" / "ok" / "CartPole-v1" / "seed1.log").stat().st_mtime_ns
    assert sweep.main([*base, "--seeds", "3"]) == 0
    runs = out / "runs" / "ok" / "CartPole-v1"
    assert sorted(p.name for p in runs.glob("seed?")) == ["seed1", "seed2", "seed3"]
    assert (runs / "seed1.log").stat().st_mtime_ns == first  # not run again
    status = json.loads((out / "sweep.json").read_text())
    assert status["config"]["seeds"] == 3 and len(status["runs"]) == 3


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
    deadline = time.time() + scaled(180)
    while time.time() < deadline:
        if seed1.exists() and len(seed1.read_text().splitlines()) >= 4:
            break
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    status = json.loads((out / "sweep.json").read_text())["runs"]
    assert any(v["status"] != "done" for v in status.values()), "sweep finished before the kill"
    time.sleep(0.5)  # the runs die with their sweep (PDEATHSIG)
    summary = experiment.summarize(out)  # the dead driver's "running" is not believed
    assert summary["state"] == "interrupted" and summary["counts"]["running"] == 0
    subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True, timeout=scaled(300))
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


def test_relative_out_from_any_working_directory(tmp_path, fake_algos, monkeypatch):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    argv = ["--algos", "ok", "--envs", "CartPole-v1", "--seeds", "2", "--out", "rel"]
    assert sweep.main([*argv, "--algos-dir", str(fake_algos)]) == 0
    runs = json.loads((elsewhere / "rel" / "sweep.json").read_text())["runs"]
    assert {v["status"] for v in runs.values()} == {"done"}
    for seed in (1, 2):
        assert (elsewhere / "rel" / "runs" / "ok" / "CartPole-v1" / f"seed{seed}").is_dir()
    assert not (ROOT / "rel").exists()


def test_second_sweep_on_one_out_is_refused_and_stale_lock_taken_over(tmp_path, fake_algos, capsys):
    out = tmp_path / "sweep"
    argv = ["--algos", "ok", "--envs", "CartPole-v1", "--seeds", "1", "--out", str(out)]
    argv += ["--algos-dir", str(fake_algos)]
    out.mkdir()
    holder = subprocess.Popen(  # another process holding the lock, as a running sweep does
        [
            sys.executable,
            "-c",
            "import sys, time; from controlrl.experiment import OutLock; "
            f"OutLock({str(out)!r}).acquire(); print('held', flush=True); time.sleep(60)",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        assert sweep.main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"in use by another sweep (pid {holder.pid} " in err[0], err
        assert not (out / "sweep.json").exists()
    finally:
        holder.kill()
        holder.wait()
    # the holder is dead: its lock file stays, naming it, and is taken over
    assert str(holder.pid) in (out / "sweep.lock").read_text()
    assert sweep.main(argv) == 0
    assert json.loads((out / "sweep.lock").read_text())["pid"] == os.getpid()


@pytest.mark.parametrize(
    "content, fragment",
    [
        ("{not json", "not a readable sweep file"),
        ("[1, 2]", "expected a JSON object, got a list"),
        ('{"runs": {}}', "missing key 'config'"),
        (
            '{"config": {"algos": ["ok"], "envs": ["CartPole-v1"], "seeds": 1, "extra": [],'
            ' "total_timesteps": "100"}, "runs": {}}',
            "'config.total_timesteps' has the wrong type",
        ),
        (
            '{"config": {"algos": ["ok"], "envs": ["CartPole-v1"], "seeds": 1, "extra": [],'
            ' "total_timesteps": 100}, "runs": {"ok/CartPole-v1/seed1": {"status": "odd"}}}',
            "has status 'odd'",
        ),
    ],
)
def test_corrupt_sweep_json_is_one_line_in_sweep_and_status(
    content, fragment, tmp_path, fake_algos, capsys
):
    out = tmp_path / "sweep"
    out.mkdir()
    (out / "sweep.json").write_text(content)
    argv = ["--algos", "ok", "--envs", "CartPole-v1", "--seeds", "1", "--total-timesteps", "100"]
    for args in (
        [*argv, "--out", str(out), "--algos-dir", str(fake_algos)],
        ["status", str(out)],
    ):
        code = sweep.main(args)
        assert code == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and fragment in err[0] and "sweep.json" in err[0], err
    assert (out / "sweep.json").read_text() == content  # left as it was


@pytest.mark.parametrize(
    "argv",
    [
        ["--total-timesteps", "nan"],
        ["--algos", "ok", "--envs", "CartPole-v1", "--total-timesteps", "inf"],
        ["--algos", "ok", "--envs", "CartPole-v1", "--seeds", "1e400"],
        ["--algos", "ok", "--envs", "CartPole-v1", "--seeds", "2.5"],
        ["--algos", "ok", "--envs", "CartPole-v1", "--unknown-flag"],
        ["--algos", "ok", "--envs", "CartPole-v1", "--backend", "dask"],
        ["--algos", "ok", "--envs", "CartPole-v1", "--cpus-per-run", "nan"],
        ["--algos", "ok", "--envs", "CartPole-v1", "--workers"],
        ["status"],
        ["status", "a", "b"],
    ],
)
def test_every_parse_error_is_one_line_exit_2(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        sweep.main(argv)
    assert exc.value.code == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and "error:" in err[0] and not captured.out, captured


@pytest.mark.parametrize(
    "flags, fragment",
    [
        (["--seeds", "100000"], "--seeds must be <= 10000"),
        (["--envs", "CartPole-v1,CartPole-v1"], "--envs names CartPole-v1 more than once"),
        (["--workers", "0"], "--workers must be in 1..1024"),
        (["--address", "127.0.0.1:1"], "--address needs --backend ray"),
        (["--gpus-per-run", "1"], "need --backend ray"),
        (["--backend", "ray", "--address", "nonsense"], "must be HOST:PORT"),
    ],
)
def test_bad_values_refused_before_anything_starts(flags, fragment, tmp_path, fake_algos, capsys):
    out = tmp_path / "sweep"
    argv = ["--algos", "ok", "--envs", "CartPole-v1", "--out", str(out)]
    assert sweep.main([*argv, "--algos-dir", str(fake_algos), *flags]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and fragment in err[0], err
    assert not out.exists()


def test_unreachable_address_fails_at_once_in_one_line(tmp_path, fake_algos):
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()  # nothing listens there now
    cmd = [sys.executable, "-m", "controlrl.sweep", "--algos", "ok", "--envs", "CartPole-v1"]
    cmd += ["--backend", "ray", "--address", f"127.0.0.1:{port}", "--out", str(tmp_path / "o")]
    start = time.time()
    res = subprocess.run(
        [*cmd, "--algos-dir", str(fake_algos)], cwd=tmp_path, capture_output=True, text=True
    )
    assert res.returncode == 2 and time.time() - start < 30
    assert res.stderr.strip().splitlines() == [
        f"error: --address 127.0.0.1:{port}: no Ray cluster answers there (Connection refused)"
    ]
    assert not (tmp_path / "o").exists()


def test_node_that_does_not_see_the_sweep_directory_refuses(tmp_path, fake_algos):
    config = experiment.SweepConfig(["ok"], ["CartPole-v1"], 1, 100)
    (task,) = experiment.plan(config, tmp_path / "out", fake_algos)
    marker = tmp_path / "out" / "sweep.marker"
    marker.parent.mkdir()
    for written in (None, "another-sweeps-token"):
        if written:
            marker.write_text(written)
        result = experiment.run_task(task, marker=(str(marker), "token"), node="n2")
        assert result["status"] == "refused" and "not shared with node n2" in result["error"]
        assert experiment.result_problem(task, result) == result["error"]
        assert not Path(task.run_dir).exists() and not Path(task.state).exists()
    marker.write_text("token")
    result = experiment.run_task(task, marker=(str(marker), "token"), node="n2")
    assert result["status"] == "done" and experiment.result_problem(task, result) == ""
    state = experiment.read_run_state(task.state)
    assert (state["status"], state["node"], state["attempt"]) == ("done", "n2", 1)
    # a run reported done whose results the driver cannot see: results on another disk
    (Path(task.run_dir) / "final_eval.json").unlink()
    assert "every node mounts" in experiment.result_problem(task, result)


def _fake_sweep(out: Path, driver_state: str = "running") -> None:
    """A sweep.json of 4 runs (1 done, 2 with state files, 1 queued) and their files."""
    now = time.time()
    config = {"algos": ["ok"], "envs": ["CartPole-v1"], "seeds": 4, "total_timesteps": 1000}
    config["extra"] = []
    runs = {f"ok/CartPole-v1/seed{s}": {"status": "queued"} for s in range(1, 5)}
    runs["ok/CartPole-v1/seed1"] = {"status": "done", "seconds": 100.0, "start_step": 0}
    runs["ok/CartPole-v1/seed2"]["status"] = "running"  # the driver's word, not the run's
    driver = {"pid": os.getpid(), "host": socket.gethostname(), "state": driver_state}
    driver.update(heartbeat=now, slots=2)
    out.mkdir(parents=True)
    (out / "sweep.json").write_text(json.dumps({"config": config, "runs": runs, "driver": driver}))
    for seed, (status, beat, step) in {
        2: ("running", now, 600),
        3: ("running", now - 300, 200),
    }.items():
        state = {"status": status, "started": now - 50, "heartbeat": beat, "start_step": 100}
        path = out / "state" / "ok" / "CartPole-v1" / f"seed{seed}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({**state, "node": "n", "attempt": 1}))
        run_dir = out / "runs" / "ok" / "CartPole-v1" / f"seed{seed}"
        run_dir.mkdir(parents=True)
        (run_dir / "metrics.csv").write_text(f"step,x\n{step},0\n")


def test_status_counts_what_runs_say_and_eta(tmp_path):
    out = tmp_path / "sweep"
    _fake_sweep(out)
    holder = subprocess.Popen(  # the live driver holds the lock
        [
            sys.executable,
            "-c",
            "import time; from controlrl.experiment import OutLock; "
            f"OutLock({str(out)!r}).acquire(); print('held', flush=True); time.sleep(60)",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        s = experiment.summarize(out)
        assert s["state"] == "running"
        # seed2 runs (fresh heartbeat); seed3's heartbeat is stale: lost, waiting for a retry
        assert s["runs"] == {
            "ok/CartPole-v1/seed1": "done",
            "ok/CartPole-v1/seed2": "running",
            "ok/CartPole-v1/seed3": "queued",
            "ok/CartPole-v1/seed4": "queued",
        }
        # rates: seed1 100 s / 1000 steps, seed2 50 s / 500 steps -> 0.1 s per step; left:
        # 400 + 800 + 1000 steps over min(2 slots, 3 unfinished) -> 110 s
        assert s["eta_seconds"] == pytest.approx(110.0, rel=0.02)
        assert experiment.repair(out)["driver"]["state"] == "running"  # alive: untouched
    finally:
        holder.kill()
        holder.wait()
    # the driver is gone: status says interrupted, repairs sweep.json, no ETA
    s = experiment.summarize(out)
    assert s["state"] == "interrupted" and s["counts"]["running"] == 0
    assert s["eta_seconds"] is None
    assert sweep.main(["status", str(out)]) == 0
    data = json.loads((out / "sweep.json").read_text())
    assert data["driver"]["state"] == "interrupted"
    assert data["runs"]["ok/CartPole-v1/seed2"]["status"] == "queued"


def test_read_rows_parses_back_what_write_rows_wrote_and_names_the_flag(tmp_path):
    path = tmp_path / "fig.csv"
    experiment.write_rows(path, [{"algo": "ppo", "depth": 7, "ret": 1.25}])
    rows = experiment.read_rows(path, ints=("depth",), floats=("ret",))
    assert rows == [{"algo": "ppo", "depth": 7, "ret": 1.25}]
    with pytest.raises(SystemExit, match="--replot needs"):
        experiment.read_rows(tmp_path / "missing.csv", flag="--replot")


def test_kept_rows_keeps_the_cells_not_run_anew_parsed_back(tmp_path):
    path = tmp_path / "fig.csv"
    rows = [{"cell": "a", "seed": 1, "x": 0.5}, {"cell": "b", "seed": 2, "x": float("nan")}]
    experiment.write_rows(path, rows + [{"cell": "a", "seed": 3, "x": ""}])
    kept = experiment.kept_rows(path, ("cell",), {("a",)}, ints=("seed",), floats=("x",))
    assert len(kept) == 1 and kept[0]["cell"] == "b" and kept[0]["seed"] == 2
    assert math.isnan(kept[0]["x"])
    both = experiment.kept_rows(path, ("cell",), set(), ints=("seed",), floats=("x",))
    assert [r["seed"] for r in both] == [1, 2, 3] and math.isnan(both[2]["x"])  # "" is NaN
    assert experiment.kept_rows(tmp_path / "none.csv", ("cell",), set()) == []


def test_a_sweep_grows_by_more_tasks_but_keeps_every_saved_task(tmp_path, fake_algos, capsys):
    out = tmp_path / "sweep"
    base = ["--algos", "ok", "--seeds", "1", "--out", str(out), "--algos-dir", str(fake_algos)]
    assert sweep.main([*base, "--envs", "CartPole-v1"]) == 0
    first = (out / "runs" / "ok" / "CartPole-v1" / "seed1.log").stat().st_mtime_ns
    assert sweep.main([*base, "--envs", "CartPole-v1,Acrobot-v1"]) == 0
    assert (out / "runs" / "ok" / "CartPole-v1" / "seed1.log").stat().st_mtime_ns == first
    assert (out / "runs" / "ok" / "Acrobot-v1" / "seed1").is_dir()
    status = json.loads((out / "sweep.json").read_text())
    assert status["config"]["envs"] == ["CartPole-v1", "Acrobot-v1"]
    assert sorted(status["runs"]) == ["ok/Acrobot-v1/seed1", "ok/CartPole-v1/seed1"]
    assert sweep.main([*base, "--envs", "Acrobot-v1"]) == 2  # a saved task dropped: refused
    assert "different sweep configuration" in capsys.readouterr().err


def test_differing_flags_names_what_would_train_differently(tmp_path):
    from algos import ppo
    from controlrl.cli import parse
    from controlrl.experiment import differing_flags

    argv = ["--num-steps", "512", "--hidden-sizes", "32", "32"]
    args = vars(parse(ppo.Args, ["--env-id", "Hopper-v5", "--seed", "4", *argv]))
    args = {k: list(v) if isinstance(v, tuple) else v for k, v in args.items()}
    for change, want in [({}, []), ({"progress": False, "run_dir": "x"}, []),
                         ({"learning_rate": 1e-3}, ["learning_rate"]),
                         ({"hidden_sizes": [64, 64]}, ["hidden_sizes"])]:  # fmt: skip
        (tmp_path / "config.json").write_text(json.dumps({"args": {**args, **change}}))
        assert differing_flags(tmp_path, "ppo", argv) == want
    assert differing_flags(tmp_path, "ppo", argv, ignore=("hidden_sizes",)) == []


@pytest.mark.parametrize("checkpoint", [False, True])
def test_a_rerun_leaves_a_run_that_a_live_resume_holds(tmp_path, fake_algos, checkpoint):
    """A run killed before (or after) its first checkpoint, resumed by hand: while that process
    holds the run's lock, the sweep's rerun neither deletes the directory nor starts the run."""
    config = experiment.SweepConfig(["ok"], ["CartPole-v1"], 1, 100)
    (task,) = experiment.plan(config, tmp_path / "out", fake_algos)
    run_dir = Path(task.run_dir)
    run_dir.mkdir(parents=True)
    (run_dir / "config.json").write_text("{}")
    (run_dir / "metrics.csv").write_text("step,train/episode_return\n1,1\n")
    if checkpoint:
        (run_dir / "checkpoints").mkdir()
        (run_dir / "checkpoints" / "latest.pt").write_bytes(b"x")
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(run_dir)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        result = experiment.run_task(task)
        assert result["status"] == "failed", result
        assert f"in use by another run (pid {holder.pid})" in result["error"]
        assert (run_dir / "metrics.csv").read_text() == "step,train/episode_return\n1,1\n"
        assert not (run_dir / "final_eval.json").exists()
    finally:
        holder.kill()
        holder.wait()
    # its holder gone, the rerun takes the run as before
    assert experiment.run_task(task)["status"] == "done"


# a process holding a run directory's lock as a live run does (controlrl.rundir.lock)
HOLD_LOCK = """
import sys, time
from controlrl import rundir
rundir.lock(sys.argv[1])
print("locked", flush=True)
time.sleep(600)
"""
