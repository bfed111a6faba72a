"""Ledger rows of E1 and E2 at 1M env steps per run (the PPO paper's budget): each E1 paired
comparison on the tasks of trust_region_family_1m.csv, and E2's depth gap on the tasks of
depth_sweep_1m.csv (whose depth-2 runs are that family's), each beside the verdict of the same
comparison on the same tasks at 300k steps (trust_region_family.csv, depth_sweep.csv); and SPO vs
PPO in the SPO reference's own MuJoCo setting (spo_reference_1m.csv) beside the same pair at the
same budget in CleanRL's setting. All paired over seeds on the final deterministic evaluation
return."""

from __future__ import annotations

from paper_figures.claims import (
    E1_METRIC,
    E1_PAIRS,
    E1_SETTINGS,
    E2_CLAIM,
    E2_METRIC,
    E2_PAPER,
    E2_SETTING,
    Row,
    _depth_gap,
    _family_setting,
    cut_tasks,
    depth_budget,
    depth_setting,
    layout,
    normalised_diffs,
    paired_verdict,
    with_theirs,
)

NAME = "trust_region_family_1m"
BEFORE = "trust_region_family"  # the 300k figure whose verdicts these rows restate at 1M
DEPTH, DEPTH_BEFORE = "depth_sweep_1m", "depth_sweep"
SPO_REF = "spo_reference_1m"  # trust_region_family.py --protocol spo-reference
SPO_REF_SETTING = (
    "the SPO reference's MuJoCo trainer (mujoco/main.py) with its PPO baseline in the same "
    "trainer: the 7-layer tanh policy (256-256-128-128-64-64) and 64-64 critic, 8 envs x 256 steps "
    "per batch, 4 minibatches x 10 epochs, lr 3e-4 decayed, no entropy bonus, timeouts as "
    "terminal; one observation normaliser over the 8 envs where the reference keeps one per env"
)


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


def depth_rows(read) -> list[Row]:
    """E2-1M: SPO's depth gap over PPO pooled over the tasks of depth_sweep_1m.csv, beside the
    same gap on the same tasks at 300k (depth_sweep.csv)."""
    runs, before = read(f"{DEPTH}.csv"), read(f"{DEPTH_BEFORE}.csv")
    envs = sorted({r["env_id"] for r in runs})
    depths = sorted({int(r["depth"]) for r in runs})
    d = _depth_gap(runs)
    stat, verdict, det = paired_verdict(d, ".4g")
    was_d = _depth_gap([r for r in before if r["env_id"] in envs])
    was_rows = f"row E2-{envs[0].split('-')[0]}" if len(envs) == 1 else "rows E2-<task>"
    where = (
        f"{depth_setting(envs, depths)}; was {paired_verdict(was_d, '.4g')[1]} on "
        f"{', '.join(envs)} at {int(before[0]['steps']):,} steps ({was_d.size} pairs, {was_rows})"
        f" -> {verdict} at {int(runs[0]['steps']):,} steps"
    )
    seeds = f"{len({r['seed'] for r in runs})} per task, {d.size} pairs"
    return [Row("E2-1M", E2_PAPER, E2_CLAIM, E2_SETTING, where, depth_budget(runs), seeds,
                E2_METRIC, stat, verdict, det, f"{DEPTH}.csv, {DEPTH_BEFORE}.csv")]  # fmt: skip


def spo_reference_rows(read) -> list[Row]:
    """E1-SPO-ref: SPO vs PPO in the SPO reference's own setting (on EnvPool, whose v5 ids are
    Gymnasium's tasks), beside the same pair at the same budget in CleanRL's setting (E1-SPO-1M)."""
    runs, before = read(f"{SPO_REF}.csv"), read(f"{NAME}.csv")
    envs = sorted({r["env_id"] for r in runs})
    tasks = [e.removeprefix("envpool:") for e in envs]
    rid, paper, claim, a, b, theirs = next(p for p in E1_PAIRS if p[0] == "E1-SPO")
    d = normalised_diffs(runs, "final_eval_return", a, b, envs)
    stat, verdict, det = paired_verdict(d)
    was_d = normalised_diffs(before, "final_eval_return", a, b, tasks)
    steps = int(runs[0]["steps"])
    where = (
        f"paper's own setting at {steps:,} of its 10,000,000 steps: {SPO_REF_SETTING}; on EnvPool "
        f"({', '.join(envs)}: Gymnasium's v5 MDP; the reference ran v4){cut_tasks(tasks)}; was "
        f"{paired_verdict(was_d)[1]} in CleanRL's setting ({layout('ppo')}, 64-64 tanh) on "
        f"{', '.join(tasks)} at {int(before[0]['steps']):,} steps ({was_d.size} pairs, row "
        f"{rid}-1M) -> {verdict} in the paper's"
    )
    budget = with_theirs(_family_setting(runs)[2], theirs)
    seeds = f"{len({r['seed'] for r in runs})} per task, {d.size} pairs"
    return [Row(f"{rid}-ref", paper, claim, E1_SETTINGS[rid], where, budget, seeds, E1_METRIC,
                stat, verdict, det, f"{SPO_REF}.csv, {NAME}.csv")]  # fmt: skip
