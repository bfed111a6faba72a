"""Per-seed env steps per CPU second of a PPO population on MuJoCo (algos/ppo.py --num-seeds S,
controlrl/population_control.py) against the same seeds as separate processes, side by side,
beside the floor: the S x N envs stepped with random actions.

    python paper_figures/bench_control_population.py           # the committed CSVs and figure
    python paper_figures/bench_control_population.py --toy --out runs/bench_toy    # seconds
    python paper_figures/bench_control_population.py --envs brax:ant --sizes 1,4,16 \
        --name bench_control_population_brax      # ppo_brax.py --num-seeds: vmap, no floor

Contenders, each in its own fresh process (controlrl.bench), for every env of --envs and S of
--sizes, at CleanRL's PPO settings (vwxyzjn/cleanrl cleanrl/ppo_continuous_action.py: ppo.py's
defaults, 1 env x 2048 steps, 32 minibatches, 10 epochs, 64-64 tanh nets):
  population-S  one process: ppo.py --num-seeds S --seed 1, --iterations rollouts
  separate-S    seeds 1..S, ppo.py --seed k in one process each, --workers of them at a time
  floor-S       the S x N envs of a population (one sync vector env) stepped --floor-steps
                times with uniform random actions: the env work alone
On a brax: id the trainer is algos/ppo_brax.py (its defaults, 64 envs x 32 steps per seed; a
population vmaps the jitted rollout and update over seeds) and there is no floor: its envs step
inside the compiled rollout. A training process's time is the CPU time of its iterations after the
first --warmup ones (time/rollout_s_cpu + time/update_s_cpu of its timing.csv: no start-up,
checkpoint or final evaluation); the separate side sums its processes'. Columns:
seed_steps_per_cpu_s, speedup (population over separate at the same S), us_per_seed_step (CPU
microseconds per seed-step), floor_ratio (population's us_per_seed_step over the floor's per env
step at S x N envs), proc_cpu_s (whole processes, start-up included) and peak_rss_mb (the largest
process).

Also one sync vector env (every env in this process) against one async (a process per env) of
each --vector-sizes count, stepped with random actions: env steps per wall and per CPU second
(the children's included), in <out>/bench_control_population_envs.csv; the population's default
(sync on Gymnasium ids) follows from it. Writes <out>/bench_control_population.csv and .png (the
rates against S, per env).
"""

from __future__ import annotations

import csv
import math
import resource
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from controlrl import bench
from controlrl.cli import ArgumentParser

ROOT = Path(__file__).resolve().parents[1]
BRAX_ENVS = 64  # ppo_brax.py's default batch: 64 envs x 32 steps, ppo.py's 2048 samples
QUIET = ["--eval-every", "0", "--eval-episodes", "1", "--no-tensorboard", "--no-progress"]
FIELDS = [
    *"contender env_id seeds iterations status wall_s cpu_s seed_steps".split(),
    *"seed_steps_per_cpu_s speedup us_per_seed_step floor_ratio proc_cpu_s peak_rss_mb".split(),
]


