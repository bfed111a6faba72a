"""The results table of paper_figures/brax_locomotion.py's runs: its <name>.csv, one row per
(env, trainer, seed). The toy runs nothing: it redraws the script's figure (--plot-only) from
brax-locomotion-410k/toy/, a tiny committed fixture (brax_locomotion.TOY_FIXTURE)."""

from paper_figures.brax_locomotion import run_script, table

__all__ = ["run_script", "table"]
