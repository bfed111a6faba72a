"""The results table of paper_figures/rarl_robustness.py: its rarl_robustness.csv holds one row
per (variant, seed, mass scale, damping scale); per (variant, seed) grid_return is the mean
return over every perturbation and nominal_return the return at mass x 1 and damping x 1."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from controlrl.experiment import read_rows


def table(exp, source: Path) -> list[dict]:
    cells = read_rows(Path(source) / "rarl_robustness.csv")
    out = []
    for arm, seed in dict.fromkeys((r["variant"], int(r["seed"])) for r in cells):
        mine = [r for r in cells if r["variant"] == arm and int(r["seed"]) == seed]
        nominal = [float(r["mean_return"]) for r in mine
                   if float(r["mass_scale"]) == 1 and float(r["friction_scale"]) == 1]  # fmt: skip
        grid = np.mean([float(r["mean_return"]) for r in mine])
        out.append({"env": "InvertedPendulum-v5", "arm": arm, "seed": seed,
                    "grid_return": grid, "nominal_return": nominal[0]})  # fmt: skip
    return out
