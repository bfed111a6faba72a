"""Ledger rows of Target Policy Optimization in its own settings (paper_figures/tpo_repro.py):
the tabular bandits of its sections 3.1-3.2 exactly as the reference runs them, Appendix B's
closed forms, our network implementations on the same bandits, and the terminal-reward token
reversal of section 3.6 with the zero-variance masking ablation of section 4.2.

The paper gives numbers in Appendix B (lambda, beta at p = 0.1), Table 3 (exact-match error at
2000 episodes) and section 4.2 (masking); its tabular figures give curves only, read here by eye
on their log axes ("~"). "Reproduced" is said only where ours falls within the paper's reported
spread; a number read by eye off a figure has no spread, and our token-reversal budget is not the
paper's, so those rows carry a verdict on the paper's comparison at our budget instead.

The network bandits (E11-TPO-net-*) and the token-reversal rows of TPO against GRPO, GRPO without
KL and PG, GRPO's KL row and the masking row are declared experiments now
(paper_figures/tpo-network-bandits and paper_figures/tpo-token-reversal). What stays here, and
why it is not yet declared: the tabular rows and Appendix B's check are computations of
tpo_repro.py, not runs of algos/*.py (an exact-only experiment with an analysis.py would hold
them, its paired rows judged there); the single-sample baselines (PPO, DG, prompt- and
interaction-matched) run 100 or 800 one-answer prompts an update, so at the same 60 updates their
env-step budget is not TPO's, and a declared arm runs each env at the env's one budget (pairing
them with TPO needs a budget per arm and env, or updates as the unit). Their rows keep the
no-learning guard (inconclusive where both sides stay above 95% error).
"""

from __future__ import annotations

import numpy as np

from controlrl import stats
from paper_figures.claims import (
    FAILS,
    HOLDS,
    INCONCLUSIVE,
    NOT_RUN,
    Row,
    paired_verdict,
    read,
)

PAPER = "Target Policy Optimization (Kaddour 2026, arXiv 2604.06159)"
SINGLE, MULTI = "single K=100", "multi N=100 K=10"
TAB_SETTING = {
    SINGLE: "K = 100 one-hot bandit, logit table at 0, B = 100 sampled pulls, normalised logit "
    "steps alpha 0.1, 150 steps, 100 seeds (section 3.1; reference TabularSingleConfig)",
    MULTI: "N = 100 contexts x K = 10 one-hot arms, N(0, 1) logits, exact population updates, "
    "normalised steps alpha 0.1, 1000 steps, 100 seeds (section 3.2; TabularMultiConfig)",
}
TAB_OURS = (
    "paper's own setting: the reference's update rules, losses differentiated by autograd "
    "(TPO through algos/tpo.py), float64, numpy seeds"
)
# read by eye from the paper's Figures 2a and 3a (log axes), mean over its 100 seeds
PAPER_FIG = {
    (SINGLE, "tpo"): "~1e-4 at step 145",
    (SINGLE, "grpo"): "~3e-3",
    (SINGLE, "pg"): "~1e-3",
    (MULTI, "tpo"): "~5e-4",
    (MULTI, "grpo"): "~5e-4",
    (MULTI, "dg"): "~2e-3",
    (MULTI, "pg"): "~6e-3",
    (MULTI, "ce"): "~4e-4",
}
SEQ_OURS = (
    "differs: 64-64 MLP on one-hot [prompt | answer | position] and Adam 1e-3 (clip 1.0) "
    "instead of a 2-layer transformer with Muon; B = 100 prompts x K = 8 answers, 4 epochs as "
    "the paper"
)


NO_LEARNING = 0.95  # Table 3's "-": exact-match error above 95%, no meaningful learning
EARLIER_SEEDS = 30  # the token-reversal cells' seeds before they grew to 200


def by(rows, value: str, **match) -> dict[str, float]:
    """{seed: value} of the rows whose columns equal `match`."""
    return {
        r["seed"]: float(r[value]) for r in rows if all(r[k] == str(v) for k, v in match.items())
    }


def paired_diffs(a: dict, b: dict) -> np.ndarray:
    """a - b over the seeds both have."""
    return np.array([a[s] - b[s] for s in sorted(a, key=int) if s in b])


def mean_of(values: dict) -> float:
    return float(np.mean(list(values.values())))


def run_verdict(task: str, fa: dict, fb: dict, sign: int) -> tuple[str, str, str]:
    """(statistic, verdict, detectable) of a paired network or token-reversal comparison."""
    stat, verdict, det = paired_verdict(paired_diffs(fa, fb), ".3g", claim_sign=sign)
    if task.startswith("sequence") and min(mean_of(fa), mean_of(fb)) > NO_LEARNING:
        # the paper's "-": neither learns, so the claim (one learns where the other does not)
        # cannot show at this budget, whatever the sign of a difference near 1
        verdict = INCONCLUSIVE
        stat += f"; both above {NO_LEARNING:.0%} error (the paper's no meaningful learning)"
    return stat, verdict, det


