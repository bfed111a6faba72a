"""EnTRPO against TRPO on CartPole-v1 (Roostaie and Ebadzadeh 2021, arXiv 2110.13373: "EnTRPO
achieves better performance for controlling a Cart-Pole system compared with the original TRPO").

    python paper_figures/entrpo_cartpole.py          # 12 paired seeds x 2 variants, 30,720 steps
    python paper_figures/entrpo_cartpole.py --toy    # seconds: the pipeline at toy size

Both variants are algos/trpo.py with the same flags and seeds (seed n of one pairs with seed n of
the other); EnTRPO adds --entropy-coef and --replay-rollouts (the abstract gives neither value:
0.01 and 1 here). Metrics per run: the final deterministic evaluation (final_eval.json, 5
episodes) and the mean of the periodic deterministic evaluations over the run (--eval-every).
Writes <out>/entrpo_cartpole.csv (per run) and entrpo_cartpole.png (evaluation curves).
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import numpy as np

from controlrl.cli import ArgumentParser
from controlrl.experiment import SweepConfig, apply_toy, run_sweep, write_rows

ROOT = Path(__file__).resolve().parents[1]
ENV = "CartPole-v1"
TOY = {"seeds": 2, "total_timesteps": 2048, "num_steps": 256, "eval_every": 1024}


def eval_curve(run_dir: Path) -> tuple[list[int], list[float]]:
    """(steps, eval/return) of the periodic evaluations in metrics.csv."""
    steps, returns = [], []
    with open(run_dir / "metrics.csv") as f:
        for row in csv.DictReader(f):
            if row["eval/return"] not in ("", "nan"):
                steps.append(int(row["step"]))
                returns.append(float(row["eval/return"]))
    return steps, returns


def main(argv: list[str] | None = None) -> None:
    p = ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=12)
    p.add_argument("--total-timesteps", type=int, default=30_720)
    p.add_argument("--num-steps", type=int, default=512, help="steps per env per rollout")
    p.add_argument("--eval-every", type=int, default=2048)
    p.add_argument("--entropy-coef", type=float, default=0.01)
    p.add_argument("--replay-rollouts", type=int, default=1)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--toy", action="store_true", help="tiny sizes (a test of the pipeline)")
    p.add_argument("--sweeps-root", type=Path, default=ROOT / "runs" / "sweeps" / "entrpo")
    p.add_argument("--out", type=Path, default=ROOT / "paper_figures" / "out")
    args = p.parse_args(argv)
    if args.toy:
        apply_toy(args, argv, TOY)
    common = ["--num-steps", str(args.num_steps), "--eval-every", str(args.eval_every)]
    common += ["--eval-episodes", "5", "--no-tensorboard", "--no-progress"]
    variants = {
        "trpo": [],
        "entrpo": [
            *("--entropy-coef", str(args.entropy_coef)),
            *("--replay-rollouts", str(args.replay_rollouts)),
        ],
    }
    rows, curves = [], {}
    for name, flags in variants.items():
        config = SweepConfig(["trpo"], [ENV], args.seeds, args.total_timesteps, common + flags)
        out = args.sweeps_root / f"{name}_{args.total_timesteps}"
        runs = run_sweep(config, out, workers=args.workers)
        for run_id, status in sorted(runs.items(), key=lambda kv: int(kv[0].rsplit("seed")[1])):
            if status["status"] != "done":
                raise SystemExit(f"entrpo_cartpole.py: run {run_id} {status['status']}")
            run_dir = out / "runs" / run_id
            steps, returns = eval_curve(run_dir)
            curves.setdefault(name, []).append((steps, returns))
            final = json.loads((run_dir / "final_eval.json").read_text())["eval_return_mean"]
            rows.append(
                {
                    "variant": name,
                    "seed": int(run_id.rsplit("seed", 1)[1]),
                    "steps": args.total_timesteps,
                    "entropy_coef": args.entropy_coef if name == "entrpo" else 0.0,
                    "replay_rollouts": args.replay_rollouts if name == "entrpo" else 0,
                    "final_eval_return": float(final),
                    "mean_eval_return": float(np.mean(returns)) if returns else float("nan"),
                    "evaluations": len(returns),
                }
            )
            mean = rows[-1]["mean_eval_return"]
            print(f"{name} {run_id}: final {final:.1f}, mean over run {mean:.1f}", flush=True)

    args.out.mkdir(parents=True, exist_ok=True)
    write_rows(args.out / "entrpo_cartpole.csv", rows)
    import matplotlib.pyplot as plt

    from controlrl import plots

    with plt.rc_context(plots.STYLE):
        fig, ax = plt.subplots(figsize=(6, 3.6))
        for name, runs in curves.items():
            n = min(len(s) for s, _ in runs)
            if n == 0:
                continue
            r = np.array([ret[:n] for _, ret in runs])
            ax.plot(runs[0][0][:n], r.mean(0), "o-", ms=3, label=f"{name}, mean of {len(r)} seeds")
        ax.set_xlabel("env steps")
        ax.set_ylabel("deterministic evaluation return")
        ax.set_title(f"CartPole-v1, TRPO vs EnTRPO, {args.total_timesteps:,} steps", fontsize=9)
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(args.out / "entrpo_cartpole.png")
    cmd = " ".join(argv if argv is not None else sys.argv[1:])
    print(f"wrote {args.out}/entrpo_cartpole.csv and .png; command: python "
          f"paper_figures/entrpo_cartpole.py {cmd}")  # fmt: skip


if __name__ == "__main__":
    main()
