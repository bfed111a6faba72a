"""The results table of paper_figures/hard_starts.py: its hard_starts.csv holds one row per
(arm, seed) on SparseMountainCar-v0."""

from __future__ import annotations

from pathlib import Path

from controlrl.experiment import read_rows


def table(exp, source: Path) -> list[dict]:
    rows = read_rows(Path(source) / "hard_starts.csv")
    return [{"env": "SparseMountainCar-v0", **r} for r in rows]
