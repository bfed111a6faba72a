"""Many (algorithm, env, seed) runs: each a separate process running the algorithm's own script.

The sweep directory holds sweep.json (the configuration, every run's status: queued, running,
done, failed with the tail of its log, and the driver's pid, host, state and heartbeat),
runs/<algo>/<env>/seed<n>/ (each run's own directory), state/<algo>/<env>/seed<n>.json (what
each run says about itself while it lives: started, heartbeat, node, attempt), sweep.lock (held
by the driver) and sweep.marker (a token each node checks to prove it sees the same directory).
Columns of runs are algorithms, or arms (Arm: a name, an algorithm, its own flags), whose name
takes the algorithm's place in those paths. Seeds are 1..n or an explicit list; in population
mode one process trains a contiguous block of them (--seed first --num-seeds count), its
directory runs/<arm>/<env>/seeds<first>-<last>/.
Re-running the same sweep skips finished runs and resumes killed ones from their checkpoints.
Backends: a local pool of worker threads, each driving one run's process (default, no
dependency), or Ray (`pip install .[ray]`), where the same task function runs under ray.remote.
Local runs are forked from a server that imported torch once, or exec'd as fresh interpreters
(controlrl.launch says which is the default and why; CONTROLRL_SWEEP_LAUNCH=exec or
run_sweep(launcher="exec") chooses exec); Ray runs are always exec'd.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from controlrl import launch, rundir
from controlrl.rundir import flock_holder, take_flock, write_text_atomic

ROOT = Path(__file__).resolve().parents[1]
ALGOS_DIR = ROOT / "algos"
STATUSES = ("queued", "running", "done", "failed")
RUN_STATES = ("running", "done", "failed")  # what a run's own state file says
DRIVER_STATES = ("running", "finished", "interrupted")
HEARTBEAT_S = 5.0  # the driver and every run rewrite their heartbeat this often
STALE_S = 30.0  # a heartbeat older than this belongs to a process that is gone
CONNECT_TIMEOUT_S = 30.0  # joining a Ray cluster
MAX_SEEDS = 10_000
MAX_SEED = 2**31 - 1  # the largest seed number a seed list may hold
MAX_TIMESTEPS = 10**12
MAX_WORKERS = 1024
LOCK_NAME, MARKER_NAME = "sweep.lock", "sweep.marker"
OWN_FILES = {LOCK_NAME, MARKER_NAME}  # what a sweep writes before sweep.json
ARM_NAME = re.compile(r"[A-Za-z0-9._-]+")


class SweepError(ValueError):
    """Bad sweep input; the message names the problem."""


class SweepTimeout(SweepError):
    """A Ray cluster did not answer in time (the connecting thread may still be stuck)."""


@dataclass(frozen=True)
class Task:
    """One run: which script, which flags, where it writes. A population task (population=True)
    trains the seeds `seeds` (a contiguous block, `seed` its first) in one process."""

    algo: str
    env_id: str
    seed: int
    total_timesteps: int
    run_dir: str
    script: str
    extra: tuple[str, ...] = ()
    state: str = ""  # the run's own state file (status, heartbeat, node), "" for none
    arm: str = ""  # the arm's name (the directory component in place of algo), "" for none
    seeds: tuple[int, ...] = ()  # the seeds the run trains; () is (seed,)
    population: bool = False  # --seed seeds[0] --num-seeds len(seeds)

    def __post_init__(self) -> None:
        if not self.seeds:
            object.__setattr__(self, "seeds", (self.seed,))

    @property
    def run_id(self) -> str:
        """<arm or algo>/<env id>/seed<n>, a population's .../seeds<first>-<last>."""
        return f"{self.arm or self.algo}/{self.env_id}/{seed_dir_name(self.seeds, self.population)}"


@dataclass(frozen=True)
class Arm:
    """A column of a sweep: `name` (its directory, in place of the algorithm's), the script
    algos/<algo>.py, and `flags` appended after the sweep's common `extra`."""

    name: str
    algo: str
    flags: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "flags", tuple(self.flags))  # a list from JSON or a caller


@dataclass
class SweepConfig:
    """What defines a sweep; a directory belongs to exactly one.

    arms: when given, the columns of runs in place of `algos` (which must then be empty).
    seed_list: the seeds in place of 1..seeds (then `seeds` is 0 or its length).
    population: one run per (column, env, contiguous block of seeds), --num-seeds.
    steps_per_env: {env id: steps} in place of total_timesteps for the envs it names."""

    algos: list[str]
    envs: list[str]
    seeds: int
    total_timesteps: int
    extra: list[str] = field(default_factory=list)
    arms: list[Arm] | None = None
    seed_list: list[int] | None = None
    population: bool = False
    steps_per_env: dict[str, int] | None = None

    def columns(self) -> list[Arm]:
        """The arms, or one per algorithm (named as it) without flags of its own."""
        if self.arms is not None:
            return list(self.arms)
        return [Arm(algo, algo) for algo in self.algos]

    def seed_numbers(self) -> list[int]:
        """The sweep's seeds, ascending: seed_list, or 1..seeds."""
        if self.seed_list is not None:
            return sorted(self.seed_list)
        return list(range(1, self.seeds + 1))

    def steps_for(self, env_id: str) -> int:
        """The step budget of each run on env_id."""
        return (self.steps_per_env or {}).get(env_id, self.total_timesteps)

    def to_dict(self) -> dict:
        """What sweep.json's "config" holds: the fields of old sweeps, then each new field only
        where it is not its default (an old configuration writes what it always wrote)."""
        data = {
            "algos": list(self.algos),
            "envs": list(self.envs),
            "seeds": self.seeds,
            "total_timesteps": self.total_timesteps,
            "extra": list(self.extra),
        }
        if self.arms is not None:
            data["arms"] = [
                {"name": a.name, "algo": a.algo, "flags": list(a.flags)} for a in self.arms
            ]
        if self.seed_list is not None:
            data["seed_list"] = list(self.seed_list)
        if self.population:
            data["population"] = True
        if self.steps_per_env is not None:
            data["steps_per_env"] = dict(self.steps_per_env)
        return data

    @classmethod
    def from_dict(cls, data: dict) -> SweepConfig:
        """The configuration to_dict wrote (a sweep.json's, checked by load_status)."""
        arms, steps = data.get("arms"), data.get("steps_per_env")
        return cls(
            list(data["algos"]),
            list(data["envs"]),
            data["seeds"],
            data["total_timesteps"],
            list(data["extra"]),
            arms=None if arms is None else [Arm(a["name"], a["algo"], a["flags"]) for a in arms],
            seed_list=None if data.get("seed_list") is None else list(data["seed_list"]),
            population=bool(data.get("population", False)),
            steps_per_env=None if steps is None else dict(steps),
        )


