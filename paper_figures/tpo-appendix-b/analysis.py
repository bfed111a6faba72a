"""Appendix B's closed forms: paper_figures/tpo_repro.py --part appendix-b writes the largest
|autograd direction - beta(p)(e_y - pi)| of every method over the multi-context runs, and lam and
beta(0.1) from autograd (results/checks.csv). The claim holds when every deviation is within the
declared tolerance and every quoted number ([analysis] quoted) equals ours to the digits the
paper gives; it does not hold otherwise (the older row's rule)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from paper_figures import tpo_repro
from paper_figures.lab import protocol
from paper_figures.lab.spec import Experiment


def run(exp: Experiment, toy: bool, target: Path) -> None:
    """Rerun the checks (the toy: a few steps of two seeds) and keep their CSV as the table."""
    flags = exp.extra["flags"] + (exp.extra["toy_flags"] if toy else [])
    with tempfile.TemporaryDirectory() as tmp:
        tpo_repro.main([*flags, "--out", tmp])
        shutil.copyfile(Path(tmp) / "tpo_repro_exact.csv", target)


def judge(exp: Experiment, rows: list[dict]) -> dict[str, protocol.Judgement]:
    tol = exp.extra["tolerance"]
    devs = {r["method"]: float(r["ours"]) for r in rows if r["check"] == "max deviation"}
    ours = {(r["check"], r["method"]): float(r["ours"]) for r in rows}
    parts, matches = [], []
    for q in exp.extra["quoted"]:
        mine = ours[(q["check"], q["method"])]
        matches.append(round(mine, q["digits"]) == round(q["paper"], q["digits"]))
        parts.append(f"{q['method']} {q['check']}: ours {mine:.4g}, paper {q['paper']:g}")
    worst = max(devs.values())
    ok = all(matches) and worst < tol
    j = protocol.Judgement("exact", n=f"{len(devs)} methods, {len(parts)} quoted numbers")
    j.verdict = protocol.HOLDS if ok else protocol.FAILS
    j.text = (f"max |autograd - closed form| {worst:.2g} against the tolerance {tol:g} "
              f"({exp.extra['tolerance_why']}; " + ", ".join(f"{m} {v:.1g}" for m, v in
              devs.items()) + "); " + "; ".join(parts) + f"; {sum(matches)} of {len(matches)} "
              "quoted numbers equal ours to the paper's digits")  # fmt: skip
    return {"E11-TPO-appendixB": j}
