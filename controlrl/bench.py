"""The one benchmark harness: every contender in its own fresh process, order rotated per repeat,
ratios paired per repeat, one CSV row per contender per repeat (with the command that made it).

A contender's worker is an importable function, "package.module:function" or
"path/to/file.py:function" (called with `config` as keyword arguments; it returns a JSON-able
dict), or a command (argv list; its result is whatever it writes, read by the caller). A worker
that crashes or runs past its timeout becomes a failed Run; the others still run.

    runs = bench.run([Contender("a", "pkg.mod:fa"), Contender("b", "pkg.mod:fb")], repeats=3)
    bench.median_range(bench.paired_ratios(runs, "a", "b", lambda r: r.result["s"]), ".2f")
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import importlib
import importlib.util
import json
import os
import resource
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

POLL_S = 0.1  # how often a running contender's poll() is called
LOG_TAIL = 4000  # characters of a contender's output kept in its Run


@dataclass(frozen=True)
class Contender:
    """One thing to time: a worker function or a command, its config, timeout and environment."""

    name: str
    worker: str | Sequence[str]  # "module:function" / "file.py:function", or a command's argv
    config: Mapping[str, Any] = field(default_factory=dict)  # keyword arguments of the function
    timeout: float | None = None  # seconds; past it the process group is killed
    env: Mapping[str, str] = field(default_factory=dict)  # added to os.environ for its process
    cwd: str | None = None  # default: a fresh temporary directory per run
    poll: Callable[[], None] | None = None  # called every POLL_S while its process runs


@dataclass
class Run:
    """What one contender's process gave in one repeat."""

    contender: Contender
    repeat: int
    slot: int  # position in this repeat's order
    status: str  # "ok", "exit <code>" or "timeout after <s> s"
    launched: float  # time.time() just before the process started
    wall_s: float  # process wall clock, start-up included
    result: dict = field(default_factory=dict)  # the worker function's return value
    log: str = ""  # tail of its stdout + stderr

    @property
    def name(self) -> str:
        """The contender's name."""
        return self.contender.name

    @property
    def ok(self) -> bool:
        """Whether the process finished in time with exit status 0."""
        return self.status == "ok"

    def row(self) -> dict[str, Any]:
        """A CSV row: name, repeat, slot, status, wall_s and the result's scalar values."""
        scalars = {k: v for k, v in self.result.items() if isinstance(v, (int, float, str))}
        return {
            "contender": self.name,
            "repeat": self.repeat,
            "slot": self.slot,
            "status": self.status,
            "wall_s": self.wall_s,
            **scalars,
        }


def rotation(items: Sequence, repeat: int) -> list:
    """`items` rotated left by `repeat`: over len(items) repeats each item takes every slot."""
    k = repeat % len(items) if items else 0
    return list(items[k:]) + list(items[:k])


def _command(contender: Contender, workdir: Path) -> list[str]:
    if not isinstance(contender.worker, str):
        return list(contender.worker)
    module, sep, function = contender.worker.rpartition(":")
    if not sep or not module or not function:
        raise ValueError(f"worker {contender.worker!r} is not 'module:function'")
    if module.endswith(".py"):  # resolved here: the child runs in its own temporary directory
        module = str(Path(module).resolve())
    (workdir / "config.json").write_text(json.dumps(dict(contender.config)))
    return [sys.executable, "-m", "controlrl.bench", f"{module}:{function}", str(workdir)]


