"""How a local sweep starts its runs: forked from a server that imported torch once, or exec'd.

A run is `python algos/<algo>.py ...`; for a short run most of its CPU is start-up and imports
(the stop-bandit grpo run of paper_figures/bench_sweep_launch.py: ~2.2 s CPU, ~1.6 s of it
`import torch`, numpy, gymnasium and controlrl). "fork" (the default where Python has a
forkserver) keeps one multiprocessing forkserver per driver that imports PRELOAD once, and each
run is a fork of it that runs the script as __main__ with the argv, working directory,
environment, sys.path and log file descriptors that `python script.py` would have, so its files
are the same bytes. paper_figures/bench_sweep_launch.py (12 such runs, 2 at once, 3 repeats):
0.83 CPU s per run forked, the server's imports included, against 2.88 s exec'd (3.5x less
CPU, 3.9x less wall clock); hence fork is the default. "exec" (CONTROLRL_SWEEP_LAUNCH=exec or
run_sweep(launcher="exec"), and always under Ray) starts a fresh interpreter per run.

What a fork still shares with the server, unlike a fresh interpreter: modules as they were on
disk when the server imported them, environment variables read at import (OMP_NUM_THREADS and
the like, as the driver had them when the server started) and the str hash seed.
The server runs no torch op (an OpenMP pool does not survive fork) and never imports jax (not
fork-safe: a script that needs it imports it itself, in the run).
"""

from __future__ import annotations

import atexit
import functools
import json
import multiprocessing
import os
import subprocess
import sys
import threading
from dataclasses import dataclass
from multiprocessing import connection, forkserver, reduction

# what every algorithm imports (python -X importtime: torch ~1.1 s, controlrl.cli ~0.13 s)
PRELOAD = (
    "numpy",
    "torch",
    "gymnasium",
    "tyro",
    "envs",
    "controlrl.cli",
    "controlrl.update",
    "controlrl.nets",
    "controlrl.training",
    "controlrl.losses",
    "controlrl.population",
    "controlrl.diagnostics",
    "controlrl.session",
    "controlrl.rollout",
    "controlrl.returns",
    "controlrl.group_rollout",
    "controlrl.evaluate",
    "controlrl.buffers",
    "controlrl.launch",
)
MODES = ("fork", "exec")
MODE_ENV = "CONTROLRL_SWEEP_LAUNCH"


def default_mode() -> str:
    """CONTROLRL_SWEEP_LAUNCH if set, else fork where a forkserver exists (Linux, macOS)."""
    mode = os.environ.get(MODE_ENV, "")
    if mode:
        if mode not in MODES:
            raise ValueError(f"{MODE_ENV} must be one of {', '.join(MODES)}, got {mode!r}")
        return mode
    return "fork" if "forkserver" in multiprocessing.get_all_start_methods() else "exec"


def start(cmd: list[str], env: dict, cwd, log_path, mode: str = "exec"):
    """Start cmd ([sys.executable, script, *args]) with stdout and stderr appended to log_path;
    returns an Exec or a Fork (pid, wait(timeout) -> returncode or None while it runs)."""
    if mode == "fork":
        return Fork.start(cmd, env, cwd, log_path)
    with open(log_path, "a") as log:
        proc = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, cwd=cwd, env=env, preexec_fn=die_with_parent
        )
    return Exec(proc)


def die_with_parent() -> None:
    """Linux: SIGKILL when the parent dies, so a killed sweep leaves no orphan writing into a run
    directory that the next sweep resumes."""
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


@dataclass
class Exec:
    """A run as its own interpreter."""

    proc: subprocess.Popen

    @property
    def pid(self) -> int:
        return self.proc.pid

    def wait(self, timeout: float) -> int | None:
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None


@dataclass
class Fork:
    """A run forked from the forkserver; `sentinel` gives its pid, then its exit status."""

    pid: int
    sentinel: int
    returncode: int | None = None

    @classmethod
    def start(cls, cmd: list[str], env: dict, cwd, log_path) -> Fork:
        server = _server()
        sentinel, w = server.connect_to_new_process([])
        job = Job(
            script=cmd[1],
            argv=list(cmd[1:]),
            env=dict(env),
            cwd=str(cwd),
            log=str(log_path),
            path=base_path(env.get("PYTHONPATH", "")),
            server_pid=server._forkserver_pid,
        )
        with open(w, "wb", closefd=True) as pipe:
            reduction.dump({}, pipe)  # no preparation: the driver's __main__ is not re-imported
            reduction.dump(job, pipe)
        return cls(forkserver.read_signed(sentinel), sentinel)

    def wait(self, timeout: float) -> int | None:
        if self.returncode is None and connection.wait([self.sentinel], timeout):
            try:
                self.returncode = forkserver.read_signed(self.sentinel)
            except EOFError:  # the server died before reporting: as if the run were killed
                self.returncode = -9
            os.close(self.sentinel)
        return self.returncode


_lock = threading.Lock()


def _server():
    """The driver's forkserver, started (once) with PRELOAD imported."""
    with _lock:
        forkserver.set_forkserver_preload(list(PRELOAD))  # read when the server starts
        forkserver.ensure_running()  # (re)starts it if it is not running
    return forkserver._forkserver


