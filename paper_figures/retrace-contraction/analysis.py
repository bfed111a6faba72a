"""The contraction factor of the exact off-policy operators (theory/retrace.py) against lambda and
against the pi/mu mismatch, for Retrace, importance sampling, tree backup and uncorrected
Q(lambda), over random 5-state, 3-action MDPs: results/checks.csv (per sweep, kind and grid point
the mean and max factor over the MDPs) and, at full size, results/figure.png.

`python -m paper_figures run retrace-contraction` takes seconds (the toy: toy_n_mdps, toy_grid).
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from paper_figures.lab import protocol
from paper_figures.lab.spec import Experiment
from theory.mdp import random_mdp, random_policy
from theory.retrace import contraction_factor, operator, traces

KINDS = {
    "retrace": "Retrace",
    "is": "importance sampling",
    "tree_backup": "tree backup",
    "q_lambda": r"Q($\lambda$), uncorrected",
}
FIELDS = ["sweep", "kind", "x", "mean_factor", "max_factor", "n_mdps", "gamma"]


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


def run(exp: Experiment, toy: bool, target: Path) -> None:
    """Both sweeps into the table; at full size the figure beside it."""
    cfg = exp.extra
    n = cfg["toy_n_mdps"] if toy else cfg["n_mdps"]
    m = cfg["toy_grid"] if toy else cfg["grid"]
    grid = np.linspace(0, 1, m)
    rows = factors(n, cfg["gamma"], grid, grid)
    with target.open("w", newline="") as f:
        w = csv.writer(f, lineterminator="\r\n")
        w.writerow(FIELDS)
        w.writerows(
            [s, k, f"{x:.4f}", f"{a:.6g}", f"{b:.6g}", n, cfg["gamma"]] for s, k, x, a, b in rows
        )
    if not toy:
        draw(rows, cfg["gamma"], target.parent / "figure.png")


def draw(rows: list[tuple], gamma: float, target: Path) -> None:
    """Left: the mean factor against lambda at alpha 0.5; right: against alpha at lambda 1."""
    from controlrl.plots import plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, sweep, xlabel in [
        (axes[0], "lambda", r"$\lambda$ (mismatch $\alpha$ = 0.5)"),
        (axes[1], "mismatch", r"mismatch $\alpha$ ($\lambda$ = 1)"),
    ]:
        for kind, label in KINDS.items():
            sel = [r for r in rows if r[0] == sweep and r[1] == kind]
            ax.plot([r[2] for r in sel], [r[3] for r in sel], marker="o", ms=3, label=label)
        ax.axhline(gamma, color="k", ls="--", lw=1, label=r"$\gamma$")
        ax.axhline(1.0, color="grey", ls=":", lw=1)
        ax.set_yscale("symlog", linthresh=1.0)
        top = max(r[3] for r in rows)
        ticks = [t for t in (0, 0.25, 0.5, 0.75, 1, 2, 5, 10, 20, 50) if t <= top]
        ax.set_yticks(ticks, [f"{t:g}" for t in ticks])
        ax.set_xlabel(xlabel)
        ax.legend(fontsize=8)
    axes[0].set_ylabel(r"contraction factor $\|M\|_\infty$ (mean over MDPs)")
    fig.tight_layout()
    fig.savefig(target, dpi=80)
    plt.close(fig)


def judge(exp: Experiment, rows: list[dict]) -> dict[str, protocol.Judgement]:
    """E4: holds when Retrace's worst factor over both sweeps is at most gamma and uncorrected
    Q(lambda)'s worst exceeds 1; does not hold otherwise."""
    worst: dict[str, float] = {}
    for r in rows:
        worst[r["kind"]] = max(worst.get(r["kind"], 0.0), float(r["max_factor"]))
    gamma = float(rows[0]["gamma"])
    safe = worst["retrace"] <= gamma + 1e-9 and worst["q_lambda"] > 1
    j = protocol.Judgement("exact", n=f"{rows[0]['n_mdps']} MDPs")
    j.verdict = protocol.HOLDS if safe else protocol.FAILS
    j.text = (
        f"worst factor over the sweeps: retrace {worst['retrace']:.3g} (gamma {gamma:g}); tree "
        f"backup {worst['tree_backup']:.3g}; IS {worst['is']:.3g}; uncorrected "
        f"{worst['q_lambda']:.3g}"
    )
    return {"E4": j}