def train_worker(
    env_id: str, seed: int, seeds: int | None, iterations: int, warmup: int, run_dir: str, steps
) -> dict:
    """In the contender's process: ppo.py (a population of `seeds` from `seed`, or the one run
    --seed `seed`; on a brax: id ppo_brax.py, its `steps` a batch of 64 envs); the CPU seconds of
    its iterations after `warmup`, read from timing.csv (a JAX compile comes before them)."""
    from algos import ppo, ppo_brax
    from controlrl import population_actor_critic, session, training
    from controlrl.cli import parse

    timer = bench.cpu_timer(session.Timer)  # laps gain their CPU seconds, in this process only
    training.Timer = population_actor_critic.Timer = ppo_brax.Timer = timer
    shutil.rmtree(run_dir, ignore_errors=True)
    algo, shape = ppo, ["--num-steps", str(steps)]
    if env_id.startswith("brax:"):
        algo, shape = (
            ppo_brax,
            ["--num-envs", str(BRAX_ENVS), "--num-steps", str(steps // BRAX_ENVS)],
        )
    argv = ["--env-id", env_id, "--seed", str(seed), *shape, *QUIET]
    argv += ["--total-timesteps", str(iterations * steps), "--run-dir", run_dir]
    if seeds is not None:
        argv += ["--num-seeds", str(seeds)]
    algo.main(parse(algo.Args, argv))
    with (Path(run_dir) / "timing.csv").open() as f:
        rows = list(csv.DictReader(f))[warmup:]
    cpu = sum(float(r["time/rollout_s_cpu"]) + float(r["time/update_s_cpu"]) for r in rows)
    proc = bench.usage()  # the whole process's, start-up included: proc_cpu_s, not cpu_s
    return {
        "cpu_s": cpu,
        "measured": len(rows),
        "proc_cpu_s": proc["cpu_s"],
        "peak_rss_mb": proc["peak_rss_mb"],
    }


def random_steps(env_id: str, num_envs: int, steps: int, mode: str | None = None) -> dict:
    """In the contender's process: num_envs envs of env_id in one vector env stepped `steps`
    times with uniform random actions; its wall and CPU seconds. mode None: the floor (a sync
    vector env as a population makes it, every step timed); "sync" or "async": one step first
    (the workers started), then the others, the children's CPU counted too."""
    import numpy as np

    import envs

    vec = envs.make(env_id, num_envs, 0, **({"vectorization": mode} if mode else {"copy": False}))
    vec.reset(seed=list(range(num_envs)) if mode is None else 0)
    space = vec.single_action_space
    rng = np.random.default_rng(0)
    actions = rng.uniform(space.low, space.high, (steps, num_envs, *space.shape))
    actions = actions.astype(np.float32)
    if mode is not None:
        vec.step(actions[0])
    t0, c0 = time.perf_counter(), time.process_time()
    for a in actions[0 if mode is None else 1 :]:
        vec.step(a)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    vec.close()  # the children's CPU is theirs once they have exited
    if mode is None:
        return {"cpu_s": cpu, "wall_s": wall, "peak_rss_mb": bench.usage()["peak_rss_mb"]}
    return {"wall_s": wall, "cpu_s": cpu + bench.usage(resource.RUSAGE_CHILDREN)["cpu_s"]}


def _row(name, env_id, seeds, run, steps, iterations) -> dict:
    row = dict(contender=name, env_id=env_id, seeds=seeds, iterations=iterations)
    row |= dict(status=run.status, wall_s=run.wall_s, cpu_s=run.result.get("cpu_s", math.nan))
    row |= dict(seed_steps=steps, proc_cpu_s=run.result.get("proc_cpu_s", ""))
    return row | {"peak_rss_mb": run.result.get("peak_rss_mb", math.nan)}


def separate(me, args, env_id: str, S: int, work: Path) -> dict:
    """Seeds 1..S as one process each, args.workers at a time: their CPU seconds summed."""
    config = dict(env_id=env_id, seeds=None, iterations=args.iterations, warmup=args.warmup)
    config["steps"] = args.num_steps
    worker = f"{me}:train_worker"
    contenders = [
        bench.Contender(f"seed-{k}", worker, config | dict(seed=k, run_dir=str(work / str(k))))
        for k in range(1, S + 1)
    ]
    t0 = time.perf_counter()
    with ThreadPoolExecutor(args.workers) as pool:
        runs = list(pool.map(bench.run_one, contenders))
    wall = time.perf_counter() - t0
    bad = [r for r in runs if not r.ok]
    measured = args.iterations - args.warmup
    row = _row(f"separate-{S}", env_id, S, bad[0] if bad else runs[0], 0, args.iterations)
    row |= dict(status=bad[0].status if bad else "ok", wall_s=wall)
    row |= {k: sum(r.result.get(k, math.nan) for r in runs) for k in ("cpu_s", "proc_cpu_s")}
    row["peak_rss_mb"] = max(r.result.get("peak_rss_mb", math.nan) for r in runs)
    row["seed_steps"] = S * measured * args.num_steps
    if bad:
        print(bad[0].log[-2000:])
    return row


def plot(rows: list[dict], path: Path) -> None:
    """Per-seed env steps per CPU second against S: population, separate, floor; one panel per
    env."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    envs = list(dict.fromkeys(r["env_id"] for r in rows))
    fig, axes = plt.subplots(1, len(envs), figsize=(5 * len(envs), 3.6), squeeze=False)
    for ax, env_id in zip(axes[0], envs):
        for kind, style in (("population", "o-"), ("separate", "s--"), ("floor", "k:")):
            pts = [
                (r["seeds"], r["seed_steps_per_cpu_s"])
                for r in rows
                if r["env_id"] == env_id and r["contender"].startswith(kind) and r["status"] == "ok"
            ]
            if pts:
                x, y = zip(*sorted(pts))
                label = "floor (random actions)" if kind == "floor" else kind
                ax.plot(x, y, style, label=label)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("seeds S")
        ax.set_ylabel("per-seed env steps per CPU second")
        ax.set_title(f"PPO on {env_id}")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    p = ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--envs", default="HalfCheetah-v5,Hopper-v5")
    p.add_argument("--sizes", default="1,4,16,32", help="population sizes S")
    p.add_argument("--iterations", type=int, default=3, help="rollouts of every training run")
    p.add_argument("--warmup", type=int, default=1, help="first iterations not timed")
    p.add_argument("--num-steps", type=int, default=2048, help="steps per rollout (CleanRL)")
    p.add_argument("--workers", type=int, default=2, help="separate processes at once (cores)")
    p.add_argument("--floor-steps", type=int, default=1024, help="vector steps of the floor")
    p.add_argument("--vector-sizes", default="4,16,32", help="env counts, sync against async")
    p.add_argument("--vector-steps", type=int, default=256)
    p.add_argument("--work-dir", type=Path, default=ROOT / "runs" / "bench_control_population")
    p.add_argument("--out", type=Path, default=ROOT / "paper_figures" / "out")
    p.add_argument("--name", default="bench_control_population", help="the CSVs' and PNG's stem")
    p.add_argument("--toy", action="store_true", help="tiny sizes (tests)")
    args = p.parse_args(argv)
    args.envs = args.envs.split(",")
    args.sizes = [int(s) for s in args.sizes.split(",")]
    args.vector_sizes = [int(s) for s in args.vector_sizes.split(",")]
    if args.toy:
        args.sizes, args.num_steps, args.iterations = [1, 2], 64, 2
        args.floor_steps, args.vector_sizes, args.vector_steps = 64, [2], 16
        if args.work_dir == p.get_default("work_dir"):  # never the full-size runs
            args.work_dir = ROOT / "runs" / "bench_control_population_toy"
    me = str(Path(__file__).resolve())
    measured = args.iterations - args.warmup
    rows: list[dict] = []
    for env_id in args.envs:
        for S in args.sizes:
            work = args.work_dir / env_id / f"S{S}"
            config = dict(env_id=env_id, seed=1, seeds=S, iterations=args.iterations)
            config |= dict(warmup=args.warmup, steps=args.num_steps)
            config["run_dir"] = str(work / "population")
            run = bench.run_one(bench.Contender(f"population-{S}", f"{me}:train_worker", config))
            if not run.ok:
                print(run.log[-2000:])
            steps = S * measured * args.num_steps
            pop = _row(f"population-{S}", env_id, S, run, steps, args.iterations)
            sep = separate(me, args, env_id, S, work / "separate")
            config = dict(env_id=env_id, num_envs=S, steps=args.floor_steps)
            floor = None  # brax: its envs step inside the jitted rollout, not from the host
            if not env_id.startswith("brax:"):
                run = bench.run_one(bench.Contender(f"floor-{S}", f"{me}:random_steps", config))
                floor = _row(f"floor-{S}", env_id, S, run, S * args.floor_steps, "")
            for r in (pop, sep, floor) if floor else (pop, sep):
                cpu, steps = r["cpu_s"], r["seed_steps"]
                r["seed_steps_per_cpu_s"] = steps / cpu if cpu > 0 else ""
                r["us_per_seed_step"] = 1e6 * cpu / steps if steps else ""
                print(f"[{r['status']}] {env_id} {r['contender']}: {cpu:.2f} s CPU for {steps} "
                      "seed-steps", flush=True)  # fmt: skip
            if pop["status"] == sep["status"] == "ok":
                pop["speedup"] = pop["seed_steps_per_cpu_s"] / sep["seed_steps_per_cpu_s"]
            if floor and pop["status"] == floor["status"] == "ok":
                pop["floor_ratio"] = pop["us_per_seed_step"] / floor["us_per_seed_step"]
            rows += [pop, sep, floor] if floor else [pop, sep]
    command = bench.command_line("paper_figures/bench_control_population.py", argv)
    args.out.mkdir(parents=True, exist_ok=True)
    fields = [{k: r.get(k, "") for k in FIELDS} for r in rows]
    bench.write_csv(args.out / f"{args.name}.csv", fields, command)
    plot(rows, args.out / f"{args.name}.png")
    vector_rows = []
    for env_id in [e for e in args.envs if not e.startswith("brax:")]:
        for n in args.vector_sizes:
            for mode in ("sync", "async"):
                config = dict(env_id=env_id, num_envs=n, mode=mode, steps=args.vector_steps)
                run = bench.run_one(bench.Contender(f"{mode}-{n}", f"{me}:random_steps", config))
                steps, res = n * (args.vector_steps - 1), run.result
                row = dict(contender=f"{mode}-{n}", env_id=env_id, num_envs=n, vectorization=mode)
                row |= dict(status=run.status, env_steps=steps)
                row |= {k: res.get(k, math.nan) for k in ("wall_s", "cpu_s")}
                for k in ("wall_s", "cpu_s"):
                    row[f"steps_per_{k}"] = steps / res[k] if run.ok else ""
                vector_rows.append(row)
                print(f"[{run.status}] {env_id} {mode} x{n}: {vector_rows[-1]['steps_per_wall_s']}"
                      " env steps per wall second", flush=True)  # fmt: skip
    if vector_rows:
        bench.write_csv(args.out / f"{args.name}_envs.csv", vector_rows, command)
    for r in [r for r in rows if r["contender"].startswith("population-")]:
        print(
            f"{r['env_id']} S={r['seeds']}: {r['seed_steps_per_cpu_s']:.0f} per-seed env steps "
            f"per CPU s, speedup over separate {r.get('speedup', '')}, time per seed-step over "
            f"the floor {r.get('floor_ratio', '')}"
        )
    print(f"wrote {args.out / (args.name + '.csv')}; command: {command}")


if __name__ == "__main__":
    main()