def tabular_rows() -> list[Row]:
    rows = read("tpo_repro_tabular.csv")
    curves = read("tpo_repro_tabular_curves.csv")
    out = []

    def final(setting, m):
        return by(rows, "final_error", setting=setting, method=m)

    def n_seeds(setting):
        return len(final(setting, "tpo"))

    def budget(setting):
        steps = rows[[r["setting"] for r in rows].index(setting)]["steps"]
        return f"{steps} steps, as the paper"

    for rid, setting, a, b, claim, sign in [
        ("E11-TPO-single-vs-GRPO", SINGLE, "tpo", "grpo",
         "TPO converges faster than GRPO; GRPO plateaus at higher error", -1),
        ("E11-TPO-single-vs-PG", SINGLE, "tpo", "pg",
         "TPO converges faster than PG; PG plateaus at higher error", -1),
        ("E11-TPO-single-TPO-DG", SINGLE, "tpo", "dg",
         "TPO and DG converge fastest (TPO no worse than DG)", -1),
        ("E11-TPO-multi-CE", MULTI, "ce", "tpo",
         "the CE oracle is fastest (below TPO)", -1),
        ("E11-TPO-multi-vs-GRPO", MULTI, "tpo", "grpo",
         "among the RL updates TPO finishes with the lowest error (vs GRPO)", -1),
        ("E11-TPO-multi-vs-DG", MULTI, "tpo", "dg",
         "among the RL updates TPO finishes with the lowest error (vs DG)", -1),
        ("E11-TPO-multi-vs-PG", MULTI, "tpo", "pg",
         "among the RL updates TPO finishes with the lowest error (vs PG)", -1),
    ]:  # fmt: skip
        fa, fb = final(setting, a), final(setting, b)
        d = paired_diffs(fa, fb)
        stat, verdict, det = paired_verdict(d, ".3g", claim_sign=sign)
        paper = ", ".join(
            f"{m.upper()} {PAPER_FIG[(setting, m)]}" for m in (a, b) if (setting, m) in PAPER_FIG
        )
        ours = f"ours: {a.upper()} {mean_of(fa):.3g}, {b.upper()} {mean_of(fb):.3g}"
        out.append(
            Row(
                rid,
                PAPER,
                claim,
                TAB_SETTING[setting],
                TAB_OURS,
                budget(setting),
                f"{d.size} paired seeds (paper 100)",
                f"error 1 - pi(y*) at the last step (mean over seeds); paper (Fig., by eye): "
                f"{paper or 'no number'}; {ours}; paired {a} minus {b}",
                stat,
                verdict,
                det,
                "tpo_repro_tabular.csv",
            )
        )

    # multi context, early: GRPO and DG ahead of TPO at the start, TPO ahead at the end
    early = 250
    mean_err = {
        m: [float(r["mean_error"]) for r in curves if r["setting"] == MULTI and r["method"] == m]
        for m in ("tpo", "grpo", "dg")
    }
    ahead = {m: sum(mean_err[m][t] < mean_err["tpo"][t] for t in range(early)) for m in mean_err}
    finals = [
        paired_verdict(paired_diffs(final(MULTI, "tpo"), final(MULTI, m)), ".3g", claim_sign=-1)[1]
        for m in ("grpo", "dg")
    ]
    start = all(2 * ahead[m] > early for m in ("grpo", "dg"))
    out.append(
        Row(
            "E11-TPO-multi-overtake",
            PAPER,
            "DG and GRPO improve slightly faster at the start, but TPO overtakes them and "
            "finishes lower",
            TAB_SETTING[MULTI],
            TAB_OURS,
            budget(MULTI),
            f"{n_seeds(MULTI)} seeds (paper 100)",
            f"seed-mean error 1 - mean_n pi_n(y_n): steps among the first {early} where GRPO's "
            "(DG's) is below TPO's; the final-error rows E11-TPO-multi-vs-GRPO/-DG",
            f"GRPO below TPO at {ahead['grpo']} of {early} steps, DG at {ahead['dg']}; final: "
            f"TPO below GRPO {finals[0]}, below DG {finals[1]} (paired)",
            HOLDS if start and finals == [HOLDS, HOLDS] else FAILS,
            "see E11-TPO-multi-vs-GRPO/-DG",
            "tpo_repro_tabular.csv, tpo_repro_tabular_curves.csv",
        )
    )

    # misalignment: lowest on average, and at how many steps the seed mean is the lowest
    for rid, setting, others, claim in [
        ("E11-TPO-single-misalignment", SINGLE, ("dg", "grpo", "pg"),
         "TPO keeps the lowest misalignment to the exact policy gradient throughout training"),
        ("E11-TPO-multi-misalignment", MULTI, ("dg", "grpo", "pg"),
         "TPO stays much closer to the CE oracle's direction than GRPO, DG and PG throughout"),
    ]:  # fmt: skip
        mean_mis = {
            m: [float(r["mean_misalignment"]) for r in curves if r["setting"] == setting and
                r["method"] == m]
            for m in ("tpo", *others)
        }  # fmt: skip
        steps = len(mean_mis["tpo"])
        lowest = sum(
            all(mean_mis["tpo"][t] <= mean_mis[m][t] for m in others) for t in range(steps)
        )
        first = next(
            (t for t in range(steps) if all(mean_mis["tpo"][t] <= mean_mis[m][t] for m in others)),
            steps,
        )
        parts, verdicts = [], []
        ta = by(rows, "mean_misalignment", setting=setting, method="tpo")
        for m in others:
            d = paired_diffs(ta, by(rows, "mean_misalignment", setting=setting, method=m))
            stat, verdict, det = paired_verdict(d, ".3g", claim_sign=-1)
            parts.append(f"vs {m}: {stat}")
            verdicts.append(verdict)
        # "throughout": lowest on average AND at every step; lowest on average only is a fail
        if all(v == HOLDS for v in verdicts):
            verdict = HOLDS if lowest == steps else FAILS
        else:
            verdict = FAILS if FAILS in verdicts else INCONCLUSIVE
        out.append(
            Row(
                rid,
                PAPER,
                claim,
                TAB_SETTING[setting],
                TAB_OURS,
                budget(setting),
                f"{n_seeds(setting)} paired seeds (paper 100)",
                "1 - cos(g, g*) per step (g* the exact PG, or CE's direction); TPO's seed-mean "
                f"lowest at {lowest} of {steps} steps (first at step {first}); paired "
                "per-seed mean over steps, TPO minus each",
                "; ".join(parts),
                verdict,
                "see statistic",
                "tpo_repro_tabular.csv, tpo_repro_tabular_curves.csv",
            )
        )
    return out


