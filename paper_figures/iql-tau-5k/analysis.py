"""The script's runs into the results table: paper_figures/iql_tau.py writes one row per run to
<out>/<name>.csv, <name> the declaration's --name (its sweeps, and the toy's datasets, under
<out>/sweeps)."""

from paper_figures.iql_tau import run_script, table

__all__ = ["run_script", "table"]
