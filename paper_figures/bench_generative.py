"""Training env steps/s of the generative policies, algos/fpo.py (FPO, arXiv 2507.21053) and
algos/dppo.py (DPPO, arXiv 2409.00588), against algos/ppo.py, side by side in one run.

    python paper_figures/bench_generative.py --out paper_figures/out/bench_generative.csv \\
        --iterations 3 --warmup 1 --repeats 3

Contenders (CONTENDERS), each in its own fresh process (controlrl.bench), the order rotated in
every repeat, on --env-id with --num-envs envs x --num-steps steps per iteration, each with its
reference's defaults (fpo: akanazawa/fpo, flow_steps 10; dppo: irom-lab/dppo hopper-v2
ft_ppo_diffusion_mlp.yaml, pre-trained for --dppo-pretrain-steps on --dppo-dataset first, not
timed) and two variants with ppo's update size or widths. Times from each run's timing.csv (wall
and process CPU); the first --warmup iterations dropped; ratios <algo>/ppo paired per repeat.
Writes one CSV row per process.
"""

from __future__ import annotations

import argparse
import importlib
from pathlib import Path

from controlrl import bench
from paper_figures.lab import scripts

CONTENDERS = ("ppo", "fpo", "fpo_ppo_update", "dppo", "dppo_ppo_nets")
ALGO = {c: c.split("_")[0] for c in CONTENDERS}  # the algos/ file each contender runs
FIELDS = [
    *"contender repeat slot seed env_id num_envs num_steps iterations warmup threads".split(),
    *"steps rollout_s update_s cpu_s sps sps_cpu process_s status".split(),
]


def work(contender: str, **cfg) -> dict:
    """Train one contender for warmup + iterations iterations; its timed seconds."""
    from controlrl import training

    training.Timer = bench.cpu_timer(training.Timer)  # this process only
    module = importlib.import_module(f"algos.{ALGO[contender]}")
    T, N = cfg["num_steps"], cfg["num_envs"]
    kwargs = dict(env_id=cfg["env_id"], seed=cfg["seed"], num_envs=N, num_steps=T)
    kwargs |= dict(total_timesteps=(cfg["warmup"] + cfg["iterations"]) * T * N)
    kwargs |= dict(torch_threads=cfg["threads"], **contender_flags(contender, cfg))
    with bench.trained(module, **kwargs) as (_, rows, _):
        rows = rows[cfg["warmup"] :]
    out = {k: sum(float(r[f"time/{k}"]) for r in rows) for k in ("rollout_s", "update_s")}
    cpu = sum(float(r["time/rollout_s_cpu"]) + float(r["time/update_s_cpu"]) for r in rows)
    return out | dict(steps=len(rows) * T * N, train_s=sum(out.values()), cpu_s=cpu)


def contender_flags(contender: str, cfg: dict) -> dict:
    """What a contender sets beyond the common flags (everything else: its defaults)."""
    if contender == "fpo_ppo_update":
        return dict(update_epochs=10, critic_hidden_sizes=(64, 64))
    if contender in ("dppo", "dppo_ppo_nets"):
        flags = dict(dataset=cfg["dppo_dataset"], pretrain_steps=cfg["dppo_pretrain_steps"])
        if contender == "dppo_ppo_nets":
            flags |= dict(hidden_sizes=(64, 64, 64), critic_hidden_sizes=(64, 64))
        return flags
    if contender in ("ppo", "fpo") and cfg["toy"]:
        return dict(num_minibatches=2, update_epochs=1)
    return {}


def contenders(args: argparse.Namespace, repeat: int) -> list[bench.Contender]:
    keys = ("env_id", "num_envs", "num_steps", "iterations", "warmup", "threads", "toy")
    cfg = {k: getattr(args, k) for k in keys} | dict(seed=repeat + 1)
    cfg |= dict(dppo_dataset=args.dppo_dataset, dppo_pretrain_steps=args.dppo_pretrain_steps)
    worker = f"{Path(__file__).resolve()}:work"
    return bench.contenders(args.contenders, worker, cfg, args.timeout, args.threads)


def row(run: bench.Run) -> dict:
    cfg = run.contender.config
    keys = ("contender", "seed", "env_id", "num_envs", "num_steps", "iterations", "warmup")
    out = {k: cfg[k] for k in (*keys, "threads")}
    out |= dict(repeat=run.repeat, slot=run.slot, process_s=run.wall_s, status=run.status)
    if run.ok:
        r = run.result
        out |= {k: r[k] for k in ("steps", "rollout_s", "update_s", "cpu_s")}
        out["sps"] = r["steps"] / r["train_s"]
        out["sps_cpu"] = r["steps"] / r["cpu_s"]
    return {k: out.get(k, "") for k in FIELDS}


def summarize(rows: list[dict]) -> str:
    """Markdown table: steps/s (wall, CPU) per contender and the paired ratios to ppo."""

    def split(_, mine: list[dict]) -> str:  # seconds per iteration
        its = [r["steps"] / (r["num_envs"] * r["num_steps"]) for r in mine]
        roll, upd = ([r[k] / n for r, n in zip(mine, its)] for k in ("rollout_s", "update_s"))
        return f"{bench.median_range(roll)} / {bench.median_range(upd)}" if mine else "n/a"

    def to_ppo(key: str):
        ratios = {n: bench.row_ratios(rows, n, "ppo", key) for n in {r["contender"] for r in rows}}
        return lambda name, _: "1" if name == "ppo" else bench.median_range(ratios[name])

    m = bench.median_of
    columns = {"env steps/s": m("sps", ",.0f"), "per CPU s": m("sps_cpu", ",.0f")}
    columns |= {"rollout s / update s per iteration": split, "/ppo (wall)": to_ppo("sps")}
    lines = bench.per_contender(rows, columns | {"/ppo (CPU)": to_ppo("sps_cpu")})
    return "\n".join(lines + bench.failures(rows))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = bench.parser(__doc__, "paper_figures/out/bench_generative.csv", names=CONTENDERS)
    p.add_argument("--env-id", default="Hopper-v5", help="Gymnasium id of every contender")
    p.add_argument("--num-envs", type=int, default=8)
    p.add_argument("--num-steps", type=int, default=256, help="steps per env per iteration")
    p.add_argument("--iterations", type=int, default=3, help="timed iterations per process")
    p.add_argument("--warmup", type=int, default=1, help="leading iterations not timed")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--dppo-dataset", default="hopper-medium-v5-s0", help="dppo.py --dataset")
    p.add_argument("--dppo-pretrain-steps", type=int, default=100, help="not timed")
    args = p.parse_args(argv)  # --toy: ppo and fpo at 1 epoch of 2 minibatches
    args.contenders = bench.subset(p, args.contenders, CONTENDERS, "--contenders")
    if "ppo" not in args.contenders or len(args.contenders) < 2:
        p.error(f"--contenders must name ppo and another, got {args.contenders}")
    scripts.at_least(p, args, ("num_envs", "num_steps", "iterations", "repeats", "threads"))
    scripts.at_least(p, args, ("warmup",), 0)
    return args


def main(argv: list[str] | None = None) -> list[dict]:
    def describe(r: dict) -> str:
        return f"{r['sps']:8.0f} env steps/s, {r['sps_cpu']:8.0f} per CPU s"

    script = "paper_figures/bench_generative.py"
    return bench.repeats(parse_args(argv), script, argv, contenders, row, describe, summarize)


if __name__ == "__main__":
    main()
