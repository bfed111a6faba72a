"""Ledger rows of the objective zoo (paper_figures/objective_zoo.py): each objective's paper claim
against GRPO (or the comparison the paper makes) on our bernoulli-10 bandit, paired over the
same seeds, and ScaleRL's ordering of the loss types. Every row is a transplant: the papers
train language models on reasoning tasks; here a softmax policy learns a 10-armed Bernoulli
bandit, so a row says whether the mechanism's effect survives where the truth is known."""

from __future__ import annotations

import numpy as np

from controlrl import stats
from paper_figures.claims import FAILS, HOLDS, INCONCLUSIVE, Row, paired_verdict, read

CSV = "objective_zoo.csv"
MUCH = 0.01  # ">>": a gap of at least 1 point of success (the bandit's optimum = 1)
BANDIT = "bandit:bernoulli-10"
LLM = "LLM RL on reasoning tasks (the paper's models and data)"
TRANSPLANT = "transplant: bernoulli-10 bandit, 256 pulls per update, groups of 8, Adam 1e-3"
# a mismatch run's train/episode_return is its perturbed sampler's rollouts (both sides of the row)
MISMATCH = (
    "; rollouts from the policy's logits at temperature 1.25 on both sides, so the success is "
    "the perturbed sampler's, and the greedy final evaluation is at its ceiling for both"
)
# id, objective, baseline, paper, claim, claim_sign (+1: objective's success above baseline's)
CLAIMS = [
    ("Z-DAPO", "dapo-clip-higher", "grpo", "DAPO (arXiv 2503.14476)",
     "clip-higher (eps_high 0.28) trains better than the symmetric clip 0.2", 1),
    ("Z-CISPO", "cispo", "grpo", "MiniMax-M1 (arXiv 2506.13585)",
     "CISPO (clipped stop-gradient IS weight, every token keeps its gradient) beats GRPO", 1),
    ("Z-SAPO", "sapo", "grpo", "SAPO (arXiv 2511.20347)",
     "the soft gate sigma(tau (r - 1)) beats GRPO's hard clip", 1),
    ("Z-DPG", "dpg", "grpo", "Delightful Policy Gradient (arXiv 2603.14608)",
     "gating by sigma(A x surprisal / eta) improves the policy gradient", 1),
    ("Z-GPG", "gpg", "grpo", "GPG (arXiv 2504.02546)",
     "GPG (no surrogate, no KL, group-mean advantage) beats GRPO", 1),
    ("Z-RGRA", "rgra", "grpo", "REINFORCE with group-relative advantage (RGRA)",
     "GRPO's ratio and clip are not needed: RGRA does at least as well", 1),
    ("Z-RGRA-neg", "rgra-no-negatives", "rgra", "REINFORCE with group-relative advantage (RGRA)",
     "negative samples are essential: dropping them hurts", -1),
    ("Z-ClipCov", "clip-cov", "grpo", "The Entropy Mechanism (arXiv 2505.22617)",
     "Clip-Cov (no gradient for a few high-covariance tokens) beats GRPO", 1),
    ("Z-KLCov", "kl-cov", "grpo", "The Entropy Mechanism (arXiv 2505.22617)",
     "KL-Cov (a KL penalty on a few high-covariance tokens) beats GRPO", 1),
    ("Z-RLOO", "rloo", "grpo", "Back to Basics: RLOO (arXiv 2402.14740)",
     "the leave-one-out baseline trains at least as well as GRPO's normalised advantage", 1),
    ("Z-RPP", "reinforce++", "grpo", "REINFORCE++ (arXiv 2501.03262)",
     "global-batch advantage normalisation beats GRPO's per-group one", 1),
    ("Z-LitePPO", "lite-ppo", "grpo", "Tricks or Traps / LitePPO (arXiv 2508.08221)",
     "group-mean with batch-std normalisation beats GRPO's group std", 1),
    ("Z-BNPO", "bnpo", "grpo", "BNPO (Beta-normalised policy optimisation)",
     "Beta normalisation of the reward beats GRPO's", 1),
    ("Z-TIS", "mismatch-tis", "mismatch-none", "truncated IS for train-inference mismatch",
     "under a rollout/trainer mismatch, TIS trains better than no correction", 1),
    ("Z-MIS", "mismatch-mis", "mismatch-none", "masked IS (IcePop) for train-inference mismatch",
     "under a rollout/trainer mismatch, MIS trains better than no correction", 1),
]  # fmt: skip


def _final(rows: list[dict], objective: str, key: str = "final_success") -> dict[str, float]:
    return {r["seed"]: float(r[key]) for r in rows if r["objective"] == objective}


def _diffs(rows: list[dict], a: str, b: str, key: str = "final_success") -> np.ndarray:
    fa, fb = _final(rows, a, key), _final(rows, b, key)
    return np.array([fa[s] - fb[s] for s in sorted(fa, key=int) if s in fb])


def rows() -> list[Row]:
    """One row per objective claim, then ScaleRL's 'CISPO >= GSPO >> DAPO'."""
    data = [r for r in read(CSV) if r["bandit"] == BANDIT]
    samples = f"ours {int(data[0]['samples']):,} pulls per seed"
    out = []
    for rid, a, b, paper, claim, sign in CLAIMS:
        d = _diffs(data, a, b)
        if d.size == 0:
            continue
        stat, verdict, det = paired_verdict(d, ".3g", claim_sign=sign)
        auc = _diffs(data, a, b, "auc").mean()
        setting = TRANSPLANT + (MISMATCH if a.startswith("mismatch") else "")
        out.append(
            Row(rid, paper, claim, LLM, setting, samples, f"{d.size} pairs",
                f"final success (last 1,280 pulls / optimum), {a} minus {b}",
                f"{stat}; AUC diff {auc:+.3g}", verdict, det, CSV)
        )  # fmt: skip
    # ScaleRL: asymptotic pass rate of sigmoid compute fits, CISPO >= GSPO >> DAPO. On a
    # one-step bandit GSPO's sequence ratio is the per-step ratio (GSPO = GRPO here), so the
    # testable part is CISPO >> DAPO; the final success stands in for the fitted asymptote.
    d = _diffs(data, "cispo", "dapo-clip-higher")
    if d.size:
        stat, _, det = paired_verdict(d, ".3g", claim_sign=1)
        diff = stats.paired(d, np.zeros_like(d)).diff
        lo, hi = diff.lo, diff.hi
        verdict = HOLDS if lo > MUCH else FAILS if hi < MUCH else INCONCLUSIVE
        clip = np.nanmean([float(r["clip_frac"]) for r in data if r["objective"] == "grpo"])
        stat += (
            f"; '>>' read as a gap > {MUCH} (95% CI entirely below: does not hold); GRPO's clip"
            f" cut {clip:.2%} of steps, so the clip range, where the losses differ, is rarely"
            " reached here"
        )
        out.append(
            Row("Z-ScaleRL", "ScaleRL, The Art of Scaling RL Compute for LLMs (arXiv 2510.13786)",
                "CISPO >= GSPO >> DAPO in asymptotic performance",
                "LLM math RL at up to 100k GPU-hours; asymptote of a sigmoid fit of pass rate "
                "against compute", TRANSPLANT + "; GSPO = GRPO on a one-step bandit, so only "
                "CISPO >> DAPO is tested, with final success for the asymptote", samples,
                f"{d.size} pairs", "final success, cispo minus dapo-clip-higher", stat, verdict,
                det, CSV)
        )  # fmt: skip
    return out
