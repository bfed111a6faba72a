"""The results table of paper_figures/knapsack_allocation.py: its knapsack_allocation.csv holds
one row per (Adam step, arm, seed); the step is the env ("adam-<lr>")."""

from __future__ import annotations

import csv
from pathlib import Path

from paper_figures.lab.spec import Experiment


def table(exp: Experiment, source: Path) -> list[dict]:
    with (Path(source) / "knapsack_allocation.csv").open(newline="") as f:
        return [{"env": f"adam-{float(r['lr']):g}", **r} for r in csv.DictReader(f)]
