"""Gradient updates/s of algos/retrace.py against Stable-Baselines3's SAC, side by side in one run.

    python paper_figures/bench_retrace.py --out paper_figures/out/bench_retrace.csv \\
        --updates 3000 --warmup 500 --repeats 3

Contenders, each in its own fresh process (controlrl.bench), the order rotated in every repeat:
ours (algos/retrace.py: Retrace(lambda) targets over segments, twin Q, SAC actor and
temperature; time/train_s of its timing.csv) and sb3 (stable_baselines3/sac/sac.py, timed by a
callback after each env step). Both: one env, 256-256 ReLU nets, 256 transitions per update
(ours: 32 segments of 8), one update per env step, SAC's settings, --learning-starts uniform
steps first, 1 torch thread; the first --warmup updates are not timed. Rates per wall and per
process CPU second; ratios ours/sb3 paired per repeat. Writes one CSV row per process.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from controlrl import bench
from paper_figures.lab import scripts

CONTENDERS = ("ours", "sb3")
SETTINGS = dict(hidden_sizes=[256, 256], batch_size=256, learning_rate=3e-4, gamma=0.99)
SETTINGS |= dict(polyak=0.005, init_alpha=1.0, buffer_size=1_000_000, updates_per_step=1)
FIELDS = [  # CSV columns; controlrl.bench's 'command' comes last
    *"contender repeat slot seed env_id learning_starts updates warmup threads".split(),
    *"hidden params batch_size segment_length timed_updates train_s updates_per_s".split(),
    *"cpu_s updates_per_cpu_s process_s status".split(),
]


# --------------------------------------------------------------------------------------------
# workers: each runs in its own process (controlrl.bench)


def work(contender: str, **cfg) -> dict:
    """Train one contender for learning_starts + updates env steps; its timing."""
    import torch

    torch.set_num_threads(cfg["threads"])
    return {"ours": _ours, "sb3": _sb3}[contender](cfg)


def _ours(cfg: dict) -> dict:
    from algos import retrace
    from controlrl import checkpoint

    retrace.Timer = bench.cpu_timer(retrace.Timer)  # this process only: CPU seconds per lap too
    kw = {k: cfg[k] for k in ("env_id", "seed", "learning_starts", "log_every", "segment_length")}
    kw |= dict(
        total_timesteps=cfg["learning_starts"] + cfg["updates"], torch_threads=cfg["threads"]
    )
    kw |= dict(batch_size=cfg["batch_size"], hidden_sizes=tuple(cfg["hidden"]))
    with bench.trained(retrace, **SETTINGS | kw) as (run_dir, rows, _):
        state = checkpoint.load(run_dir / "checkpoints" / "latest.pt")
    # the actor's and the twin critic's parameters (not the action box's scale and bias)
    params = sum(v.numel() for k, v in state["policy"].items() if k not in ("scale", "bias"))
    params += sum(v.numel() for v in state["q"].values())
    skip = (cfg["learning_starts"] + cfg["warmup"]) // cfg["log_every"]
    timed = rows[skip:]
    n = len(timed) * cfg["log_every"]
    wall = sum(float(r["time/train_s"]) for r in timed)
    cpu = sum(float(r["time/train_s_cpu"]) for r in timed)
    return dict(timed_updates=n, train_s=wall, cpu_s=cpu, params=params)


def _sb3(cfg: dict) -> dict:
    import gymnasium as gym
    from stable_baselines3 import SAC
    from stable_baselines3.common.callbacks import BaseCallback

    start = cfg["learning_starts"] + cfg["warmup"]  # env steps before the timed ones
    marks: dict[str, float] = {}

    class Clock(BaseCallback):
        """Wall and CPU clock after env step `start` and after the last one: SB3 calls
        _on_step after each env step, and trains (one step) before the next."""

        def _on_step(self) -> bool:
            if self.num_timesteps == start:
                marks["wall0"], marks["cpu0"] = time.perf_counter(), time.process_time()
            return True

    s = SETTINGS  # under SAC's names (stable_baselines3/sac/sac.py)
    kw = dict(learning_rate=s["learning_rate"], buffer_size=s["buffer_size"], tau=s["polyak"])
    kw |= dict(gamma=s["gamma"], train_freq=1, gradient_steps=s["updates_per_step"])
    kw |= dict(ent_coef=f"auto_{s['init_alpha']}", target_entropy="auto", seed=cfg["seed"])
    kw |= dict(learning_starts=cfg["learning_starts"], batch_size=cfg["batch_size"])
    kw |= dict(policy_kwargs=dict(net_arch=list(cfg["hidden"])), device="cpu")
    model = SAC("MlpPolicy", gym.make(cfg["env_id"]), **kw)
    model.learn(cfg["learning_starts"] + cfg["updates"], callback=Clock())
    wall, cpu = time.perf_counter() - marks["wall0"], time.process_time() - marks["cpu0"]
    # from after env step `start` (its update not yet done) to the end: the updates after env
    # steps start .. end, one more than the env steps start + 1 .. end in the span
    params = sum(p.numel() for net in (model.actor, model.critic) for p in net.parameters())
    out = dict(timed_updates=cfg["updates"] - cfg["warmup"] + 1, train_s=wall, cpu_s=cpu)
    return out | dict(params=params)


# --------------------------------------------------------------------------------------------
# what is compared, rows and summary


def contenders(args: argparse.Namespace, repeat: int) -> list[bench.Contender]:
    """The contenders asked for, with this repeat's seed."""
    keys = ("env_id", "learning_starts", "updates", "warmup", "log_every", "threads", "hidden")
    cfg = {k: getattr(args, k) for k in (*keys, "batch_size", "segment_length")}
    worker = f"{Path(__file__).resolve()}:work"
    cfg["seed"] = repeat + 1
    return bench.contenders(args.contenders, worker, cfg, args.timeout, args.threads)


