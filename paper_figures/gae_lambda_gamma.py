"""Final return of the GAE paper's algorithm (algos/gae.py; Schulman et al. 2015, "High-Dimensional
Continuous Control Using Generalized Advantage Estimation") over a grid of lambda x gamma (the
paper's Fig. 2/3 experiment, at a small budget): one heat map of the mean over seeds, with the seed
spread in the CSV.

    python paper_figures/gae_lambda_gamma.py                       # Hopper-v5, 200k steps, 3 seeds
    python paper_figures/gae_lambda_gamma.py --env-id Swimmer-v5 --total-timesteps 500000

Runs go through the sweep runner (one sweep per (lambda, gamma) cell under --sweeps-root), so a
killed figure run resumes where it stopped. Writes <out>/<name>.png and .csv (--name, default
gae_lambda_gamma).
"final return" = episode-weighted mean training return over the last --final-window steps;
final_eval_return = the run's final deterministic evaluation (5 episodes, normaliser frozen).
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import numpy as np

from controlrl import plots
from controlrl.cli import ArgumentParser
from controlrl.experiment import SweepConfig, run_sweep

ROOT = Path(__file__).resolve().parents[1]

LAMBDAS = (0.0, 0.5, 0.9, 0.95, 0.99, 1.0)
GAMMAS = (0.95, 0.99, 0.995)


def main(argv: list[str] | None = None) -> None:
    p = ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--env-id", default="Hopper-v5")
    p.add_argument("--total-timesteps", type=int, default=200_000)
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--lambdas", default=",".join(map(str, LAMBDAS)))
    p.add_argument("--gammas", default=",".join(map(str, GAMMAS)))
    p.add_argument("--final-window", type=int, default=20_480)
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--sweeps-root", type=Path, default=ROOT / "runs" / "sweeps" / "gae_grid")
    p.add_argument("--out", type=Path, default=ROOT / "paper_figures" / "out")
    p.add_argument("--name", default="gae_lambda_gamma", help="stem of the PNG and CSV")
    p.add_argument("extra", nargs="*", help="flags passed to every algos/gae.py run (after --)")
    args = p.parse_args(argv)
    lambdas = [float(x) for x in args.lambdas.split(",")]
    gammas = [float(x) for x in args.gammas.split(",")]

    rows = []
    for gamma in gammas:
        for lam in lambdas:
            extra = [
                "--gamma",
                str(gamma),
                "--gae-lambda",
                str(lam),
                "--eval-every",
                "0",
                "--eval-episodes",
                "5",
                *args.extra,
            ]
            out = args.sweeps_root / f"{args.env_id}_gamma{gamma}_lambda{lam}"
            config = SweepConfig(["gae"], [args.env_id], args.seeds, args.total_timesteps, extra)
            runs = run_sweep(config, out, workers=args.workers)
            for run_id, status in sorted(runs.items()):
                run_dir = out / "runs" / run_id
                done = status["status"] == "done"
                ret = plots.final_return(run_dir, args.final_window) if done else float("nan")
                final = json.loads((run_dir / "final_eval.json").read_text()) if done else {}
                rows.append(
                    {
                        "env_id": args.env_id,
                        "gamma": gamma,
                        "lambda": lam,
                        "seed": run_id.rsplit("seed", 1)[1],
                        "status": status["status"],
                        "steps": final.get("step", ""),
                        "final_return": ret,
                        "final_eval_return": final.get("eval_return_mean", float("nan")),
                        # seconds collecting and updating (the ledger states the total)
                        "train_s": plots.train_seconds(run_dir) if done else float("nan"),
                    }
                )
                print(
                    f"gamma {gamma} lambda {lam} {run_id}: {status['status']} {ret:.1f}", flush=True
                )

    args.out.mkdir(parents=True, exist_ok=True)
    with (args.out / f"{args.name}.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    grid = np.full((len(gammas), len(lambdas)), np.nan)
    for i, gamma in enumerate(gammas):
        for j, lam in enumerate(lambdas):
            vals = [r["final_return"] for r in rows if r["gamma"] == gamma and r["lambda"] == lam]
            grid[i, j] = np.nanmean(vals) if np.isfinite(vals).any() else np.nan

    import matplotlib.pyplot as plt

    with plt.rc_context(plots.STYLE):
        fig, ax = plt.subplots(figsize=(1.1 * len(lambdas) + 1.5, 0.7 * len(gammas) + 1.5))
        ax.grid(False)
        im = ax.imshow(grid, cmap="viridis", aspect="auto")
        ax.set_xticks(range(len(lambdas)), [str(x) for x in lambdas])
        ax.set_yticks(range(len(gammas)), [str(x) for x in gammas])
        ax.set_xlabel("lambda")
        ax.set_ylabel("gamma")
        for i in range(len(gammas)):
            for j in range(len(lambdas)):
                ax.text(j, i, f"{grid[i, j]:.0f}", ha="center", va="center", color="w", fontsize=8)
        fig.colorbar(im, ax=ax, label="final training return")
        ax.set_title(
            f"GAE paper algorithm, {args.env_id}, {args.total_timesteps:,} steps, "
            f"mean of {args.seeds} seeds",
            fontsize=9,
        )
        fig.tight_layout()
        fig.savefig(args.out / f"{args.name}.png")
    cmd = " ".join(argv if argv is not None else sys.argv[1:])
    print(
        f"wrote {args.out}/{args.name}.png and .csv; command: python "
        f"paper_figures/gae_lambda_gamma.py {cmd}"
    )


if __name__ == "__main__":
    main()
