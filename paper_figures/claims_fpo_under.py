"""Ledger rows of FPO's under-conditioned claim (paper_figures/fpo_underconditioned.py): FPO
against Gaussian PPO on Reacher-v5 with the target's y hidden from the policy, and how much more
FPO gains there than with the goal shown, paired over seeds, on the final deterministic
evaluation return."""

from __future__ import annotations

import numpy as np

from paper_figures.claims import ALPHA, Row, paired_verdict

PAPER = "Flow Matching Policy Gradients (arXiv 2507.21053)"
PAPER_SETTING = (
    "humanoid motion tracking with the policy conditioned on part of the goal (reference "
    "akanazawa/fpo, built on Puffer PHC)"
)
FULL, PARTIAL = "Reacher-v5", "ReacherPartialGoal-v5"
FIRST = 5  # seeds of the first population; the sweep was grown from it, seeds 1-5 unchanged


def _gap(data, env: str) -> dict[str, float]:
    """seed -> FPO minus PPO final evaluation return on env."""
    by = {(r["algo"], r["seed"]): float(r["final_eval_return"]) for r in data if r["env"] == env}
    return {s: by[("fpo", s)] - by[("ppo", s)] for a, s in by if a == "fpo" and ("ppo", s) in by}


def pairs(n: int, extra: str = "") -> str:
    """The seeds column: n pairs, and that the exact two-sided sign-flip test cannot reject at
    ALPHA with so few (its smallest p is 2 / 2^n: 0.0625 at 5 pairs)."""
    short = "; too few for the exact sign-flip test to reach p < 0.05" if 2 / 2**n >= ALPHA else ""
    return f"{n} pairs{extra}{short}"


def _was(d: np.ndarray, verdict: str) -> str:
    """'; was <verdict on seeds 1..FIRST> at FIRST seeds -> <verdict>' once the sweep has grown
    past its first population (d ordered by seed), else ''."""
    if d.size <= FIRST:
        return ""
    return f"; was {paired_verdict(d[:FIRST])[1]} at {FIRST} seeds (seeds 1-{FIRST}) -> {verdict}"


def rows(read) -> list[Row]:
    """E7-under (FPO minus PPO with the goal partly hidden) and E7-under-gap (that difference
    minus the one with the goal shown, seeds paired by index)."""
    data = read("fpo_underconditioned.csv")
    steps = int(data[0]["steps"])
    hours = sum(float(r["train_s"]) for r in data) / 3600
    part, full = _gap(data, PARTIAL), _gap(data, FULL)
    mean = {
        (a, e): np.mean(
            [float(r["final_eval_return"]) for r in data if (r["algo"], r["env"]) == (a, e)]
        )
        for a in ("fpo", "ppo")
        for e in (FULL, PARTIAL)
    }
    ours = (
        f"transplant: {PARTIAL} (Gymnasium's Reacher-v5 with the target's y left out of the "
        "observation; dynamics, goal draw and reward unchanged) beside Reacher-v5 itself; fpo.py "
        "and ppo.py with their own defaults (1 env x 2,048 steps, 32 minibatches, 10 epochs). "
        "Under Reacher's distance reward the best response to the hidden coordinate is one point, "
        "so the task tests the claim as stated, not that the best policy is multimodal"
    )
    budget = (
        f"ours {steps:,} env steps per run; {hours:.1f} hours of collection and updates summed "
        "over the runs; the paper's humanoid runs are not comparable in size"
    )
    d = np.array([part[s] for s in sorted(part, key=int)])
    stat, verdict, det = paired_verdict(d, ".4g")
    gap = np.array([part[s] - full[s] for s in sorted(part, key=int) if s in full])
    gap_stat, gap_verdict, gap_det = paired_verdict(gap, ".4g")
    means = (
        f"FPO {mean[('fpo', PARTIAL)]:.4g} vs PPO {mean[('ppo', PARTIAL)]:.4g} hidden, "
        f"{mean[('fpo', FULL)]:.4g} vs {mean[('ppo', FULL)]:.4g} shown (means)"
    )
    return [
        Row(
            "E7-under",
            PAPER,
            "FPO beats Gaussian PPO when the policy sees only part of the goal",
            PAPER_SETTING,
            ours + _was(d, verdict),
            budget,
            pairs(d.size),
            f"final deterministic evaluation return on {PARTIAL}, FPO minus PPO",
            f"{means}; {stat}",
            verdict,
            det,
            "fpo_underconditioned.csv",
        ),
        Row(
            "E7-under-gap",
            PAPER,
            "FPO's advantage over Gaussian PPO is larger when the goal is partly hidden",
            PAPER_SETTING,
            ours + _was(gap, gap_verdict),
            budget,
            pairs(gap.size, " (seed k hidden with seed k shown)"),
            "final deterministic evaluation return: (FPO - PPO with the goal partly hidden) - "
            "(FPO - PPO with it shown)",
            gap_stat,
            gap_verdict,
            gap_det,
            "fpo_underconditioned.csv",
        ),
    ]
