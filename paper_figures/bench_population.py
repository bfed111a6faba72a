"""Seeds per second of a population run (--num-seeds S, controlrl/population.py) against the same
seeds as separate processes through the sweep runner (controlrl.experiment), side by side.

    python paper_figures/bench_population.py                       # the committed CSV
    python paper_figures/bench_population.py --toy --out runs/bench_toy    # seconds

Contenders, each in its own fresh process (controlrl.bench), for every (algorithm, bandit):
population-S (algos/<algo>.py --num-seeds S, on --population-threads torch threads) and
separate-n (seeds 1..n through run_sweep, --workers one-thread processes at once), both with the
bandit suite's settings (paper_figures/bandit-suite/experiment.toml) and the final evaluation
only. A contender's time is its process wall clock, start-up included; per_seed_s is that over
its seeds; speedup = separate per_seed_s / population per_seed_s; cpu_s and peak_rss_mb of its
processes. Writes <out>/bench_population.csv (one row per contender; the rows of cells this call
does not run are kept with their commands) and prints the speed-ups.
"""

from __future__ import annotations

import importlib
import resource
import shutil
import sys
from pathlib import Path

from controlrl import bench
from controlrl.cli import ArgumentParser

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = {"bandit:bernoulli-10": 10240, "bandit:sequence-reverse-2-6": 20480}
LENGTH = {"bandit:bernoulli-10": 1, "bandit:sequence-reverse-2-6": 6}  # steps per sample
SETTINGS = ["--num-envs", "256", "--eval-every", "0", "--no-tensorboard", "--no-progress"]


def settings(algo: str, env_id: str) -> list[str]:
    """The flags of every run of the algorithm on the bandit (both sides): ppo as the bandit
    suite's declaration runs it there (one episode per env per rollout, its matched flags)."""
    from paper_figures.lab import spec

    if algo != "ppo":
        return list(SETTINGS)
    suite = spec.load(ROOT / "paper_figures" / "bandit-suite")
    (arm,) = [a for a in suite.arms.values() if a.algo == "ppo" and env_id in a.envs]
    return [*SETTINGS, *arm.flags]


FIELDS = [
    *"contender algo bandit seeds samples threads status wall_s per_seed_s speedup".split(),
    *"cpu_s cpu_per_seed_s peak_rss_mb".split(),
]


def population_worker(
    algo: str, env_id: str, steps: int, seeds: int, run_dir: str, threads: int = 1
) -> dict:
    """In the contender's process: one population of `seeds` seeds (from 1) on `threads` torch
    threads."""
    from controlrl.cli import parse

    module = importlib.import_module(f"algos.{algo}")
    shutil.rmtree(run_dir, ignore_errors=True)
    argv = ["--env-id", env_id, "--total-timesteps", str(steps), *settings(algo, env_id)]
    argv += ["--seed", "1", "--num-seeds", str(seeds), "--run-dir", run_dir]
    argv += ["--torch-threads", str(threads)]
    module.main(parse(module.Args, argv))
    return bench.usage()


def separate_worker(algo: str, env_id: str, steps: int, seeds: int, out: str, workers: int):
    """In the contender's process: seeds 1..seeds, one process each, through run_sweep."""
    from controlrl import launch
    from controlrl.experiment import SweepConfig, run_sweep

    shutil.rmtree(out, ignore_errors=True)  # a finished run would be skipped, not timed
    config = SweepConfig([algo], [env_id], seeds, steps, settings(algo, env_id))
    runs = run_sweep(config, Path(out), workers=workers)
    launch.stop_server()  # a forking sweep's server: its CPU and its runs' counted below
    failed = [k for k, v in runs.items() if v["status"] != "done"]
    if failed:
        raise RuntimeError(f"failed runs: {failed}")
    return bench.usage(resource.RUSAGE_CHILDREN)


