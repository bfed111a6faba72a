"""The gradient-subspace runs as the results table: paper_figures/gradient_subspace.py writes one
row per (seed, network, k, iteration or iteration pair); a run here is one seed's network, its
metrics the means over that seed's rows (the script's docstring defines the measures)."""

from __future__ import annotations

from pathlib import Path

from controlrl.experiment import read_rows

DT = 5  # iterations between the two eigenspaces of the overlap (the script's DT)
COLUMN = {"hessian": "value", "random": "random"}  # the arm's measure in the script's CSV


def _mean(rows: list[dict], column: str) -> float:
    if not rows:
        raise ValueError("gradient_subspace.csv: a run has no rows for a measure")
    return sum(float(r[column]) for r in rows) / len(rows)


def table(exp, source) -> list[dict]:
    """One dict per (network, arm, seed): fraction and overlap at k = 1% of P, the same at 5%."""
    data = read_rows(Path(source) / "gradient_subspace.csv")
    out = []
    for net in ("actor", "critic"):
        ks = sorted({int(r["k"]) for r in data if r["net"] == net})  # 1% and 5% of P
        for seed in sorted({int(r["seed"]) for r in data}):
            mine = [r for r in data if r["net"] == net and int(r["seed"]) == seed]
            for arm, column in COLUMN.items():
                row = {"env": net, "arm": arm, "seed": seed}
                for k, tag in zip(ks, ("", "_5pct")):
                    at_k = [r for r in mine if int(r["k"]) == k]
                    fraction = [r for r in at_k if r["kind"] == "fraction"]
                    overlap = [r for r in at_k if r["kind"] == "overlap"
                               and int(r["t2"]) - int(r["t1"]) == DT]  # fmt: skip
                    row[f"fraction{tag}"] = _mean(fraction, column)
                    row[f"overlap{tag}"] = _mean(overlap, column)
                out.append(row)
    return out
