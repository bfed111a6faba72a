"""A claim that cannot run here: the declaration's [analysis] table gives, per claim, why; the
table (results/checks.csv) records it and the claim's verdict is "cannot run here" with that
reason as its text."""

from __future__ import annotations

import csv
from pathlib import Path

from paper_figures.lab import protocol
from paper_figures.lab.spec import Experiment

FIELDS = ["claim", "reason"]


def run(exp: Experiment, toy: bool, target: Path) -> None:
    """Write each claim's reason (nothing runs, at any size)."""
    with target.open("w", newline="") as f:
        writer = csv.DictWriter(f, FIELDS, lineterminator="\n")
        writer.writeheader()
        for claim in exp.claims:
            writer.writerow({"claim": claim.id, "reason": exp.extra[claim.id]})


def judge(exp: Experiment, rows: list[dict]) -> dict[str, protocol.Judgement]:
    """Every claim: cannot run here, the reason as its text."""
    out = {}
    for r in rows:
        j = protocol.Judgement("exact", n="not run")
        j.verdict, j.text = protocol.CANNOT, r["reason"]
        out[r["claim"]] = j
    return out
