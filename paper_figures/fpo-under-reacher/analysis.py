"""The script's runs into the results table: paper_figures/fpo_underconditioned.py writes one row
per (algorithm, task, seed) to <out>/fpo_underconditioned.csv; an arm is an (algorithm, task)
cell. Its sweeps go under <out>/sweeps."""

from __future__ import annotations

from pathlib import Path

from controlrl.experiment import read_rows
from paper_figures import fpo_underconditioned
from paper_figures.lab import runner

GOAL = {"Reacher-v5": "shown", "ReacherPartialGoal-v5": "hidden"}


def run_script(exp, toy: bool, out: Path) -> None:
    argv = runner.script_argv(exp, toy, out) + ["--sweep-dir", str(Path(out) / "sweeps")]
    if fpo_underconditioned.main(argv):
        raise SystemExit(f"{exp.id}: fpo_underconditioned.py failed")


def table(exp, source: Path) -> list[dict]:
    rows = read_rows(Path(source) / "fpo_underconditioned.csv")
    return [r | {"env": "reacher", "arm": f"{r['algo']}-{GOAL[r['env']]}"} for r in rows]
