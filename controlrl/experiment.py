"""Many (algorithm, env, seed) runs: each a separate process running the algorithm's own script.

The sweep directory holds sweep.json (the configuration and every run's status: queued, running,
done, failed with the tail of its log) and runs/<algo>/<env>/seed<n>/ (each run's own directory).
Re-running the same sweep skips finished runs and resumes killed ones from their checkpoints.
Backends: a local pool of worker threads, each driving one subprocess (default, no dependency),
or Ray (`pip install .[ray]`), where the same task function runs under ray.remote.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ALGOS_DIR = ROOT / "algos"
STATUSES = ("queued", "running", "done", "failed")


class SweepError(ValueError):
    """Bad sweep input; the message names the problem."""


@dataclass(frozen=True)
class Task:
    """One run: which script, which flags, where it writes."""

    algo: str
    env_id: str
    seed: int
    total_timesteps: int
    run_dir: str
    script: str
    extra: tuple[str, ...] = ()

    @property
    def run_id(self) -> str:
        return f"{self.algo}/{self.env_id}/seed{self.seed}"


@dataclass
class SweepConfig:
    """What defines a sweep; a directory belongs to exactly one."""

    algos: list[str]
    envs: list[str]
    seeds: int
    total_timesteps: int
    extra: list[str] = field(default_factory=list)


def apply_toy(args, argv: list[str] | None, toy: dict) -> None:
    """A figure script's --toy: set each of toy's {dest: value} on args unless its flag
    (--dest-with-dashes, alone or as --flag=value) was given on the command line (argv, or
    sys.argv[1:] when None), so toy sizes replace defaults, never what the user asked for."""
    given = {a.split("=")[0] for a in (argv if argv is not None else sys.argv[1:])}
    for key, value in toy.items():
        if "--" + key.replace("_", "-") not in given:
            setattr(args, key, value)


def write_rows(path: str | Path, rows: list[dict], fields=None) -> None:
    """A figure's CSV: one row per dict, columns `fields` (default: the first row's keys),
    floats to 6 significant digits (what the figures' numbers carry; keeps the files small)."""
    import csv

    with Path(path).open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(fields if fields is not None else rows[0]))
        writer.writeheader()
        for r in rows:
            writer.writerow({k: f"{v:.6g}" if isinstance(v, float) else v for k, v in r.items()})


def check_config(config: SweepConfig, algos_dir: Path = ALGOS_DIR) -> None:
    """Raise SweepError for an unknown algorithm or env id or a non-positive count."""
    from envs import UnknownEnvError, check_env_id

    if config.seeds <= 0:
        raise SweepError(f"--seeds must be > 0, got {config.seeds}")
    if config.total_timesteps <= 0:
        raise SweepError(f"--total-timesteps must be > 0, got {config.total_timesteps}")
    if not config.algos or not config.envs:
        raise SweepError("--algos and --envs must each name at least one entry")
    known = sorted(p.stem for p in algos_dir.glob("*.py") if not p.stem.startswith("_"))
    for algo in config.algos:
        if algo not in known:
            raise SweepError(f"unknown algorithm '{algo}' (known: {', '.join(known)})")
    for env_id in config.envs:
        try:
            check_env_id(env_id)
        except UnknownEnvError as exc:
            raise SweepError(f"--envs: {exc}") from None


def plan(config: SweepConfig, out: Path, algos_dir: Path = ALGOS_DIR) -> list[Task]:
    """Every (algo, env, seed) of the sweep, seeds numbered 1..n."""
    return [
        Task(
            algo,
            env_id,
            seed,
            config.total_timesteps,
            str(out / "runs" / algo / env_id.replace(":", "_") / f"seed{seed}"),
            str(algos_dir / f"{algo}.py"),
            tuple(config.extra),
        )
        for algo in config.algos
        for env_id in config.envs
        for seed in range(1, config.seeds + 1)
    ]


def is_done(run_dir: Path) -> bool:
    """A run is finished once it wrote its final evaluation."""
    return (run_dir / "final_eval.json").exists()


