"""Mountain Car's optimality gap: paper_figures/mountain_car.py trains both arms and steps each
final policy from the start states against the reference controller; `table` reads its
mountain_car.csv (one row per policy and seed) into the results table.

`python -m paper_figures run mountain-car-chebyshev` trains the 16 runs (minutes per run on one
core); its toy size is one seed of 512 env steps per arm on a 10 x 10 grid from 2 start states.
"""

from __future__ import annotations

from pathlib import Path

from controlrl.experiment import read_rows


def table(exp, source: Path) -> list[dict]:
    """One row per run: the arm is the script's policy column."""
    env = next(iter(exp.envs))
    return [{"env": env, "arm": r["policy"], "seed": int(r["seed"]),
             **{m: r[m] for m in exp.metrics}}
            for r in read_rows(Path(source) / "mountain_car.csv")]  # fmt: skip