def seed_dir_name(seeds: tuple[int, ...] | list[int], population: bool) -> str:
    """A run's directory name: seed<n>, a population's seeds<first>-<last>."""
    return f"seeds{seeds[0]}-{seeds[-1]}" if population else f"seed{seeds[0]}"


def seed_blocks(seeds: list[int]) -> list[tuple[int, ...]]:
    """The maximal runs of consecutive numbers of a sorted seed list: [1, 2, 3, 7, 8] ->
    [(1, 2, 3), (7, 8)], each what one population run trains."""
    blocks: list[list[int]] = []
    for seed in seeds:
        if blocks and seed == blocks[-1][-1] + 1:
            blocks[-1].append(seed)
        else:
            blocks.append([seed])
    return [tuple(b) for b in blocks]


def apply_toy(args, argv: list[str] | None, toy: dict) -> None:
    """A figure script's --toy: set each of toy's {dest: value} on args unless its flag
    (--dest-with-dashes, alone or as --flag=value) was given on the command line (argv, or
    sys.argv[1:] when None), so toy sizes replace defaults, never what the user asked for."""
    given = {a.split("=")[0] for a in (argv if argv is not None else sys.argv[1:])}
    for key, value in toy.items():
        if "--" + key.replace("_", "-") not in given:
            setattr(args, key, value)


def read_rows(path: str | Path, ints=(), floats=(), flag: str = "--from-csv") -> list[dict]:
    """A figure's CSV as write_rows left it, the columns `ints` and `floats` parsed back; a
    missing file exits naming the flag that needs it."""
    import csv

    path = Path(path)
    if not path.exists():
        raise SystemExit(f"error: {flag} needs {path} (written by a run of this script)")
    with path.open(newline="") as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        r.update({k: int(r[k]) for k in ints} | {k: float(r[k]) for k in floats})
    return rows


def kept_rows(path: str | Path, key: tuple[str, ...], fresh: set, ints=(), floats=()) -> list[dict]:
    """The rows of a figure's existing CSV whose cell (the values of the columns `key`) is not in
    `fresh` (the cells this call ran or read anew), parsed as read_rows parses them, an empty
    float cell as NaN; no file: no rows. A figure grown cell by cell keeps what it ran before."""
    import csv

    path = Path(path)
    if not path.exists():
        return []
    with path.open(newline="") as f:
        rows = [r for r in csv.DictReader(f) if tuple(r[k] for k in key) not in fresh]
    for r in rows:
        r.update({k: int(r[k]) for k in ints})
        r.update({k: float(r[k]) if r[k] else float("nan") for k in floats})
    return rows


def write_rows(path: str | Path, rows: list[dict], fields=None) -> None:
    """A figure's CSV: one row per dict, columns `fields` (default: the first row's keys),
    floats to 6 significant digits (what the figures' numbers carry; keeps the files small)."""
    import csv

    with Path(path).open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(fields if fields is not None else rows[0]))
        writer.writeheader()
        for r in rows:
            writer.writerow({k: f"{v:.6g}" if isinstance(v, float) else v for k, v in r.items()})


PRESENTATION = {"run_dir", "resume", "progress", "tensorboard", "capture_video"}


def differing_flags(run_dir: str | Path, algo: str, argv: list[str], ignore=()) -> list[str]:
    """The flags of algos/<algo>.py whose values in the run's config.json differ from what
    `argv` (with the run's own env id and seed) parses to: empty when the run is what argv
    would train. Flags that change neither training nor its evaluation (PRESENTATION: the run
    directory, logging, video) and `ignore` are not compared."""
    import importlib

    from controlrl.cli import parse

    saved = json.loads((Path(run_dir) / "config.json").read_text())["args"]
    own = ["--env-id", saved["env_id"], "--seed", str(saved["seed"])]
    want = vars(parse(importlib.import_module(f"algos.{algo}").Args, [*own, *argv]))
    skip = PRESENTATION | set(ignore)
    plain = {k: list(v) if isinstance(v, tuple) else v for k, v in want.items()}
    return [k for k in plain if k not in skip and saved.get(k) != plain[k]]


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_config(config: SweepConfig, algos_dir: Path = ALGOS_DIR) -> None:
    """Raise SweepError for an unknown algorithm or env id, a repeated entry, a count out of
    range, a bad arm, seed list or step budget, or (population) an algorithm without
    --num-seeds or an env whose runs cannot share one process; starts nothing."""
    from envs import UnknownEnvError, check_env_id

    if config.seed_list is not None:
        _check_seed_list(config)
    elif config.seeds <= 0:
        raise SweepError(f"--seeds must be > 0, got {config.seeds}")
    elif config.seeds > MAX_SEEDS:
        raise SweepError(f"--seeds must be <= {MAX_SEEDS}, got {config.seeds}")
    if config.total_timesteps <= 0:
        raise SweepError(f"--total-timesteps must be > 0, got {config.total_timesteps}")
    if config.total_timesteps > MAX_TIMESTEPS:
        raise SweepError(f"--total-timesteps must be <= 1e12, got {config.total_timesteps}")
    if config.arms is not None:
        if config.algos:
            raise SweepError("give algos or arms, not both (arms name their own algorithms)")
        if not config.arms:
            raise SweepError("arms must name at least one arm")
        _check_arms(config.arms)
    if not config.columns() or not config.envs:
        raise SweepError("--algos and --envs must each name at least one entry")
    for flag, names in (("--algos", config.algos), ("--envs", config.envs)):
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:  # two workers would share one run directory
            raise SweepError(f"{flag} names {', '.join(twice)} more than once")
    known = sorted(p.stem for p in algos_dir.glob("*.py") if not p.stem.startswith("_"))
    for arm in config.columns():
        if arm.algo not in known:
            raise SweepError(f"unknown algorithm '{arm.algo}' (known: {', '.join(known)})")
    for env_id in config.envs:
        try:
            check_env_id(env_id)
        except UnknownEnvError as exc:
            raise SweepError(f"--envs: {exc}") from None
    if config.steps_per_env is not None:
        _check_steps_per_env(config)
    if config.population:
        _check_population(config, algos_dir)