def run_task(task: Task, log_tail_lines: int = 20) -> dict:
    """Run (or resume) one task to completion in a subprocess; the same function for every backend.

    Returns {"run_id", "status": "done"|"failed", "returncode", "error", "seconds"}.
    """
    run_dir = Path(task.run_dir)
    start = time.time()
    if is_done(run_dir):
        return {
            "run_id": task.run_id,
            "status": "done",
            "returncode": 0,
            "error": "",
            "seconds": 0.0,
        }
    if (run_dir / "checkpoints" / "latest.pt").exists():
        cmd = [sys.executable, task.script, "--resume", str(run_dir)]
    else:
        if run_dir.exists():  # killed before its first checkpoint: nothing worth keeping
            shutil.rmtree(run_dir)
        cmd = [
            sys.executable,
            task.script,
            "--env-id",
            task.env_id,
            "--seed",
            str(task.seed),
            "--total-timesteps",
            str(task.total_timesteps),
            "--run-dir",
            str(run_dir),
            "--no-progress",
            *task.extra,
        ]
    log_path = run_dir.parent / f"{run_dir.name}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("a") as log:
        log.write(f"$ {' '.join(cmd)}\n")
        log.flush()
        env = {**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
        proc = subprocess.run(
            cmd,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
            env=env,
            preexec_fn=_die_with_parent,
        )
    ok = proc.returncode == 0 and is_done(run_dir)
    error = ""
    if not ok:
        lines = log_path.read_text(errors="replace").splitlines()
        error = "\n".join(lines[-log_tail_lines:])
    return {
        "run_id": task.run_id,
        "status": "done" if ok else "failed",
        "returncode": proc.returncode,
        "error": error,
        "seconds": time.time() - start,
    }


def _die_with_parent() -> None:
    """Linux: the run gets SIGKILL when the sweep that started it dies, so a killed sweep leaves
    no orphan writing into a run directory that the next sweep resumes."""
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class StatusFile:
    """sweep.json: the configuration and per-run status; written atomically, under a lock."""

    def __init__(self, out: Path, config: SweepConfig) -> None:
        self.path = out / "sweep.json"
        self.lock = threading.Lock()
        out.mkdir(parents=True, exist_ok=True)
        self.data = {"config": asdict(config), "runs": {}}
        if self.path.exists():  # check_out_dir made sure the configuration is the same
            self.data["runs"] = json.loads(self.path.read_text())["runs"]

    def set(self, run_id: str, **fields) -> None:
        with self.lock:
            self.data["runs"].setdefault(run_id, {}).update(fields)
            tmp = self.path.with_suffix(".json.tmp")
            tmp.write_text(json.dumps(self.data, indent=1))
            os.replace(tmp, self.path)


def check_out_dir(out: Path, config: SweepConfig) -> None:
    """Raise SweepError if `out` holds a sweep with another configuration (or is not a sweep)."""
    status = out / "sweep.json"
    if status.exists():
        saved = json.loads(status.read_text())
        if saved.get("config") != asdict(config):
            raise SweepError(
                f"{out} belongs to a different sweep configuration "
                f"({saved.get('config')}); use another --out"
            )
    elif out.exists() and any(out.iterdir()):
        raise SweepError(f"{out} exists and is not a sweep directory; use another --out")


def run_sweep(
    config: SweepConfig,
    out: Path,
    backend: str = "local",
    workers: int = 2,
    address: str | None = None,
    algos_dir: Path = ALGOS_DIR,
    on_update: Callable[[dict], None] | None = None,
) -> dict[str, dict]:
    """Run every task not yet done; returns the final status of every run."""
    check_config(config, algos_dir)
    check_out_dir(out, config)
    status = StatusFile(out, config)
    tasks = plan(config, out, algos_dir)
    for task in tasks:
        if is_done(Path(task.run_dir)):
            status.set(task.run_id, status="done")
        else:
            status.set(task.run_id, status="queued", error="")
    todo = [t for t in tasks if not is_done(Path(t.run_dir))]

    def finished(result: dict) -> None:
        status.set(
            result["run_id"],
            status=result["status"],
            error=result["error"],
            returncode=result["returncode"],
            seconds=result["seconds"],
            ended=time.time(),
        )
        if on_update:
            on_update(result)

    if backend == "local":
        _run_local(todo, workers, status, finished)
    elif backend == "ray":
        _run_ray(todo, workers, address, status, finished)
    else:
        raise SweepError(f"--backend must be 'local' or 'ray', got {backend!r}")
    return status.data["runs"]


def _run_local(todo: list[Task], workers: int, status: StatusFile, finished) -> None:
    from concurrent.futures import ThreadPoolExecutor

    def one(task: Task) -> None:
        status.set(task.run_id, status="running", started=time.time())
        try:
            result = run_task(task)
        except Exception as exc:  # a broken run never stops the others
            result = {
                "run_id": task.run_id,
                "status": "failed",
                "returncode": -1,
                "error": f"{type(exc).__name__}: {exc}",
                "seconds": 0.0,
            }
        finished(result)

    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(one, todo))


