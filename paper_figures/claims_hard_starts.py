"""Ledger rows of E15 (hard-start guidance in sparse Mountain Car, paper_figures/hard_starts.py):
POPE-style demonstration resets and a TREK-style short behaviour clone against plain PPO, and the
ray-interference arm (easy starts mixed in) against plain PPO, each paired over seeds on the
fraction of the fixed hard starts that the final deterministic policy solves."""

from __future__ import annotations

import numpy as np

from paper_figures.claims import Row, paired_verdict

SETTING = (
    "PPO (rl-baselines3-zoo MountainCar settings) on SparseMountainCar-v0 (reward 1 at the goal)"
)
METRIC = (
    "final deterministic policy: fraction of {n} hard starts (x0 in [-0.6, -0.4], v0 = 0) solved"
)


def _paired(data, a: str, b: str) -> np.ndarray:
    """Per seed: solved_frac of arm a minus that of arm b (seeds both arms ran)."""
    va = {r["seed"]: float(r["solved_frac"]) for r in data if r["arm"] == a}
    vb = {r["seed"]: float(r["solved_frac"]) for r in data if r["arm"] == b}
    return np.array([va[s] - vb[s] for s in sorted(va, key=int) if s in vb])


def rows(read) -> list[Row]:
    """E15-pope, E15-bc and E15-interference."""
    data = read("hard_starts.csv")  # hard_starts_reference.csv: the easy starts' DP steps
    steps = int(data[0]["steps"])
    metric = METRIC.format(n=data[0]["hard_starts"])
    budget = f"{steps:,} env steps per run (papers: LLM RL over many prompts and steps)"
    demos = data[0]["demos"]
    bc_steps = next(r["bc_steps"] for r in data if r["arm"] == "bc")
    easy_steps = [
        int(r["dp_steps"]) for r in read("hard_starts_reference.csv") if r["kind"] == "easy"
    ]
    easy = f"{min(easy_steps)}-{max(easy_steps)}"
    means = {
        arm: np.mean([float(r["solved_frac"]) for r in data if r["arm"] == arm])
        for arm in ("ppo", "pope", "bc", "mixed")
    }
    specs = [
        ("E15-pope", "pope", "ppo",
         "Privileged On-Policy Exploration (POPE)",
         "guidance by oracle-solution prefixes expands the set of solvable hard problems",
         "LLM RL (GRPO) on hard math problems, hard problems prefixed with part of an oracle "
         "solution",
         f"transplant: {SETTING}; half of the training episodes start at a state along one of "
         f"{demos} optimal demonstrations (the DP reference's controller), half at the hard "
         "starts"),
        ("E15-bc", "bc", "ppo",
         "TREK (Teacher-Routed Exploration via Forward KL)",
         "a short forward-KL (behaviour-cloning) phase on verified hard-problem solutions, then "
         "on-policy RL, solves more hard problems than RL alone",
         "GRPO on math and agentic tasks, teacher proposals ranked by student likelihood (top-r "
         "kept), a short forward-KL phase, then GRPO",
         f"transplant: {SETTING}; {bc_steps} full-batch Adam steps of -log pi(a|s) on all "
         f"{demos} optimal demonstrations (no ranking: each is verified optimal), then PPO from "
         "the hard starts"),
        ("E15-interference", "ppo", "mixed",
         "Privileged On-Policy Exploration (POPE): ray interference",
         "mixing easy and hard problems in RL training slows progress on the hard ones",
         "LLM RL (GRPO) on a mix of easy and hard math problems",
         f"transplant: {SETTING}; the mixed arm starts half of its episodes at easy starts "
         f"(right of the valley, moving right: the DP optimum {easy} steps), half at the hard "
         "ones; same total samples"),
    ]  # fmt: skip
    out = []
    for rid, a, b, paper, claim, paper_setting, ours in specs:
        d = _paired(data, a, b)  # the claim: a > b
        stat, verdict, detectable = paired_verdict(d, claim_sign=1)
        out.append(
            Row(
                rid,
                paper,
                claim,
                paper_setting,
                ours,
                budget,
                f"{d.size} pairs",
                f"{metric}, {a} minus {b} per seed",
                f"{a} {means[a]:.3g} vs {b} {means[b]:.3g} (means); {stat}",
                verdict,
                detectable,
                "hard_starts.csv",
            )
        )
    return out
