"""Run a sweep of (algorithm, env, seed) runs, or show a running sweep's progress.

    python -m controlrl.sweep --algos ppo --envs Hopper-v5,HalfCheetah-v5 --seeds 5 \\
        --total-timesteps 1e6 [--backend local|ray] [--workers N] [--address HOST:PORT] \\
        [--out DIR] [-- extra algo flags]
    python -m controlrl.sweep status DIR
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from controlrl.experiment import ALGOS_DIR, SweepConfig, SweepError, run_sweep, summarize


def _int(text: str) -> int:
    value = float(text)  # accepts 1e6
    if value != int(value):
        raise argparse.ArgumentTypeError(f"not an integer: {text}")
    return int(value)


def _fmt_seconds(seconds: float | None) -> str:
    if seconds is None:
        return "unknown"
    return time.strftime("%H:%M:%S", time.gmtime(seconds))


def status_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m controlrl.sweep status")
    parser.add_argument("out", type=Path)
    args = parser.parse_args(argv)
    if not (args.out / "sweep.json").exists():
        print(f"error: {args.out} is not a sweep directory (no sweep.json)", file=sys.stderr)
        return 2
    summary = summarize(args.out)
    c = summary["counts"]
    print(
        f"{c['done']}/{summary['total']} done, {c['running']} running, {c['queued']} queued, "
        f"{c['failed']} failed; ETA {_fmt_seconds(summary['eta_seconds'])}"
    )
    for run_id, error in summary["failed"].items():
        print(f"FAILED {run_id}:\n  " + "\n  ".join(error.splitlines()[-5:]))
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["status"]:
        return status_main(argv[1:])
    extra: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, extra = argv[:cut], argv[cut + 1 :]
    parser = argparse.ArgumentParser(
        prog="python -m controlrl.sweep", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--algos", required=True, help="comma-separated scripts in algos/")
    parser.add_argument("--envs", required=True, help="comma-separated env ids")
    parser.add_argument("--seeds", type=_int, default=3, help="seeds 1..N per (algo, env)")
    parser.add_argument("--total-timesteps", type=_int, default=1_000_000)
    parser.add_argument("--backend", choices=("local", "ray"), default="local")
    parser.add_argument("--workers", type=_int, default=2, help="runs at once")
    parser.add_argument("--address", default=None, help="Ray cluster to join (ray backend)")
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
    if args.workers <= 0:
        print(f"error: --workers must be > 0, got {args.workers}", file=sys.stderr)
        return 2

    def report(result: dict) -> None:
        print(f"[{result['status']}] {result['run_id']} ({result['seconds']:.0f} s)", flush=True)

    try:
        runs = run_sweep(
            config, out, args.backend, args.workers, args.address, args.algos_dir, on_update=report
        )
    except SweepError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    failed = [k for k, v in runs.items() if v["status"] == "failed"]
    print(
        f"sweep {out}: {len(runs) - len(failed)}/{len(runs)} done"
        + (f", failed: {', '.join(failed)}" if failed else "")
    )
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