def ray_init(address: str | None, workers: int) -> None:
    """Join a cluster at `address`, or start a local instance bound to loopback only."""
    if not address:
        # Ray otherwise picks the machine's network address as the node IP even when told
        # 127.0.0.1; with this (read at import) it uses loopback, as on a laptop.
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    import ray

    if ray.is_initialized():
        return
    if address:
        ray.init(address=address, log_to_driver=False)
    else:
        ray.init(
            num_cpus=workers,
            include_dashboard=False,
            log_to_driver=False,
            _node_ip_address="127.0.0.1",
        )


def _run_ray(todo: list[Task], workers: int, address: str | None, status, finished) -> None:
    import ray

    ray_init(address, workers)
    remote = ray.remote(num_cpus=1, max_retries=0)(run_task)
    pending = {}
    for task in todo:
        pending[remote.remote(task)] = task
        status.set(task.run_id, status="running", started=time.time())
    while pending:
        ready, _ = ray.wait(list(pending), num_returns=1)
        for ref in ready:
            task = pending.pop(ref)
            try:
                result = ray.get(ref)
            except Exception as exc:
                result = {
                    "run_id": task.run_id,
                    "status": "failed",
                    "returncode": -1,
                    "error": f"{type(exc).__name__}: {exc}",
                    "seconds": 0.0,
                }
            finished(result)


def summarize(out: Path) -> dict:
    """Counts per status and an ETA from finished runs' durations and running runs' progress."""
    data = json.loads((out / "sweep.json").read_text())
    runs = data["runs"]
    counts = {s: sum(r.get("status") == s for r in runs.values()) for s in STATUSES}
    total_steps = data["config"]["total_timesteps"]
    now = time.time()
    rates = []  # seconds per env step, measured on runs in progress or finished
    remaining_steps = 0.0
    for run_id, run in runs.items():
        algo, env_tag, seed = run_id.split("/")
        run_dir = out / "runs" / algo / env_tag.replace(":", "_") / seed
        step = _last_step(run_dir)
        if run.get("status") == "done":
            if run.get("seconds"):
                rates.append(run["seconds"] / total_steps)
            continue
        if run.get("status") == "failed":
            continue
        remaining_steps += total_steps - step
        if run.get("status") == "running" and step > 0 and run.get("started"):
            rates.append((now - run["started"]) / max(step, 1))
    workers = max(counts["running"], 1)
    eta = (remaining_steps * sum(rates) / len(rates) / workers) if rates else None
    return {
        "counts": counts,
        "total": len(runs),
        "eta_seconds": eta,
        "failed": {k: v.get("error", "") for k, v in runs.items() if v.get("status") == "failed"},
    }


def _last_step(run_dir: Path) -> int:
    metrics = run_dir / "metrics.csv"
    if not metrics.exists():
        return 0
    lines = metrics.read_text().splitlines()
    try:
        return int(float(lines[-1].split(",", 1)[0])) if len(lines) > 1 else 0
    except ValueError:
        return 0
