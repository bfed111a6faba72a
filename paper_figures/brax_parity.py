"""Training compute per env step of algos/ppo_brax.py against Brax's own PPO trainer (google/brax
brax/training/agents/ppo/train.py), the two alternated in ONE process, so that a change of the
machine's load hits both (brax_ppo_race.py runs each trainer in its own process, one after the
other).

Per seed and round, in alternating order: Brax's trainer (brax_ppo_race.brax_worker, unchanged)
trains anew and reports each training epoch's 'training/walltime'; algos/ppo_brax.py's main()
trains anew with the same seed and settings, its timing.csv giving rollout + update seconds per
iteration, grouped into the same epochs. The first epoch (Brax compiles in it) is dropped on both
sides; the round's ratio is ours / brax over the other epochs (< 1: ours cheaper), a seed's the
median over its rounds. Settings: brax_ppo_race.py's flags, with --rounds and --cpu added. By
default the process is pinned to one CPU, so that an epoch's wall time is its compute; --cpu -1
measures unpinned.

    python paper_figures/brax_parity.py                      # 3 seeds x 3 rounds
    python paper_figures/brax_parity.py --toy --out runs/toy/brax_parity   # tiny budget

Writes brax_parity.csv (one row per seed, round and trainer) into --out.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import tempfile
from pathlib import Path

from controlrl import bench
from controlrl.cli import ArgumentParser
from paper_figures import brax_ppo_race as race  # the race's settings, brax worker and flags

ROOT = Path(__file__).resolve().parents[1]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="Every other flag is brax_ppo_race.py's (--env, --num-envs, --seeds, ...).",
    )
    p.add_argument("--rounds", type=int, default=3, help="runs of each trainer per seed")
    p.add_argument("--total-timesteps", type=int, default=122_880, help="env steps per run")
    p.add_argument("--num-evals", type=int, default=7, help="brax num_evals: num_evals-1 epochs")
    what = "run on this one CPU (-2: the last one; -1: no pinning, the OS's choice)"
    p.add_argument("--cpu", type=int, default=-2, help=what)
    own, rest = p.parse_known_args(argv)
    if own.rounds < 1:
        p.error("--rounds must be >= 1")
    if own.num_evals < 3:
        p.error("--num-evals must be >= 3 (the first epoch is dropped)")
    args = race.parse_args(rest)
    if args.toy:
        own.rounds, own.total_timesteps, own.num_evals = 1, args.total_timesteps, 3
    vars(args).update(vars(own), trainers=("brax", "ours_jax"))
    return args


def pin(cpu: int) -> str:
    """Pin this process (and the JAX threads it starts later) to one CPU; returns a label."""
    if cpu == -1 or not hasattr(os, "sched_setaffinity"):
        return "not pinned"
    cpus = sorted(os.sched_getaffinity(0))
    chosen = cpus[-1] if cpu == -2 else cpu
    if chosen not in cpus:
        raise SystemExit(f"--cpu {cpu}: this process may run on CPUs {cpus} only")
    os.sched_setaffinity(0, {chosen})
    return f"pinned to CPU {chosen}"


def epoch_seconds(per_unit: list[float], units_per_epoch: int) -> list[float]:
    """Seconds per epoch from seconds per iteration (ours: one iteration = one brax training
    step), in order; a trailing partial epoch is an error (the runs did not match)."""
    n = units_per_epoch
    if n < 1 or len(per_unit) % n:
        raise ValueError(f"{len(per_unit)} iterations do not split into epochs of {n}")
    return [sum(per_unit[i : i + n]) for i in range(0, len(per_unit), n)]


def round_ratio(ours: list[float], brax: list[float]) -> float:
    """ours / brax training seconds over the same epochs, the first (compile) epoch dropped."""
    if len(ours) != len(brax) or len(ours) < 2:
        raise ValueError(f"epochs do not match: ours {len(ours)}, brax {len(brax)}")
    return sum(ours[1:]) / sum(brax[1:])


def run_brax(args, seed: int, work: Path) -> list[float]:
    log = work / f"brax_seed{seed}.jsonl"
    log.unlink(missing_ok=True)
    race.brax_worker(seed=seed, total=race.schedule(args)[1], log=str(log), **race.brax_train(args))
    return race.brax_epochs([json.loads(line) for line in log.read_text().splitlines()])


def run_ours(args, seed: int, work: Path) -> list[float]:
    from algos import ppo_brax
    from controlrl.cli import parse

    run_dir = Path(tempfile.mkdtemp(prefix=f"ours_seed{seed}_", dir=work))
    flags = [*race.our_flags(args, seed, "ours_jax"), f"--run-dir={run_dir}"]
    ppo_brax.main(parse(ppo_brax.Args, flags))
    with (run_dir / "timing.csv").open() as f:
        rows = list(csv.DictReader(f))
    per_iteration = [float(r["time/rollout_s"]) + float(r["time/update_s"]) for r in rows]
    per_epoch = race.schedule(args)[0] // (args.num_envs * args.num_steps)
    return epoch_seconds(per_iteration, per_epoch)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    pinned = pin(args.cpu)  # before JAX starts its threads
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    command = bench.command_line("paper_figures/brax_parity.py", argv)
    args.out.mkdir(parents=True, exist_ok=True)
    work = args.work_dir / "parity"
    work.mkdir(parents=True, exist_ok=True)
    steps_per_epoch, total = race.schedule(args)
    print(
        f"{args.env} ({args.pipeline}): {total} env steps per run in {args.num_evals - 1} epochs"
        f" of {steps_per_epoch}, seeds {seeds}, {args.rounds} rounds each, {pinned}",
        flush=True,
    )
    rows, ratios = [], {}
    k = 0
    for seed in seeds:
        for r in range(args.rounds):
            epochs = {}
            for slot, trainer in enumerate(bench.rotation(("brax", "ours_jax"), k)):
                runner = run_brax if trainer == "brax" else run_ours
                epochs[trainer] = runner(args, seed, work)
                n, timed = len(epochs[trainer]), sum(epochs[trainer][1:])
                row = dict(seed=seed, round=r, slot=slot, trainer=trainer, epochs=n)
                row |= dict(timed_steps=steps_per_epoch * (n - 1), train_s=timed)
                row |= dict(train_sps=steps_per_epoch * (n - 1) / timed)
                row["epoch_s"] = " ".join(f"{x:.4f}" for x in epochs[trainer])
                rows.append(row | {"cpu": pinned})
            k += 1
            ratio = round_ratio(epochs["ours_jax"], epochs["brax"])
            ratios.setdefault(seed, []).append(ratio)
            for row in rows[-2:]:
                row["ours_over_brax"] = ratio
            print(f"  seed {seed} round {r}: ours/brax {ratio:.3f}", flush=True)
    bench.write_csv(args.out / "brax_parity.csv", rows, command)
    per_seed = {s: f"{statistics.median(v):.3f}" for s, v in ratios.items()}
    print(f"training compute per env step, ours/brax, per seed (median of rounds): {per_seed}")
    print(f"wrote {args.out}/brax_parity.csv\ncommand: {command}")


if __name__ == "__main__":
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    main()
