"""The single-sample token-reversal runs: paper_figures/tpo_repro.py --part single-sample writes
tpo_repro_runs.csv (per cell and seed the error 1 - the exact-match rate averaged over the last
10 updates); `table` reads the declared cells' rows, success = 1 - that error."""

from __future__ import annotations

from pathlib import Path

from controlrl.experiment import read_rows

METRIC = "last10:train/episode_return"


def table(exp, source: Path) -> list[dict]:
    out = []
    for r in read_rows(Path(source) / "tpo_repro_runs.csv"):
        env = f"bandit:{r['task']}"
        if r["method"] in exp.arms and env in exp.arms[r["method"]].envs:
            out.append({"env": env, "arm": r["method"], "seed": int(r["seed"]),
                        METRIC: 1 - float(r["final_error"])})  # fmt: skip
    return out
