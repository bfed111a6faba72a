"""The results table of paper_figures/dppo_finetune.py's runs: its <name>.csv, one row per
fine-tuning run. The toy runs nothing: it redraws the script's figure (--replot, its fast path)
from dppo-finetune-100k/toy/, the tiny committed fixture both budgets share (the CSVs of
`dppo_finetune.py --toy --train` on a 200-step random Hopper-v5 dataset, one seed per policy), as
that toy's four runs and two clone evaluations take tens of seconds."""

from pathlib import Path

from paper_figures import dppo_finetune
from paper_figures.lab import runner


def run_script(exp, toy: bool, out: Path) -> None:
    fixture = Path(__file__).parents[1] / "dppo-finetune-100k" / "toy" if toy else None
    dppo_finetune.lab_run(runner.script_argv(exp, toy, out), fixture)


def table(exp, source: Path) -> list[dict]:
    return dppo_finetune.lab_table(exp.flags, source)
