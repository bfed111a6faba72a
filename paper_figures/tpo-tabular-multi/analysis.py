"""The multi-context tabular runs: paper_figures/tpo_repro.py --part multi writes
tpo_repro_tabular.csv (one row per method and seed), which `table` reads into the results table."""

from paper_figures.tpo_repro import table

__all__ = ["table"]
