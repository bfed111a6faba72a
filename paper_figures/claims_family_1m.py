"""Ledger rows of E2 at 1M env steps per run (the PPO paper's budget): E2's depth gap and SPO vs
PPO with the deep policy on the tasks of depth_sweep_1m.csv (whose depth-2 runs are
trust_region_family_1m.csv's), each beside the verdict of the same comparison on the same tasks at
300k steps (depth_sweep.csv), paired over seeds on the final deterministic evaluation return. The
E1 comparisons at 1M are declared in paper_figures/trust-region-1m/."""

from __future__ import annotations

from paper_figures.claims import (
    E1_METRIC,
    E2_CLAIM,
    E2_METRIC,
    E2_PAPER,
    E2_SETTING,
    Row,
    _depth_gap,
    depth_budget,
    depth_setting,
    normalised_diffs,
    paired_verdict,
)

DEPTH, DEPTH_BEFORE = "depth_sweep_1m", "depth_sweep"
DEEP_CLAIM = "with deeper policy networks SPO outperforms PPO"  # the SPO paper's headline


def depth_rows(read) -> list[Row]:
    """E2-1M: SPO's depth gap over PPO pooled over the tasks of depth_sweep_1m.csv, and E2-deep-1M:
    SPO vs PPO both with the deepest policy (the SPO paper's headline), each beside the same
    comparison on the same tasks at 300k (depth_sweep.csv)."""
    runs, before = read(f"{DEPTH}.csv"), read(f"{DEPTH_BEFORE}.csv")
    envs = sorted({r["env_id"] for r in runs})
    before = [r for r in before if r["env_id"] in envs]
    at = f"{', '.join(envs)} at {int(before[0]['steps']):,} steps"
    steps, files = f"{int(runs[0]['steps']):,} steps", f"{DEPTH}.csv, {DEPTH_BEFORE}.csv"
    n_seeds, budget = len({r["seed"] for r in runs}), depth_budget(runs)
    d = _depth_gap(runs)
    stat, verdict, det = paired_verdict(d, ".4g")
    was_d = _depth_gap(before)
    was_rows = f"row E2-{envs[0].split('-')[0]}" if len(envs) == 1 else "rows E2-<task>"
    where = (
        f"{depth_setting(runs)}; was {paired_verdict(was_d, '.4g')[1]} on {at} ({was_d.size} "
        f"pairs, {was_rows}) -> {verdict} at {steps}"
    )
    seeds = f"{n_seeds} per task, {d.size} pairs"
    gap = Row("E2-1M", E2_PAPER, E2_CLAIM, E2_SETTING, where, budget, seeds, E2_METRIC, stat,
              verdict, det, files)  # fmt: skip
    deep = str(max(int(r["depth"]) for r in runs))
    d = normalised_diffs([r for r in runs if r["depth"] == deep], "final_eval_return", "spo",
                         "ppo", envs)  # fmt: skip
    stat, verdict, det = paired_verdict(d)
    was_d = normalised_diffs([r for r in before if r["depth"] == deep], "final_eval_return",
                             "spo", "ppo", envs)  # fmt: skip
    where = (
        f"{depth_setting(runs)}; SPO and PPO both with the depth-{deep} policy; was "
        f"{paired_verdict(was_d)[1]} on {at} ({was_d.size} pairs, the depth-{deep} runs of "
        f"{DEPTH_BEFORE}.csv) -> {verdict} at {steps}"
    )
    metric = f"{E1_METRIC}, both with the depth-{deep} policy"
    seeds = f"{n_seeds} per task, {d.size} pairs"
    both = Row("E2-deep-1M", E2_PAPER, DEEP_CLAIM, E2_SETTING, where, budget, seeds, metric, stat,
               verdict, det, files)  # fmt: skip
    return [gap, both]
