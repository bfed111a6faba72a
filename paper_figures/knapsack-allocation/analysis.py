"""The results table of paper_figures/knapsack_allocation.py: its knapsack_allocation.csv holds
one row per (Adam step, arm, seed); the step is the env ("adam-<lr>")."""

from __future__ import annotations

from pathlib import Path

from controlrl.experiment import read_rows


def table(exp, source: Path) -> list[dict]:
    rows = read_rows(Path(source) / "knapsack_allocation.csv")
    return [{"env": f"adam-{float(r['lr']):g}", **r} for r in rows]