def _check_seed_list(config: SweepConfig) -> None:
    seeds = config.seed_list
    if not isinstance(seeds, list | tuple) or not seeds:
        raise SweepError(f"seed_list must be a non-empty list of seeds, got {seeds!r}")
    if len(seeds) > MAX_SEEDS:
        raise SweepError(f"seed_list must hold <= {MAX_SEEDS} seeds, got {len(seeds)}")
    bad = [s for s in seeds if not (_is_int(s) and 0 <= s <= MAX_SEED)]
    if bad:
        raise SweepError(f"seed_list: seeds must be integers in 0..{MAX_SEED}, got {bad[0]!r}")
    twice = sorted({s for s in seeds if seeds.count(s) > 1})
    if twice:  # two runs of one seed would share one run directory
        raise SweepError(f"seed_list names {', '.join(map(str, twice))} more than once")
    if config.seeds not in (0, len(seeds)):
        raise SweepError(
            f"seeds must be 0 or the length of seed_list ({len(seeds)}), got {config.seeds}"
        )


def _check_arms(arms: list[Arm]) -> None:
    for arm in arms:
        if not isinstance(arm, Arm):
            raise SweepError(f"arms must hold Arm entries, got {arm!r}")
        name_ok = isinstance(arm.name, str) and ARM_NAME.fullmatch(arm.name) is not None
        if not name_ok or arm.name in (".", ".."):
            raise SweepError(
                f"arm name {arm.name!r} must be letters, digits, '.', '_' or '-' (a directory name)"
            )
        if not all(isinstance(f, str) for f in arm.flags):
            raise SweepError(f"arm '{arm.name}': flags must be strings, got {list(arm.flags)!r}")
    names = [arm.name for arm in arms]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:  # two columns would share one directory
        raise SweepError(f"arms name {', '.join(twice)} more than once")


def _check_steps_per_env(config: SweepConfig) -> None:
    steps = config.steps_per_env
    if not isinstance(steps, dict):
        raise SweepError(f"steps_per_env must map env ids to steps, got {steps!r}")
    for env_id, value in steps.items():
        if env_id not in config.envs:
            raise SweepError(f"steps_per_env names '{env_id}', which is not one of the envs")
        if not (_is_int(value) and 0 < value <= MAX_TIMESTEPS):
            raise SweepError(f"steps_per_env['{env_id}'] must be in 1..1e12, got {value!r}")


def _check_population(config: SweepConfig, algos_dir: Path) -> None:
    """Every column's algorithm takes --num-seeds on every env's backend (its Args'
    population_backends: bandits for every such file, Gymnasium and envpool: ids for ppo.py,
    spo.py and bpo.py; controlrl/population_control.py), and a bandit's envs end their episodes
    together (what controlrl/population.py batches over seeds)."""
    from controlrl.population import BACKEND_NAMES
    from envs import bandits, split_id

    for env_id in config.envs:
        backend, name = split_id(env_id)
        if backend == "bandit" and not bandits.lockstep(name):
            raise SweepError(
                f"population needs bandit: envs whose episodes end together, got {env_id} "
                "(run its seeds as separate runs)"
            )
    for algo in dict.fromkeys(arm.algo for arm in config.columns()):
        users = ", ".join(arm.name for arm in config.columns() if arm.algo == algo)
        if not takes_num_seeds(algo, algos_dir):
            raise SweepError(
                f"population: algos/{algo}.py has no --num-seeds (arms {users}); "
                "run its seeds as separate runs"
            )
        backends = population_backends(algo, algos_dir)
        for env_id in config.envs:
            if split_id(env_id)[0] not in backends:
                names = " or ".join(BACKEND_NAMES[b] for b in backends)
                raise SweepError(
                    f"population needs {names} envs for algos/{algo}.py (arms {users}), got "
                    f"{env_id} (run its seeds as separate runs)"
                )


def population_backends(algo: str, algos_dir: Path = ALGOS_DIR) -> tuple[str, ...]:
    """The env backends whose seeds algos_dir/<algo>.py batches with --num-seeds: this
    checkout's algorithms by their Args (population_backends), bandits for any other script."""
    import importlib

    script = (Path(algos_dir) / f"{algo}.py").resolve()
    if script.parent == ALGOS_DIR.resolve():
        try:
            module = importlib.import_module(f"algos.{algo}")
        except Exception:  # an optional dependency missing: bandits, as any script
            module = None
        if module is not None and Path(module.__file__ or "").resolve() == script:
            return tuple(getattr(getattr(module, "Args", None), "population_backends", ("bandit",)))
    return ("bandit",)


