"""Is the regret of tabular policy optimization polylogarithmic when losses are stochastic?
(Catalogue statement T-REG1, after the best-of-both-worlds PO papers.) The learner is the
testbed's optimistic PO (algos/optimistic_po.py, Shani et al. 2020, c_b = 0.1), not the papers'
Tsallis-regularised learner; the instance is a random 5x3x5 MDP with Bernoulli rewards. Per seed
the pseudo-regret R(k) on a log-spaced grid over [K/64, K] is fitted by least squares as
a + b log k and as a + c sqrt(k), with the top octave's log-log slope beside them.

    python -m paper_figures run regret-polylog   # the declared experiment: K = 2^14, 30 seeds
    python paper_figures/regret_polylog.py --toy --out DIR

Writes regret_polylog.csv (one row per seed: both fits, their RMSE, the top-octave slope) and
regret_polylog_curves.csv (seed, k, R(k) on the grid).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from algos.optimistic_po import Args as RunArgs
from algos.optimistic_po import run
from controlrl.experiment import write_rows
from envs.errors import ArgumentParser  # the one-line parser
from theory.regret import fit_log, fit_sqrt, log_grid, octave_slopes

ROOT = Path(__file__).resolve().parents[1]


def seed_row(seed: int, K: int, c_b: float) -> tuple[dict, list[dict]]:
    """One run: its fits and its curve on the grid."""
    reg = run(RunArgs(episodes=K, seed=seed, progress=False, c_b=c_b))["regret"]
    grid = log_grid(K // 64, K)
    y = reg[grid - 1]
    a_log, b_log, _ = fit_log(grid, y)
    rmse_log = float(np.sqrt(np.mean((y - a_log - b_log * np.log(grid)) ** 2)))
    a_sq, c_sq, rmse_sq = fit_sqrt(grid, y)
    row = dict(seed=seed, K=K, c_b=c_b, k_min=int(grid[0]), a_log=a_log, b_log=b_log)
    row |= dict(rmse_log=rmse_log, a_sqrt=a_sq, c_sqrt=c_sq, rmse_sqrt=rmse_sq)
    row |= dict(top_octave_slope=float(octave_slopes(reg, K // 2, K)[-1]), regret_K=float(reg[-1]))
    return row, [{"seed": seed, "k": int(k), "regret": float(v)} for k, v in zip(grid, y)]


def main(argv: list[str] | None = None) -> None:
    parser = ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "paper_figures" / "out")
    parser.add_argument("--log2-k", type=int, default=14)
    parser.add_argument("--seeds", type=int, default=30)
    parser.add_argument("--c-b", type=float, default=0.1)
    parser.add_argument("--toy", action="store_true", help="K = 2^9, 2 seeds")
    args = parser.parse_args(argv)
    K, seeds = (2**9, 2) if args.toy else (2**args.log2_k, args.seeds)
    rows, curves = [], []
    for seed in range(seeds):
        row, curve = seed_row(seed, K, args.c_b)
        rows.append(row)
        curves += curve
        print(
            f"seed {seed}: rmse log {row['rmse_log']:.3g}, sqrt {row['rmse_sqrt']:.3g}", flush=True
        )
    args.out.mkdir(parents=True, exist_ok=True)
    write_rows(args.out / "regret_polylog.csv", rows)
    write_rows(args.out / "regret_polylog_curves.csv", curves)
    print(
        "python paper_figures/regret_polylog.py " + " ".join(sys.argv[1:] if argv is None else argv)
    )


if __name__ == "__main__":
    main()