def run_one(contender: Contender, repeat: int = 0, slot: int = 0) -> Run:
    """Run one contender in a fresh process and wait for it (or its timeout)."""
    with tempfile.TemporaryDirectory(prefix=f"bench_{contender.name}_") as tmp:
        workdir = Path(tmp)
        cmd = _command(contender, workdir)
        env = {**os.environ, **contender.env}
        with (workdir / "output.log").open("w+") as log:
            launched, t0 = time.time(), time.perf_counter()
            # own session: a timeout kills the worker's children too (e.g. a JAX or Ray pool)
            proc = subprocess.Popen(
                cmd,
                cwd=contender.cwd or tmp,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            status = _wait(proc, contender, t0)
            wall = time.perf_counter() - t0
            log.seek(0)
            tail = log.read()[-LOG_TAIL:]
        result: dict = {}
        result_path = workdir / "result.json"
        if status == "ok" and isinstance(contender.worker, str):
            if result_path.exists():
                result = json.loads(result_path.read_text())
            else:
                status = "exit 0 without a result"
    return Run(contender, repeat, slot, status, launched, wall, result, tail)


def _wait(proc: subprocess.Popen, contender: Contender, t0: float) -> str:
    while True:
        try:
            code = proc.wait(timeout=POLL_S)
            break
        except subprocess.TimeoutExpired:
            if contender.timeout is not None and time.perf_counter() - t0 > contender.timeout:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                return f"timeout after {contender.timeout:g} s"
            if contender.poll is not None:
                contender.poll()
    if contender.poll is not None:
        contender.poll()  # what it wrote just before exiting
    return "ok" if code == 0 else f"exit {code}"


def run_repeat(
    contenders: Sequence[Contender], repeat: int, on_run: Callable[[Run], None] | None = None
) -> list[Run]:
    """One repeat: every contender once, in the order rotated by `repeat`."""
    runs = []
    for slot, contender in enumerate(rotation(contenders, repeat)):
        runs.append(run_one(contender, repeat, slot))
        if on_run is not None:
            on_run(runs[-1])
    return runs


def run(
    contenders: Sequence[Contender], repeats: int, on_run: Callable[[Run], None] | None = None
) -> list[Run]:
    """`repeats` repeats of all contenders, the order rotated in every repeat."""
    return [r for k in range(repeats) for r in run_repeat(contenders, k, on_run)]


def paired_ratios(
    runs: Sequence[Run], a: str, b: str, value: Callable[[Run], float]
) -> list[float]:
    """value(a) / value(b) within each repeat where both succeeded, in repeat order."""
    ok = {(r.name, r.repeat): r for r in runs if r.ok}
    repeats = sorted({k for _, k in ok})
    return [value(ok[a, k]) / value(ok[b, k]) for k in repeats if (a, k) in ok and (b, k) in ok]


def row_ratios(rows: Sequence[Mapping[str, Any]], a: str, b: str, key: str) -> list[float]:
    """key of contender a / key of b within each repeat where both are ok and have a value, in
    repeat order: paired_ratios for CSV rows (contender, repeat, status and the key)."""
    ok = {(r["contender"], r["repeat"]): r for r in rows if r["status"] == "ok"}
    repeats = sorted(k for c, k in ok if c == a and (b, k) in ok)
    pairs = [(ok[a, k], ok[b, k]) for k in repeats]
    return [x[key] / y[key] for x, y in pairs if x[key] != "" and y[key] != ""]


def failures(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """A line per row whose run failed: 'FAILED <contender> repeat <k>: <status>'."""
    return [f"FAILED {r['contender']} repeat {r['repeat']}: {r['status']}" for r in rows
            if r["status"] != "ok"]  # fmt: skip


class Recorder:
    """An on_run callback of run / run_repeat / run_one's caller: each run's CSV row (row(run))
    written to `out` with the rows before it as the run ends, so that a bench killed midway
    keeps what finished, and one progress line printed (describe(row) for a run that ended ok,
    else its status and the tail of its log). Runs may end in threads of their own."""

    def __init__(
        self,
        out: str | Path,
        command: str,
        row: Callable[[Run], dict],
        describe: Callable[[dict], str],
        rows: Sequence[dict] = (),
        keep_commands: bool = False,
    ) -> None:
        self.out, self.command, self.row, self.describe = out, command, row, describe
        self.rows, self.runs, self.keep_commands = list(rows), [], keep_commands
        self.t0, self.lock = time.perf_counter(), threading.Lock()

    def __call__(self, run: Run) -> None:
        with self.lock:
            self.runs.append(run)
            self.rows.append(self.row(run))
            write_csv(self.out, self.rows, self.command, self.keep_commands)
            what = self.describe(self.rows[-1]) if run.ok else run.status
            clock = f"[{time.perf_counter() - self.t0:6.0f} s]"
            print(f"{clock} repeat {run.repeat} {run.name} {what}", flush=True)
            if not run.ok:
                print(run.log[-2000:], flush=True)


def repeats(
    args: Any,
    script: str,
    argv: Sequence[str] | None,
    contenders: Callable[[Any, int], Sequence[Contender]],
    row: Callable[[Run], dict],
    describe: Callable[[dict], str],
    summarize: Callable[[list[dict]], str],
) -> list[dict]:
    """A bench's main loop: args.repeats repeats of contenders(args, repeat), each run's row
    written to args.out as it ends (Recorder), then summarize(rows) printed (report)."""
    command = command_line(script, argv)
    recorder = Recorder(args.out, command, row, describe)
    for k in range(args.repeats):
        run_repeat(contenders(args, k), k, on_run=recorder)
    report(summarize(recorder.rows), args.repeats, command, args.out)
    return recorder.rows


def median_range(values: Sequence[float], fmt: str = ".2f") -> str:
    """'median (min-max)' of the values; just the value for one, 'n/a' for none."""
    if not values:
        return "n/a"
    med = format(statistics.median(values), fmt)
    if len(values) == 1:
        return med
    return f"{med} ({format(min(values), fmt)}-{format(max(values), fmt)})"


def cpu_timer(timer_cls: type) -> type:
    """A subclass of an algorithm's Timer (laps into self.laps) that also records each lap's
    process CPU seconds as time/<lap>_cpu: benches patch it in, in their own process only, so
    timing.csv gains CPU time beside wall time."""

    class CpuTimer(timer_cls):
        def __init__(self) -> None:
            super().__init__()
            self.cpu = time.process_time()

        def lap(self, name: str) -> None:
            super().lap(name)
            now = time.process_time()
            self.laps[f"time/{name}_cpu"] = now - self.cpu
            self.cpu = now

    return CpuTimer


def parser(doc: str, out: str, timeout: float = 3600.0, names: Sequence[str] = ()):
    """A bench script's parser: the docstring's first paragraph as its description, --out (the
    CSV, default `out`), --threads (torch threads of every contender), --timeout (seconds per
    contender process), --toy and, given contender names, --contenders (default: all of them)."""
    from controlrl.cli import ArgumentParser

    raw = argparse.RawDescriptionHelpFormatter
    p = ArgumentParser(description=doc.split("\n\n")[0], formatter_class=raw)
    p.add_argument("--out", default=out, help="CSV to write")
    p.add_argument("--threads", type=int, default=1, help="torch threads of every contender")
    p.add_argument("--timeout", type=float, default=timeout, help="seconds per contender process")
    p.add_argument("--toy", action="store_true", help="tiny run for tests")
    if names:
        p.add_argument("--contenders", default=",".join(names), help="subset, comma-separated")
    return p


def subset(p: argparse.ArgumentParser, text: str, allowed: Sequence[str], flag: str) -> list[str]:
    """The comma-separated names of `text`; a parser error unless they are a non-empty subset
    of `allowed`."""
    chosen = [c.strip() for c in text.split(",") if c.strip()]
    bad = set(chosen) - set(allowed)
    if bad or not chosen:
        p.error(f"{flag} must be a subset of {','.join(allowed)}, got {bad or 'none'}")
    return chosen


def ints(p: argparse.ArgumentParser, text: str, flag: str, least: int = 0) -> list[int]:
    """The comma-separated integers of `text`; a parser error unless there is at least one and
    every one is >= least."""
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        values = []
    if not values or min(values) < least:
        p.error(f"{flag} must be comma-separated integers >= {least}, got {text!r}")
    return values


def fill(args: argparse.Namespace, full: Mapping[str, Any], toy: Mapping[str, Any] = {}) -> None:
    """Give every flag left None its default: `toy`'s with --toy, else `full`'s."""
    for name, value in ({**full, **toy} if args.toy else full).items():
        if getattr(args, name) is None:
            setattr(args, name, value)


def contenders(
    names: Sequence[str], worker: str, config: Mapping, timeout: float | None, threads: int
) -> list[Contender]:
    """One Contender per name, its config `config` plus contender=<name>, OMP_NUM_THREADS set."""
    env = {"OMP_NUM_THREADS": str(threads)}
    return [Contender(c, worker, {"contender": c, **config}, timeout, env) for c in names]


@contextlib.contextmanager
def trained(module: Any, **kwargs: Any) -> Iterator[tuple[Path, list[dict[str, str]], Any]]:
    """Train an algos/ module (its main on its validated Args(**kwargs)) in a temporary run
    directory, quietly unless kwargs say otherwise (no evaluation but the final one of 1
    episode, no checkpoint, TensorBoard or progress bar); yields the run directory, the rows of
    its timing.csv and main's return value."""
    quiet = dict(eval_every=0, eval_episodes=1, checkpoint_every=10**9)
    quiet |= dict(tensorboard=False, progress=False)
    with tempfile.TemporaryDirectory(prefix="bench_run_") as tmp:
        run_dir = Path(tmp) / "run"
        args = module.Args(**{**quiet, **kwargs, "run_dir": str(run_dir)})
        args.validate()
        returned = module.main(args)
        with (run_dir / "timing.csv").open() as f:
            yield run_dir, list(csv.DictReader(f)), returned


def table(header: Sequence[str], lines: Sequence[Sequence[str]]) -> list[str]:
    """A markdown table: the header, its rule, one line per sequence of cells."""
    return ["| " + " | ".join(cells) + " |" for cells in [header, ["---"] * len(header), *lines]]


def per_contender(rows: Sequence[Mapping[str, Any]], columns: Mapping[str, Callable]) -> list[str]:
    """A markdown table of CSV rows: one line per contender (first-seen order), a column per
    header: its function of the contender's name and its rows with status ok."""
    names = dict.fromkeys(r["contender"] for r in rows)
    ok = [r for r in rows if r["status"] == "ok"]
    cells = [
        [n, *(f(n, [r for r in ok if r["contender"] == n]) for f in columns.values())]
        for n in names
    ]
    return table(["contender", *columns], cells)


def median_of(key: str, fmt: str = ".2f") -> Callable[[str, Sequence[Mapping]], str]:
    """A per_contender column: median_range of the rows' `key` (rows without a value left out)."""
    return lambda _, rows: median_range([r[key] for r in rows if r[key] != ""], fmt)


def report(summary: str, repeats: int, command: str, out: str | Path) -> None:
    """Print a bench's summary, the command that made it and its CSV."""
    print(f"\n{repeats} repeats: median (min-max), ratios paired per repeat\n{summary}")
    print(f"\ncommand: {command}\nCSV: {out}")


def usage(who: int = resource.RUSAGE_SELF) -> dict[str, float]:
    """cpu_s (user + system) and peak_rss_mb of this process (or, with RUSAGE_CHILDREN, of its
    waited-for children)."""
    u = resource.getrusage(who)
    return {"cpu_s": u.ru_utime + u.ru_stime, "peak_rss_mb": u.ru_maxrss / 1024}


REPO_ROOT = Path(__file__).resolve().parents[1]


def portable_word(word: str) -> str:
    """One command-line word, shell-quoted, its absolute path written to read the same on any
    machine: relative to the repository root inside the repository, from ~ (or $HOME after
    '--flag=') inside the home directory; other words as given."""
    flag, eq, value = word.partition("=") if word.startswith("-") else ("", "", word)
    if not eq:
        flag, value = "", word
    if os.path.isabs(value):
        paths = (Path(os.path.normpath(value)), Path(value).resolve())  # as typed, links resolved
        for path in paths:
            if path.is_relative_to(REPO_ROOT):
                return shlex.quote(flag + eq + str(path.relative_to(REPO_ROOT)))
        home = Path.home()
        for path in paths:
            if home != Path("/") and path.is_relative_to(home):
                rest = shlex.quote(str(path.relative_to(home)))
                return shlex.quote(flag + eq) + '"$HOME"/' + rest if eq else "~/" + rest
    return shlex.quote(word)


def command_line(script: str, argv: Sequence[str] | None) -> str:
    """The command that made an output: `python <script> <args>` (sys.argv's when argv is None),
    its absolute paths made portable (portable_word), so a committed CSV names no machine path."""
    words = ["python", script, *(sys.argv[1:] if argv is None else argv)]
    return " ".join(portable_word(w) for w in words)


def write_csv(
    path: str | Path,
    rows: Sequence[Mapping[str, Any]],
    command: str | None,
    keep_commands: bool = False,
) -> None:
    """Rows (columns in first-seen order) plus a 'command' column (none when command is None),
    to `path`. keep_commands: a row that already has a command (one kept from an earlier run of
    the figure) keeps it."""
    columns = [k for k in dict.fromkeys(k for row in rows for k in row) if k != "command"]
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        last = [] if command is None else ["command"]
        writer = csv.DictWriter(f, fieldnames=[*columns, *last], restval="")
        writer.writeheader()
        for row in rows:
            own = row.get("command") if keep_commands else None
            writer.writerow({**row, **({} if command is None else {"command": own or command})})


def read_csv(path: str | Path) -> list[dict[str, Any]]:
    """Rows of a CSV written by write_csv, numbers parsed back (ints, floats), '' kept."""
    with Path(path).open(newline="") as f:
        return [{k: _parse(v) for k, v in row.items()} for row in csv.DictReader(f)]


def _parse(text: str) -> Any:
    if "_" in text:  # int() and float() accept "1_000"; a CSV cell like that is a name
        return text
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _load(spec: str) -> Callable[..., Any]:
    module, _, function = spec.rpartition(":")
    if module.endswith(".py"):  # a script that is not in a package (paper_figures/)
        loaded = importlib.util.spec_from_file_location(Path(module).stem, module)
        mod = importlib.util.module_from_spec(loaded)
        sys.modules[loaded.name] = mod  # dataclasses and pickling look the module up by name
        loaded.loader.exec_module(mod)
    else:
        mod = importlib.import_module(module)
    return getattr(mod, function)


def _child(spec: str, workdir: str) -> None:
    """In the contender's process: call the worker with its config, write its result."""
    config = json.loads((Path(workdir) / "config.json").read_text())
    result = _load(spec)(**config)
    (Path(workdir) / "result.json").write_text(json.dumps(result or {}))


if __name__ == "__main__":
    _child(*sys.argv[1:3])
