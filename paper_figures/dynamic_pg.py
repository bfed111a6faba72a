"""Dynamic (backward-in-time) vs simultaneous softmax policy gradient with exact gradients on a
finite-horizon chain (Klein, Weissmann, Doering, ICLR 2024, "Beyond Stationarity: Convergence
Analysis of Stochastic Softmax Policy Gradient Methods": dynamic PG's bounds are better because
it uses the finite-horizon structure).

Chain of 5 states (theory.mdp.chain: slip 0.1, reward 1 at the right end, 0.1 at the left end),
horizons H = 2 .. 16, start distribution uniform, logits from 0, the same step size for both
methods (two step sizes: the iteration counts scale as 1 / lr in this regime, the ratio does not).
Stopping rule: eps-optimal at every epoch and state (eps = 0.01); dynamic PG stops each epoch at
eps / H, which guarantees it. An iteration is one exact gradient step (all epochs at once for
simultaneous PG, one epoch for dynamic PG). Exact and deterministic: no seeds.

    python -m paper_figures run dynamic-pg        # the declared experiment's table
    python paper_figures/dynamic_pg.py --out DIR  # -> DIR/dynamic_pg.csv
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from controlrl.experiment import write_rows
from envs.errors import ArgumentParser  # the one-line parser, without torch
from theory import dynamic_pg as dpg
from theory.mdp import chain

ROOT = Path(__file__).resolve().parents[1]
HORIZONS = (2, 4, 6, 8, 10, 12, 14, 16)
LRS = (4.0, 16.0)
EPS = 0.01


def rows(horizons=HORIZONS, lrs=LRS, eps: float = EPS) -> list[dict]:
    """One row per (H, lr): both methods' iterations, their ratio and final optimality gaps."""
    out = []
    for lr in lrs:
        for H in horizons:
            mdp = chain(n=5, slip=0.1, horizon=H, small=0.1)
            mu = np.full(mdp.S, 1.0 / mdp.S)
            n_sim, th_sim = dpg.simultaneous_pg(mdp, mu, lr, eps)
            n_dyn, th_dyn = dpg.dynamic_pg(mdp, mu, lr, eps)
            out.append(
                {
                    "H": H,
                    "lr": lr,
                    "eps": eps,
                    "simultaneous_iterations": n_sim,
                    "dynamic_iterations": n_dyn,
                    "ratio": n_sim / n_dyn,
                    "simultaneous_gap": dpg.optimality_gap(mdp, dpg.softmax(th_sim)),
                    "dynamic_gap": dpg.optimality_gap(mdp, dpg.softmax(th_dyn)),
                }
            )
            print(f"lr {lr:g} H {H}: simultaneous {n_sim}, dynamic {n_dyn}", flush=True)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "paper_figures" / "out")
    parser.add_argument("--toy", action="store_true", help="H in {2, 4}, one step size")
    args = parser.parse_args(argv)
    table = rows((2, 4), (16.0,)) if args.toy else rows()
    args.out.mkdir(parents=True, exist_ok=True)
    write_rows(args.out / "dynamic_pg.csv", table)
    print("python paper_figures/dynamic_pg.py " + " ".join(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    main()
