"""Ledger rows of E14 (gradient subspaces of PPO, paper_figures/gradient_subspace.py): the
gradient's share of squared norm in the top-k Hessian eigenspace, and the overlap of that
eigenspace 5 iterations apart, each against the random-subspace baseline k/P, paired over seeds.
The criteria were fixed in gradient_subspace.py's docstring before its run."""

from __future__ import annotations

import numpy as np

from controlrl import stats
from paper_figures.claims import Row, paired_verdict

PAPER = "Identifying Policy Gradient Subspaces (Schneider et al., ICLR 2024)"
DT = 5  # iterations between the two eigenspaces of the overlap criterion
PRIMARY_K = "1% of P"


def _per_seed(rows, net: str, kind: str, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Per seed: the mean measured value and the mean of (value - k/P) over its rows."""
    seeds = sorted({r["seed"] for r in rows}, key=int)
    value, excess = [], []
    for s in seeds:
        mine = [
            r
            for r in rows
            if r["seed"] == s and r["net"] == net and r["kind"] == kind and int(r["k"]) == k
            and (kind == "fraction" or int(r["t2"]) - int(r["t1"]) == DT)
        ]  # fmt: skip
        if not mine:
            raise ValueError(f"gradient_subspace.csv: no {net} {kind} rows for seed {s}, k {k}")
        v = np.array([float(r["value"]) for r in mine])
        base = np.array([float(r["baseline"]) for r in mine])
        value.append(v.mean())
        excess.append((v - base).mean())
    return np.array(value), np.array(excess)


def rows(read) -> list[Row]:
    """The four E14 rows (actor and critic; fraction and overlap) at k = 1% of the parameters."""
    data = read("gradient_subspace.csv")
    out = []
    for net in ("actor", "critic"):
        p = int(next(r["P"] for r in data if r["net"] == net))
        k = min(int(r["k"]) for r in data if r["net"] == net)  # the 1% k (the other is 5%)
        iters = sorted({int(r["t1"]) for r in data if r["kind"] == "fraction"})
        seeds = len({r["seed"] for r in data})
        for kind, claim, metric in (
            (
                "fraction",
                "policy gradients lie in a low-dimensional subspace: the top-k eigenspace of the "
                "loss Hessian holds far more of the gradient's squared norm than a random one",
                f"norm(P_k g)^2 / norm(g)^2 minus k/P (random k-subspace), per seed mean over "
                f"iterations {', '.join(map(str, iters))}",
            ),
            (
                "overlap",
                "the gradient subspace changes slowly: the top-k Hessian eigenspaces of nearby "
                "iterations overlap",
                f"(1/k) sum norm(P_k(t+{DT}) v_i(t))^2 minus k/P (random subspaces), per seed mean "
                f"over t",
            ),
        ):
            value, excess = _per_seed(data, net, kind, k)
            stat, verdict, detectable = paired_verdict(excess)
            mean = stats.summarize(value)
            out.append(
                Row(
                    f"E14-{net}-{kind}",
                    PAPER,
                    claim + f" ({net} of PPO)",
                    "PPO and SAC on MuJoCo/Box2D tasks, 64 x 64 networks, k = 100, top "
                    "eigenvectors by Lanczos, long runs",
                    f"ppo.py (CleanRL defaults) on Pendulum-v1, 16 x 16 tanh {net} "
                    f"(P = {p}), exact Hessian of ppo.py's {net} loss on the whole rollout "
                    f"batch, k = {k} ({PRIMARY_K}; 5% also in the CSV), top by absolute eigenvalue",
                    f"{len(iters) and max(iters)} iterations x 2048 steps per seed (paper: up "
                    "to millions of steps)",
                    str(seeds),
                    metric,
                    f"{kind} {mean.text('.3g')} vs k/P = {k / p:.3g}; {stat}",
                    verdict,
                    detectable,
                    "gradient_subspace.csv",
                )
            )
    return out
