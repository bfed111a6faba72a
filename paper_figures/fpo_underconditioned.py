r"""FPO vs Gaussian PPO with the goal fully and partly shown to the policy (McAllister et al. 2025,
"Flow Matching Policy Gradients", arXiv 2507.21053; reference akanazawa/fpo): the paper reports
flow policies winning most where the policy is under-conditioned, seeing only part of the goal.

    python paper_figures/fpo_underconditioned.py --train   # runs what is missing, then plots
    python paper_figures/fpo_underconditioned.py           # plots the runs under --sweep-dir
    python paper_figures/fpo_underconditioned.py --replot  # the PNG from <out>/<name>*.csv alone

Tasks (--envs): Reacher-v5, the goal shown, and ReacherPartialGoal-v5
(envs/partial_goal_reacher.py), the same task with the target's y left out of the observation.
algos/fpo.py and algos/ppo.py with their own defaults (1 env x 2,048 steps, 32 minibatches, 10
epochs), --seeds x --steps per task, a deterministic evaluation every --eval-every steps over
--eval-episodes episodes (the flow policy's samples from noise, as the reference's), the
normaliser frozen.

Writes <out>/<name>.png, <name>.csv (per run: final evaluation return, the mean over the run's
evaluations, the seconds spent collecting and updating) and <name>_curves.csv (per run and
evaluation step: the return). One panel per task: the seeds' mean and its band (the 95%
bootstrap CI from >= 5 seeds, the min-max range below; the legend says which).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from controlrl import experiment, plots
from controlrl.cli import ArgumentParser
from controlrl.experiment import SweepConfig, env_tag
from paper_figures.lab import scripts

ROOT = Path(__file__).resolve().parents[1]
ALGOS = ("fpo", "ppo")
ENVS = ("Reacher-v5", "ReacherPartialGoal-v5")
FIELDS = ("algo", "env", "seed", "steps", "final_eval_return", "mean_eval_return", "train_s")
TOY = {"seeds": 1, "steps": 256, "eval_every": 128, "eval_episodes": 1, "workers": 2}
TOY_FLAGS = ["--num-steps", "128", "--num-minibatches", "2", "--update-epochs", "1"]


def config(args) -> SweepConfig:
    extra = ["--eval-every", str(args.eval_every), "--eval-episodes", str(args.eval_episodes)]
    extra += TOY_FLAGS if args.toy else []
    return SweepConfig(list(ALGOS), list(args.envs), args.seeds, args.steps, extra)


def results(args) -> list[dict]:
    """Per finished run under --sweep-dir: its row and its evaluation curve."""
    out = []
    for env in args.envs:
        for algo in ALGOS:
            base = args.sweep_dir / "runs" / algo / env_tag(env)
            for done in sorted(base.glob("seed*/final_eval.json")):
                final = json.loads(done.read_text())
                steps, returns = plots.read_metrics(done.parent, "eval/return")
                row = {
                    "algo": algo,
                    "env": env,
                    "seed": int(done.parent.name.removeprefix("seed")),
                    "steps": final["step"],
                    "final_eval_return": final["eval_return_mean"],
                    "mean_eval_return": float(np.mean(returns)) if len(returns) else float("nan"),
                    "train_s": plots.train_seconds(done.parent),
                }
                out.append({"row": row, "curve": (steps, returns)})
    return out


def write_csvs(args, runs: list[dict]) -> None:
    args.out.mkdir(parents=True, exist_ok=True)
    experiment.write_rows(args.out / f"{args.name}.csv", [r["row"] for r in runs], FIELDS)
    experiment.write_rows(
        args.out / f"{args.name}_curves.csv",
        [
            {k: r["row"][k] for k in ("algo", "env", "seed")} | {"step": int(s), "eval_return": v}
            for r in runs
            for s, v in zip(*r["curve"])
        ],
    )


def read_csvs(args) -> list[dict]:
    """The runs as write_csvs left them in --out."""
    rows = experiment.read_rows(
        args.out / f"{args.name}.csv", ints=("seed", "steps"), flag="--replot",
        floats=("final_eval_return", "mean_eval_return", "train_s"),
    )  # fmt: skip
    points: dict[tuple, list] = {}
    for p in experiment.read_rows(
        args.out / f"{args.name}_curves.csv", ints=("seed", "step"), floats=("eval_return",),
        flag="--replot",
    ):  # fmt: skip
        points.setdefault((p["algo"], p["env"], p["seed"]), []).append(p)
    runs = []
    for row in rows:
        pts = points.get((row["algo"], row["env"], row["seed"]), [])
        curve = (
            np.array([p["step"] for p in pts], float),
            np.array([p["eval_return"] for p in pts]),
        )
        runs.append({"row": row, "curve": curve})
    return runs


def plot(args, runs: list[dict]) -> None:
    import matplotlib.pyplot as plt

    envs = list(dict.fromkeys(r["row"]["env"] for r in runs))
    with plt.rc_context(plots.STYLE):
        fig, axes = plt.subplots(1, len(envs), figsize=(4.6 * len(envs), 3.4), squeeze=False)
        for ax, env in zip(axes[0], envs):
            mine = [r for r in runs if r["row"]["env"] == env]
            plots.plot_curves(ax, {a: [r["curve"] for r in mine if r["row"]["algo"] == a]
                                   for a in ALGOS})  # fmt: skip
            steps = max(r["row"]["steps"] for r in mine)
            shown = "goal partly hidden (no target y)" if "PartialGoal" in env else "goal shown"
            ax.set_title(f"{env}: {shown}, {steps:,} steps", fontsize=8)
            ax.set_ylabel("deterministic eval return")
            ax.legend(fontsize=7)
        fig.suptitle("FPO (flow policy) vs Gaussian PPO, goal shown vs partly hidden", fontsize=9)
        fig.tight_layout()
        fig.savefig(args.out / f"{args.name}.png", dpi=args.dpi)


def main(argv: list[str] | None = None) -> int:
    p = ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--envs", type=lambda s: s.split(","), default=list(ENVS))
    p.add_argument("--seeds", type=int, default=7)
    p.add_argument("--steps", type=int, default=200_000, help="env steps per run")
    p.add_argument("--eval-every", type=int, default=25_000)
    p.add_argument("--eval-episodes", type=int, default=10)
    p.add_argument(
        "--sweep-dir", type=Path, default=ROOT / "runs" / "sweeps" / "fpo_underconditioned"
    )
    p.add_argument("--out", type=Path, default=ROOT / "paper_figures" / "out")
    p.add_argument("--name", default="fpo_underconditioned", help="stem of the PNG and CSVs")
    p.add_argument("--dpi", type=int, default=60)
    p.add_argument("--train", action="store_true", help="run what is missing first")
    p.add_argument("--workers", type=int, default=2, help="runs at once when training")
    p.add_argument("--toy", action="store_true", help="seconds-sized end-to-end run (tests)")
    p.add_argument("--replot", action="store_true", help="only the PNG, from <out>/<name>*.csv")
    args = p.parse_args(argv)
    if args.toy:
        experiment.apply_toy(args, argv, TOY)
    if args.replot:  # the committed CSVs alone: no run directory is read
        plot(args, read_csvs(args))
        print(f"wrote {args.out / args.name}.png from its CSVs")
        return 0
    if args.train:
        scripts.train(config(args), args.sweep_dir, workers=args.workers)
    runs = results(args)
    if not runs:
        print(f"error: no finished runs under {args.sweep_dir} (run with --train)", file=sys.stderr)
        return 1
    write_csvs(args, runs)
    plot(args, runs)
    for env in args.envs:
        for algo in ALGOS:
            mine = [r["row"]["final_eval_return"] for r in runs
                    if r["row"]["env"] == env and r["row"]["algo"] == algo]  # fmt: skip
            if mine:
                print(f"{env} {algo}: final eval {np.mean(mine):.4g} over {len(mine)} seeds")
    given = " ".join(argv if argv is not None else sys.argv[1:])
    print(
        f"wrote {args.out / args.name}.png and its CSVs; command: python "
        f"paper_figures/fpo_underconditioned.py {given}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
