"""Ledger rows of IQL (tau 0.7) against behaviour cloning at the larger budget
(paper_figures/iql_tau.py --name iql_vs_bc_100k), one row per dataset: the final D4RL-normalised
score, IQL minus BC. The two are different learners (BC trains no critics), so a seed does not
pair them: two-sample permutation test. Each row states the earlier, smaller run's verdict on the
same dataset (iql_vs_bc.csv), whether IQL's curve is still rising at the end of the budget (the
least-squares slope over the second half of each run's evaluations), and its compute."""

from __future__ import annotations

import numpy as np

from controlrl import stats
from paper_figures.claims import Row
from paper_figures.claims_retrace import two_sample_verdict

PAPER = "Offline Reinforcement Learning with Implicit Q-Learning (arXiv 2110.06169)"
NOW, OLD = "iql_vs_bc_100k.csv", "iql_vs_bc.csv"
CURVES = "iql_vs_bc_100k_curves.csv"
# IQL's scores in the paper's table (D4RL locomotion-v2 datasets, 1M gradient steps)
PAPER_IQL = {"hopper-medium": 66.3, "hopper-medium-replay": 94.7}
SLOPE_PER = 10_000  # slopes in score per this many gradient steps
# the datasets a rerun at this budget is sized for: the three medium-replay ones and hopper-medium
TARGETS = ("hopper-medium", "hopper-medium-replay", "halfcheetah-medium-replay",
           "walker2d-medium-replay")  # fmt: skip


def _scores(rows, dataset: str, method: str) -> list[float]:
    return [
        float(r["final_normalized_score"])
        for r in rows
        if r["dataset"] == dataset and r["method"] == method
    ]


def slopes(curves, dataset: str, method: str) -> list[float]:
    """Per run (seed): the least-squares slope of its evaluation score against gradient steps
    over the evaluations in the second half of the run, per SLOPE_PER steps."""
    runs: dict[str, list[tuple[float, float]]] = {}
    for r in curves:
        if r["dataset"] == dataset and r["method"] == method:
            runs.setdefault(r["seed"], []).append((float(r["step"]), float(r["score"])))
    out = []
    for seed in sorted(runs, key=int):
        pts = np.array(sorted(runs[seed]))
        late = pts[pts[:, 0] >= pts[:, 0].max() / 2]
        if len(late) >= 2:
            slope = np.polyfit(late[:, 0], late[:, 1], 1)[0] * SLOPE_PER
            out.append(float(np.round(slope, 9)) + 0.0)  # no "-0.00" from rounding noise
    return out


def _trend(curves, dataset: str, steps: int) -> str:
    parts = []
    for method, name in (("iql", "IQL"), ("bc", "BC")):
        s = slopes(curves, dataset, method)
        if s:
            parts.append(f"{name} {stats.summarize(s).text('.2f')}")
    return (
        f"slope of the score over the second half of the run ({steps // 2:,}-{steps:,} steps),"
        f" per {SLOPE_PER:,} gradient steps: " + "; ".join(parts)
    )


def update_hours(rows) -> float:
    """The study's compute: the runs' update seconds (train_s) summed, in hours."""
    return float(np.nansum([float(r.get("train_s") or "nan") for r in rows])) / 3600


def rerun_text(read) -> str:
    """What the pooled smaller run's row says of the rerun: its datasets and budget."""
    now = read(NOW)
    names = ", ".join(dict.fromkeys(short_name(r) for r in now))
    return (
        f"rerun at {int(now[0]['steps']):,} gradient steps on {names} alone (rows "
        f"E5-vs-BC-<dataset>)"
    )


def short_name(r) -> str:
    """A CSV row's dataset as the rows name it: hopper-medium-replay (env and kind)."""
    return f"{r['env'].split('-')[0].lower()}-{r['kind']}"


def rows(read) -> list[Row]:
    now, old, curves = read(NOW), read(OLD), read(CURVES)
    steps = {int(r["steps"]) for r in now}
    if len(steps) != 1:
        raise ValueError(f"claims_iql: {NOW} mixes budgets {sorted(steps)}")
    steps = steps.pop()
    old_steps = int(old[0]["steps"])
    datasets = list(dict.fromkeys(r["dataset"] for r in now))
    kinds = ", ".join(dict.fromkeys(f"{r['env']} {r['kind']}" for r in now))
    budget = (
        f"ours {steps:,} gradient steps per run; {update_hours(now):.1f} CPU-hours of updates in "
        f"all ({kinds}); paper 1,000,000"
    )
    have = {short_name(r) for r in now}
    cut = ", ".join(t for t in TARGETS if t not in have)
    out = []
    for ds in datasets:
        name = short_name(next(r for r in now if r["dataset"] == ds))
        t = stats.two_sample(_scores(now, ds, "iql"), _scores(now, ds, "bc"))
        verdict = two_sample_verdict(t)
        was = ""
        if _scores(old, ds, "iql") and _scores(old, ds, "bc"):
            o = stats.two_sample(_scores(old, ds, "iql"), _scores(old, ds, "bc"))
            was = (
                f"; was {two_sample_verdict(o)} at {old_steps:,} steps x {o.a.n} seeds "
                f"(diff {o.diff:.3g}, {o.kind} {o.lo:.3g} to {o.hi:.3g}) -> {verdict}"
            )
        paper = f"D4RL {name}-v2, 1M gradient steps"
        if name in PAPER_IQL:
            paper += f" (the paper's IQL: {PAPER_IQL[name]})"
        ours = (
            f"transplant: generated {ds} (D4RL's recipe and layout, a PPO behaviour policy of "
            "ours, so its normalised scores are not D4RL's); algos/iql.py with CORL's defaults, "
            f"tau 0.7, against --bc; {_trend(curves, ds, steps)}; not rerun at this budget: the "
            f"tau sweep, {cut} and d3rlpy's IQL (cut to fit the compute){was}"
        )
        out.append(
            Row(
                f"E5-vs-BC-{name}",
                PAPER,
                "IQL beats behaviour cloning on D4RL locomotion",
                paper,
                ours,
                budget,
                f"{t.a.n} vs {t.b.n} (unpaired)",
                "final normalised score (deterministic evaluation), IQL minus BC",
                f"IQL {t.a.mean:.3g} vs BC {t.b.mean:.3g} (means); {t.text('.3g')}",
                verdict,
                format(t.detectable, ".3g"),
                f"{NOW}, {CURVES}, {OLD}",
            )
        )
    return out
