"""Training compute per env step of algos/ppo_brax.py against Brax's own PPO trainer (google/brax
brax/training/agents/ppo/train.py), the two alternated in ONE process: the successor of
brax_ppo_race.py's train clock for the parity claim (ours' training compute per env step at most
Brax's trainer's at matched settings, median over >= 3 seeds).

Why a second script. The race runs every trainer in its own process, one after the other, and
each measures a few seconds of training, so a change of the machine's load between runs enters
its per-seed cost ratios. Here both trainers run in the same process, seconds apart, in rounds
whose order alternates, so that a change of load hits both.

What it measures. For each seed and round: Brax's trainer trains anew with that seed
(brax_ppo_race.brax_worker, unchanged) and reports the wall time of every training epoch
('training/walltime', its jitted epochs, evaluations excluded); then (or first, every other
round) algos/ppo_brax.py's main() trains anew with the same seed and settings in a fresh
run directory, and its timing.csv gives rollout + update seconds per iteration (compiling and
evaluations excluded). Both run the same env steps, split into the same epochs (brax's
num_evals - 1 epochs of whole training steps; ours groups its iterations, one per brax training
step, the same way). The first epoch is dropped on both sides (brax compiles its training epoch
in it). The round's ratio is ours / brax over the remaining epochs (training compute per env step;
< 1: ours cheaper); a seed's ratio is the median over its rounds, and the verdict the median over
seeds. Settings: those of brax_ppo_race.py (the same flags; see its docstring for what is
matched and what cannot be), with --rounds and --cpu added.

One CPU. By default the process (and with it every JAX thread) is pinned to one CPU, so that the
wall time of an epoch is its compute and the other core's load does not enter (unpinned epochs
of the same work spread far wider: paper_figures/README.md, out/brax_parity_unpinned_*.csv).
--cpu -1 measures unpinned (both trainers may then use both cores, as XLA:CPU's thread pool
does for large kernels).

    python paper_figures/brax_parity.py                      # 3 seeds x 3 rounds
    python paper_figures/brax_parity.py --toy --out runs/toy/brax_parity   # tiny budget
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
    p.add_argument(
        "--cpu",
        type=int,
        default=-2,
        help="run on this one CPU (-2: the last one; -1: no pinning, the OS's choice)",
    )
    own, rest = p.parse_known_args(argv)
    if own.rounds < 1:
        p.error("--rounds must be >= 1")
    if own.num_evals < 3:
        p.error("--num-evals must be >= 3 (the first epoch is dropped)")
    args = race.parse_args(rest)
    if args.toy:
        own.rounds, own.total_timesteps, own.num_evals = 1, args.total_timesteps, 3
    args.rounds, args.total_timesteps, args.num_evals = (
        own.rounds,
        own.total_timesteps,
        own.num_evals,
    )
    args.trainers = ("brax", "ours_jax")
    args.cpu = own.cpu
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
    if units_per_epoch < 1 or len(per_unit) % units_per_epoch:
        raise ValueError(
            f"{len(per_unit)} iterations do not split into epochs of {units_per_epoch}"
        )
    return [
        sum(per_unit[i : i + units_per_epoch]) for i in range(0, len(per_unit), units_per_epoch)
    ]


def brax_epochs(log: Path) -> list[float]:
    """Epoch seconds from brax's progress records (cumulated 'training/walltime' per eval)."""
    walls = [json.loads(line)["train_walltime"] for line in log.read_text().splitlines()]
    return [b - a for a, b in zip(walls, walls[1:])]


def round_ratio(ours: list[float], brax: list[float]) -> float:
    """ours / brax training seconds over the same epochs, the first (compile) epoch dropped."""
    if len(ours) != len(brax) or len(ours) < 2:
        raise ValueError(f"epochs do not match: ours {len(ours)}, brax {len(brax)}")
    return sum(ours[1:]) / sum(brax[1:])


def run_brax(args, seed: int, work: Path) -> list[float]:
    log = work / f"brax_seed{seed}.jsonl"
    log.unlink(missing_ok=True)
    race.brax_worker(seed=seed, total=race.schedule(args)[1], log=str(log), **race.brax_train(args))
    return brax_epochs(log)


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
    eval_every, total = race.schedule(args)
    steps_per_epoch = eval_every
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
                timed = sum(epochs[trainer][1:])
                rows.append(
                    {
                        "seed": seed,
                        "round": r,
                        "slot": slot,
                        "trainer": trainer,
                        "epochs": len(epochs[trainer]),
                        "timed_steps": steps_per_epoch * (len(epochs[trainer]) - 1),
                        "train_s": timed,
                        "train_sps": steps_per_epoch * (len(epochs[trainer]) - 1) / timed,
                        "epoch_s": " ".join(f"{x:.4f}" for x in epochs[trainer]),
                        "cpu": pinned,
                    }
                )
            k += 1
            ratio = round_ratio(epochs["ours_jax"], epochs["brax"])
            ratios.setdefault(seed, []).append(ratio)
            for row in rows[-2:]:
                row["ours_over_brax"] = ratio
            print(f"  seed {seed} round {r}: ours/brax {ratio:.3f}", flush=True)
    bench.write_csv(args.out / "brax_parity.csv", rows, command)
    per_seed = {s: statistics.median(v) for s, v in ratios.items()}
    median = statistics.median(per_seed.values())
    print(
        "training compute per env step, ours/brax, per seed (median of rounds): "
        + ", ".join(f"{s}: {v:.3f}" for s, v in per_seed.items())
        + f"; median over seeds {median:.3f}; <= 1.0: "
        + ("holds" if median <= 1.0 else "does not hold")
    )
    print(f"wrote {args.out}/brax_parity.csv\ncommand: {command}")


if __name__ == "__main__":
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    main()
