"""Ledger rows of SPO vs PPO in the SPO reference's own MuJoCo setting (trust_region_family.py
--protocol spo-reference, on EnvPool, whose v5 ids are Gymnasium's tasks): each beside the same
pair at the same budget on the same tasks in CleanRL's setting (E1-SPO at 300k, E1-SPO-1M), so
that only the setting differs (a task that CleanRL's setting did not run at that budget has no old
verdict, and the pooled old verdict is over the tasks it did run); then one factor of CleanRL's
setting at a time in the reference's own, each beside the reference's own at the same budget;
paired over seeds on the final deterministic evaluation return."""

from __future__ import annotations

from paper_figures.claims import (
    E1_METRIC,
    E1_PAIRS,
    E1_SETTINGS,
    Row,
    _family_setting,
    cut_tasks,
    layout,
    normalised_diffs,
    paired_verdict,
    with_theirs,
)

SETTING = (
    "the SPO reference's MuJoCo trainer (mujoco/main.py) with its PPO baseline in the same "
    "trainer: the 7-layer tanh policy (256-256-128-128-64-64) and 64-64 critic, 8 envs x 256 steps "
    "per batch, 4 minibatches x 10 epochs, lr 3e-4 decayed, no entropy bonus, timeouts as "
    "terminal; one observation normaliser over the 8 envs where the reference keeps one per env"
)
# (our CSV, the CleanRL-setting CSV at the same budget, the id of its E1-SPO row, whether that
# row has per-task rows <id>-<task> beside it, our row's id)
AT_300K = ("spo_reference_300k", "trust_region_family", "E1-SPO", True, "E1-SPO-ref")
AT_1M = ("spo_reference_1m", "trust_region_family_1m", "E1-SPO-1M", False, "E1-SPO-ref-1M")
STUDIES = [AT_300K, AT_1M]
# One factor of CleanRL's setting put into the reference's, at 1M steps on Hopper-v5: (our CSV,
# (the reference's words in SETTING, CleanRL's that replace them), the flags after -- that make
# it, our row's id)
EPOCHS, BATCH = 10, 2048  # the reference's, kept by every study here
MB32 = ("spo_reference_mb32_1m", ("4 minibatches", "32 minibatches"), "--num-minibatches 32",
        "E1-SPO-ref-1M-mb32")  # fmt: skip
LAYOUT = ("spo_reference_1x2048_1m", ("8 envs x 256 steps", "1 env x 2,048 steps"),
          "--num-envs 1 --num-steps 2048", "E1-SPO-ref-1M-1x2048")  # fmt: skip
TIMEOUTS = ("spo_reference_timeouts_1m", ("timeouts as terminal", "timeouts bootstrapped"),
            "--no-truncation-as-terminal", "E1-SPO-ref-1M-timeouts")  # fmt: skip
ABLATIONS = [MB32, LAYOUT, TIMEOUTS]


def rows(read, studies=STUDIES) -> list[Row]:
    """Per study: SPO vs PPO pooled over its tasks, then (with several) one row per task."""
    _, paper, claim, a, b, theirs = next(p for p in E1_PAIRS if p[0] == "E1-SPO")
    out = []
    for name, before_name, was_id, per_task, rid in studies:
        runs, before = read(f"{name}.csv"), read(f"{before_name}.csv")
        envs = sorted({r["env_id"] for r in runs})
        tasks = [e.removeprefix("envpool:") for e in envs]
        budget = with_theirs(_family_setting(runs)[2], theirs)
        steps, files = int(runs[0]["steps"]), f"{name}.csv, {before_name}.csv"
        n_seeds = len({r["seed"] for r in runs})
        several = per_task and len({r["env_id"] for r in before}) > 1
        cases = [(rid, envs, tasks, _was_row(was_id, tasks, several))]
        if len(envs) > 1:
            cases += [(_task_row(rid, e), [e], [t], _was_row(was_id, [t], several))
                        for e, t in zip(envs, tasks)]  # fmt: skip
        _check_minibatches(runs, SETTING)
        before_steps, before_tasks = int(before[0]["steps"]), {r["env_id"] for r in before}
        for row_id, row_envs, row_tasks, row_was in cases:
            ran = [t for t in row_tasks if t in before_tasks]
            d, stat, verdict, det, was, n_was = _pair(a, b, runs, row_envs, before, ran)
            if ran:  # tasks that CleanRL's setting did not run at this budget have no old verdict
                unrun = [t for t in row_tasks if t not in ran]
                old = (
                    f"was {was} in CleanRL's setting ({layout('ppo')}, 64-64 tanh) on "
                    f"{', '.join(ran)} at {before_steps:,} steps ({n_was} pairs, row {row_was}"
                    + (f"; {' and '.join(unrun)} not run there at this budget)" if unrun else ")")
                )
            else:
                old = f"not run in CleanRL's setting at {before_steps:,} steps"
            where = (
                f"paper's own setting at {steps:,} of its 10,000,000 steps: {SETTING}; on EnvPool "
                f"({', '.join(row_envs)}: Gymnasium's v5 MDP; the reference ran v4)"
                f"{cut_tasks(tasks)}; {old} -> {verdict} in the paper's"
            )
            seeds = f"{n_seeds} per task, {d.size} pairs" if row_id == rid else f"{d.size} pairs"
            claim_here = claim if row_id == rid else f"{claim}, on {row_tasks[0]}"
            out.append(Row(row_id, paper, claim_here, E1_SETTINGS["E1-SPO"], where, budget, seeds,
                           E1_METRIC, stat, verdict, det, files))  # fmt: skip
    return out


