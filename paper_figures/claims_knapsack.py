"""Ledger rows of Knapsack RL's budget allocation (E15, paper_figures/knapsack_allocation.py):
the share of non-zero gradients, the accuracy at the same budget and against the uniform
allocation at twice the budget; paired over seeds (every arm on the same pools), at each Adam
step size the CSV holds (the first is the main one, the others a sensitivity)."""

from __future__ import annotations

import numpy as np

from controlrl import stats
from paper_figures.claims import Row, bar_verdict, paired_verdict

PAPER = (
    "Knapsack RL: Unlocking Exploration of LLMs via Optimizing Budget Allocation (arXiv 2509.25849)"
)
PAPER_SETTING = (
    "GRPO on LLM mathematical reasoning (RLVR); the homogeneous baseline gives every prompt the "
    "same rollouts, the knapsack rule allocates them over prompts by their success rates"
)
RAISE = 0.2  # the abstract's "increases the effective ratio ... by 20-40%": at least 20%
MATCH = 0.01  # "matches" 2x compute: within 1 point of pool accuracy


def _by_seed(data, lr: str, arm: str, key: str) -> dict[str, float]:
    return {r["seed"]: float(r[key]) for r in data if r["lr"] == lr and r["arm"] == arm}


def _diffs(data, lr: str, a: str, b: str, key: str, relative: bool = False) -> np.ndarray:
    va, vb = _by_seed(data, lr, a, key), _by_seed(data, lr, b, key)
    seeds = sorted(set(va) & set(vb), key=int)
    return np.array([va[s] / vb[s] - 1 if relative else va[s] - vb[s] for s in seeds])


def _band_verdict(d: np.ndarray, bar: float) -> tuple[str, str, str]:
    """(statistic, verdict, detectable): the paired differences' 95% CI against `bar`."""
    result = stats.paired(d, np.zeros_like(d))
    s = result.diff
    verdict = bar_verdict(s.kind, s.lo, s.hi, bar)
    return result.text(".3g"), verdict, format(result.detectable, ".3g")


def rows(read) -> list[Row]:
    """E15-knapsack-effective, E15-knapsack and E15-knapsack-2x per step size."""
    data = read("knapsack_allocation.csv")
    lrs = list(dict.fromkeys(r["lr"] for r in data))
    out = []
    for i, lr in enumerate(lrs):
        suffix = "" if i == 0 else f"-lr{lr}"
        role = "main setting" if i == 0 else "sensitivity: a step at which uniform saturates"
        seeds = len(_by_seed(data, lr, "uniform", "seed"))
        n = {arm: int(next(r["rollouts"] for r in data if r["arm"] == arm)) for arm in
             ("uniform", "uniform-2x")}  # fmt: skip
        ours = (
            "transplant: GRPO (clipped surrogate, on-policy, no KL) on a tabular pool of 256 "
            "prompts x 10 answers, one correct (reward 1), initial pi(correct) ~ Beta(0.5, 0.5) "
            "per prompt; 32 prompts per update, 8 rollouts each uniform; knapsack: the same 256 "
            "rollouts by the reference's rule over each prompt's success at its previous visit "
            f"(min_n 2, max_n 64, alpha 0.9, fallback on); Adam {lr} ({role})"
        )
        budget = (f"ours 40 epochs, {n['uniform']:,} rollouts per seed ({n['uniform-2x']:,} "
                  "for uniform-2x); paper: LLM RLVR")  # fmt: skip
        mean = {arm: np.mean(list(_by_seed(data, lr, arm, "final_success").values()))
                for arm in ("uniform", "knapsack", "uniform-2x")}  # fmt: skip
        eff = {arm: np.mean(list(_by_seed(data, lr, arm, "effective_ratio").values()))
               for arm in ("uniform", "knapsack")}  # fmt: skip
        d = _diffs(data, lr, "knapsack", "uniform", "effective_ratio", relative=True)
        stat, verdict, det = _band_verdict(d, RAISE)
        out.append(Row(
            f"E15-knapsack-effective{suffix}", PAPER,
            "knapsack allocation raises the share of non-zero policy gradients by 20-40% over "
            "the uniform allocation", PAPER_SETTING, ours, budget, f"{seeds} pairs",
            "effective ratio (share of rollouts with a non-zero advantage, mean over updates "
            "after the first epoch), knapsack / uniform - 1 per seed; holds if its 95% CI lies "
            f"at or above {RAISE:g}, fails if below",
            f"knapsack {eff['knapsack']:.3g} vs uniform {eff['uniform']:.3g} (means); {stat}",
            verdict, det, "knapsack_allocation.csv"))  # fmt: skip
        d = _diffs(data, lr, "knapsack", "uniform", "final_success")
        stat, verdict, det = paired_verdict(d, ".3g")
        out.append(Row(
            f"E15-knapsack{suffix}", PAPER,
            "knapsack allocation trains to a higher accuracy than the uniform allocation at the "
            "same rollout budget", PAPER_SETTING, ours, budget, f"{seeds} pairs",
            "final pool accuracy (exact mean over prompts of pi(correct) after the last "
            "update), knapsack minus uniform per seed",
            f"knapsack {mean['knapsack']:.4g} vs uniform {mean['uniform']:.4g} (means); {stat}",
            verdict, det, "knapsack_allocation.csv"))  # fmt: skip
        d = _diffs(data, lr, "knapsack", "uniform-2x", "final_success")
        stat, verdict, det = _band_verdict(d, -MATCH)
        out.append(Row(
            f"E15-knapsack-2x{suffix}", PAPER,
            "the uniform allocation needs about 2x the rollouts to match knapsack allocation",
            PAPER_SETTING, ours, budget, f"{seeds} pairs",
            "final pool accuracy, knapsack (1x rollouts) minus uniform-2x per seed; holds if "
            f"its 95% CI lies at or above -{MATCH:g} (no more than {MATCH:g} below), fails if "
            "below",
            f"knapsack {mean['knapsack']:.4g} vs uniform-2x {mean['uniform-2x']:.4g} (means); "
            f"{stat}", verdict, det, "knapsack_allocation.csv"))  # fmt: skip
    return out
