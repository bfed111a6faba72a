"""The entropy mechanism on sampled steps: paper_figures/entropy_mechanism.py samples every row
(results/checks.csv: per bandit, update, batch size B and eta, the mean one-step entropy change
over batches with its 95% percentile-bootstrap CI, the covariance term's prediction and whether it
falls inside) and each claim is judged from those rows by the rule of the ledger row it replaces:

- Entropy-first-order: at the smallest eta, holds when the covariance term lies inside the CI in
  every row, does not hold otherwise;
- Entropy-sampled-sign: among natural PG's single-sample rows (B = 1), does not hold when a row's
  covariance term predicts a rise and the CI of the measured change lies wholly below 0, holds
  when no row does.

`python -m paper_figures run entropy-mechanism` resamples every row (minutes; the toy: --toy).
"""

from __future__ import annotations

from pathlib import Path

from paper_figures.lab import protocol, runner
from paper_figures.lab.spec import Experiment


def run(exp: Experiment, toy: bool, target: Path) -> None:
    """Sample every row with the script (the toy: its --toy) and write its CSV as the table."""
    runner.script_table("entropy_mechanism", toy, target)


def judge(exp: Experiment, rows: list[dict]) -> dict[str, protocol.Judgement]:
    """Both claims (a claim whose rows the table lacks is not judged)."""
    out = {}
    batches = f"{min((int(r['batches']) for r in rows), default=0)} batches each"
    smallest = min(float(r["eta"]) for r in rows)
    first = [r for r in rows if float(r["eta"]) == smallest]
    k = sum(r["first_inside"] == "1" for r in first)
    j = protocol.Judgement("exact", n=f"{len(first)} rows, {batches}")
    j.verdict = protocol.HOLDS if k == len(first) else protocol.FAILS
    j.text = (f"the covariance term inside the 95% bootstrap CI of the mean one-step entropy "
              f"change at eta {smallest:g} in {k} of {len(first)} rows; holds when inside in "
              "every row, does not hold otherwise")  # fmt: skip
    out["Entropy-first-order"] = j
    single = [r for r in rows if r["update"] == "natural" and r["B"] == "1"]
    if single:
        rev = [r for r in single if float(r["hi"]) < 0 < float(r["pred_first"])]
        j = protocol.Judgement("exact", n=f"{len(single)} rows, {batches}")
        j.verdict = protocol.FAILS if rev else protocol.HOLDS
        where = ""
        if rev:
            r = min(rev, key=lambda r: float(r["eta"]))
            where = (f" (from eta {float(r['eta']):.3g}; there, {r['bandit']}: measured "
                     f"{float(r['mean']):.4f} [{float(r['lo']):.4f}, {float(r['hi']):.4f}] "
                     f"against {float(r['pred_first']):+.4f})")  # fmt: skip
        j.text = (f"{len(rev)} of {len(single)} rows where the covariance term predicts a rise "
                  f"and the 95% CI of the measured change lies below 0{where}; does not hold "
                  "when any row does, holds when none does")  # fmt: skip
        out["Entropy-sampled-sign"] = j
    return out
