"""algos/ppo_brax.py's iteration (rollout + update + the fetch of its scalars) pinned to one CPU
against unpinned, each in its own fresh process: wall and CPU seconds per iteration at given
ppo_brax.py settings (XLA:CPU sizes its intra-op thread pool by the CPUs a process may use).

    python paper_figures/brax_threads.py                                  # the race's settings
    python paper_figures/brax_threads.py --name ant -- --env-id brax:ant --brax-pipeline spring \\
        --num-envs 256 --num-steps 80 --update-epochs 4 --hidden-sizes 32 32 32 32 \\
        --critic-hidden-sizes 256 256 256 256 256 --activation swish --policy tanh_normal
    python paper_figures/brax_threads.py --toy --out runs/toy/brax_threads  # tiny, for the test

Each worker builds ppo_brax.make_functions, runs --warmup untimed iterations (compiling and
leaving the start of training), then --iterations timed ones; a repeat runs both modes, the
order rotated (controlrl.bench). Flags after `--` go to ppo_brax.py's Args (defaults: the race's
inverted_pendulum settings, brax_ppo_race.py).
"""

from __future__ import annotations

import os
import statistics
import time
from pathlib import Path

from controlrl import bench
from controlrl.cli import ArgumentParser

ROOT = Path(__file__).resolve().parents[1]
RACE = "--env-id brax:inverted_pendulum --brax-pipeline positional --num-envs 64 --num-steps 32"
RACE += " --num-minibatches 32 --update-epochs 10 --no-anneal-lr --no-norm-reward"
RACE += " --no-clip-vloss --max-grad-norm 0.5"
MODES = ("pinned", "unpinned")


def worker(mode: str, flags: list[str], warmup: int, iterations: int) -> dict:
    """In its own process: pin (or not) before JAX starts, then time ppo_brax iterations."""
    if mode == "pinned":
        os.sched_setaffinity(0, {max(os.sched_getaffinity(0))})
    from brax import envs as brax_envs

    from algos import ppo_brax as pb
    from controlrl.cli import parse
    from envs import split_id

    args = parse(pb.Args, flags)
    jax, jnp = pb._jax(), pb._jnp()
    env = brax_envs.get_environment(split_id(args.env_id)[1], backend=args.brax_pipeline)
    reset, rollout, update, _, tx = pb.make_functions(env, args)
    params = pb.init_params(
        jax.random.PRNGKey(args.seed), env.observation_size, env.action_size, args
    )
    opt = pb.init_optimizer(tx, params)
    obs_rms = pb.rms_init((env.observation_size,))
    state, steps, obs_rms = reset(jax.random.PRNGKey(args.seed + 1), obs_rms)
    z = jnp.zeros(args.num_envs)
    carry = (state, steps, obs_rms, pb.rms_init((1,)), z, z, jnp.zeros(args.num_envs, jnp.int32))
    key = jax.random.PRNGKey(args.seed + 2)
    wall, cpu = [], []
    for i in range(warmup + iterations):
        key, k1, k2 = jax.random.split(key, 3)
        t0, c0 = time.perf_counter(), time.process_time()
        carry, batch = rollout(params, carry, k1)
        params, opt, out = update(params, opt, batch, k2, args.learning_rate)
        jax.device_get(out)
        if i >= warmup:
            wall.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
    return {
        "cpus": len(os.sched_getaffinity(0)),
        "wall_ms": 1e3 * statistics.median(wall),
        "cpu_ms": 1e3 * statistics.median(cpu),
        "wall_min_ms": 1e3 * min(wall),
    }


def main(argv: list[str] | None = None) -> None:
    p = ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=ROOT / "paper_figures" / "out")
    p.add_argument("--name", default="race", help="CSV: brax_threads_<name>.csv")
    p.add_argument("--warmup", type=int, default=20, help="untimed iterations per process")
    p.add_argument("--iterations", type=int, default=40, help="timed iterations per process")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--timeout", type=float, default=1200.0, help="seconds per process")
    p.add_argument("--toy", action="store_true", help="tiny settings, for the test")
    p.add_argument("ours", nargs="*", help="ppo_brax.py flags (after --)")
    args = p.parse_args(argv)
    if not hasattr(os, "sched_setaffinity"):
        raise SystemExit("brax_threads.py needs os.sched_setaffinity (Linux)")
    flags = RACE.split() + args.ours
    if args.toy:
        flags += "--num-envs 8 --num-steps 8 --num-minibatches 2 --update-epochs 1".split()
        args.warmup, args.iterations, args.repeats = 1, 2, 1
    command = bench.command_line("paper_figures/brax_threads.py", argv)
    spec = f"{Path(__file__).resolve()}:worker"
    config = {"flags": flags, "warmup": args.warmup, "iterations": args.iterations}
    contenders = [
        bench.Contender(m, spec, config | {"mode": m}, args.timeout, cwd=str(ROOT)) for m in MODES
    ]
    path = args.out / f"brax_threads_{args.name}.csv"

    def row(run: bench.Run) -> dict:
        return dict(mode=run.name, repeat=run.repeat, slot=run.slot, status=run.status) | run.result

    report = bench.Recorder(path, command, row, lambda r: f"{r['wall_ms']:.1f} ms wall")
    runs = bench.run(contenders, args.repeats, report)
    for m in MODES:
        got = [r.result for r in runs if r.name == m and r.ok]
        walls, cpus = [g["wall_ms"] for g in got], [g["cpu_ms"] for g in got]
        print(
            f"{m}: {bench.median_range(walls, '.1f')} ms wall, "
            f"{bench.median_range(cpus, '.1f')} ms CPU per iteration"
        )
    ratios = bench.paired_ratios(runs, "unpinned", "pinned", lambda r: r.result["wall_ms"])
    print(f"wall per iteration, unpinned / pinned (paired): {bench.median_range(ratios)}")
    print(f"wrote {path}\ncommand: {command}")


if __name__ == "__main__":
    main()
