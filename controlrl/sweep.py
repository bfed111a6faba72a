"""Run a sweep of (algorithm, env, seed) runs, or show a running sweep's progress.

    python -m controlrl.sweep --algos ppo --envs Hopper-v5,HalfCheetah-v5 --seeds 5 \\
        --total-timesteps 1e6 [--backend local|ray] [--workers N] [--address HOST:PORT] \\
        [--cpus-per-run C] [--gpus-per-run G] [--connect-timeout S] \\
        [--out DIR] [-- extra algo flags]
    python -m controlrl.sweep status DIR
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

from controlrl.experiment import (
    ALGOS_DIR,
    SweepConfig,
    SweepError,
    SweepTimeout,
    repair,
    run_sweep,
    summarize,
)


class _Parser(argparse.ArgumentParser):
    """argparse with its errors in one line (no usage block), exit status 2."""

    def error(self, message: str) -> None:
        print(f"{self.prog}: error: {' '.join(message.split())}", file=sys.stderr)
        raise SystemExit(2)


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        pass
    try:
        value = float(text)  # accepts 1e6
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(value) or value != int(value):
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}")
    return int(value)


def _amount(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"not a finite amount >= 0: {text!r}")
    return value


def _fmt_seconds(seconds: float | None) -> str:
    if seconds is None:
        return "unknown"
    return time.strftime("%H:%M:%S", time.gmtime(min(seconds, 86400 * 365)))


def status_main(argv: list[str]) -> int:
    """`status DIR`: counts, the driver's state, the ETA and the failed runs' log tails."""
    parser = _Parser(prog="python -m controlrl.sweep status")
    parser.add_argument("out", type=Path)
    args = parser.parse_args(argv)
    if not (args.out / "sweep.json").is_file():
        print(f"error: {args.out} is not a sweep directory (no sweep.json)", file=sys.stderr)
        return 2
    try:
        repair(args.out)  # a dead driver's "running" becomes "interrupted"
        summary = summarize(args.out)
    except SweepError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    c = summary["counts"]
    print(
        f"{c['done']}/{summary['total']} done, {c['running']} running, {c['queued']} queued, "
        f"{c['failed']} failed; ETA {_fmt_seconds(summary['eta_seconds'])}"
    )
    driver = summary["driver"]
    if summary["state"] == "interrupted":
        print(
            f"sweep interrupted (driver pid {driver.get('pid')} on {driver.get('host')} is gone):"
            " rerun the same command to resume"
        )
    for run_id, error in summary["failed"].items():
        print(f"FAILED {run_id}:\n  " + "\n  ".join(error.splitlines()[-5:]))
    return 0


def main(argv: list[str] | None = None) -> int:
    """The sweep command line; returns the exit status (2: bad input, 1: a run failed)."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["status"]:
        return status_main(argv[1:])
    extra: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, extra = argv[:cut], argv[cut + 1 :]
    parser = _Parser(prog="python -m controlrl.sweep", description=__doc__.splitlines()[0])
    parser.add_argument("--algos", required=True, help="comma-separated scripts in algos/")
    parser.add_argument("--envs", required=True, help="comma-separated env ids")
    parser.add_argument("--seeds", type=_int, default=3, help="seeds 1..N per (algo, env)")
    parser.add_argument("--total-timesteps", type=_int, default=1_000_000)
    parser.add_argument("--backend", choices=("local", "ray"), default="local")
    parser.add_argument(
        "--workers",
        type=_int,
        default=None,
        help="runs at once (local: default 2; ray: at most this many in flight, default as "
        "many as the cluster's CPUs and GPUs fit)",
    )
    parser.add_argument("--address", default=None, help="Ray cluster to join (ray backend)")
    parser.add_argument("--cpus-per-run", type=_amount, default=1.0, help="ray backend")
    parser.add_argument("--gpus-per-run", type=_amount, default=0.0, help="ray backend")
    parser.add_argument(
        "--connect-timeout", type=_amount, default=30.0, help="seconds to join --address"
    )
    parser.add_argument("--out", type=Path, default=None, help="default runs/sweeps/<algos>_<envs>")
    parser.add_argument("--algos-dir", type=Path, default=ALGOS_DIR, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    config = SweepConfig(
        args.algos.split(","), args.envs.split(","), args.seeds, args.total_timesteps, extra
    )
    out = (
        args.out
        or Path("runs")
        / "sweeps"
        / f"{args.algos.replace(',', '+')}_{args.envs.replace(',', '+').replace(':', '_')}"
    )
    out = out.expanduser().absolute()  # where the user stands, whoever runs the runs

    def report(result: dict) -> None:
        print(f"[{result['status']}] {result['run_id']} ({result['seconds']:.0f} s)", flush=True)

    try:
        runs = run_sweep(
            config,
            out,
            args.backend,
            args.workers,
            args.address,
            args.algos_dir,
            on_update=report,
            cpus_per_run=args.cpus_per_run,
            gpus_per_run=args.gpus_per_run,
            connect_timeout_s=args.connect_timeout,
        )
    except SweepTimeout as exc:
        # the thread that tried to connect may never return: leave without waiting for it
        print(f"error: {exc}", file=sys.stderr, flush=True)
        sys.stdout.flush()
        os._exit(2)
    except (SweepError, OSError) as exc:
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"interrupted: rerun the same command to resume {out}", file=sys.stderr)
        return 130
    failed = [k for k, v in runs.items() if v["status"] == "failed"]
    print(
        f"sweep {out}: {len(runs) - len(failed)}/{len(runs)} done"
        + (f", failed: {', '.join(failed)}" if failed else "")
    )
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
