"""Our PPO's training speed per env backend and vector-env layout, at one batch size.

    python paper_figures/bench_backends.py --out paper_figures/out/bench_backends.csv \\
        --layouts Hopper-v5:1x2048,Hopper-v5:8x256,envpool:Hopper-v5:8x256 --repeats 5

Each layout is `<env id>:<envs>x<steps per env>`; every layout of one call has the same batch,
so only collecting it differs; the first is the reference. The contender is algos/ppo.py with
CleanRL's settings (bench_ppo.py's `ours` worker), in its own fresh process, the order rotated in
every repeat; the first --warmup iterations are dropped. Writes one CSV row per process to --out
and prints env steps/s per layout and the speed against the reference, paired per repeat.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from controlrl import bench
from paper_figures import bench_ppo
from paper_figures.lab import scripts

DEFAULT_LAYOUTS = "Hopper-v5:1x2048,Hopper-v5:8x256,envpool:Hopper-v5:8x256"
TOY_LAYOUTS = "Hopper-v5:1x256,Hopper-v5:2x128"
FIELDS = ["layout", "backend", *bench_ppo.FIELDS]


def parse_layout(text: str) -> tuple[str, int, int]:
    """'<env id>:<envs>x<steps>' -> (env id, envs, steps per env)."""
    env_id, sep, shape = text.strip().rpartition(":")
    envs, x, steps = shape.partition("x")
    if not (sep and env_id and x and envs.isdigit() and steps.isdigit()):
        raise ValueError(f"layout {text!r} is not '<env id>:<envs>x<steps>' (e.g. Hopper-v5:8x256)")
    if int(envs) < 1 or int(steps) < 1:
        raise ValueError(f"layout {text!r}: envs and steps must be >= 1")
    return env_id, int(envs), int(steps)


def backend(env_id: str) -> str:
    """The backend an id selects in envs.make: its prefix, Gymnasium without one."""
    prefix, sep, _ = env_id.partition(":")
    return prefix if sep else "gymnasium"


def contenders(args: argparse.Namespace) -> list[bench.Contender]:
    worker = f"{Path(bench_ppo.__file__).resolve()}:work"
    out = []
    for text in args.layouts:
        env_id, envs, steps = parse_layout(text)
        cfg = dict(algo="ppo", contender="ours", env_id=env_id, num_envs=envs, num_steps=steps)
        cfg |= dict(num_minibatches=args.num_minibatches, epochs=args.epochs, seed=args.seed)
        cfg |= dict(threads=args.threads, warmup=args.warmup, iterations=args.iterations)
        out.append(bench.Contender(text, worker, cfg, args.timeout))
    return out


def row(run: bench.Run, warmup: int) -> dict:
    """bench_ppo's row (seconds per iteration, steps/s) with the layout and its backend."""
    out = bench_ppo.row(run, warmup)
    return {"layout": run.name, "backend": backend(run.contender.config["env_id"]), **out}


def summarize(runs: list[bench.Run], layouts: list[str], warmup: int) -> str:
    """Markdown: per layout, steps/s, rollout and update s/iter, speed vs the first layout."""
    rows = [row(r, warmup) | {"contender": r.name} for r in runs]
    m = bench.median_of

    def speed(name: str, _) -> str:
        ratios = bench.row_ratios(rows, name, layouts[0], "sps")
        return "-" if name == layouts[0] else bench.median_range(ratios)

    columns = {
        "backend": lambda name, _: backend(parse_layout(name)[0]),
        "steps/s": m("sps", ",.0f"),
    }
    columns |= {"rollout s/iter": m("rollout_s"), "update s/iter": m("update_s")}
    lines = bench.per_contender(rows, columns | {"speed vs first": speed})
    lines[0] = lines[0].replace("contender", "layout")
    lines += [f"FAILED {r.name}, repeat {r.repeat}: {r.status}" for r in runs if not r.ok]
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = bench.parser(__doc__, "paper_figures/out/bench_backends.csv", 1800.0)
    layouts = f"{DEFAULT_LAYOUTS}; {TOY_LAYOUTS} with --toy"
    what = f"comma-separated <env id>:<envs>x<steps>, first the reference (default {layouts})"
    p.add_argument("--layouts", help=what)
    p.add_argument("--iterations", type=int, help="timed iterations per process (3; 1 --toy)")
    p.add_argument("--repeats", type=int, help="repeats (default 5; 1 with --toy)")
    p.add_argument("--warmup", type=int, default=1, help="leading iterations dropped (default 1)")
    p.add_argument("--num-minibatches", type=int, default=32, help="minibatches per epoch")
    p.add_argument("--epochs", type=int, default=10, help="epochs per iteration")
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args(argv)
    layouts = args.layouts or (TOY_LAYOUTS if args.toy else DEFAULT_LAYOUTS)
    args.layouts = [s.strip() for s in layouts.split(",") if s.strip()]
    bench.fill(args, dict(iterations=3, repeats=5), dict(iterations=1, repeats=1))
    try:
        shapes = [parse_layout(s) for s in args.layouts]
    except ValueError as e:
        p.error(str(e))
    if len(set(args.layouts)) != len(args.layouts) or not args.layouts:
        p.error(f"--layouts must name distinct layouts, got {args.layouts}")
    batches = {envs * steps for _, envs, steps in shapes}
    if len(batches) != 1:
        p.error(f"--layouts must share one batch (envs x steps), got {sorted(batches)}")
    if batches.pop() % args.num_minibatches:
        p.error(f"--num-minibatches {args.num_minibatches} must divide the batch")
    scripts.at_least(p, args, ("iterations", "repeats", "threads", "num_minibatches", "epochs"))
    scripts.at_least(p, args, ("warmup",), 0)
    return args


def main(argv: list[str] | None = None) -> list[bench.Run]:
    args = parse_args(argv)
    command = bench.command_line("paper_figures/bench_backends.py", argv)
    report = bench.Recorder(args.out, command,
                            lambda run: {k: row(run, args.warmup).get(k, "") for k in FIELDS},
                            lambda r: f"{r['sps']:8.0f} steps/s")  # fmt: skip
    runs = bench.run(contenders(args), args.repeats, on_run=report)
    bench.report(summarize(runs, args.layouts, args.warmup), args.repeats, command, args.out)
    return runs


if __name__ == "__main__":
    main()
