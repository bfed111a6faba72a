"""GRPO's recurrence against sampled runs: paper_figures/grpo_recurrence.py samples every row
(results/checks.csv: per setting, G and groups, the final PoS's mean over seeds, its 95%
percentile-bootstrap CI, the finite-G recurrence's value and the population fixed point) and each
claim counts the rows where its prediction holds: it holds when every row agrees, does not hold
when none does, and is inconclusive in between (the rule of the ledger row it replaces).

`python -m paper_figures run grpo-recurrence` resamples every row (minutes; the toy: --toy).
"""

from __future__ import annotations

from pathlib import Path

from paper_figures.lab import protocol, runner
from paper_figures.lab.spec import Experiment

SMALL = ("ref-kl", "mirror+ref")  # the small-step settings (p_ref 0.361, beta2 3)
LARGE = ("no-population-fixed-point",)  # beta2 0.5


def run(exp: Experiment, toy: bool, target: Path) -> None:
    """Sample every row with the script (the toy: its --toy) and write its CSV as the table."""
    runner.script_table("grpo_recurrence", toy, target)


def count_verdict(k: int, n: int) -> str:
    """Every row agrees: holds; none: does not hold; some: inconclusive."""
    return protocol.HOLDS if k == n else protocol.FAILS if k == 0 else protocol.INCONCLUSIVE


def judge(exp: Experiment, rows: list[dict]) -> dict[str, protocol.Judgement]:
    """Each claim's count of agreeing rows (a claim whose rows the table lacks is not judged)."""
    small = [r for r in rows if r["setting"] in SMALL]
    large = [r for r in rows if r["setting"] in LARGE]

    def inside(r: dict, value: str) -> bool:
        return float(r["final_lo"]) <= float(r[value]) <= float(r["final_hi"])

    ci = "95% bootstrap CI of the final PoS (mean over seeds)"
    counts = {
        "GRPO-amplification": (
            [float(r["final_lo"]) > float(r["p_ref"]) for r in rows],
            f"rows whose {ci} lies above p_ref",
        ),
        "GRPO-recurrence-small-step": (
            [r["final_inside"] == "1" for r in small],
            f"rows whose {ci} holds the finite-G recurrence's value",
        ),
        "GRPO-recurrence-large-step": (
            [r["final_inside"] == "1" for r in large],
            f"rows whose {ci} holds the finite-G recurrence's value",
        ),
        "GRPO-population-fixed-point": (
            [inside(r, "fixed_point_population") for r in small],
            f"rows whose {ci} holds the population fixed point",
        ),
    }
    seeds = min((int(r["seeds"]) for r in rows), default=0)
    out = {}
    for claim in exp.claims:
        agree, what = counts[claim.id]
        if not agree:
            continue
        k, n = sum(agree), len(agree)
        j = protocol.Judgement("exact", n=f"{n} rows of {seeds} seeds")
        j.verdict = count_verdict(k, n)
        j.text = (f"{k} of {n} {what}; holds when all do, does not hold when none does, "
                  "inconclusive in between")  # fmt: skip
        out[claim.id] = j
    return out
