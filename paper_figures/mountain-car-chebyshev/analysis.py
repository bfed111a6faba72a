"""Mountain Car's optimality gap: paper_figures/mountain_car.py trains both arms and steps each
final policy from the start states against the reference controller; `table` reads its
mountain_car.csv (one row per policy and seed) into the results table.

`python -m paper_figures run mountain-car-chebyshev` trains the 16 runs (minutes per run on one
core); its toy size is one seed of 512 env steps per arm on a 10 x 10 grid from 2 start states.
"""

from __future__ import annotations

import csv
from pathlib import Path

from paper_figures.lab.spec import Experiment


def table(exp: Experiment, source: Path) -> list[dict]:
    """One row per run: the arm is the script's policy column."""
    env = next(iter(exp.envs))
    with (Path(source) / "mountain_car.csv").open(newline="") as f:
        return [{"env": env, "arm": r["policy"], "seed": int(r["seed"]),
                 **{m: r[m] for m in exp.metrics}} for r in csv.DictReader(f)]  # fmt: skip