def exact_rows() -> list[Row]:
    rows = read("tpo_repro_exact.csv")
    devs = {r["method"]: float(r["ours"]) for r in rows if r["check"].startswith("max")}
    quoted = [r for r in rows if r["paper"]]
    matches = []
    for r in quoted:
        digits = 0 if r["method"] == "tpo" and r["check"].startswith("lambda") else 2
        matches.append(round(float(r["ours"]), digits) == round(float(r["paper"]), digits))
    text = "; ".join(
        f"{r['method']} {r['check'].split(',')[0]}: ours {float(r['ours']):.4g}, paper {r['paper']}"
        for r in quoted
    )
    worst = max(devs.values())
    ok = all(matches) and worst < 1e-10
    return [
        Row(
            "E11-TPO-appendixB",
            PAPER,
            "every exact one-hot update is beta(p_n)(e_y - pi_n): CE 1, PG p, DG p/(1+p), GRPO "
            "sqrt(p/(1-p)), TPO p(lam-1)/(1-p+lam p), lam = exp(10/3) ~ 28; at p = 0.1 TPO 0.73,"
            " DG 0.09, GRPO 0.33",
            "Appendix B, N = 100 x K = 10 exact updates",
            "paper's own setting: autograd directions at every step of every seed of the "
            "multi-context runs against the closed forms",
            "exact",
            "n/a",
            "max |autograd - closed form| over all steps and seeds, and the quoted numbers "
            "to the paper's digits",
            f"max deviation {worst:.2g} ({', '.join(f'{m} {v:.1g}' for m, v in devs.items())});"
            f" {text}" + ("; reproduced (every quoted number to its digits)" if ok else ""),
            HOLDS if ok else FAILS,
            "exact",
            "tpo_repro_exact.csv",
        )
    ]


