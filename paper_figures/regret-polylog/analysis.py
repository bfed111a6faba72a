"""T-REG1: paper_figures/regret_polylog.py runs optimistic PO per seed and fits each regret curve
two ways; `table` gives each (fit, seed) a row: log(R(K) / the fit's RMSE), the RMSE, its share
of R(K), R(K) and the run's top-octave log-log slope. The script's seed k is the table's k + 1.

`python -m paper_figures run regret-polylog` takes a few minutes on one core (the toy: --toy).
"""

from __future__ import annotations

import math
from pathlib import Path

from controlrl.experiment import read_rows
from paper_figures.lab.spec import Experiment


def table(exp: Experiment, source: Path) -> list[dict]:
    """Two rows per seed, one per fitted curve."""
    env = next(iter(exp.envs))
    out = []
    for r in read_rows(Path(source) / "regret_polylog.csv"):
        regret = float(r["regret_K"])
        for arm in exp.arms:
            rmse = float(r[f"rmse_{arm}"])
            out.append({"env": env, "arm": arm, "seed": int(r["seed"]) + 1,
                        "fit": math.log(regret / rmse), "rmse": rmse,
                        "rmse_share": rmse / regret, "regret_K": regret,
                        "top_octave_slope": r["top_octave_slope"]})  # fmt: skip
    return out
