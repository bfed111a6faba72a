"""The regret slopes of optimistic PO (paper_figures/regret.py): results/checks.csv (per setting
the log-log slope of the mean cumulative regret over [K/4, K], its interval and band), and at
full size results/regret.csv (mean regret at log-spaced K) and results/figure.png (regret.py's
three panels). A slope's claim holds when its 95% bootstrap interval lies at or below the
declared bar, does not hold when it lies above.

`python -m paper_figures run regret-optimistic-po` computes every setting of the figure at
K = 2^16 x 5 seeds (about an hour on one core); the toy computes the two claimed settings alone
at the toy's K (toy_log2_k) x its seeds.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import numpy as np

from controlrl.experiment import write_rows
from paper_figures import regret
from paper_figures.lab import protocol
from paper_figures.lab.spec import Experiment
from theory.regret import log_grid


def run(exp: Experiment, toy: bool, target: Path) -> None:
    """The slopes' table: at full size regret.py's every setting (and its regret table and
    figure beside it); the toy: the claimed settings at the toy's K."""
    cfg = exp.extra
    if not toy:
        with tempfile.TemporaryDirectory() as tmp:
            regret.main(regret.Args(out=tmp, log2_k=cfg["log2_k"], seeds=cfg["seeds"]))
            shutil.copy(Path(tmp) / "regret_slopes.csv", target)
            shutil.copy(Path(tmp) / "regret.csv", target.parent / "regret.csv")
            shutil.copy(Path(tmp) / "regret.png", target.parent / "figure.png")
        return
    K = 2 ** cfg["toy_log2_k"]
    ks = log_grid(max(K // 4, 2), K)
    claimed = set(cfg["settings"].values())
    rows = []
    for panel, label, kw in regret.settings():
        if label not in claimed or any(r["setting"] == label for r in rows):
            continue
        runs = [regret.run(regret.RunArgs(episodes=K, seed=s, progress=False, **kw))["regret"]
                for s in range(cfg["toy_seeds"])]  # fmt: skip
        rows.append(regret.slope_row(panel, label, np.array(runs), ks, K))
    write_rows(target, [{k: r[k] for k in regret.SLOPE_FIELDS} for r in rows])


def judge(exp: Experiment, rows: list[dict]) -> dict[str, protocol.Judgement]:
    """Per claimed setting: holds when the slope's 95% interval lies at or below the bar, does
    not hold when it lies wholly above, inconclusive when it straddles it or is a range."""
    bar = float(exp.extra["bar"])
    by = {r["setting"]: r for r in rows}
    out = {}
    for claim_id, setting in exp.extra["settings"].items():
        r = by[setting]
        slope, lo, hi = float(r["slope"]), float(r["lo"]), float(r["hi"])
        j = protocol.Judgement("exact", slope, lo, hi, r["band"], f"{r['seeds']} seeds")
        if r["band"] == "range":
            j.verdict, j.cause = protocol.INCONCLUSIVE, "a range of fewer than 5 seeds"
        elif hi <= bar:
            j.verdict = protocol.HOLDS
        elif lo > bar:
            j.verdict = protocol.FAILS
        else:
            j.verdict, j.cause = protocol.INCONCLUSIVE, f"the interval straddles {bar:g}"
        j.text = (
            f"slope {slope:.3f} ({r['band']} {lo:.3f} to {hi:.3f}; n={r['seeds']}) over K "
            f"{int(r['k_min']):,}-{int(r['k_max']):,}, against the bar {bar:g}"
        )
        out[claim_id] = j
    return out
