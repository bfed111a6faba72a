"""A sweep of short runs started by fork from a server that imported torch once (controlrl.launch
"fork") against a fresh interpreter per run ("exec"), side by side.

    python paper_figures/bench_sweep_launch.py                      # the committed CSV
    python paper_figures/bench_sweep_launch.py --toy --out runs/bench_sweep_launch_toy.csv

Each contender is one run_sweep of --runs grpo runs on the stop bandit (seeds 1..runs, 20480
steps, --workers at once) in its own fresh process (controlrl.bench), the order alternating per
repeat. wall_s is the sweep's wall clock; cpu_s the CPU (user + system) of every process it
started: the runs, and with fork the forkserver (stopped and waited for before it is counted);
cpu_per_run_s = cpu_s / runs. Prints the exec/fork ratios paired per repeat.
"""

from __future__ import annotations

import resource
import shutil
import time
from pathlib import Path

from controlrl import bench

LAUNCHERS = ("fork", "exec")
ENV_ID, STEPS = "bandit:sequence-stop-2-4", 20480
FLAGS = "--num-envs 256 --eval-every 0 --no-tensorboard --group-size 64 --update-epochs 1".split()
FIELDS = ["contender", "repeat", "status", "runs", "workers", "wall_s", "cpu_s", "cpu_per_run_s"]


def worker(contender: str, runs: int, workers: int, steps: int, work: str) -> dict:
    """In the contender's process: the sweep through one launcher; its wall clock and CPU."""
    from controlrl import launch
    from controlrl.experiment import SweepConfig, run_sweep

    out = Path(work) / contender
    shutil.rmtree(out, ignore_errors=True)  # a finished run would be skipped, not timed
    config = SweepConfig(["grpo"], [ENV_ID], runs, steps, FLAGS)
    t0 = time.perf_counter()
    results = run_sweep(config, out, workers=workers, launcher=contender)
    wall_s = time.perf_counter() - t0
    launch.stop_server()  # its CPU and its runs' now count as this process's children's
    failed = [k for k, v in results.items() if v["status"] != "done"]
    if failed:
        raise RuntimeError(f"failed runs: {failed}")
    return {"wall_s": wall_s, "cpu_s": bench.usage(resource.RUSAGE_CHILDREN)["cpu_s"]}


def row(run: bench.Run) -> dict:
    config, result = run.contender.config, run.result
    out = {"contender": run.name, "repeat": run.repeat, "status": run.status}
    out |= {"runs": config["runs"], "workers": config["workers"]}
    out |= {k: result.get(k, "") for k in ("wall_s", "cpu_s")}
    out["cpu_per_run_s"] = result["cpu_s"] / config["runs"] if run.ok else ""
    return {k: out[k] for k in FIELDS}


def summarize(rows: list[dict]) -> str:
    m = bench.median_of
    columns = {"wall s": m("wall_s"), "cpu s": m("cpu_s"), "cpu s/run": m("cpu_per_run_s")}
    lines = bench.per_contender(rows, columns)
    for key in ("wall_s", "cpu_s"):
        ratios = bench.median_range(bench.row_ratios(rows, "exec", "fork", key))
        lines.append(f"exec/fork {key}: {ratios}")
    return "\n".join([*lines, *bench.failures(rows)])


def main(argv: list[str] | None = None) -> list[dict]:
    p = bench.parser(__doc__, "paper_figures/out/bench_sweep_launch.csv", 1800.0)
    p.add_argument("--runs", type=int, help="runs per sweep (default 12; 2 with --toy)")
    p.add_argument("--workers", type=int, default=2, help="runs at once")
    p.add_argument("--repeats", type=int, help="repeats (default 3; 1 with --toy)")
    p.add_argument("--work-dir", default="runs/bench_sweep_launch", help="the sweeps' --out")
    args = p.parse_args(argv)
    bench.fill(args, dict(runs=12, repeats=3), dict(runs=2, repeats=1))
    config = dict(runs=args.runs, workers=args.workers, steps=2048 if args.toy else STEPS)
    config["work"] = str(Path(args.work_dir).resolve())
    me = f"{Path(__file__).resolve()}:worker"
    every = bench.contenders(LAUNCHERS, me, config, args.timeout, args.threads)
    return bench.repeats(args, "paper_figures/bench_sweep_launch.py", argv, lambda *_: every,
                         row, describe, summarize)  # fmt: skip


def describe(r: dict) -> str:
    return f"{r['wall_s']:.1f} s wall, {r['cpu_per_run_s']:.2f} cpu s/run"


if __name__ == "__main__":
    main()
