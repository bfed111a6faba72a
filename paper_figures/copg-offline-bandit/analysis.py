"""CoPG on an offline bandit: paper_figures/copg_bandit.py trains the three arms on the same
datasets and minibatches and writes copg_bandit.csv (one row per seed and method); `table` reads
it into the results table, the script's seed k as seed k + 1.

`python -m paper_figures run copg-offline-bandit` takes seconds to a minute (the toy: [toy] flags).
"""

from __future__ import annotations

from pathlib import Path

from controlrl.experiment import read_rows


def table(exp, source: Path) -> list[dict]:
    """One row per (method, seed)."""
    env = next(iter(exp.envs))
    return [{"env": env, "arm": r["method"], "seed": int(r["seed"]) + 1,
             **{m: r[m] for m in exp.metrics}}
            for r in read_rows(Path(source) / "copg_bandit.csv")]  # fmt: skip
