"""The script's runs into the results table: paper_figures/fpo_multimodal.py writes one row per
bandit run (the final checkpoint's mode shares) to <out>/fpo_multimodal.csv; its sweeps go under
<out>/sweeps."""

from __future__ import annotations

from pathlib import Path

from controlrl.experiment import read_rows
from paper_figures import fpo_multimodal
from paper_figures.lab import runner


def run_script(exp, toy: bool, out: Path) -> None:
    argv = runner.script_argv(exp, toy, out) + ["--sweep-dir", str(Path(out) / "sweeps")]
    fpo_multimodal.main(argv)


def table(exp, source: Path) -> list[dict]:
    rows = read_rows(Path(source) / "fpo_multimodal.csv")
    return [{"env": "bandit:bimodal", "arm": r["algo"], **r} for r in rows]
