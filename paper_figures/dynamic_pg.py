"""Dynamic (backward-in-time) vs simultaneous softmax policy gradient with exact gradients on a
finite-horizon chain (Klein, Weissmann, Doering, ICLR 2024, "Beyond Stationarity: Convergence
Analysis of Stochastic Softmax Policy Gradient Methods"): iterations to eps-optimality at every
epoch and state (dynamic PG stops each epoch at eps / H) on a 5-state chain (theory.mdp.chain),
per horizon H and step size, from uniform logits. Exact and deterministic: no seeds.

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
            row = dict(H=H, lr=lr, eps=eps, simultaneous_iterations=n_sim, dynamic_iterations=n_dyn)
            row |= dict(ratio=n_sim / n_dyn)
            row |= dict(simultaneous_gap=dpg.optimality_gap(mdp, dpg.softmax(th_sim)))
            out.append(row | dict(dynamic_gap=dpg.optimality_gap(mdp, dpg.softmax(th_dyn))))
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
