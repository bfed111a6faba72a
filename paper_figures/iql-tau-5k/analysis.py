"""The script's runs into the results table: paper_figures/iql_tau.py writes one row per run to
<out>/iql_tau.csv (its sweeps, and the toy's datasets, under <out>/sweeps)."""

from __future__ import annotations

from pathlib import Path

from paper_figures import iql_tau
from paper_figures.lab import runner


def run_script(exp, toy: bool, out: Path) -> None:
    iql_tau.run_lab(runner.script_argv(exp, toy, out), out)


def table(exp, source: Path) -> list[dict]:
    return iql_tau.lab_table(Path(source) / "iql_tau.csv")