def takes_num_seeds(algo: str, algos_dir: Path = ALGOS_DIR) -> bool:
    """Whether algos_dir/<algo>.py accepts --num-seeds: this checkout's algorithms by their
    Args (a num_seeds field), any other script by its --help."""
    import dataclasses
    import importlib

    script = (Path(algos_dir) / f"{algo}.py").resolve()
    if script.parent == ALGOS_DIR.resolve():
        try:
            module = importlib.import_module(f"algos.{algo}")
        except Exception:  # an optional dependency missing: ask the script itself
            module = None
        loaded = module is not None and Path(module.__file__ or "").resolve() == script
        if loaded and dataclasses.is_dataclass(getattr(module, "Args", None)):
            return "num_seeds" in {f.name for f in dataclasses.fields(module.Args)}
    pythonpath = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    try:
        done = subprocess.run(
            [sys.executable, str(script), "--help"],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": pythonpath},
            timeout=300,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return re.search(r"(?<![\w-])--num-seeds(?![\w-])", done.stdout) is not None


def env_tag(env_id: str) -> str:
    """The directory name of an env id's runs: <out>/runs/<algo>/<env_tag>/seed<k> (a backend's
    'envpool:Hopper-v5' is envpool_Hopper-v5, a colon being no path character everywhere)."""
    return env_id.replace(":", "_")


def plan(config: SweepConfig, out: Path, algos_dir: Path = ALGOS_DIR) -> list[Task]:
    """Every run of the sweep, with absolute paths: per column (arm or algorithm), env and seed
    (seeds 1..n or seed_list, ascending), or in population mode per column, env and contiguous
    block of seeds. A run's flags: the sweep's extra, then its arm's own."""
    out, algos_dir = Path(out).expanduser().resolve(), Path(algos_dir).expanduser().resolve()
    seeds = config.seed_numbers()
    groups = seed_blocks(seeds) if config.population else [(seed,) for seed in seeds]
    tasks = []
    for arm in config.columns():
        for env_id in config.envs:
            tag = env_tag(env_id)
            for group in groups:
                name = seed_dir_name(group, config.population)
                tasks.append(
                    Task(
                        arm.algo,
                        env_id,
                        group[0],
                        config.steps_for(env_id),
                        str(out / "runs" / arm.name / tag / name),
                        str(algos_dir / f"{arm.algo}.py"),
                        (*config.extra, *arm.flags),
                        str(out / "state" / arm.name / tag / f"{name}.json"),
                        arm=arm.name if config.arms is not None else "",
                        seeds=group,
                        population=config.population,
                    )
                )
    return tasks


def task_command(task: Task, resume: bool = False) -> list[str]:
    """The command that runs `task` (run_task runs it from the checkout's root, with the
    checkout first on PYTHONPATH): a fresh start, or with resume=True the continuation of its
    run directory from its checkpoint."""
    if resume:
        return [sys.executable, task.script, "--resume", str(task.run_dir)]
    seeds = ["--seed", str(task.seed)]
    if task.population:
        seeds += ["--num-seeds", str(len(task.seeds))]
    return [
        sys.executable,
        task.script,
        "--env-id",
        task.env_id,
        *seeds,
        "--total-timesteps",
        str(task.total_timesteps),
        "--run-dir",
        str(task.run_dir),
        "--no-progress",
        *task.extra,
    ]


def is_done(run_dir: Path) -> bool:
    """A run is finished once it wrote its final evaluation."""
    return (Path(run_dir) / "final_eval.json").exists()


def _write_json(path: Path, data: dict) -> None:
    """Atomic: readers on any node see the old or the new file, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, json.dumps(data, indent=1))


def read_run_state(path: str | Path) -> dict | None:
    """A run's own record (status, started, heartbeat, node, attempt, start_step), or None."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("status") not in RUN_STATES:
        return None
    if not all(_is_number(data.get(k)) for k in ("started", "heartbeat", "start_step")):
        return None
    return data


def _node_problem(task: Task, marker: tuple[str, str], node: str) -> str:
    """Why this node cannot run the task (empty if it can): the sweep directory must be the one
    the driver wrote its marker into, and the checkout must sit at the driver's path."""
    path, token = marker
    try:
        seen = Path(path).read_text().strip()
    except OSError:
        seen = None
    if seen != token:
        what = "is missing" if seen is None else "belongs to another sweep"
        return (
            f"--out {Path(path).parent} is not shared with node {node}: the driver's marker "
            f"{Path(path).name} {what} there; put --out on a file system every node mounts"
        )
    if not Path(task.script).exists():
        return f"{task.script} does not exist on node {node}: every node needs the same checkout"
    return ""


def run_task(
    task: Task,
    log_tail_lines: int = 20,
    marker: tuple[str, str] | None = None,
    node: str | None = None,
    launcher: str = "exec",
) -> dict:
    """Run (or resume) one task to completion in its own process; the same function for every
    backend. launcher: "exec" (a fresh interpreter) or "fork" (from the driver's forkserver,
    controlrl.launch).

    With `marker` (path, token) the task first checks that it sees the driver's sweep directory
    and refuses otherwise (status "refused"). While the run lives, its state file
    (task.state) says so, with a heartbeat; at the end it holds the outcome.
    Returns {"run_id", "status": "done"|"failed"|"refused", "returncode", "error", "seconds",
    "node", "attempt", "start_step"}.
    """
    run_dir = Path(task.run_dir)
    start = time.time()
    node = node or socket.gethostname()
    result = {"run_id": task.run_id, "node": node, "attempt": 0, "start_step": 0}
    problem = _node_problem(task, marker, node) if marker is not None else ""
    if problem:
        return {**result, "status": "refused", "returncode": -1, "error": problem, "seconds": 0.0}
    if is_done(run_dir):
        return {**result, "status": "done", "returncode": 0, "error": "", "seconds": 0.0}
    busy = _in_use(run_dir)
    if busy:  # a live process (a --resume by hand) owns the run: leave it and its files alone
        return {**result, "status": "failed", "returncode": -1, "error": busy, "seconds": 0.0}
    start_step = 0
    if (run_dir / "checkpoints" / "latest.pt").exists():
        cmd = task_command(task, resume=True)
        start_step = _last_step(run_dir)
    else:
        if run_dir.exists():  # killed before its first checkpoint: nothing worth keeping
            busy = _remove_unless_locked(run_dir)
            if busy:
                return {
                    **result,
                    "status": "failed",
                    "returncode": -1,
                    "error": busy,
                    "seconds": 0.0,
                }
        cmd = task_command(task)
    state_path = Path(task.state) if task.state else None
    previous = read_run_state(state_path) if state_path else None
    attempt = (previous or {}).get("attempt", 0) + 1 if previous else 1
    state = {
        "status": "running",
        "started": start,
        "heartbeat": start,
        "node": node,
        "host": socket.gethostname(),
        "pid": None,
        "attempt": attempt,
        "start_step": start_step,
    }
    log_path = run_dir.parent / f"{run_dir.name}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    # the run imports this checkout's packages, whatever is installed or the working directory
    pythonpath = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl"), "PYTHONPATH": pythonpath}
    with log_path.open("a") as log:
        log.write(f"$ {' '.join(cmd)}\n")
    proc = launch.start(cmd, env, ROOT, log_path, launcher)
    state["pid"] = proc.pid
    while True:
        if state_path:
            _write_json(state_path, state)
        returncode = proc.wait(HEARTBEAT_S)
        if returncode is not None:
            break
        state["heartbeat"] = time.time()
    ok = returncode == 0 and is_done(run_dir)
    error = ""
    if not ok:
        lines = log_path.read_text(errors="replace").splitlines()
        error = "\n".join(lines[-log_tail_lines:])
    now = time.time()
    state.update(status="done" if ok else "failed", heartbeat=now, ended=now, returncode=returncode)
    if state_path:
        _write_json(state_path, state)
    return {
        **result,
        "status": state["status"],
        "returncode": returncode,
        "error": error,
        "seconds": now - start,
        "attempt": attempt,
        "start_step": start_step,
    }


def _in_use(run_dir: Path) -> str:
    """Why run_dir cannot be run now ('' when it can): a live process holds its lock."""
    pid = rundir.holder(run_dir)
    if pid is None:
        return ""
    return f"{run_dir} is in use by another run (pid {pid}); the sweep left it as it is"


def _remove_unless_locked(run_dir: Path) -> str:
    """Remove run_dir holding its lock, so that a run taking it meanwhile is never deleted
    under it; '' when removed, else why not (a live holder)."""
    fd = take_flock(run_dir / rundir.LOCK_NAME)
    if fd is None:
        return _in_use(run_dir) or f"{run_dir} is in use by another run"
    try:
        shutil.rmtree(run_dir)
    finally:
        os.close(fd)
    return ""


def _is_number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _is_str_list(value) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _is_arm_list(value) -> bool:
    return isinstance(value, list) and all(
        isinstance(a, dict)
        and isinstance(a.get("name"), str)
        and isinstance(a.get("algo"), str)
        and _is_str_list(a.get("flags"))
        for a in value
    )


def _status_problem(data) -> str:
    """What is wrong with a parsed sweep.json (empty if nothing)."""
    if not isinstance(data, dict):
        return f"expected a JSON object, got a {type(data).__name__}"
    for key in ("config", "runs"):
        if key not in data:
            return f"missing key '{key}'"
    config, runs = data["config"], data["runs"]
    if not isinstance(config, dict):
        return "'config' is not an object"
    for key, ok in (
        ("algos", _is_str_list),
        ("envs", _is_str_list),
        ("extra", _is_str_list),
        ("seeds", lambda v: isinstance(v, int) and not isinstance(v, bool)),
        ("total_timesteps", lambda v: isinstance(v, int) and not isinstance(v, bool)),
    ):
        if key not in config:
            return f"missing key 'config.{key}'"
        if not ok(config[key]):
            return f"'config.{key}' has the wrong type ({type(config[key]).__name__})"
    for key, ok in (  # what newer sweeps add, each where it is not its default
        ("arms", _is_arm_list),
        ("seed_list", lambda v: isinstance(v, list) and all(_is_int(s) for s in v)),
        ("population", lambda v: isinstance(v, bool)),
        ("steps_per_env", lambda v: isinstance(v, dict) and all(map(_is_int, v.values()))),
    ):
        if config.get(key) is not None and not ok(config[key]):
            return f"'config.{key}' has the wrong type or form ({type(config[key]).__name__})"
    if not isinstance(runs, dict):
        return "'runs' is not an object"
    for run_id, run in runs.items():
        if not isinstance(run, dict):
            return f"run '{run_id}' is not an object"
        if len(run_id.split("/")) != 3:
            return f"run id '{run_id}' is not <algo>/<env>/seed<n>"
        if run.get("status") not in STATUSES:
            return f"run '{run_id}' has status {run.get('status')!r} (allowed: {STATUSES})"
        for key in ("started", "ended", "seconds", "start_step"):
            if key in run and not _is_number(run[key]):
                return f"'{run_id}.{key}' is not a number"
        if "error" in run and not isinstance(run["error"], str):
            return f"'{run_id}.error' is not a string"
    driver = data.get("driver")
    if driver is not None:
        if not isinstance(driver, dict):
            return "'driver' is not an object"
        if driver.get("state") not in DRIVER_STATES:
            return f"'driver.state' is {driver.get('state')!r} (allowed: {DRIVER_STATES})"
        for key in ("pid", "heartbeat", "slots"):
            if not _is_number(driver.get(key)):
                return f"'driver.{key}' is not a number"
        if not isinstance(driver.get("host"), str):
            return "'driver.host' is not a string"
    return ""


def load_status(out: Path) -> dict:
    """sweep.json of `out`, checked; SweepError (one line naming the file) if it is not one."""
    path = Path(out) / "sweep.json"
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise SweepError(f"{path} is not a readable sweep file ({detail})") from None
    problem = _status_problem(data)
    if problem:
        raise SweepError(f"{path} is not a valid sweep file: {problem}")
    return data


class OutLock:
    """An exclusive lock on a sweep directory, held by the driver for the life of the sweep.

    flock on `<out>/sweep.lock`: the kernel drops it when its holder dies, so a lock left by a
    dead process is simply taken over; the file names the holder for the refusal message."""

    def __init__(self, out: Path) -> None:
        self.path = Path(out) / LOCK_NAME
        self.fd: int | None = None

    def acquire(self, wait_s: float = 2.0, record: bool = True) -> OutLock:
        """Take the lock (waiting up to wait_s for a passing reader) or raise SweepError."""
        payload = json.dumps({"pid": os.getpid(), "host": socket.gethostname()}).encode()
        fd = take_flock(self.path, payload if record else None, wait_s)
        if fd is None:
            holder = self.holder()
            raise SweepError(
                f"{self.path.parent} is in use by another sweep (pid "
                f"{holder.get('pid', '?')} on {holder.get('host', '?')}); wait for it "
                "to end or use another --out"
            )
        self.fd = fd
        return self

    def holder(self) -> dict:
        """Who wrote the lock file last ({} if nobody or unreadable)."""
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def held_by_other(self) -> bool:
        """Whether a live process holds the lock (checked without waiting)."""
        return flock_holder(self.path) is not None

    def release(self) -> None:
        """Drop the lock."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def driver_alive(out: Path, data: dict) -> bool:
    """Whether the sweep's driver still runs: it holds the lock on `out`, or it runs on another
    host (whose lock this file system may not show) and its heartbeat is recent."""
    driver = data.get("driver")
    if not driver or driver.get("state") != "running":
        return False
    if OutLock(out).held_by_other():
        return True
    other_host = driver.get("host") != socket.gethostname()
    return other_host and time.time() - driver["heartbeat"] < STALE_S


def repair(out: Path) -> dict:
    """sweep.json with a dead driver's `running` replaced: the sweep marked interrupted, its
    runs queued (a rerun resumes them). Written back under the lock; returns the data."""
    out = Path(out)
    data = load_status(out)
    driver = data.get("driver")
    if not driver or driver.get("state") != "running" or driver_alive(out, data):
        return data
    lock = OutLock(out)
    try:
        lock.acquire(wait_s=0.0, record=False)
    except (SweepError, OSError):
        return data  # a sweep just started, or the directory is read-only: report unrepaired
    try:
        data = load_status(out)
        if data.get("driver", {}).get("state") == "running":
            data["driver"]["state"] = "interrupted"
            for run in data["runs"].values():
                if run["status"] == "running":
                    run["status"] = "queued"
            _write_json(out / "sweep.json", data)
    except OSError:
        pass
    finally:
        lock.release()
    return data


class StatusFile:
    """sweep.json: the configuration, per-run status and the driver's record (pid, host,
    state, heartbeat, slots); written atomically, under a lock."""

    def __init__(self, out: Path, config: SweepConfig, driver: dict | None = None) -> None:
        self.path = Path(out) / "sweep.json"
        self.lock = threading.Lock()
        Path(out).mkdir(parents=True, exist_ok=True)
        self.data: dict = {"config": config.to_dict(), "runs": {}}
        if self.path.exists():  # check_out_dir made sure the configuration is the same
            self.data["runs"] = load_status(Path(out))["runs"]
        if driver is not None:
            self.data["driver"] = driver

    def set(self, run_id: str, **fields) -> None:
        """Update one run's record and write the file."""
        with self.lock:
            self.data["runs"].setdefault(run_id, {}).update(fields)
            _write_json(self.path, self.data)

    def set_driver(self, **fields) -> None:
        """Update the driver's record and write the file."""
        with self.lock:
            self.data.setdefault("driver", {}).update(fields)
            _write_json(self.path, self.data)


