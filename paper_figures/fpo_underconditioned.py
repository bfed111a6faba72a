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

Writes <out>/<name>.png (per task: the seeds' mean and its band, the 95% bootstrap CI from >= 5
seeds, the min-max range below), <name>.csv (per run: final evaluation return, the mean over its
evaluations, seconds collecting and updating) and <name>_curves.csv (per run: return by step).
"""

from __future__ import annotations

import sys

import numpy as np

from controlrl import experiment, plots
from controlrl.cli import ArgumentParser
from controlrl.experiment import SweepConfig, env_tag
from paper_figures.lab import run_csvs, scripts
from paper_figures.lab.script_flags import add_sweep_flags, wrote

ALGOS = ("fpo", "ppo")
ENVS = ("Reacher-v5", "ReacherPartialGoal-v5")
FIELDS = ("algo", "env", "seed", "steps", "final_eval_return", "mean_eval_return", "train_s")
KEY, CURVES = FIELDS[:3], {"curve": "eval_return"}
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
            for seed, run_dir, final in run_csvs.finished(base):
                steps, returns = plots.read_metrics(run_dir, "eval/return")
                mean = float(np.mean(returns)) if len(returns) else float("nan")
                row = {"algo": algo, "env": env, "seed": seed, "steps": final["step"],
                       "final_eval_return": final["eval_return_mean"], "mean_eval_return": mean,
                       "train_s": plots.train_seconds(run_dir)}  # fmt: skip
                out.append({"row": row, "curve": (steps, returns)})
    return out


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
        fig.savefig(args.out / f"{args.name}.png", dpi=60)


def main(argv: list[str] | None = None) -> int:
    p = ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--envs", type=lambda s: s.split(","), default=list(ENVS))
    p.add_argument("--seeds", type=int, default=7)
    p.add_argument("--steps", type=int, default=200_000, help="env steps per run")
    p.add_argument("--eval-every", type=int, default=25_000)
    p.add_argument("--eval-episodes", type=int, default=10)
    add_sweep_flags(p, "fpo_underconditioned", workers=2)
    args = p.parse_args(argv)
    if args.toy:
        experiment.apply_toy(args, argv, TOY)
    if args.replot:  # the committed CSVs alone: no run directory is read
        ints, floats = FIELDS[2:4], FIELDS[4:]
        plot(args, run_csvs.read(args.out, args.name, KEY, CURVES, "eval_return", ints, floats))
        wrote(f"{args.out / args.name}.png from its CSVs", "fpo_underconditioned", argv)
        return 0
    if args.train:
        scripts.train(config(args), args.sweep_dir, workers=args.workers)
    runs = results(args)
    if not runs:
        print(f"error: no finished runs under {args.sweep_dir} (run with --train)", file=sys.stderr)
        return 1
    run_csvs.write(args.out, args.name, runs, FIELDS, KEY, CURVES, "eval_return", exact=False)
    plot(args, runs)
    for env in args.envs:
        for algo in ALGOS:
            mine = [r["row"]["final_eval_return"] for r in runs
                    if r["row"]["env"] == env and r["row"]["algo"] == algo]  # fmt: skip
            if mine:
                print(f"{env} {algo}: final eval {np.mean(mine):.4g} over {len(mine)} seeds")
    wrote(f"{args.out / args.name}.png and its CSVs", "fpo_underconditioned", argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