def row(run: bench.Run) -> dict:
    """One CSV row."""
    cfg = run.contender.config
    keys = ("contender", "seed", "env_id", "learning_starts", "updates", "warmup", "threads")
    out = {k: cfg[k] for k in (*keys, "batch_size")}
    out |= dict(repeat=run.repeat, slot=run.slot, process_s=run.wall_s, status=run.status)
    out |= dict(hidden="-".join(map(str, cfg["hidden"])))
    out["segment_length"] = cfg["segment_length"] if cfg["contender"] == "ours" else ""
    if run.ok:
        r = run.result
        out |= dict(timed_updates=r["timed_updates"], train_s=r["train_s"], cpu_s=r["cpu_s"])
        out["params"] = r["params"]  # actor + twin critic: the same network sizes
        out["updates_per_s"] = r["timed_updates"] / r["train_s"]
        out["updates_per_cpu_s"] = r["timed_updates"] / r["cpu_s"]
    return {k: out.get(k, "") for k in FIELDS}


def summarize(rows: list[dict]) -> str:
    """Markdown table of updates/s per contender and the paired ratios ours/sb3."""
    m = bench.median_of
    columns = {
        "updates/s": m("updates_per_s", ",.1f"),
        "updates/CPU s": m("updates_per_cpu_s", ",.1f"),
    }
    lines = bench.per_contender(rows, {**columns, "process s": m("process_s", ".0f")})
    ratio = {k: bench.median_range(bench.row_ratios(rows, "ours", "sb3", k))
             for k in ("updates_per_s", "updates_per_cpu_s")}  # fmt: skip
    lines.append(f"\nspeed ours/sb3 (paired per repeat): {ratio['updates_per_s']}")
    lines.append(f"speed ours/sb3 by CPU time: {ratio['updates_per_cpu_s']}")
    return "\n".join(lines + bench.failures(rows))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = bench.parser(__doc__, "paper_figures/out/bench_retrace.csv", names=CONTENDERS)
    p.add_argument("--env-id", default="HalfCheetah-v5", help="Gymnasium id of both")
    p.add_argument("--updates", type=int, help="timed + warmup updates (3000; 40 --toy)")
    p.add_argument("--warmup", type=int, help="leading updates not timed (500; 20 --toy)")
    p.add_argument("--learning-starts", type=int, help="uniform-action env steps (1000; 40 --toy)")
    p.add_argument("--log-every", type=int, help="ours: env steps per timing row (100; 10 --toy)")
    p.add_argument("--repeats", type=int, help="repeats (3; 1 --toy)")
    p.add_argument("--hidden", help="hidden sizes of both (256,256; 32,32 --toy)")
    p.add_argument("--batch-size", type=int, default=256, help="transitions per update (256)")
    p.add_argument("--segment-length", type=int, default=8, help="ours: steps per segment (8)")
    args = p.parse_args(argv)
    toy = dict(updates=40, warmup=20, learning_starts=40, log_every=10, repeats=1, hidden="32,32")
    full = dict(updates=3000, warmup=500, learning_starts=1000, log_every=100, repeats=3)
    bench.fill(args, full | dict(hidden="256,256"), toy)
    args.hidden = bench.ints(p, args.hidden, "--hidden", 1)
    args.contenders = bench.subset(p, args.contenders, CONTENDERS, "--contenders")
    scripts.at_least(
        p, args, ("updates", "log_every", "repeats", "threads", "batch_size", "segment_length")
    )
    if not 0 <= args.warmup < args.updates:
        p.error(f"--warmup must be in [0, --updates {args.updates}), got {args.warmup}")
    for name in ("updates", "warmup", "learning_starts"):  # ours times whole iterations
        if getattr(args, name) % args.log_every:
            p.error(f"--log-every {args.log_every} must divide --{name.replace('_', '-')}")
    if args.batch_size % args.segment_length:
        p.error(f"--segment-length {args.segment_length} must divide --batch-size")
    if args.learning_starts < args.segment_length:
        p.error("--learning-starts must be >= --segment-length (a full segment to sample)")
    return args


def main(argv: list[str] | None = None) -> list[dict]:
    def describe(r: dict) -> str:
        return f"{r['updates_per_s']:8.1f} updates/s, {r['updates_per_cpu_s']:8.1f} per CPU s"

    script = "paper_figures/bench_retrace.py"
    return bench.repeats(parse_args(argv), script, argv, contenders, row, describe, summarize)


if __name__ == "__main__":
    main()