def same_sweep(saved: SweepConfig, new: SweepConfig) -> bool:
    """Whether `new` is the sweep `saved` or that sweep grown: the same columns (algorithms or
    arms), extra, population mode and each saved env's step budget (total_timesteps counts only
    as that budget: an env added with a larger steps_per_env budget grows the sweep), and every
    run of `saved` still a run of `new` (more seeds or envs: more runs; a population whose
    blocks of seeds changed is another sweep)."""
    if saved.seed_list is None and not 0 < saved.seeds <= MAX_SEEDS:
        return False  # not a sweep this runner writes: planning it could take forever
    fixed = ("algos", "extra", "arms", "population")
    if any(_plain(getattr(saved, k)) != _plain(getattr(new, k)) for k in fixed):
        return False
    if any(saved.steps_for(env_id) != new.steps_for(env_id) for env_id in saved.envs):
        return False
    here = Path(".")  # run ids do not depend on where the runs are
    new_ids = {t.run_id for t in plan(new, here)}
    return all(t.run_id in new_ids for t in plan(saved, here))


def _plain(value):
    """Lists for tuples, recursively, so a JSON copy compares equal to the original."""
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, Arm):
        return [value.name, value.algo, list(value.flags)]
    return value


def check_out_dir(out: Path, config: SweepConfig) -> None:
    """Raise SweepError if `out` holds a sweep with another configuration (or is not a sweep).
    More seeds or more tasks of the same configuration are the same sweep grown: its runs are
    kept (a task of the saved sweep may not be dropped, nor a seed)."""
    out = Path(out)
    if (out / "sweep.json").exists():
        saved = load_status(out)["config"]
        if not same_sweep(SweepConfig.from_dict(saved), config):
            raise SweepError(
                f"{out} belongs to a different sweep configuration ({saved}); use another --out"
            )
    elif out.exists() and not out.is_dir():
        raise SweepError(f"--out {out} is a file; use another --out")
    elif out.exists() and any(p.name not in OWN_FILES for p in out.iterdir()):
        raise SweepError(f"{out} exists and is not a sweep directory; use another --out")


