"""The results table of paper_figures/brax_locomotion.py's runs: its <name>.csv, one row per
(env, trainer, seed). The toy runs nothing: it redraws the script's figure (--plot-only, its fast
path) from brax-locomotion-410k/toy/, the tiny committed fixture both budgets share (the CSVs of
`brax_locomotion.py --toy`: one seed per trainer and env), as that toy's six processes each
compile a JAX trainer (minutes on 2 cores)."""

from pathlib import Path

from paper_figures import brax_locomotion
from paper_figures.lab import runner


def run_script(exp, toy: bool, out: Path) -> None:
    fixture = Path(__file__).parents[1] / "brax-locomotion-410k" / "toy" if toy else None
    brax_locomotion.lab_run(runner.script_argv(exp, toy, out), fixture)


def table(exp, source: Path) -> list[dict]:
    return brax_locomotion.lab_table(exp.flags, source)
