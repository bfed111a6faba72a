"""Ledger rows of the bandit suite (paper_figures/bandit_suite.py -> out/bandit_suite.csv, one row
per run): every comparison paired by seed (seed k of two methods faces the same reward and prompt
stream), on the final success rate = mean return over a run's last 1,280 samples over the
bandit's optimal expected reward; 200 seeds per cell (a population run per GRPO-family and
TPO cell, 200 separate runs per PPO cell), seeds 1-200 on both sides of a pair."""

from __future__ import annotations

import numpy as np

from controlrl import stats
from paper_figures.claims import FAILS, HOLDS, Row, paired_verdict, read

CSV = "bandit_suite.csv"
TPO = "Target Policy Optimization (arXiv 2604.06159)"
GRPO = "DeepSeekMath: Pushing the Limits of Mathematical Reasoning (arXiv 2402.03300)"
GSPO = "Group Sequence Policy Optimization (arXiv 2507.18071)"
KPO = (
    "Online Causal Kalman Filtering for Stable and Effective Policy Optimization (arXiv 2602.10609)"
)
FILTER = "A Minimalist Approach to LLM Reasoning (arXiv 2504.11343)"
ENTROPY = (
    "The Entropy Mechanism of Reinforcement Learning for Reasoning Language Models "
    "(arXiv 2505.22617)"
)
REVERSE = "bandit:sequence-reverse-2-6"
ADD = "bandit:sequence-add-2-3"
REVERSE_SETTING = (
    "transplant: V = 2, L = 6 and GRPO with the suite's k3 KL 0.04 (the paper: L = 7-10, GRPO "
    "without KL)"
)
ADD_SETTING = "transplant: our addition bandit (two 3-bit numbers, a 4-bit answer)"

# id, bandit, method a, method b, claim (a beats or matches b), paper, our setting
COMPARISONS = [
    ("E11-TPO-sparse", "bandit:sparse-1000", "tpo", "grpo", "TPO beats GRPO under sparse reward",
     TPO, "transplant: our sparse-1000 bandit, not TPO's own bandits"),
    ("E11-TPO-easy", "bandit:bernoulli-10", "tpo", "grpo",
     "TPO matches GRPO on easy tasks (no loss)", TPO, "transplant: our bernoulli-10 bandit"),
    ("E11-TPO-reverse", REVERSE, "tpo", "grpo",
     "TPO beats GRPO on terminal-reward token reversal", TPO, REVERSE_SETTING),
    ("E11-TPO-add", ADD, "tpo", "grpo", "TPO beats GRPO on a verifiable sequence task", TPO,
     ADD_SETTING),
    ("E11-filter", "bandit:contextual-16-10", "pg-filter", "pg",
     "filtering zero-variance groups carries most of GRPO's benefit over plain PG", FILTER,
     "transplant: contextual bandit with hard contexts; PG with a group-mean baseline"),
    ("E11-GSPO-reverse", REVERSE, "grpo-seq", "grpo",
     "a sequence-level ratio trains better than GRPO's per-token ratio", GSPO,
     "transplant: token reversal V = 2, L = 6; the product of per-token ratios"),
    ("E11-KPO-reverse", REVERSE, "grpo-kalman", "grpo",
     "Kalman-filtered ratios train better than per-token ratios", KPO,
     "transplant: token reversal V = 2, L = 6"),
    ("E11-GSPO-add", ADD, "grpo-seq", "grpo",
     "a sequence-level ratio trains better than GRPO's per-token ratio", GSPO, ADD_SETTING),
    ("E11-KPO-add", ADD, "grpo-kalman", "grpo",
     "Kalman-filtered ratios train better than per-token ratios", KPO, ADD_SETTING),
]  # fmt: skip
for bandit in (
    "bandit:bernoulli-10",
    "bandit:sparse-1000",
    "bandit:contextual-16-10",
    REVERSE,
    ADD,
):
    name = bandit.removeprefix("bandit:")
    COMPARISONS.append(
        (f"E11-GRPO-PPO-{name}", bandit, "grpo", "ppo",
         "GRPO, without a critic, does as well as PPO", GRPO,
         f"transplant: {name}; PPO with a critic and GAE, batch-matched")
    )  # fmt: skip


def final(rows: list[dict], bandit: str, method: str) -> dict[str, float]:
    """{seed: final success} of one cell; an error naming the cell if it is missing."""
    out = {
        r["seed"]: float(r["final_success"])
        for r in rows
        if r["bandit"] == bandit and r["method"] == method
    }
    if not out:
        raise ValueError(f"claims_bandits: {CSV} has no runs of {method} on {bandit}")
    return out


def rows() -> list[Row]:
    """The bandit-suite rows: paired comparisons of final success, and GRPO's entropy rises."""
    data = read(CSV)
    samples = {r["bandit"]: int(r["samples"]) for r in data}
    out = []
    for rid, bandit, a, b, claim, paper, setting in COMPARISONS:
        fa, fb = final(data, bandit, a), final(data, bandit, b)
        d = np.array([fa[s] - fb[s] for s in sorted(fa, key=int) if s in fb])
        stat, verdict, det = paired_verdict(d, ".3g")
        out.append(
            Row(
                rid,
                paper,
                claim,
                "the paper's own tasks (LLM RL or its bandits)",
                setting,
                f"ours {samples[bandit]:,} samples per run, 256 per update, groups of 8",
                f"{d.size} pairs ({len(fa)} and {len(fb)} seeds)",
                f"final success rate (last 1,280 samples / optimum), {a} minus {b}, paired by seed",
                stat,
                verdict,
                det,
                CSV,
            )
        )
    rises = np.array(
        [
            float(r["entropy_rise_frac"])
            for r in data
            if r["bandit"] == "bandit:bernoulli-10" and r["method"] == "grpo"
        ]
    )
    s = stats.summarize(rises)
    out.append(
        Row(
            "E11-entropy",
            ENTROPY,
            "GRPO's policy entropy falls monotonically",
            "LLM RL; bandit check with one update per rollout",
            "transplant: bernoulli-10, the suite's 4 epochs per rollout",
            f"ours {samples['bandit:bernoulli-10']:,} samples per run",
            f"{rises.size}",
            "fraction of a run's updates that raise the policy entropy, mean over seeds",
            s.text(".3g"),
            HOLDS if rises.max() == 0 else FAILS,
            "n/a",
            CSV,
        )
    )
    return out