def check_resources(workers: int | None, cpus_per_run: float, gpus_per_run: float) -> None:
    """Raise SweepError for a count or resource request out of range."""
    if workers is not None and not 0 < workers <= MAX_WORKERS:
        raise SweepError(f"--workers must be in 1..{MAX_WORKERS}, got {workers}")
    if not (_is_number(cpus_per_run) and 0 < cpus_per_run <= 1024):
        raise SweepError(f"--cpus-per-run must be in (0, 1024], got {cpus_per_run}")
    if not (_is_number(gpus_per_run) and 0 <= gpus_per_run <= 64):
        raise SweepError(f"--gpus-per-run must be in [0, 64], got {gpus_per_run}")


def run_sweep(
    config: SweepConfig,
    out: Path,
    backend: str = "local",
    workers: int | None = 2,
    address: str | None = None,
    algos_dir: Path = ALGOS_DIR,
    on_update: Callable[[dict], None] | None = None,
    cpus_per_run: float = 1.0,
    gpus_per_run: float = 0.0,
    connect_timeout_s: float = CONNECT_TIMEOUT_S,
    launcher: str | None = None,
) -> dict[str, dict]:
    """Run every task not yet done; returns the final status of every run.

    `out` is resolved against the working directory here, so every run, log and node sees the
    same absolute paths. workers: runs at once (local: the pool size, default 2; Ray: at most
    this many in flight, None for as many as the cluster's resources allow). launcher: how the
    local backend starts runs, "fork" or "exec" (None: controlrl.launch.default_mode()).
    """
    out = Path(out).expanduser().resolve()
    algos_dir = Path(algos_dir).expanduser().resolve()
    if backend not in ("local", "ray"):
        raise SweepError(f"--backend must be 'local' or 'ray', got {backend!r}")
    try:
        launcher = launcher or launch.default_mode()
    except ValueError as exc:
        raise SweepError(str(exc)) from None
    if launcher not in launch.MODES:
        raise SweepError(f"launcher must be one of {', '.join(launch.MODES)}, got {launcher!r}")
    check_config(config, algos_dir)
    check_resources(workers, cpus_per_run, gpus_per_run)
    if backend == "local":
        if address:
            raise SweepError("--address needs --backend ray")
        if (cpus_per_run, gpus_per_run) != (1.0, 0.0):
            raise SweepError("--cpus-per-run and --gpus-per-run need --backend ray")
        workers = workers or 2
    check_out_dir(out, config)
    slots = workers
    if backend == "ray":  # before anything is written: a wrong address leaves no trace
        slots = ray_init(address, workers or 0, cpus_per_run, gpus_per_run, connect_timeout_s)
    try:
        out.mkdir(parents=True, exist_ok=True)
        lock = OutLock(out).acquire()
    except OSError as exc:
        raise SweepError(f"--out {out}: {exc.strerror or exc}") from None
    stop = threading.Event()
    status = None
    try:
        check_out_dir(out, config)  # again under the lock: another sweep may just have begun
        marker = (str(out / MARKER_NAME), uuid.uuid4().hex)
        write_text_atomic(out / MARKER_NAME, marker[1])
        status = StatusFile(
            out,
            config,
            driver={
                "pid": os.getpid(),
                "host": socket.gethostname(),
                "state": "running",
                "started": time.time(),
                "heartbeat": time.time(),
                "backend": backend,
                "slots": slots,
            },
        )
        tasks = plan(config, out, algos_dir)
        for task in tasks:
            if is_done(Path(task.run_dir)):
                status.set(task.run_id, status="done")
            else:
                status.set(task.run_id, status="queued", error="")
        todo = [t for t in tasks if not is_done(Path(t.run_dir))]

        def beat() -> None:
            while not stop.wait(HEARTBEAT_S):
                status.set_driver(heartbeat=time.time())

        threading.Thread(target=beat, daemon=True).start()

        def finished(result: dict) -> None:
            status.set(
                result["run_id"],
                status=result["status"],
                error=result["error"],
                returncode=result["returncode"],
                seconds=result["seconds"],
                start_step=result.get("start_step", 0),
                node=result.get("node", ""),
                ended=time.time(),
            )
            if on_update:
                on_update(result)

        if backend == "local":
            _run_local(todo, workers, status, finished, launcher)
        else:
            _run_ray(todo, workers, cpus_per_run, gpus_per_run, marker, status, finished)
        status.set_driver(state="finished", heartbeat=time.time())
        return status.data["runs"]
    finally:
        stop.set()
        if status is not None and status.data["driver"]["state"] == "running":
            try:
                status.set_driver(state="interrupted", heartbeat=time.time())
            except OSError:
                pass
        lock.release()


