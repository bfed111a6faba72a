"""Success conditioning against PPO: paper_figures/success_conditioning.py runs the three
operators on the same bandits and writes one row per (operator, bandit, iteration); `table`
summarises each run (operator and bandit) over its iterations, and `judge` decides the two count
claims from the results table: E18-exact (the identity to the table's 6 significant digits, and no
fall of eta) and E18-sampled-degrade (any fall of eta refutes it).

`python -m paper_figures run success-conditioning` takes seconds (the toy: the script's --toy).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np

from controlrl.experiment import read_rows
from paper_figures.lab import protocol
from paper_figures.lab.spec import Experiment

TOLERANCE = 1e-5  # |relative improvement - chi2| counted as equal (6 significant digits)


def table(exp: Experiment, source: Path) -> list[dict]:
    """Per (operator, bandit): its iterations summarised."""
    env = next(iter(exp.envs))
    runs = defaultdict(list)
    for r in read_rows(Path(source) / "success_conditioning.csv"):
        runs[(r["method"], int(r["seed"]))].append({k: float(v) for k, v in r.items()
                                                   if k != "method"})  # fmt: skip
    out = []
    for (arm, seed), its in runs.items():
        rel = np.array([r["rel_improvement"] for r in its])
        chi2 = np.array([r["chi2"] for r in its])
        fall = np.array([r["eta_before"] - r["eta_after"] for r in its])
        last = max(its, key=lambda r: r["iteration"])
        out.append({"env": env, "arm": arm, "seed": seed, "identity_excess": np.mean(chi2 - rel),
                    "identity_gap": np.max(np.abs(rel - chi2)), "degrade_rate": np.mean(fall > 0),
                    "falls": np.sum(fall > 0), "largest_fall": max(fall.max(), 0.0),
                    "rel_improvement": rel.mean(), "chi2": chi2.mean(),
                    "final_eta": last["eta_after"]})  # fmt: skip
    return out


def judge(exp: Experiment, rows: list[dict]) -> dict[str, protocol.Judgement]:
    """The count claims: E18-exact on exact conditioning, E18-sampled-degrade on filtered BC."""
    arm = {a: [r for r in rows if r["arm"] == a] for a in ("sc_exact", "sc_sampled")}
    iters = {a: sum(int(r["steps"]) for r in g) for a, g in arm.items()}
    out = {}
    gap = max(r["identity_gap"] for r in arm["sc_exact"])
    falls = int(sum(r["falls"] for r in arm["sc_exact"]))
    j = protocol.Judgement("exact", n=f"{len(arm['sc_exact'])} bandits")
    j.verdict = protocol.HOLDS if gap < TOLERANCE and falls == 0 else protocol.FAILS
    j.text = (f"largest |relative improvement - chi2| {gap:.2g} (equal below {TOLERANCE:g}); "
              f"{falls} of {iters['sc_exact']} iterations lower eta")  # fmt: skip
    out["E18-exact"] = j
    falls = int(sum(r["falls"] for r in arm["sc_sampled"]))
    largest = max(r["largest_fall"] for r in arm["sc_sampled"])
    j = protocol.Judgement("exact", n=f"{len(arm['sc_sampled'])} bandits")
    j.verdict = protocol.FAILS if falls else protocol.HOLDS
    j.text = (f"{falls} of {iters['sc_sampled']} iterations lower eta; largest fall "
              f"{largest:.3g}")  # fmt: skip
    out["E18-sampled-degrade"] = j
    return out
