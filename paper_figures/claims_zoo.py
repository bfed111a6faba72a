"""Ledger rows of the objective zoo (paper_figures/objective_zoo.py): each objective's paper claim
against GRPO (or the comparison the paper makes), per bandit, paired over the same seeds, and
ScaleRL's ordering of the loss types. Every row is a transplant: the papers train language
models on reasoning tasks; here a softmax policy learns a bandit (bernoulli-10, contextual-16-10
with its hard contexts, sparse-1000, the sequence rules reverse and add, and the variable-length
sequence-stop), so a row says whether the mechanism's effect survives where the truth is known.
A bandit's rows carry its short name in the id (bernoulli-10's keep the bare ids)."""

from __future__ import annotations

import numpy as np

from controlrl import stats
from paper_figures.claims import FAILS, HOLDS, INCONCLUSIVE, Row, paired_verdict, read

CSV = "objective_zoo.csv"
MUCH = 0.01  # ">>": a gap of at least 1 point of success (the bandit's optimum = 1)
LLM = "LLM RL on reasoning tasks (the paper's models and data)"
# bandit -> (id suffix, what a sample is, its setting)
BANDITS = {
    "bandit:bernoulli-10": ("", "pulls", "bernoulli-10 bandit"),
    "bandit:contextual-16-10": ("-ctx", "pulls", "contextual-16-10 bandit (4 hard contexts)"),
    "bandit:sparse-1000": ("-sparse", "pulls", "sparse-1000 bandit (one good arm of 1,000)"),
    "bandit:sequence-reverse-2-6": ("-rev", "answers", "sequence-reverse-2-6 (6-token answers)"),
    "bandit:sequence-add-2-3": ("-add", "answers", "sequence-add-2-3 (4-digit binary sums)"),
    "bandit:sequence-stop-2-4": (
        "-stop", "answers", "sequence-stop-2-4 (answers end at EOS, cap 8 tokens; a budget of "
        "20,480 tokens)",
    ),
}  # fmt: skip
SETTING = "transplant: {}, 256 {} per update, groups of 8, Adam 1e-3"
TOKEN_BUDGET = {"-stop": "ours 20,480 tokens per seed (objective_zoo.py's PLAN)"}
# a mismatch run's train/episode_return is its perturbed sampler's rollouts (both sides of the row)
MISMATCH = (
    "; rollouts from the policy's logits at temperature 1.25 on both sides, so the success is "
    "the perturbed sampler's, and the greedy final evaluation is at its ceiling for both"
)
# id, objective, baseline, paper, claim, claim_sign (+1: objective's success above baseline's;
# 0: it matches, not below by more than MUCH)
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
    ("Z-GBPO", "gbpo", "grpo", "Bounded Ratio Reinforcement Learning (arXiv 2604.18578)",
     "GBPO (the ratio regressed onto the bounded-ratio target, thresholded at the group's median"
     " score) matches or beats GRPO in final performance", 0),
    ("Z-NFT", "nft", "grpo", "Negative-aware Fine-Tuning (arXiv 2505.18116)",
     "NFT (likelihood of the successes, an implicit negative policy for the failures) matches "
     "GRPO", 0),
    ("Z-GSPO", "gspo", "grpo", "GSPO (arXiv 2507.18071)",
     "the sequence-level (geometric-mean) ratio trains better than GRPO's per-token one", 1),
    ("Z-KL-unbiased", "kl-k3-unbiased", "grpo", "DeepSeek-V3.2 (arXiv 2512.02556)",
     "the unbiased k3 KL estimate (k3 weighted by pi / pi_old; its gradient unbiased, tested "
     "exactly in tests/controlrl/test_kl_estimators.py) trains at least as well as plain k3",
     0),
    ("Z-KL-in-loss", "grpo", "kl-in-reward", "DeepSeekMath / GRPO (arXiv 2402.03300)",
     "the KL penalty added to the loss, not to the reward, does at least as well", 0),
    ("Z-Overlong", "dapo-overlong", "grpo", "DAPO (arXiv 2503.14476)",
     "the soft overlong punishment of too-long responses improves training", 1),
]  # fmt: skip


def _final(rows: list[dict], objective: str, key: str = "final_success") -> dict[str, float]:
    return {r["seed"]: float(r[key]) for r in rows if r["objective"] == objective}


def _diffs(rows: list[dict], a: str, b: str, key: str = "final_success") -> np.ndarray:
    fa, fb = _final(rows, a, key), _final(rows, b, key)
    return np.array([fa[s] - fb[s] for s in sorted(fa, key=int) if s in fb])


def rows() -> list[Row]:
    """Per bandit: one row per objective claim whose two sides ran, then ScaleRL's."""
    every = read(CSV)
    out = []
    for bandit, (suffix, unit, name) in BANDITS.items():
        data = [r for r in every if r["bandit"] == bandit]
        if data:
            out += bandit_rows(data, suffix, unit, SETTING.format(name, unit))
    return out