def _run_local(todo: list[Task], workers: int, status: StatusFile, finished, launcher: str) -> None:
    from concurrent.futures import ThreadPoolExecutor

    def one(task: Task) -> None:
        status.set(task.run_id, status="running", started=time.time())
        try:
            result = run_task(task, launcher=launcher)
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


def _address_host_port(address: str) -> tuple[str, int]:
    """('host', port) of HOST:PORT or ray://HOST:PORT; SweepError if it is neither."""
    rest = address.removeprefix("ray://")
    host, sep, port = rest.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise SweepError(f"--address must be HOST:PORT (or 'auto'), got {address!r}")
    return host.strip("[]"), int(port)


def _quiet(call: Callable[[], None], timeout_s: float, what: str) -> None:
    """Run `call` in a thread with Ray's native stderr lines captured; SweepTimeout after
    timeout_s (a stuck Ray connection retries forever, printing a warning every few seconds)."""
    import tempfile

    errors: list[BaseException] = []

    def target() -> None:
        try:
            call()
        except BaseException as exc:  # re-raised in the caller's thread
            errors.append(exc)

    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        try:
            thread = threading.Thread(target=target, daemon=True)
            thread.start()
            thread.join(timeout_s)
        finally:
            os.dup2(saved, 2)
            os.close(saved)
    if thread.is_alive():
        raise SweepTimeout(f"{what}: no answer within {timeout_s:.0f} s")
    if errors:
        exc = errors[0]
        detail = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise SweepError(f"{what}: {detail}") from None


