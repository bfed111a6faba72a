"""What a run directory guarantees (controlrl.rundir, the Session and --resume on it): one
process at a time, the holder's pid named; a stale lock of a dead process taken over;
config.json written whole and checked key by key on --resume; an empty or truncated checkpoint
named in one line; a full or read-only disk stopped in one line with the last good checkpoint
kept; temp files of a killed writer removed."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from timeouts import scaled

from controlrl import checkpoint, rundir
from controlrl.cli import CommonArgs, config_dict, fail, parse
from controlrl.session import Session

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class SessionArgs(CommonArgs):
    env_id: str = "Pendulum-v1"
    num_steps: int = 8
    total_timesteps: int = 32  # 4 iterations of 8 steps
    norm_obs: bool = True
    eval_every: int = 0
    checkpoint_every: int = 1
    tensorboard: bool = False
    progress: bool = False


class Counter:
    def __init__(self) -> None:
        self.n = torch.zeros((), dtype=torch.int64)

    def state_dict(self) -> dict:
        return {"n": self.n.clone()}

    def load_state_dict(self, state: dict) -> None:
        self.n = state["n"].clone()


def run(args: SessionArgs, stop_after: int | None = None) -> Session:
    """Four iterations of a Session with nothing but a counter; stop_after: return after that
    iteration, files as a kill leaves them (the lock is the process's until it dies)."""
    session = Session(args, steps_per_iteration=args.num_steps)
    counter = Counter()
    for iteration in session.start(counter=counter):
        counter.n += 1
        session.step += args.num_steps
        session.end_iteration(iteration, {"n": float(counter.n)})
        if iteration == stop_after:
            return session
    session.finish(lambda: 0.0)
    return session


def one_line_error(capsys, code: int = 2) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: "), err
    return err[0]


def refused(argv, capsys, cls=SessionArgs) -> str:
    with pytest.raises(SystemExit) as exc:
        parse(cls, argv)
    assert exc.value.code == 2
    return one_line_error(capsys)


# -- the lock --------------------------------------------------------------------------------


def hold_lock(run_dir: Path) -> subprocess.Popen:
    """Another process holding run_dir's lock until killed."""
    code = (
        "import sys, time; from controlrl import rundir; rundir.lock(sys.argv[1]); "
        "print('locked', flush=True); time.sleep(120)"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(run_dir)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.stdout.readline().strip() == "locked"
    return proc


def test_a_second_run_or_resume_is_refused_naming_the_holder_then_a_dead_ones_lock_is_taken(
    tmp_path, capsys
):
    run_dir = tmp_path / "r"
    run(SessionArgs(run_dir=str(run_dir)), stop_after=2)  # a run with a checkpoint
    rundir.unlock(run_dir)  # as if this process had died: the kernel drops its lock
    holder = hold_lock(run_dir)
    try:
        for argv in (["--resume", str(run_dir)], ["--run-dir", str(tmp_path / "new")]):
            args = parse(SessionArgs, argv)
            if argv[0] == "--run-dir":
                args.run_dir = str(run_dir)  # both passed validate() before either started
            with pytest.raises(SystemExit) as exc:
                Session(args, steps_per_iteration=8)
            assert exc.value.code == 2
            line = one_line_error(capsys)
            assert f"pid {holder.pid}" in line and "in use" in line, line
        # a plain second run on the directory: refused by validate(), the live pid named
        line = refused(["--run-dir", str(run_dir)], capsys)
        assert "already holds a run" in line and f"pid {holder.pid}" in line, line
        rows = (run_dir / "metrics.csv").read_text()
    finally:
        holder.kill()
        holder.wait()
    assert (run_dir / "metrics.csv").read_text() == rows  # the refused runs wrote nothing
    # the holder died without unlocking: its lock is taken over
    run(parse(SessionArgs, ["--resume", str(run_dir)]))
    assert (run_dir / rundir.LOCK_NAME).read_text().strip() == str(os.getpid())
    assert [line.split(",")[0] for line in (run_dir / "metrics.csv").read_text().splitlines()] == [
        "step",
        "8",
        "16",
        "24",
        "32",
    ]
    assert not rundir.holds_lock(run_dir)  # finish() gave it back


def test_a_run_that_ended_while_another_waited_is_not_appended_to(tmp_path, capsys):
    """Two runs given one new --run-dir pass validate() together; the one that takes the lock
    after the other has written config.json is refused, not appended."""
    run_dir = tmp_path / "r"
    late = parse(SessionArgs, ["--run-dir", str(run_dir)])
    run(SessionArgs(run_dir=str(run_dir)))
    rows = (run_dir / "metrics.csv").read_bytes()
    with pytest.raises(SystemExit) as exc:
        Session(late, steps_per_iteration=8)
    assert exc.value.code == 2 and "already holds a run" in one_line_error(capsys)
    assert (run_dir / "metrics.csv").read_bytes() == rows


def test_the_cli_refuses_a_resume_of_a_live_run_in_one_line(tmp_path):
    run_dir = tmp_path / "r"
    cmd = [sys.executable, "algos/ppo.py", "--env-id", "Pendulum-v1", "--run-dir", str(run_dir)]
    cmd += ["--total-timesteps", "64", "--num-steps", "32", "--num-minibatches", "2"]
    cmd += ["--no-progress", "--no-tensorboard"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=scaled(300)
    )
    assert done.returncode == 0, done.stderr[-1000:]
    holder = hold_lock(run_dir)
    try:
        out = subprocess.run(
            [sys.executable, "algos/ppo.py", "--resume", str(run_dir), "--no-progress"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=scaled(300),
        )
    finally:
        holder.kill()
        holder.wait()
    assert out.returncode == 2 and "Traceback" not in out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and f"pid {holder.pid}" in lines[0], out.stderr


# -- config.json ------------------------------------------------------------------------------


def saved_run(tmp_path) -> Path:
    run_dir = tmp_path / "r"
    run(SessionArgs(run_dir=str(run_dir)), stop_after=2)
    rundir.unlock(run_dir)
    return run_dir


def without(d: dict, key: str) -> dict:
    return {k: v for k, v in d.items() if k != key}


TAMPERED = {
    "no num_steps": (lambda c: {**c, "args": without(c["args"], "num_steps")}, "[args.num_steps]"),
    "no total_timesteps": (
        lambda c: {**c, "args": without(c["args"], "total_timesteps")},
        "[args.total_timesteps]",
    ),
    "a list": (lambda c: [c], "not a JSON object"),
    "args a list": (lambda c: {**c, "args": []}, "[args]"),
    "no args": (lambda c: without(c, "args"), "[args]"),
    "env_id null": (lambda c: {**c, "args": {**c["args"], "env_id": None}}, "[args.env_id]"),
    "total_timesteps a string": (
        lambda c: {**c, "args": {**c["args"], "total_timesteps": "32"}},
        "[args.total_timesteps]",
    ),
    "a bool as 1": (lambda c: {**c, "args": {**c["args"], "norm_obs": 1}}, "[args.norm_obs]"),
    "a bad choice": (
        lambda c: {**c, "args": {**c["args"], "vectorization": "threads"}},
        "[args.vectorization]",
    ),
    "an unknown flag": (lambda c: {**c, "args": {**c["args"], "evil": 1}}, "[args.evil]"),
    "no algo": (lambda c: without(c, "algo"), "[algo]"),
    "another algo": (lambda c: {**c, "algo": "spo"}, "that run is 'spo'"),
}


@pytest.mark.parametrize("case", TAMPERED, ids=list(TAMPERED))
def test_a_tampered_config_is_refused_naming_the_key(case, tmp_path, capsys):
    run_dir = saved_run(tmp_path)
    config_path = run_dir / "config.json"
    config = json.loads(config_path.read_text())
    tamper, key = TAMPERED[case]
    config_path.write_text(json.dumps(tamper(config)))
    line = refused(["--resume", str(run_dir)], capsys)
    assert key in line and "config.json" in line, line


def test_the_saved_config_itself_resumes_with_its_values(tmp_path):
    run_dir = saved_run(tmp_path)
    config = json.loads((run_dir / "config.json").read_text())
    config["args"]["total_timesteps"] = 48  # a valid value of the right type is taken
    (run_dir / "config.json").write_text(json.dumps(config))
    args = parse(SessionArgs, ["--resume", str(run_dir)])
    assert (args.total_timesteps, args.num_steps, args.run_dir) == (48, 8, str(run_dir))


def test_ppo_refuses_to_resume_an_spo_run(tmp_path, capsys):
    from algos import ppo, spo

    run_dir = tmp_path / "spo_run"
    run_dir.mkdir()
    config = config_dict(spo.Args(env_id="Pendulum-v1"), "spo")
    (run_dir / "config.json").write_text(json.dumps(config, default=str))
    assert "that run is 'spo', not 'ppo'" in refused(["--resume", str(run_dir)], capsys, ppo.Args)
    config.pop("algo")
    (run_dir / "config.json").write_text(json.dumps(config, default=str))
    assert "[algo] missing" in refused(["--resume", str(run_dir)], capsys, ppo.Args)


def test_a_failed_config_write_leaves_no_config_and_the_rerun_starts(tmp_path, capsys, monkeypatch):
    run_dir = tmp_path / "r"
    args = parse(SessionArgs, ["--run-dir", str(run_dir)])

    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    with monkeypatch.context() as patch:
        patch.setattr(os, "fsync", full)  # where a full disk shows on a delayed-allocation fs
        with pytest.raises(SystemExit) as exc:
            run(args)
    assert exc.value.code == 1 and "No space left" in one_line_error(capsys)
    assert not (run_dir / "config.json").exists()  # not a 0-byte one
    assert not list(run_dir.glob("*.tmp"))
    run(parse(SessionArgs, ["--run-dir", str(run_dir)]))  # the directory is not stuck
    assert json.loads((run_dir / "config.json").read_text())["args"]["num_steps"] == 8


# -- checkpoints and disk faults -----------------------------------------------------------------


@pytest.mark.parametrize("size", ["empty", "truncated"])
def test_an_empty_or_truncated_checkpoint_is_refused_in_one_line(size, tmp_path, capsys):
    run_dir = saved_run(tmp_path)
    latest = Session.checkpoint_path(run_dir)
    data = latest.read_bytes()
    latest.write_bytes(b"" if size == "empty" else data[: len(data) // 2])
    line = refused(["--resume", str(run_dir)], capsys)
    assert str(latest) in line and size in line.split(str(latest))[1], line
    with pytest.raises(checkpoint.CheckpointError) as exc:
        checkpoint.load(latest)
    assert size in str(exc.value).split(str(latest))[1]


def test_a_full_disk_stops_the_run_in_one_line_and_keeps_the_last_checkpoint(
    tmp_path, capsys, monkeypatch
):
    run_dir = tmp_path / "r"
    real_save, calls = torch.save, []

    def save(obj, f, *a, **k):  # the second checkpoint hits a full disk half-way
        calls.append(1)
        if len(calls) == 2:
            f.write(b"partial")
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_save(obj, f, *a, **k)

    monkeypatch.setattr(torch, "save", save)
    with pytest.raises(SystemExit) as exc:
        run(parse(SessionArgs, ["--run-dir", str(run_dir)]))
    monkeypatch.undo()
    line = one_line_error(capsys)
    assert exc.value.code == 1 and "No space left" in line and "checkpoint" in line, line
    state = checkpoint.load(Session.checkpoint_path(run_dir))
    assert state["step"] == 8 and state["counter"]["n"] == 1  # the last good one
    assert not list((run_dir / "checkpoints").glob("*.tmp"))
    assert not rundir.holds_lock(run_dir)
    run(parse(SessionArgs, ["--resume", str(run_dir)]))  # and it resumes from there
    assert checkpoint.load(Session.checkpoint_path(run_dir))["counter"]["n"] == 4


def test_a_read_only_run_dir_is_refused_in_one_line_and_left_as_it_was(
    tmp_path, capsys, monkeypatch
):
    run_dir = saved_run(tmp_path)
    before = {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()}
    real_open = os.open

    def read_only(path, flags, *a, **k):  # root ignores chmod: the file system's answer
        if str(path).startswith(str(run_dir)) and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
        return real_open(path, flags, *a, **k)

    monkeypatch.setattr(os, "open", read_only)
    args = parse(SessionArgs, ["--resume", str(run_dir)])
    with pytest.raises(SystemExit) as exc:
        run(args)
    monkeypatch.undo()
    assert exc.value.code == 1 and "Read-only file system" in one_line_error(capsys)
    assert {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()} == before


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a chmod 0555 directory")
def test_a_chmod_read_only_run_dir_is_refused_in_one_line(tmp_path, capsys):
    run_dir = saved_run(tmp_path)
    for p in (run_dir, run_dir / "checkpoints"):
        p.chmod(0o555)
    (run_dir / rundir.LOCK_NAME).chmod(0o444)
    try:
        with pytest.raises(SystemExit) as exc:
            run(parse(SessionArgs, ["--resume", str(run_dir)]))
    finally:
        for p in (run_dir, run_dir / "checkpoints"):
            p.chmod(0o755)
    assert exc.value.code == 1 and "cannot write" in one_line_error(capsys)


def test_stale_temporaries_of_a_killed_writer_are_removed_at_start(tmp_path):
    run_dir = saved_run(tmp_path)
    stale = [
        run_dir / "checkpoints" / "latest.pt.k3j2x9.tmp",
        run_dir / "config.json.a8b7c6.tmp",
        run_dir / "pretrained.pt.zz11yy.tmp",
    ]
    for p in stale:
        p.write_bytes(b"half a file")
    kept = run_dir / "notes.tmp"  # not a name the atomic writers make
    kept.write_text("mine")
    run(parse(SessionArgs, ["--resume", str(run_dir)]))
    assert not any(p.exists() for p in stale)
    assert kept.read_text() == "mine"


def test_a_lock_taken_over_from_a_killed_process_holds_the_new_pid(tmp_path):
    run_dir = tmp_path / "r"
    holder = hold_lock(run_dir)
    assert (run_dir / rundir.LOCK_NAME).read_text().strip() == str(holder.pid)
    with pytest.raises(rundir.RunDirBusy, match=f"pid {holder.pid}"):
        rundir.lock(run_dir)
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
    rundir.lock(run_dir)
    try:
        assert (run_dir / rundir.LOCK_NAME).read_text().strip() == str(os.getpid())
    finally:
        rundir.unlock(run_dir)


def test_a_refusal_removes_the_run_directory_it_made_and_nothing_else(tmp_path, capsys):
    """cli.fail (every one-line refusal, exit 2) removes a run directory this process made and
    wrote nothing into but its lock, with the parents made for it; a directory that existed,
    or one a run has written into, stays."""
    made = tmp_path / "new" / "parents" / "run"
    existed = tmp_path / "existed"
    existed.mkdir()
    written = tmp_path / "written"
    for run_dir in (made, existed, written):
        rundir.lock(run_dir)
    (written / "config.json").write_text("{}")
    with pytest.raises(SystemExit) as exc:
        fail("bad input")
    assert exc.value.code == 2 and capsys.readouterr().err == "error: bad input\n"
    assert not (tmp_path / "new").exists()
    assert existed.is_dir() and (written / "config.json").is_file()
    for run_dir in (existed, written):
        rundir.unlock(run_dir)