def ablation_rows(read, ablations=ABLATIONS) -> list[Row]:
    """Per ablation: SPO vs PPO on Hopper at 1M in the reference's setting with one factor of
    CleanRL's, beside the same pair in the reference's own (row E1-SPO-ref-1M, or its row for the
    one task the ablation ran)."""
    _, paper, claim, a, b, theirs = next(p for p in E1_PAIRS if p[0] == "E1-SPO")
    ref_name, _, _, _, was_id = AT_1M
    before = read(f"{ref_name}.csv")
    out = []
    for name, (old, new), _, rid in ablations:
        runs = read(f"{name}.csv")
        setting = SETTING.replace(old, new)
        if setting == SETTING:
            raise ValueError(f"{rid}: {old!r} is not in the reference's setting")
        _check_minibatches(runs, setting)
        envs = sorted({r["env_id"] for r in runs})
        steps = int(runs[0]["steps"])
        ref_envs = sorted({r["env_id"] for r in before})
        one_of = len(envs) == 1 and envs[0] in ref_envs  # beside the reference's per-task row
        if steps != int(before[0]["steps"]) or not (envs == ref_envs or one_of):
            raise ValueError(f"{name}.csv and {ref_name}.csv ran different tasks or budgets")
        was_row = _task_row(was_id, envs[0]) if envs != ref_envs else was_id
        d, stat, verdict, det, was, n_was = _pair(a, b, runs, envs, before, envs)
        where = (
            f"the paper's own setting with one factor of CleanRL's ({new} for {old}), at "
            f"{steps:,} of its 10,000,000 steps: {setting}; on EnvPool ({', '.join(envs)})"
            f"{cut_tasks([e.removeprefix('envpool:') for e in envs])}; was {was} in the paper's "
            f"own setting ({n_was} pairs, row {was_row}) -> {verdict} with {new}"
        )
        budget = with_theirs(_family_setting(runs)[2], theirs)
        seeds = f"{len({r['seed'] for r in runs})} per task, {d.size} pairs"
        out.append(Row(rid, paper, claim, E1_SETTINGS["E1-SPO"], where, budget, seeds, E1_METRIC,
                       stat, verdict, det, f"{name}.csv, {ref_name}.csv"))  # fmt: skip
    return out


def _pair(a, b, runs, envs, before, was_envs):
    """(a - b normalised diffs, statistic, verdict, detectable) on `runs`' `envs`, then the
    verdict and pair count of the same comparison in `before` on `was_envs` (None, 0 on none)."""
    d = normalised_diffs(runs, "final_eval_return", a, b, envs)
    if not was_envs:
        return d, *paired_verdict(d), None, 0
    was_d = normalised_diffs(before, "final_eval_return", a, b, was_envs)
    return d, *paired_verdict(d), paired_verdict(was_d)[1], was_d.size


def _task_row(rid: str, env_id: str) -> str:
    """The id of a study's per-task row: <id>-<task name without version>."""
    return f"{rid}-{env_id.removeprefix('envpool:').split('-')[0]}"


def _check_minibatches(runs, setting: str) -> None:
    """The minibatch count the row's words state is the one every run's gradient steps show."""
    for r in runs:
        updates = int(r["steps"]) // BATCH
        mb = float(r["grad_steps"]) / (EPOCHS * updates)
        if f"{mb:g} minibatches x {EPOCHS} epochs" not in setting:
            raise ValueError(
                f"{r['algo']} seed {r['seed']} took {mb:g} minibatches per epoch; the row says "
                f"{setting!r}"
            )


def _was_row(was_id: str, tasks: list[str], several: bool) -> str:
    """The ledger row of the same comparison in CleanRL's setting: for one task of several there,
    that task's row, else the pooled one."""
    return f"{was_id}-{tasks[0].split('-')[0]}" if len(tasks) == 1 and several else was_id
