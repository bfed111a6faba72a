"""The results table of paper_figures/hard_starts.py: its hard_starts.csv holds one row per
(arm, seed) on SparseMountainCar-v0."""

from __future__ import annotations

import csv
from pathlib import Path

from paper_figures.lab.spec import Experiment


def table(exp: Experiment, source: Path) -> list[dict]:
    with (Path(source) / "hard_starts.csv").open(newline="") as f:
        return [{"env": "SparseMountainCar-v0", **r} for r in csv.DictReader(f)]