def run_rows() -> list[Row]:
    rows = read("tpo_repro_runs.csv")
    out = []
    cells = {(r["task"], r["method"]) for r in rows}

    def final(task, m, value="final_error"):
        return by(rows, value, task=task, method=m)

    def updates(task, method):
        r = next(r for r in rows if r["task"] == task and r["method"] == method)
        return int(r["updates"]), int(r["samples_per_update"])

    seq_setting = (
        "V = 2, terminal exact-match reward, 2-layer transformer, Muon 1e-3, B = 100 x K = 8, "
        "4 epochs, 2000 episodes, 20 seeds (section 3.6, Table 3, prompt-matched)"
    )
    specs = []
    single = (
        SEQ_OURS + "; PPO and DG as the reference's single-sample baselines (src/tpo/experiments/"
        "_trial.py): one answer per prompt (100 an update against TPO's 800, prompt-matched as "
        "Table 3), advantage = reward - the batch's mean, PPO's clipped per-token ratio over 4 "
        "epochs without a critic, DG's gate (eta 1) in one gradient step; our loss averages an "
        "answer's tokens (the reference sums them)"
    )
    im = single.replace(
        "one answer per prompt (100 an update against TPO's 800, prompt-matched as Table 3)",
        "interaction-matched as Table 3 (800 prompts of one answer "
        "an update, as TPO's 800 answers, and the learning rate times sqrt(8))",
    )
    # the paper's Table 3 (exact-match error %, 2000 episodes); None: "no meaningful learning"
    # (> 95%)
    prompt = {
        7: {"tpo": 6.9, "ppo": 12.0, "dg": 33.8},
        8: {"tpo": 8.6, "ppo": 26.3, "dg": 58.8},
        9: {"tpo": 6.1, "ppo": 90.6, "dg": None},
        10: {"tpo": 7.4, "ppo": None, "dg": None},
    }
    interaction = {7: {"tpo": 1.8, "ppo-im": 38.6, "dg-im": 47.7},
                   8: {"tpo": 2.8, "ppo-im": 62.1, "dg-im": 69.4}}  # fmt: skip
    names = {"ppo": "PPO", "dg": "DG", "ppo-im": "PPO-im", "dg-im": "DG-im"}

    def pct(v):
        return "> 95%" if v is None else f"{v}%"

    for table, how in ((prompt, "prompt-matched"), (interaction, "interaction-matched")):
        for L, paper in table.items():
            for b in (m for m in paper if m != "tpo"):
                name = names[b]
                ours = im if b.endswith("-im") else single
                specs.append(
                    (f"E11-TPO-reverse-L{L}-vs-{name}", f"sequence-reverse-2-{L}", "tpo", b,
                     f"TPO's exact-match error is below {name.removesuffix('-im')}'s (L = {L},"
                     f" {how})", seq_setting.replace("V = 2", f"V = 2, H = {L}"), ours,
                     f"paper at 2000 episodes: TPO {pct(paper['tpo'])}, "
                     f"{name.removesuffix('-im')} {pct(paper[b])}", -1)
                )  # fmt: skip
    for rid, task, a, b, claim, setting, ours, paper_num, sign in specs:
        if (task, a) not in cells or (task, b) not in cells:
            out.append(
                Row(rid, PAPER, claim, setting, ours, "", "", "", "the cell did not finish "
                    "within this CPU budget", NOT_RUN, "", "tpo_repro_runs.csv")
            )  # fmt: skip
            continue
        fa, fb = final(task, a), final(task, b)
        d = paired_diffs(fa, fb)
        stat, verdict, det = run_verdict(task, fa, fb, sign)
        if task.startswith("sequence") and d.size > EARLIER_SEEDS:
            # these cells grew from populations of EARLIER_SEEDS seeds (seeds 0-29, the same
            # runs up to float rounding): a verdict that more seeds changed says so
            early = {k: v for k, v in fa.items() if int(k) < EARLIER_SEEDS}
            old = run_verdict(task, early, fb, sign)[1]
            if old != verdict:
                was = stats.paired(paired_diffs(early, fb), np.zeros(EARLIER_SEEDS))
                ours += (
                    f"; was {old} at {EARLIER_SEEDS} paired seeds (seeds 0-{EARLIER_SEEDS - 1}: "
                    f"diff {was.diff.mean:.3g}, {was.diff.kind} {was.diff.lo:.3g} to "
                    f"{was.diff.hi:.3g}, sign-flip p={was.p:.3g}), {verdict} at {d.size}: the "
                    "narrower interval"
                )
        n_up, per = updates(task, a)
        per_b = updates(task, b)[1]
        if per_b != per:  # prompt-matched: B prompts, K answers each against one
            per = f"{per} ({a}) or {per_b} ({b})"
        seq = task.startswith("sequence")
        budget = (
            f"ours {n_up} updates of {per} answers; the paper 2000"
            if seq
            else f"ours {n_up} updates of {per} pulls"
        )
        unit = "exact-match error" if seq else "error"
        out.append(
            Row(
                rid,
                PAPER,
                claim,
                setting,
                ours,
                budget,
                f"{d.size} paired seeds",
                f"{unit} (1 - success of the rollout) over the last 10 updates; {paper_num}; "
                f"ours {a} {mean_of(fa):.3g}, {b} {mean_of(fb):.3g} at our budget (not "
                f"comparable to the paper's final numbers); paired {a} minus {b}",
                stat,
                verdict,
                det,
                "tpo_repro_runs.csv",
            )
        )
    return out


def rows() -> list[Row]:
    """Every TPO reproduction row."""
    return tabular_rows() + exact_rows() + run_rows()
