"""The results table of paper_figures/dppo_finetune.py's runs: its <name>.csv, one row per
fine-tuning run. The toy runs nothing: it redraws the script's figure (--replot) from
dppo-finetune-100k/toy/, a tiny committed fixture (dppo_finetune.TOY_FIXTURE)."""

from paper_figures.dppo_finetune import run_script, table

__all__ = ["run_script", "table"]