def bandit_rows(data: list[dict], suffix: str, unit: str, setting: str) -> list[Row]:
    """The claims rows of one bandit's runs, then ScaleRL's 'CISPO >= GSPO >> DAPO'."""
    samples = f"ours {int(data[0]['samples']):,} {unit} per seed"
    if suffix in TOKEN_BUDGET:  # episodes vary in length: the budget is in tokens
        samples = TOKEN_BUDGET[suffix]
    metric = f"final success (last 1,280 {unit} / optimum)"
    out = []
    for rid, a, b, paper, claim, sign in CLAIMS:
        d = _diffs(data, a, b)
        if d.size == 0:
            continue
        stat, verdict, det = paired_verdict(d, ".3g", claim_sign=sign or 1)
        if sign == 0:  # "matches (or beats)": not worse by more than MUCH
            ci = stats.paired(d, np.zeros_like(d)).diff
            verdict = HOLDS if ci.lo > -MUCH else FAILS if ci.hi < -MUCH else INCONCLUSIVE
            stat += f"; 'matches' read as a 95% CI above -{MUCH}"
        auc = _diffs(data, a, b, "auc").mean()
        mine = setting + (MISMATCH if a.startswith("mismatch") else "")
        out.append(
            Row(rid + suffix, paper, claim, LLM, mine, samples, f"{d.size} pairs",
                f"{metric}, {a} minus {b}", f"{stat}; AUC diff {auc:+.3g}", verdict, det, CSV)
        )  # fmt: skip
    # ScaleRL: asymptotic pass rate of sigmoid compute fits, CISPO >= GSPO >> DAPO. On a
    # one-step bandit GSPO's sequence ratio is the per-step ratio (GSPO = GRPO there), so the
    # testable part is CISPO >> DAPO; the final success stands in for the fitted asymptote.
    d = _diffs(data, "cispo", "dapo-clip-higher")
    if d.size == 0:
        return out
    diff = stats.paired(d, np.zeros_like(d)).diff
    verdict = HOLDS if diff.lo > MUCH else FAILS if diff.hi < MUCH else INCONCLUSIVE
    stat, _, det = paired_verdict(d, ".3g", claim_sign=1)
    stat = f"cispo - dapo: {stat}"
    tested = "only CISPO >> DAPO is tested (GSPO = GRPO on a one-step bandit)"
    compared = f"{metric}, cispo minus dapo-clip-higher"
    gspo = _diffs(data, "gspo", "dapo-clip-higher")
    if gspo.size:  # a sequence bandit: GSPO's ratio differs; both links of the chain
        g = stats.paired(gspo, np.zeros_like(gspo)).diff
        cg = _diffs(data, "cispo", "gspo")
        c = stats.paired(cg, np.zeros_like(cg)).diff
        links = [
            HOLDS if c.lo > -MUCH else FAILS if c.hi < -MUCH else INCONCLUSIVE,
            HOLDS if g.lo > MUCH else FAILS if g.hi < MUCH else INCONCLUSIVE,
        ]
        verdict = (FAILS if FAILS in links else HOLDS if links == [HOLDS, HOLDS]
                   else INCONCLUSIVE)  # fmt: skip
        stat = (
            f"cispo - gspo {c.mean:+.3g} [{c.lo:+.3g}, {c.hi:+.3g}]; gspo - dapo {g.mean:+.3g}"
            f" [{g.lo:+.3g}, {g.hi:+.3g}] (95% CIs); '>=' read as a CI above -{MUCH}"
        )
        tested = "GSPO's geometric-mean ratio at GRPO's clip 0.2 (its own 3e-4 is an LLM's)"
        compared += ", cispo minus gspo, gspo minus dapo-clip-higher"
    clip = np.nanmean([float(r["clip_frac"]) for r in data if r["objective"] == "grpo"])
    stat += (
        f"; '>>' read as a gap > {MUCH} (95% CI entirely below: does not hold); GRPO's clip"
        f" cut {clip:.2%} of steps, the range where the losses differ"
    )
    out.append(
        Row("Z-ScaleRL" + suffix,
            "ScaleRL, The Art of Scaling RL Compute for LLMs (arXiv 2510.13786)",
            "CISPO >= GSPO >> DAPO in asymptotic performance",
            "LLM math RL at up to 100k GPU-hours; asymptote of a sigmoid fit of pass rate "
            "against compute", f"{setting}; {tested}, with final success for the asymptote",
            samples, f"{d.size} pairs", compared,
            stat, verdict, det, CSV)
    )  # fmt: skip
    return out


def verdicts() -> dict[tuple[str, str], list[str]]:
    """{(bandit, objective): ['<row id>: <verdict>', ...]}: the ledger rows that each row of the
    zoo's README table (paper_figures/readme_tables.py) supports or contradicts."""
    compared = {rid: a for rid, a, *_ in CLAIMS}
    compared["Z-ScaleRL"] = ("cispo", "dapo-clip-higher", "gspo")
    every = read(CSV)
    out: dict[tuple[str, str], list[str]] = {}
    for bandit, (suffix, unit, _) in BANDITS.items():
        data = [r for r in every if r["bandit"] == bandit]
        ran = {r["objective"] for r in data}
        for row in bandit_rows(data, suffix, unit, "") if data else []:
            objectives = compared[row.id.removesuffix(suffix) if suffix else row.id]
            for objective in [objectives] if isinstance(objectives, str) else objectives:
                if objective in ran:
                    out.setdefault((bandit, objective), []).append(f"{row.id}: {row.verdict}")
    return out