def ray_init(
    address: str | None,
    workers: int,
    cpus_per_run: float = 1.0,
    gpus_per_run: float = 0.0,
    timeout_s: float = CONNECT_TIMEOUT_S,
) -> int:
    """Join a cluster at `address`, or start a local instance bound to loopback only.

    Returns how many runs can run at once (what the nodes' CPUs and GPUs fit, capped by
    workers when > 0); SweepError when no node fits one run or the cluster does not answer.
    """
    if address and address != "auto":
        host, port = _address_host_port(address)
        try:  # a closed or unroutable address makes ray.init retry forever
            socket.create_connection((host, port), timeout=min(timeout_s, 5.0)).close()
        except OSError as exc:
            raise SweepError(
                f"--address {address}: no Ray cluster answers there ({exc.strerror or exc})"
            ) from None
    else:
        host = "127.0.0.1"
    if host in ("127.0.0.1", "localhost", "::1"):
        # Ray otherwise replaces 127.0.0.1 by the machine's network address as the node IP and
        # listens on every interface; with this (read at import) it stays on loopback
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    import ray

    if host in ("127.0.0.1", "localhost", "::1"):
        from ray._private import ray_constants

        # ray imported before the variable was set: the constant it read decides, so set it
        # (services reads it at each call)
        ray_constants.ENABLE_RAY_CLUSTER = os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] != "0"
    if not ray.is_initialized():
        if address:
            _quiet(
                lambda: ray.init(address=address, log_to_driver=False),
                timeout_s,
                f"--address {address}",
            )
        else:
            ray.init(
                num_cpus=max(1, math.ceil((workers or 2) * cpus_per_run)),
                num_gpus=math.ceil((workers or 2) * gpus_per_run) if gpus_per_run else None,
                include_dashboard=False,
                log_to_driver=False,
                _node_ip_address="127.0.0.1",
            )
    fits = 0
    for n in ray.nodes():
        if n.get("Alive"):
            res = n.get("Resources", {})
            per_node = int(res.get("CPU", 0) // cpus_per_run)
            if gpus_per_run:
                per_node = min(per_node, int(res.get("GPU", 0) // gpus_per_run))
            fits += per_node
    if fits == 0:
        want = f"{cpus_per_run:g} CPU" + (f" and {gpus_per_run:g} GPU" if gpus_per_run else "")
        raise SweepError(
            f"no node of the Ray cluster has {want} free for one run "
            "(--cpus-per-run, --gpus-per-run)"
        )
    return min(fits, workers) if workers else fits


def _ray_task(task: Task, marker: tuple[str, str]) -> dict:
    """run_task on a Ray node: the node's id goes into the run's record."""
    import ray

    return run_task(task, marker=marker, node=ray.get_runtime_context().get_node_id())


def result_problem(task: Task, result: dict) -> str:
    """Why the driver cannot accept a run's result (empty if it can): the node refused the
    task, or the run finished where the driver cannot see its results."""
    if result["status"] == "refused":
        return result["error"]
    if result["status"] == "done" and not is_done(Path(task.run_dir)):
        return (
            f"{task.run_id} finished on node {result.get('node')} but {task.run_dir} has no "
            "final_eval.json here: --out must be on a file system every node mounts"
        )
    return ""


def _run_ray(
    todo: list[Task],
    workers: int | None,
    cpus_per_run: float,
    gpus_per_run: float,
    marker: tuple[str, str],
    status: StatusFile,
    finished,
) -> None:
    import ray

    # max_retries: a run whose worker or node dies is started once more (it resumes from its
    # checkpoint); an exception raised by run_task itself is not retried
    remote = ray.remote(
        num_cpus=cpus_per_run, num_gpus=gpus_per_run, max_retries=1, retry_exceptions=False
    )(_ray_task)
    queue = list(todo)
    limit = workers or len(todo)
    pending: dict = {}
    try:
        while queue or pending:
            while queue and len(pending) < limit:
                task = queue.pop(0)
                pending[remote.remote(task, marker)] = task
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=HEARTBEAT_S)
            for ref in ready:
                task = pending.pop(ref)
                try:
                    result = ray.get(ref)
                except Exception as exc:  # lost twice, or the task could not start
                    lines = str(exc).strip().splitlines() or [""]
                    result = {
                        "run_id": task.run_id,
                        "status": "failed",
                        "returncode": -1,
                        "error": f"{type(exc).__name__}: {lines[0]}",
                        "seconds": 0.0,
                    }
                problem = result_problem(task, result)
                if problem:
                    raise SweepError(problem)
                finished(result)
            # what each pending run says about itself: started (on which node, which attempt)
            for task in pending.values():
                state = read_run_state(task.state)
                run = status.data["runs"].get(task.run_id, {})
                fresh = state and time.time() - state["heartbeat"] < STALE_S
                if fresh and state["status"] == "running" and run.get("status") != "running":
                    status.set(
                        task.run_id,
                        status="running",
                        started=state["started"],
                        node=state.get("node", ""),
                        attempt=state.get("attempt", 1),
                    )
                elif not fresh and run.get("status") == "running":
                    status.set(task.run_id, status="queued")  # lost with its node; retried
    finally:
        for ref in pending:
            ray.cancel(ref, force=True)


def summarize(out: Path) -> dict:
    """Counts per status, the driver's state and an ETA from what the runs report.

    A run counts as running only while its own state file says so with a recent heartbeat
    and the driver lives; the ETA spreads the remaining steps over the runs that can run at once.
    """
    out = Path(out)
    data = load_status(out)
    runs = data["runs"]
    alive = driver_alive(out, data)
    driver = data.get("driver") or {}
    state = driver.get("state", "unknown")
    if state == "running" and not alive:  # its driver is gone without saying so
        state = "interrupted"
    config = SweepConfig.from_dict(data["config"])
    now = time.time()
    shown: dict[str, str] = {}
    rates = []  # seconds per env step, measured on runs in progress or finished
    remaining_steps = 0.0
    for run_id, run in runs.items():
        algo, env_id, seed = run_id.split("/")
        tag = env_tag(env_id)
        total_steps = config.steps_for(env_id)
        run_dir = out / "runs" / algo / tag / seed
        own = read_run_state(out / "state" / algo / tag / f"{seed}.json")
        if run["status"] in ("done", "failed"):
            shown[run_id] = run["status"]
            done_steps = total_steps - run.get("start_step", 0)
            if run["status"] == "done" and run.get("seconds") and done_steps > 0:
                rates.append(run["seconds"] / done_steps)
            continue
        running = (
            alive
            and own is not None
            and own["status"] == "running"
            and now - own["heartbeat"] < STALE_S
        )
        shown[run_id] = "running" if running else "queued"
        step = _last_step(run_dir)
        remaining_steps += max(total_steps - step, 0)
        if running and step > own["start_step"]:
            rates.append((now - own["started"]) / (step - own["start_step"]))
    counts = {s: sum(v == s for v in shown.values()) for s in STATUSES}
    unfinished = counts["queued"] + counts["running"]
    slots = max(int(driver.get("slots") or 1), counts["running"], 1)
    eta = None
    if not unfinished:
        eta = 0.0 if rates else None
    elif alive and rates:
        eta = remaining_steps * sum(rates) / len(rates) / min(slots, unfinished)
    return {
        "counts": counts,
        "total": len(runs),
        "eta_seconds": eta,
        "state": state,
        "driver": driver,
        "runs": shown,
        "failed": {k: v.get("error", "") for k, v in runs.items() if v["status"] == "failed"},
    }


def _last_step(run_dir: Path) -> int:
    metrics = Path(run_dir) / "metrics.csv"
    try:
        lines = metrics.read_text(errors="replace").splitlines()
    except OSError:
        return 0
    try:
        return int(float(lines[-1].split(",", 1)[0])) if len(lines) > 1 else 0
    except (ValueError, OverflowError):
        return 0
