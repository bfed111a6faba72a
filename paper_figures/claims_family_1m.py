"""Ledger rows of E1 at 1M env steps per run (trust_region_family_1m.csv, the PPO paper's budget):
each E1 paired comparison on the tasks of that rerun, beside the verdict of the same comparison on
the same tasks at 300k steps (trust_region_family.csv), paired over seeds on the final
deterministic evaluation return."""

from __future__ import annotations

from paper_figures.claims import (
    E1_METRIC,
    E1_PAIRS,
    E1_SETTINGS,
    Row,
    _family_setting,
    cut_tasks,
    normalised_diffs,
    paired_verdict,
    with_theirs,
)

NAME = "trust_region_family_1m"
BEFORE = "trust_region_family"  # the 300k figure whose verdicts these rows restate at 1M


def rows(read) -> list[Row]:
    """One row E1-<algo>-1M per E1 pair both of whose algorithms the 1M rerun ran."""
    runs, before = read(f"{NAME}.csv"), read(f"{BEFORE}.csv")
    envs, ours, budget = _family_setting(runs)
    steps_before = int(before[0]["steps"])
    seeds = {r["seed"] for r in runs}
    ran = {r["algo"] for r in runs}
    out = []
    for rid, paper, claim, a, b, theirs in E1_PAIRS:
        if not {a, b} <= ran:
            continue
        d = normalised_diffs(runs, "final_eval_return", a, b, envs)
        stat, verdict, det = paired_verdict(d)
        was_d = normalised_diffs(before, "final_eval_return", a, b, envs)
        where = (
            f"transplant: {ours}{cut_tasks(envs)}; was {paired_verdict(was_d)[1]} on"
            f" {', '.join(envs)} at {steps_before:,} steps ({was_d.size} pairs, rows {rid} and"
            f" {rid}-<task>) -> {verdict} at {int(runs[0]['steps']):,} steps"
        )
        out.append(Row(f"{rid}-1M", paper, claim, E1_SETTINGS[rid], where,
                       with_theirs(budget, theirs), f"{len(seeds)} per task, {d.size} pairs",
                       E1_METRIC, stat, verdict, det, f"{NAME}.csv, {BEFORE}.csv"))  # fmt: skip
    return out
