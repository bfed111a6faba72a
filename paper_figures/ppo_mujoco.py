"""PPO on Hopper, HalfCheetah and Walker2d (v5): learning curves over seeds and final returns
next to CleanRL's published PPO (v4, 1M steps, 3 seeds).

    python paper_figures/ppo_mujoco.py --train          # sweeps what is missing, then plots
    python paper_figures/ppo_mujoco.py                  # plots the sweep under --sweep-dir

Writes <out>/ppo_mujoco.png and <out>/ppo_mujoco.csv (one row per run). "final_train_return" is
the mean return of the training episodes that ended in the last `--final-window` env steps,
"final_eval_return" the deterministic evaluation (normaliser frozen) at the end of training.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from controlrl import plots  # noqa: E402
from controlrl.experiment import SweepConfig, run_sweep  # noqa: E402

# CleanRL ppo_continuous_action.py, MuJoCo v4, 1M steps, 3 seeds (their benchmark docs)
CLEANRL_V4 = {"Hopper-v5": 2383.0, "HalfCheetah-v5": 1443.0, "Walker2d-v5": 2288.0}


def final_train_return(run_dir: Path, window: int) -> float:
    """Episode-weighted mean training return over the last `window` steps of the run."""
    with (run_dir / "metrics.csv").open() as f:
        rows = list(csv.DictReader(f))
    end = float(rows[-1]["step"])
    tail = [r for r in rows if float(r["step"]) > end - window and int(r["train/episodes"]) > 0]
    n = np.array([int(r["train/episodes"]) for r in tail], float)
    ret = np.array([float(r["train/episode_return"]) for r in tail])
    return float((n * ret).sum() / n.sum()) if n.sum() else float("nan")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sweep-dir", type=Path, default=ROOT / "runs" / "sweeps" / "ppo_mujoco")
    p.add_argument("--out", type=Path, default=ROOT / "paper_figures" / "out")
    p.add_argument("--envs", default="Hopper-v5,HalfCheetah-v5,Walker2d-v5")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--total-timesteps", type=int, default=1_000_000)
    p.add_argument("--final-window", type=int, default=20_480)
    p.add_argument("--train", action="store_true", help="run missing runs first (a sweep)")
    p.add_argument("--workers", type=int, default=1, help="runs at once when training")
    p.add_argument("extra", nargs="*", help="flags passed to algos/ppo.py (after --)")
    args = p.parse_args(argv)
    env_ids = args.envs.split(",")
    if args.train:
        extra = ["--eval-every", "200000", "--eval-episodes", "5", *args.extra]
        config = SweepConfig(["ppo"], env_ids, args.seeds, args.total_timesteps, extra)
        runs = run_sweep(
            config,
            args.sweep_dir,
            workers=args.workers,
            on_update=lambda r: print(f"[{r['status']}] {r['run_id']}", flush=True),
        )
        failed = [k for k, v in runs.items() if v["status"] == "failed"]
        if failed:
            print(f"warning: failed runs {failed}; see {args.sweep_dir}/sweep.json", flush=True)

    rows, groups = [], {}
    for env_id in env_ids:
        runs = sorted((args.sweep_dir / "runs" / "ppo" / env_id).glob("seed*/final_eval.json"))
        curves = []
        for done in runs:
            run_dir = done.parent
            curves.append(plots.read_metrics(run_dir, "train/episode_return"))
            rows.append(
                {
                    "env_id": env_id,
                    "seed": run_dir.name.removeprefix("seed"),
                    "steps": int(json.loads(done.read_text())["step"]),
                    "final_train_return": final_train_return(run_dir, args.final_window),
                    "final_eval_return": json.loads(done.read_text())["eval_return_mean"],
                    "cleanrl_v4_1m": CLEANRL_V4.get(env_id, ""),
                }
            )
        if curves:
            groups[env_id] = curves
    if not rows:
        raise SystemExit(f"error: no finished runs under {args.sweep_dir} (use --train)")
    args.out.mkdir(parents=True, exist_ok=True)
    with (args.out / "ppo_mujoco.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)

    import matplotlib.pyplot as plt

    with plt.rc_context(plots.STYLE):
        fig, axes = plt.subplots(1, len(groups), figsize=(4 * len(groups), 3), squeeze=False)
        for ax, (env_id, curves) in zip(axes[0], groups.items()):
            plots.plot_curves(ax, {"controlrl PPO": curves}, smooth_window=5)
            if env_id in CLEANRL_V4:
                ax.axhline(CLEANRL_V4[env_id], color="k", ls="--", lw=1, label="CleanRL v4 1M")
            ax.set_title(env_id)
            ax.set_ylabel("training episode return")
            ax.legend(loc="lower right", fontsize=7)
        fig.suptitle(f"PPO, {args.total_timesteps:,} steps, mean and 95% bootstrap CI", fontsize=9)
        fig.tight_layout()
        fig.savefig(args.out / "ppo_mujoco.png")
    print("per env: mean final training return over seeds (CleanRL v4 1M)")
    for env_id in env_ids:
        vals = [r["final_train_return"] for r in rows if r["env_id"] == env_id]
        if vals:
            print(
                f"  {env_id}: {np.mean(vals):.0f} +- {np.std(vals):.0f} over {len(vals)} seeds "
                f"({CLEANRL_V4.get(env_id, '-')})"
            )
    print(
        f"wrote {args.out / 'ppo_mujoco.png'} and ppo_mujoco.csv; command: python "
        f"paper_figures/ppo_mujoco.py {' '.join(argv if argv is not None else sys.argv[1:])}"
    )


if __name__ == "__main__":
    main()
