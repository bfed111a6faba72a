"""T-REG4: paper_figures/dynamic_pg.py counts both methods' iterations to eps-optimality per step
size and horizon (results/checks.csv, as the script writes it). The claim holds, at the larger
step size, when dynamic PG needs more iterations at the shortest horizon and fewer at the
longest, the gap is largest at the longest horizon, and every exact test of T-REG4 passes (their
outcomes are theory-statements' table, which runs them); it does not hold otherwise.

`python -m paper_figures run dynamic-pg` takes seconds to a minute; its toy size is the script's
--toy (H 2 and 4, one step size), too short a horizon for dynamic PG to need fewer iterations.
"""

from __future__ import annotations

import importlib
import shutil
import tempfile
from pathlib import Path

from controlrl.experiment import read_rows
from paper_figures.lab import protocol
from paper_figures.lab.spec import FIGURES, Experiment

TESTS = FIGURES / "theory-statements" / "results" / "checks.csv"


def run(exp: Experiment, toy: bool, target: Path) -> None:
    """The script's table (its --toy at toy size) as results/checks.csv."""
    module = importlib.import_module("paper_figures.dynamic_pg")
    with tempfile.TemporaryDirectory() as tmp:
        module.main(["--out", tmp] + ["--toy"] * toy)
        shutil.copyfile(Path(tmp) / "dynamic_pg.csv", target)


def tests() -> tuple[int, int]:
    """(passed, failed) of T-REG4's exact tests in theory-statements' table."""
    row = next(r for r in read_rows(TESTS) if r["statement"] == "T-REG4")
    return int(row["passed"]), int(row["failed"])


def judge(exp: Experiment, rows: list[dict]) -> dict[str, protocol.Judgement]:
    lr = max(float(r["lr"]) for r in rows)
    sub = sorted((r for r in rows if float(r["lr"]) == lr), key=lambda r: int(r["H"]))
    H = [int(r["H"]) for r in sub]
    ratio = [float(r["ratio"]) for r in sub]
    gap = [int(r["simultaneous_iterations"]) - int(r["dynamic_iterations"]) for r in sub]
    passed, failed = tests()
    holds = failed == 0 and ratio[0] < 1 < ratio[-1] and gap[-1] == max(gap)
    j = protocol.Judgement("exact", n=f"{len(H)} horizons")
    j.verdict = protocol.HOLDS if holds else protocol.FAILS
    series = "; ".join(
        f"step size {x:g}: " + ", ".join(f"{float(r['ratio']):.2f}" for r in sorted(
            (r for r in rows if float(r["lr"]) == x), key=lambda r: int(r["H"])))
        for x in sorted({float(r["lr"]) for r in rows}))  # fmt: skip
    j.text = (f"simultaneous / dynamic iterations at H = {', '.join(map(str, H))}, {series}; at "
              f"step size {lr:g} simultaneous minus dynamic iterations {gap[0]:,} at H = {H[0]}, "
              f"{gap[-1]:,} at H = {H[-1]} (largest: {max(gap):,}); {passed} of "
              f"{passed + failed} exact tests of T-REG4 pass")  # fmt: skip
    return {"T-REG4": j}