def stop_server() -> None:
    """Stop the forkserver and wait for it (its CPU, and its runs', then counts in this
    process's RUSAGE_CHILDREN); the next fork starts a new one."""
    with _lock:
        forkserver._forkserver._stop()


def _exit_now(pid: int) -> None:
    """The server's first exit handler: out at once, without tearing down torch (seconds),
    for its runs die with it (PR_SET_PDEATHSIG) and must die as soon as the driver does."""
    if os.getpid() == pid:  # not in a run, which inherits the handler
        os._exit(0)


def _in_server() -> bool:
    """Whether this is the forkserver importing its preload list."""
    frame = sys._getframe()
    while frame is not None and frame.f_code is not forkserver.main.__code__:
        frame = frame.f_back
    return frame is not None


if _in_server():
    atexit.register(_exit_now, os.getpid())


@functools.lru_cache(maxsize=8)
def base_path(pythonpath: str) -> tuple[str, ...]:
    """sys.path[1:] of `python script.py` under this PYTHONPATH: the PYTHONPATH entries, the
    standard library and site-packages (asked of a fresh interpreter once)."""
    env = {**os.environ, "PYTHONPATH": pythonpath}
    code = "import json, sys; print(json.dumps(sys.path[1:]))"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, check=True)
    return tuple(json.loads(out.stdout))


@dataclass
class Job:
    """What a forked run needs to become `python script ...`; runs in the child (the forkserver
    calls _bootstrap, as it would a multiprocessing.Process's)."""

    script: str
    argv: list[str]
    env: dict
    cwd: str
    log: str
    path: tuple[str, ...]
    server_pid: int | None

    def _bootstrap(self, parent_sentinel=None) -> int:
        os._exit(run_as_main(self))


def run_as_main(job: Job) -> int:
    """In the forked child: set up as a fresh interpreter would be, run the script as __main__,
    finish as the interpreter does; returns the exit status."""
    _detach(job)
    os.chdir(job.cwd)
    os.environ.clear()
    os.environ.update(job.env)
    sys.path[:] = [os.path.dirname(os.path.abspath(job.script)), *job.path]
    sys.argv = list(job.argv)
    _redirect(job.log)
    _fresh_state()
    code = _run(job.script)
    return _finish(code)


def _detach(job: Job) -> None:
    """Die with the server (which exits when the driver dies), and do not hold the server's
    'driver alive' pipe open, which would keep it alive past the driver."""
    die_with_parent()
    if job.server_pid is not None and os.getppid() != job.server_pid:
        os._exit(1)  # the server is already gone
    alive = forkserver._forkserver._forkserver_alive_fd
    if alive is not None:
        os.close(alive)
        forkserver._forkserver._forkserver_alive_fd = None
    from multiprocessing import util

    util._finalizer_registry.clear()  # the server's, not the run's
    util._run_after_forkers()


def _redirect(log: str) -> None:
    """stdout and stderr onto the log (appending), with the encoding and buffering a fresh
    interpreter gives streams on a file (stdout block-buffered, stderr line-buffered)."""
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    streams = []
    for fd, old, lines in ((1, sys.__stdout__, False), (2, sys.__stderr__, True)):
        encoding, errors = getattr(old, "encoding", None), getattr(old, "errors", None)
        streams.append(open(fd, "w", encoding=encoding, errors=errors, closefd=False, buffering=-1))
        streams[-1].reconfigure(line_buffering=lines)
    if os.environ.get("PYTHONUNBUFFERED"):
        streams[0].reconfigure(write_through=True)
    sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__ = streams


def _fresh_state() -> None:
    """numpy's global generator is seeded from entropy per interpreter; the fork's copy would
    be the server's, the same in every run."""
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed()


def _run(script: str) -> int | BaseException:
    """Run the script as __main__; its exit status, or the exception that ended it."""
    import runpy

    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as exc:
        _flush(sys.stdout)  # the interpreter flushes stdout before it writes to stderr
        return _exit_code(exc.code)
    except BaseException as exc:  # as the interpreter: printed, then the status
        _flush(sys.stdout)
        tb = exc.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename != script:
            tb = tb.tb_next  # from the script's frame on, as `python script.py` prints it
        exc = exc.with_traceback(tb or exc.__traceback__)
        sys.excepthook(type(exc), exc, exc.__traceback__)
        return exc
    return 0


def _exit_code(code) -> int:
    """SystemExit's code as the interpreter maps it: None 0, an int itself, else printed and 1."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def _finish(code: int | BaseException) -> int:
    """Non-daemon threads joined, atexit handlers run, streams flushed, as at interpreter exit;
    a KeyboardInterrupt ends the run by SIGINT, as it does a fresh interpreter."""
    threading._shutdown()
    atexit._run_exitfuncs()
    _flush(sys.stdout)
    _flush(sys.stderr)
    if isinstance(code, KeyboardInterrupt):
        import signal

        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    return 1 if isinstance(code, BaseException) else code


def _flush(stream) -> None:
    try:
        stream.flush()
    except (AttributeError, OSError, ValueError):  # replaced, closed or broken by the script
        pass
