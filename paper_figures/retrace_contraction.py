"""Contraction factor of the exact off-policy operators (theory/retrace.py) vs lambda and vs the
pi/mu mismatch, for Retrace, importance sampling, tree backup and uncorrected Q(lambda) (Munos,
Stepleton, Harutyunyan, Bellemare 2016, "Safe and Efficient Off-Policy Reinforcement Learning":
Retrace contracts for any mu, with factor at most gamma).

The factor is sup_Q ||R Q - Q^pi|| / ||Q - Q^pi|| (max absolute row sum of the operator matrix),
averaged (and maximised) over random 5-state, 3-action MDPs with gamma = 0.9. Left: factor vs
lambda at mismatch alpha = 0.5; right: factor vs alpha at lambda = 1, where
mu = (1 - alpha) pi + alpha nu for an independent random policy nu. Writes
retrace_contraction.png and retrace_contraction.csv to --out.

    python paper_figures/retrace_contraction.py            # full: 50 MDPs
    python paper_figures/retrace_contraction.py --toy --out runs/toy/retrace_contraction
"""

from __future__ import annotations

import csv
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from controlrl.cli import cli
from theory.mdp import random_mdp, random_policy
from theory.retrace import contraction_factor, operator, traces

KINDS = {
    "retrace": "Retrace",
    "is": "importance sampling",
    "tree_backup": "tree backup",
    "q_lambda": r"Q($\lambda$), uncorrected",
}


@dataclass
class Args:
    out: str = "paper_figures/out"
    """output directory for the PNG and CSV"""
    toy: bool = False
    """tiny run (3 MDPs, 5 grid points) for tests"""
    n_mdps: int = 50
    """random MDPs averaged over (ignored with --toy)"""
    gamma: float = 0.9
    """discount"""


def factors(n_mdps: int, gamma: float, lams: np.ndarray, alphas: np.ndarray) -> list[tuple]:
    """Rows (sweep, kind, x, mean factor, max factor) over n_mdps random instances."""
    vs_lam = np.zeros((len(KINDS), len(lams), n_mdps))
    vs_alpha = np.zeros((len(KINDS), len(alphas), n_mdps))
    for i in range(n_mdps):
        rng = np.random.default_rng(i)
        mdp = random_mdp(5, 3, rng, gamma=gamma)
        pi, nu = random_policy(mdp, rng), random_policy(mdp, rng)
        for k, kind in enumerate(KINDS):
            mu = 0.5 * pi + 0.5 * nu
            for j, lam in enumerate(lams):
                vs_lam[k, j, i] = contraction_factor(
                    operator(mdp, pi, mu, traces(pi, mu, lam, kind))[0]
                )
            for j, a in enumerate(alphas):
                mu = (1 - a) * pi + a * nu
                vs_alpha[k, j, i] = contraction_factor(
                    operator(mdp, pi, mu, traces(pi, mu, 1.0, kind))[0]
                )
    rows = []
    for k, kind in enumerate(KINDS):
        rows += [("lambda", kind, x, v.mean(), v.max()) for x, v in zip(lams, vs_lam[k])]
        rows += [("mismatch", kind, x, v.mean(), v.max()) for x, v in zip(alphas, vs_alpha[k])]
    return rows


def main(args: Args) -> None:
    """Compute the sweeps, write CSV and PNG, print the command."""
    n = 3 if args.toy else args.n_mdps
    m = 5 if args.toy else 21
    lams, alphas = np.linspace(0, 1, m), np.linspace(0, 1, m)
    rows = factors(n, args.gamma, lams, alphas)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "retrace_contraction.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["sweep", "kind", "x", "mean_factor", "max_factor", "n_mdps", "gamma"])
        w.writerows(
            [s, k, f"{x:.4f}", f"{a:.6g}", f"{b:.6g}", n, args.gamma] for s, k, x, a, b in rows
        )
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, sweep, xlabel in [
        (axes[0], "lambda", r"$\lambda$ (mismatch $\alpha$ = 0.5)"),
        (axes[1], "mismatch", r"mismatch $\alpha$ ($\lambda$ = 1)"),
    ]:
        for kind, label in KINDS.items():
            sel = [r for r in rows if r[0] == sweep and r[1] == kind]
            ax.plot([r[2] for r in sel], [r[3] for r in sel], marker="o", ms=3, label=label)
        ax.axhline(args.gamma, color="k", ls="--", lw=1, label=r"$\gamma$")
        ax.axhline(1.0, color="grey", ls=":", lw=1)
        ax.set_yscale("symlog", linthresh=1.0)
        ticks = [
            t for t in (0, 0.25, 0.5, 0.75, 1, 2, 5, 10, 20, 50) if t <= max(r[3] for r in rows)
        ]
        ax.set_yticks(ticks, [f"{t:g}" for t in ticks])
        ax.set_xlabel(xlabel)
        ax.legend(fontsize=8)
    axes[0].set_ylabel(r"contraction factor $\|M\|_\infty$ (mean over MDPs)")
    fig.tight_layout()
    fig.savefig(out / "retrace_contraction.png", dpi=80)
    plt.close(fig)
    print("made by: " + " ".join(shlex.quote(a) for a in ["python", *sys.argv]))


if __name__ == "__main__":
    main(cli(Args))
