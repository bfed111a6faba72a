"""The single-sample token-reversal runs: paper_figures/tpo_repro.py --part single-sample writes
tpo_repro_runs.csv (per cell and seed the error 1 - the exact-match rate averaged over the last
10 updates); `table` reads the declared cells' rows, success = 1 - that error."""

from __future__ import annotations

import csv
from pathlib import Path

METRIC = "last10:train/episode_return"


def table(exp, source: Path) -> list[dict]:
    with open(Path(source) / "tpo_repro_runs.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    out = []
    for r in rows:
        env = f"bandit:{r['task']}"
        if r["method"] in exp.arms and env in exp.arms[r["method"]].envs:
            out.append({"env": env, "arm": r["method"], "seed": int(r["seed"]),
                        METRIC: 1 - float(r["final_error"])})  # fmt: skip
    return out