def contenders(args) -> list[tuple[bench.Contender, dict]]:
    me = str(Path(__file__).resolve())
    out = []
    for algo in args.algos:
        for env_id in args.bandits:
            samples = 512 if args.toy else SAMPLES[env_id]
            steps = samples * LENGTH[env_id]
            cell = {"algo": algo, "bandit": env_id, "samples": samples}
            work = args.work_dir / algo / env_id.removeprefix("bandit:")
            big = args.max_sequence_seeds if "sequence" in env_id else None
            for s in [s for s in args.sizes if big is None or s <= big]:
                config = dict(algo=algo, env_id=env_id, steps=steps, seeds=s)
                config["run_dir"] = str(work / f"population{s}")
                config["threads"] = args.population_threads
                c = bench.Contender(f"population-{s}", f"{me}:population_worker", config)
                out.append((c, {**cell, "seeds": s, "threads": args.population_threads}))
            config = dict(algo=algo, env_id=env_id, steps=steps, seeds=args.separate)
            config |= {"out": str(work / "separate"), "workers": args.workers}
            c = bench.Contender(f"separate-{args.separate}", f"{me}:separate_worker", config)
            out.append((c, {**cell, "seeds": args.separate, "threads": 1}))
    return out


def main(argv: list[str] | None = None) -> None:
    p = ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--algos", default="grpo,tpo")
    p.add_argument("--bandits", default=",".join(SAMPLES))
    p.add_argument("--sizes", default="1,32,1000", help="population sizes S")
    p.add_argument("--separate", type=int, default=32, help="seeds of the separate side")
    p.add_argument("--workers", type=int, default=2, help="processes at once on that side")
    what = "--torch-threads of the population contenders (the separate side: 1 per process)"
    p.add_argument("--population-threads", type=int, default=1, help=what)
    what = "largest population on the sequence bandit (default: every size)"
    p.add_argument("--max-sequence-seeds", type=int, default=None, help=what)
    p.add_argument("--work-dir", type=Path, default=ROOT / "runs" / "bench_population")
    p.add_argument("--out", type=Path, default=ROOT / "paper_figures" / "out")
    p.add_argument("--toy", action="store_true", help="tiny sizes (tests)")
    args = p.parse_args(argv)
    args.algos, args.bandits = args.algos.split(","), args.bandits.split(",")
    args.sizes = bench.ints(p, args.sizes, "--sizes", 1)
    if args.toy:  # 512 samples per bandit
        args.sizes, args.separate = [1, 4], 2
        if args.work_dir == p.get_default("work_dir"):  # never the full-size runs
            args.work_dir = ROOT / "runs" / "bench_population_toy"
    rows = []
    for contender, cell in contenders(args):
        run = bench.run_one(contender)
        cpu_s = run.result.get("cpu_s", float("nan"))
        row = {"contender": contender.name, **cell, "status": run.status, "wall_s": run.wall_s}
        row |= dict(per_seed_s=run.wall_s / cell["seeds"], cpu_s=cpu_s)
        row |= dict(cpu_per_seed_s=cpu_s / cell["seeds"])
        rows.append(row | {"peak_rss_mb": run.result.get("peak_rss_mb", float("nan"))})
        print(f"[{run.status}] {cell['algo']} {cell['bandit']} {contender.name}: "
              f"{run.wall_s:.1f} s wall, {row['per_seed_s']:.3f} s/seed", flush=True)  # fmt: skip
        if not run.ok:
            print(run.log[-2000:], file=sys.stderr)
    separate = {(r["algo"], r["bandit"]): r["per_seed_s"] for r in rows
                if r["contender"].startswith("separate") and r["status"] == "ok"}  # fmt: skip
    for row in rows:  # separate per-seed time over population per-seed time, per cell
        sep = separate.get((row["algo"], row["bandit"]))
        population = row["contender"].startswith("population")
        row["speedup"] = sep / row["per_seed_s"] if sep is not None and population else ""
    args.out.mkdir(parents=True, exist_ok=True)
    command = bench.command_line("paper_figures/bench_population.py", argv)
    path = args.out / "bench_population.csv"
    ran = {(r["algo"], r["bandit"]) for r in rows}
    kept = [  # the cells this call did not run, each with its own command
        r for r in (bench.read_csv(path) if path.exists() else [])
        if (r["algo"], r["bandit"]) not in ran
    ]  # fmt: skip
    fresh = [{k: r.get(k, "") for k in FIELDS} for r in rows]
    bench.write_csv(path, [*kept, *fresh], command, keep_commands=True)
    for r in rows:
        if r["speedup"] != "":
            print(
                f"{r['algo']} {r['bandit']} S={r['seeds']}: {r['per_seed_s']:.3f} s/seed, "
                f"{r['speedup']:.1f}x the separate processes' per-seed throughput"
            )
    print(f"wrote {args.out / 'bench_population.csv'}; command: {command}")


if __name__ == "__main__":
    main()
