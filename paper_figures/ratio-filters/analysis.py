"""The ratio-filter runs as the results table: paper_figures/ratio_filters.py writes one row per
run (kind, staleness, seed) to ratio_filters.csv; a run's env here is its staleness k."""

from __future__ import annotations

from pathlib import Path

from controlrl.experiment import read_rows


def table(exp, source) -> list[dict]:
    """One dict per run: env k<staleness>, arm the ratio kind, the declared metrics."""
    rows = read_rows(Path(source) / "ratio_filters.csv")
    return [{"env": f"k{r['staleness']}", "arm": r["kind"], **r} for r in rows]
