"""The entropy law on Hopper-v5: paper_figures/entropy_law.py trains the runs (Gaussian PPO and
GRPO, 7 seeds x 300,000 env steps each) and writes their points (paper_figures/out/
entropy_law.csv: per run and iteration, entropy and return) and every PPO update's entropy change
and Cov(log pi_old, A) (entropy_law_covariance.csv). This analysis refits those points with the
script (its --keep-committed: no training) and writes one row per run (results/checks.csv): the
R^2 of the law R = -a exp(H) + b and of a straight line, the covariance law's correlation and
sign share, the run's last step and its seconds collecting and updating. A pooled row per method
(seed "all") holds the entropy range.

Each claim is a per-seed value whose mean's 95% percentile-bootstrap CI (controlrl.stats.summarize)
decides, the rule of the ledger rows it replaces: holds when the CI lies at or above 0, does not
hold when it lies below 0, inconclusive when it straddles 0 or when fewer than 5 seeds give a
range instead of a CI.
"""

from __future__ import annotations

import csv
import importlib
import shutil
import tempfile
from pathlib import Path

import numpy as np

from controlrl import stats
from controlrl.experiment import read_rows
from paper_figures.lab import protocol
from paper_figures.lab.spec import ROOT, Experiment

OUT = ROOT / "paper_figures" / "out"
POINTS = ("entropy_law.csv", "entropy_law_fits.csv", "entropy_law_covariance.csv")
FIELDS = ["method", "seed", "steps", "r2", "r2_linear", "entropy_min", "entropy_max", "train_s"]
FIELDS += ["updates", "corr", "sign_share", "sign_chance", "update_s"]
# claim -> (method, per-seed value, what it is)
VALUES = {
    "E12-ppo": ("ppo", lambda r: r["r2"] - r["r2_linear"],
                "R^2 of the exponential law minus R^2 of a linear fit"),
    "E12-grpo": ("grpo", lambda r: r["r2"] - r["r2_linear"],
                 "R^2 of the exponential law minus R^2 of a linear fit"),
    "E12-ppo-covariance": ("ppo", lambda r: r["corr"],
                           "Pearson correlation of each update's entropy change with -Cov(log "
                           "pi_old, A) over the run's updates"),
    "E12-ppo-covariance-sign": ("ppo", lambda r: r["sign_share"] - r["sign_chance"],
                                "share of the run's updates whose entropy change has the sign of "
                                "-Cov, minus that share by chance"),
}  # fmt: skip


def run(exp: Experiment, toy: bool, target: Path) -> None:
    """Refit the committed points with the script (at any size: the training is the script's
    --train) and write one row per run."""
    module = importlib.import_module("paper_figures.entropy_law")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for name in POINTS:
            shutil.copyfile(OUT / name, tmp / name)
        argv = ["--keep-committed", "--seeds", "7", "--sweep-dir", str(tmp / "none")]
        module.main([*argv, "--out", str(tmp)])
        points, fits, updates = (read_rows(tmp / name) for name in POINTS)
    laws = {(c["method"], str(c["seed"])): c for c in module.covariance_laws(updates, "ppo")}
    rows = []
    for fit in fits:
        key = (fit["method"], fit["seed"])
        steps = [int(p["step"]) for p in points if (p["method"], p["seed"]) == key]
        secs = [float(u["train_s"]) for u in updates if (u["method"], u["seed"]) == key]
        law = laws.get(key, {})
        rows.append({
            "method": fit["method"], "seed": fit["seed"],
            "steps": max(steps) if fit["seed"] != "all" else "",
            **{k: fit[k] for k in ("r2", "r2_linear", "entropy_min", "entropy_max", "train_s")},
            **{k: law.get(k, "") for k in ("updates", "corr", "sign_share", "sign_chance")},
            "update_s": f"{sum(secs):.6g}" if secs else "",
        })  # fmt: skip
    with target.open("w", newline="") as f:
        writer = csv.DictWriter(f, FIELDS, lineterminator="\n")
        writer.writeheader()
        for r in rows:
            writer.writerow({k: f"{v:.6g}" if isinstance(v, float) else v for k, v in r.items()})


def bar_verdict(s: stats.Summary) -> str:
    """At or above 0 (the CI's low end), below 0 (its high end), else inconclusive; a range
    (fewer than 5 seeds) is inconclusive."""
    if s.kind == "range":
        return protocol.INCONCLUSIVE
    return protocol.HOLDS if s.lo >= 0 else protocol.FAILS if s.hi < 0 else protocol.INCONCLUSIVE


def judge(exp: Experiment, rows: list[dict]) -> dict[str, protocol.Judgement]:
    """Each claim from its method's per-seed values."""
    out = {}
    for claim in exp.claims:
        method, value, what = VALUES[claim.id]
        mine = [r for r in rows if r["method"] == method and r["seed"] != "all"]
        if claim.id.startswith("E12-ppo-cov"):
            mine = [r for r in mine if r["corr"] != ""]
        if not mine:
            continue
        x = np.array([value({k: float(v) for k, v in r.items() if k in FIELDS[3:] and v})
                      for r in mine])  # fmt: skip
        s = stats.summarize(x)
        j = protocol.Judgement("exact", s.mean, s.lo, s.hi, n=f"{x.size} seeds")
        j.verdict = bar_verdict(s)
        j.text = (f"{what}, per seed: {s.text('.3g')}; holds when the 95% CI lies at or above "
                  "0, does not hold when below 0")  # fmt: skip
        out[claim.id] = j
    return out
