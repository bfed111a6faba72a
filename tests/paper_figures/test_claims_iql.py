"""IQL vs BC at the larger budget: one row per dataset, unpaired, with the earlier run's verdict,
the late-curve slopes and the compute, on known scores."""

import pytest

from paper_figures import claims
from paper_figures.claims_iql import CURVES, D3RLPY, NOW, OLD, rows, slopes, tau_rerun_text

DS = "hopper-medium-v5-s0"


def result_rows(iql, bc, steps, env="Hopper-v5", kind="medium", dataset=DS):
    out = []
    for method, scores in (("iql", iql), ("bc", bc)):
        for seed, score in enumerate(scores, 1):
            out.append({"env": env, "dataset": dataset, "kind": kind, "method": method,
                        "tau": "0.7" if method == "iql" else "", "online_steps": "0",
                        "seed": str(seed), "steps": str(steps),
                        "final_normalized_score": str(score), "train_s": "720"})  # fmt: skip
    return out


def curve_rows(rise, seeds=5, method="iql", dataset=DS):
    """Scores 10 + rise * step / 10,000 at steps 10k..100k, plus a seed offset."""
    return [
        {"dataset": dataset, "method": method, "tau": "0.7", "online_steps": "0",
         "seed": str(s), "step": str(k * 10_000), "score": str(10 + s + rise * k)}
        for s in range(1, seeds + 1) for k in range(1, 11)
    ]  # fmt: skip


def peer_rows(scores, updates=100_000, dataset=DS):
    """bench_iql.py --eval rows of d3rlpy's IQL (and one of ours, which the rows do not read)."""
    out = [{"contender": "ours", "seed": "1", "dataset": f"{dataset}.hdf5", "updates": str(updates),
            "normalized_score": "0", "process_s": "1", "status": "ok"}]  # fmt: skip
    for seed, score in enumerate(scores, 1):
        out.append({"contender": "d3rlpy", "seed": str(seed), "dataset": f"{dataset}.hdf5",
                    "updates": str(updates), "normalized_score": str(score),
                    "process_s": "3600", "status": "ok"})  # fmt: skip
    return out


def ledger(now, old, curves, peer=()):
    from paper_figures.claims_iql import OLD_TAU

    files = {NOW: now, OLD: old, CURVES: curves, OLD_TAU: [], D3RLPY: list(peer)}
    return {r.id: r for r in rows(files.__getitem__)}


def test_iql_ahead_holds_and_states_the_old_verdict_slopes_and_hours():
    now = result_rows([60, 62, 64, 66, 68], [40, 41, 42, 43, 44], 100_000)
    old = result_rows([30, 31, 32], [50, 51, 52], 20_000)
    got = ledger(now, old, curve_rows(2.0) + curve_rows(0.0, method="bc"))
    row = got["E5-vs-BC-hopper-medium"]
    assert row.verdict == claims.HOLDS
    assert row.seeds == "5 vs 5 (unpaired)"
    assert row.statistic.startswith("IQL 64 vs BC 42 (means); diff 22 (95% CI")
    assert row.our_setting.endswith(
        "; was inconclusive at this power at 20,000 steps x 3 seeds (diff -20, range -22 to -18)"
        " -> holds"
    )
    slope = "per 10,000 gradient steps: IQL 2.00 (sample SD 0.00; 95% CI 2.00 to 2.00; n=5)"
    assert slope in row.our_setting
    assert "BC 0.00 (sample SD 0.00;" in row.our_setting
    assert "(the paper's IQL: 66.3)" in row.paper_setting
    assert "not rerun at this budget: the tau sweep, hopper-medium-replay, " in row.our_setting
    assert row.budget.startswith("ours 100,000 gradient steps per run; 2.0 CPU-hours")


def test_iql_behind_fails_and_a_tie_is_inconclusive():
    old = result_rows([1], [1], 20_000)
    behind = ledger(result_rows([20, 21, 22, 23, 24], [50, 52, 54, 56, 58], 100_000), old, [])
    assert behind["E5-vs-BC-hopper-medium"].verdict == claims.FAILS
    tie = ledger(result_rows([50, 52, 54, 56, 58], [51, 53, 55, 57, 49], 100_000), old, [])
    assert tie["E5-vs-BC-hopper-medium"].verdict == claims.INCONCLUSIVE


def test_one_row_per_dataset_and_mixed_budgets_are_an_error():
    now = result_rows([60] * 5, [40] * 5, 100_000)
    now += result_rows([30] * 5, [10] * 5, 100_000, kind="medium-replay",
                       dataset="hopper-medium-replay-v5-s0")  # fmt: skip
    got = ledger(now, result_rows([1], [1], 20_000), [])
    assert sorted(got) == ["E5-vs-BC-hopper-medium", "E5-vs-BC-hopper-medium-replay"]
    assert "was " not in got["E5-vs-BC-hopper-medium-replay"].our_setting  # not in the old CSV
    with pytest.raises(ValueError, match="mixes budgets"):
        ledger(now + result_rows([1], [1], 50_000), [], [])


def test_slope_uses_the_second_half_of_each_run():
    curves = curve_rows(1.0, seeds=2)
    for r in curves:  # a jump in the first half must not count
        if int(r["step"]) < 50_000:
            r["score"] = str(float(r["score"]) - 100)
    assert slopes(curves, DS, "iql") == pytest.approx([1.0, 1.0])


def test_the_pooled_rows_text_names_the_rerun_datasets():
    from paper_figures.claims_iql import rerun_text

    now = result_rows([60] * 5, [40] * 5, 100_000)
    now += result_rows([30] * 5, [10] * 5, 100_000, kind="medium-replay",
                       dataset="hopper-medium-replay-v5-s0")  # fmt: skip
    assert rerun_text({NOW: now}.__getitem__) == (
        "rerun at 100,000 gradient steps on hopper-medium, hopper-medium-replay alone (rows "
        "`E5-vs-BC-<dataset>`)"
    )


MR = "hopper-medium-replay-v5-s0"


def tau_rows_of(scores: dict[str, list[float]], dataset=MR, kind="medium-replay", steps=100_000):
    """Result rows of IQL at each tau {tau: per-seed scores} on one dataset."""
    return [
        {"env": "Hopper-v5", "dataset": dataset, "kind": kind, "method": "iql", "tau": tau,
         "online_steps": "0", "seed": str(seed), "steps": str(steps),
         "final_normalized_score": str(score), "train_s": "3600"}
        for tau, per_seed in scores.items() for seed, score in enumerate(per_seed, 1)
    ]  # fmt: skip


def smoke(hi, lo):
    """The smoke-size sweep's CSV (no env column) on an earlier generation of the dataset."""
    return [
        {"dataset": "hopper-medium-replay-v5-s0-e10", "kind": "medium-replay", "method": "iql",
         "tau": tau, "online_steps": "0", "seed": str(seed), "steps": "5000",
         "final_normalized_score": str(score)}
        for tau, per_seed in (("0.9", hi), ("0.5", lo)) for seed, score in enumerate(per_seed, 1)
    ]  # fmt: skip


def tau_ledger(now, curves=(), old=()):
    from paper_figures.claims_iql import OLD_TAU

    files = {NOW: now, OLD: result_rows([1], [1], 20_000), CURVES: list(curves),
             OLD_TAU: list(old), D3RLPY: []}  # fmt: skip
    return {r.id: r for r in rows(files.__getitem__)}


def test_tau_row_two_sample_below_six_pairs_with_the_old_verdict_and_hours():
    bc_iql = result_rows([30, 31, 32, 33, 34], [9, 9, 9, 9, 9], 100_000, kind="medium-replay",
                         dataset=MR)  # fmt: skip
    now = bc_iql + tau_rows_of({"0.5": [20, 21, 22, 23, 24], "0.9": [50, 51, 52, 53, 54]})
    got = tau_ledger(now, old=smoke([11, 10, 10.5], [8, 7, 7.5]))
    row = got["E5-tau-hopper-medium-replay"]
    assert row.verdict == claims.HOLDS
    assert row.seeds == "5 vs 5 (two-sample: 5 pairs cannot reach p < 0.05)"
    assert row.statistic.startswith(
        "means: tau 0.5 22; tau 0.7 32; tau 0.9 52; BC 9; diff 30 (95% CI"
    )
    assert row.our_setting.endswith(
        "; was inconclusive at this power at 5,000 steps x 3 seeds on hopper-medium-replay-v5-s0-"
        "e10, an earlier generation of the dataset with its own reference scores (diff 3 (range "
        "2 to 4; n=3 vs 3)) -> holds"
    )
    # 15 IQL runs (tau 0.7's at 720 s, the others at 3,600 s); BC's are not IQL's compute
    assert row.budget.startswith("ours 100,000 gradient steps per run; 11.0 CPU-hours of updates "
                                 "for the 15 IQL runs")  # fmt: skip
    # the IQL-vs-BC row reads tau 0.7 alone: the other taus neither move it nor its hours
    vs = got["E5-vs-BC-hopper-medium-replay"]
    assert vs.statistic.startswith("IQL 32 vs BC 9 (means)")
    assert "2.0 CPU-hours" in vs.budget
    assert "the tau sweep" not in vs.our_setting


def test_tau_row_pairs_seeds_from_six_and_a_smaller_tau_ahead_does_not_hold():
    now = result_rows([30] * 6, [9] * 6, 100_000, kind="medium-replay", dataset=MR)
    now += tau_rows_of({"0.5": [30, 31, 32, 33, 34, 35], "0.9": [20, 22, 21, 20, 23, 22]})
    row = tau_ledger(now)["E5-tau-hopper-medium-replay"]
    assert row.seeds == "6 pairs"
    assert "sign-flip p=0.0312" in row.statistic
    assert row.verdict == claims.FAILS
    assert " -> " not in row.our_setting  # no smoke-size runs of this kind: no old verdict


def test_no_tau_row_without_both_taus_and_the_smoke_row_names_the_rerun():
    now = result_rows([30] * 5, [9] * 5, 100_000, kind="medium-replay", dataset=MR)
    only_hi = now + tau_rows_of({"0.9": [40] * 5})
    assert not any(k.startswith("E5-tau-") for k in tau_ledger(only_hi))
    assert tau_rerun_text({NOW: only_hi}.__getitem__).startswith("not rerun at the larger")
    both = only_hi + tau_rows_of({"0.5": [20] * 5})
    assert tau_rerun_text({NOW: both}.__getitem__) == (
        "rerun at 100,000 gradient steps on hopper-medium-replay (rows "
        "E5-tau-hopper-medium-replay); not rerun at this budget: the tau sweep on hopper-medium, "
        "halfcheetah-medium-replay and walker2d-medium-replay (cut to fit the compute)"
    )


def test_tau_rows_name_the_target_datasets_left_without_a_tau_pair_and_none_when_all_have_one():
    targets = {"hopper-medium": ("Hopper-v5", "medium"),
               "hopper-medium-replay": ("Hopper-v5", "medium-replay"),
               "halfcheetah-medium-replay": ("HalfCheetah-v5", "medium-replay"),
               "walker2d-medium-replay": ("Walker2d-v5", "medium-replay")}  # fmt: skip
    now = []
    for name, (env, kind) in targets.items():
        ds = f"{name}-v5-s0"
        now += result_rows([30] * 5, [9] * 5, 100_000, env=env, kind=kind, dataset=ds)
        if name != "halfcheetah-medium-replay":
            now += [dict(r, env=env) for r in tau_rows_of({"0.5": [20] * 5, "0.9": [40] * 5},
                                                         dataset=ds, kind=kind)]  # fmt: skip
    cut = "; not rerun at this budget: the tau sweep on halfcheetah-medium-replay (cut to fit"
    three = tau_ledger(now)
    assert sorted(k for k in three if k.startswith("E5-tau-")) == [
        "E5-tau-hopper-medium",
        "E5-tau-hopper-medium-replay",
        "E5-tau-walker2d-medium-replay",
    ]
    assert all(cut in three[k].our_setting for k in three if k.startswith("E5-tau-"))
    assert cut in tau_rerun_text({NOW: now}.__getitem__)
    ds = "halfcheetah-medium-replay-v5-s0"
    now += [dict(r, env="HalfCheetah-v5") for r in tau_rows_of(
        {"0.5": [20] * 5, "0.9": [40] * 5}, dataset=ds)]  # fmt: skip
    four = tau_ledger(now)
    assert len([k for k in four if k.startswith("E5-tau-")]) == 4
    assert not any("tau sweep" in four[k].our_setting for k in four if k.startswith("E5-tau-"))
    assert "not rerun" not in tau_rerun_text({NOW: now}.__getitem__)


def test_tau_row_states_the_mean_over_each_runs_evaluations():
    now = result_rows([30] * 5, [9] * 5, 100_000, kind="medium-replay", dataset=MR)
    now += tau_rows_of({"0.5": [20] * 5, "0.9": [40] * 5})
    curves = curve_rows(1.0, dataset=MR)  # tau 0.7: 10 + seed + k at k = 1..10
    curves += [dict(r, tau="0.9", score=str(float(r["score"]) * 2)) for r in curves]
    row = tau_ledger(now, curves)["E5-tau-hopper-medium-replay"]
    assert "not the verdict's): tau 0.7 18.5 (sample SD 1.58;" in row.our_setting
    assert "; tau 0.9 37 (sample SD 3.16;" in row.our_setting


def test_slopes_of_one_tau():
    curves = curve_rows(1.0, seeds=2, dataset=MR)
    curves += [dict(r, tau="0.9", score=str(float(r["score"]) * 3)) for r in curves]
    assert slopes(curves, MR, "iql", "0.7") == pytest.approx([1.0, 1.0])
    assert slopes(curves, MR, "iql", "0.9") == pytest.approx([3.0, 3.0])


def test_each_dataset_row_quotes_the_papers_score_on_its_d4rl_counterpart():
    now = result_rows([60] * 5, [40] * 5, 100_000)
    now += result_rows([30] * 5, [10] * 5, 100_000, env="Walker2d-v5", kind="medium-replay",
                       dataset="walker2d-medium-replay-v5-s0")  # fmt: skip
    got = ledger(now, result_rows([1], [1], 20_000), [])
    walker = got["E5-vs-BC-walker2d-medium-replay"]
    assert walker.paper_setting == (
        "D4RL walker2d-medium-replay-v2, 1M gradient steps (the paper's IQL: 73.9)"
    )
    assert "(the paper's IQL: 66.3)" in got["E5-vs-BC-hopper-medium"].paper_setting
    # the cut list names the target datasets this CSV lacks, not the ones it has
    assert "; not rerun at this budget: the tau sweep, hopper-medium-replay, " \
        "halfcheetah-medium-replay and d3rlpy's IQL" in walker.our_setting  # fmt: skip


def test_d3rlpy_at_this_budget_is_stated_on_its_dataset_and_named_on_the_others():
    now = result_rows([60, 62, 64, 66, 68], [40, 41, 42, 43, 44], 100_000)
    now += result_rows([30] * 5, [10] * 5, 100_000, kind="medium-replay",
                       dataset="hopper-medium-replay-v5-s0")  # fmt: skip
    old = result_rows([1], [1], 20_000)
    none = ledger(now, old, [])["E5-vs-BC-hopper-medium"]
    assert "and d3rlpy's IQL (cut to fit the compute); was" in none.our_setting
    peer = peer_rows([50, 51, 52, 53, 54]) + [dict(peer_rows([99])[1], seed="6", status="failed")]
    got = ledger(now, old, [], peer)
    row = got["E5-vs-BC-hopper-medium"]
    assert "d3rlpy's IQL (cut" not in row.our_setting
    assert (
        "; beside it d3rlpy 2.8.1's IQL at this budget on this dataset (bench_iql.py --eval, the "
        "same settings, one process per run, 5.0 hours summed over its 5 runs): 52 (sample SD "
        "1.58; 95% CI" in row.our_setting
    )
    assert row.our_setting.endswith(
        "; not rerun at this budget: the tau sweep, halfcheetah-medium-replay and walker2d-medium-"
        "replay (cut to "
        "fit the compute); was inconclusive at this power at 20,000 steps x 1 seeds (diff 0, range "
        "0 to 0) -> holds"
    )
    assert "against our IQL's 64 (sample SD 3.16; 95% CI" in row.our_setting
    assert "; ours minus d3rlpy diff 12 (95% CI" in row.our_setting
    assert row.evidence.endswith(f", {D3RLPY}")
    other = got["E5-vs-BC-hopper-medium-replay"]
    assert "; d3rlpy's IQL ran at this budget on hopper-medium-v5-s0 alone" in other.our_setting
    assert D3RLPY not in other.evidence
    with pytest.raises(ValueError, match="has 0 IQL runs"):
        ledger(now, old, [], peer_rows([50] * 5, dataset="walker2d-medium-v5-s0"))
    with pytest.raises(ValueError, match="at 20,000 updates"):
        ledger(now, old, [], peer_rows([50] * 5, updates=20_000))
    with pytest.raises(ValueError, match="mixes datasets or budgets"):
        ledger(now, old, [], peer_rows([50] * 5) + peer_rows([50], updates=20_000)[1:])


def test_the_bench_ours_must_equal_the_iql_runs_at_the_same_seed_and_budget():
    from paper_figures.readme_tables import same_iql

    runs = result_rows([27.5, 31.5], [50, 50], 20_000)
    bench = [
        {
            "contender": "ours",
            "status": "ok",
            "dataset": f"{DS}.hdf5",
            "seed": str(s),
            "updates": "20000",
            "normalized_score": v,
        }
        for s, v in ((1, "27.5"), (2, "31.5"))
    ]
    same_iql(bench, runs)  # agrees
    with pytest.raises(ValueError, match="seed 2 at 20000 updates scores 31.4"):
        same_iql([bench[0], dict(bench[1], normalized_score="31.4")], runs)
    with pytest.raises(ValueError, match="no CSV row with"):
        same_iql([dict(bench[0], updates="30000")], runs)


def test_the_readme_rerun_table_shows_each_tau_run_and_not_run_where_cut():
    from paper_figures.claims_iql import OLD_TAU
    from paper_figures.readme_tables import offline_rerun, spread

    now = result_rows([60] * 5, [40] * 5, 100_000)  # hopper-medium: tau 0.7 and BC alone
    now += result_rows([30, 31, 32, 33, 34], [9] * 5, 100_000, kind="medium-replay", dataset=MR)
    now += tau_rows_of({"0.5": [20, 21, 22, 23, 24], "0.9": [50, 51, 52, 53, 54]})
    files = {NOW: now, OLD: result_rows([1], [1], 20_000), CURVES: [], OLD_TAU: [], D3RLPY: []}
    lines = offline_rerun(files.__getitem__).splitlines()
    assert "| dataset | BC | IQL tau 0.5 | IQL tau 0.7 | IQL tau 0.9 | IQL beats BC |" in lines[3]
    row = {ln.split(" | ")[0][2:]: ln.split(" | ")[1:] for ln in lines[5:]}
    assert row["hopper-medium"][1:] == ["not run", "60.0 [60.0, 60.0]", "not run", "holds",
                                        "not run |"]  # fmt: skip
    assert row["hopper-medium-replay"][1] == spread([20, 21, 22, 23, 24], ".1f")  # tau 0.5's
    assert row["hopper-medium-replay"][4:] == ["holds", "holds |"]
    assert "d3rlpy" not in "\n".join(lines)  # no d3rlpy runs at this budget: no sentence


def test_seed_test_compares_five_seeds_two_sample_and_six_pairs_paired():
    """The exact sign-flip test cannot reach p < 0.05 on 5 pairs (2/32), so 5 seeds a side are
    compared two-sample, which can decide; from 6 pairs the paired test."""
    from paper_figures.claims_iql import seed_test

    a = {s: 1000.0 + 10 * s for s in range(1, 6)}
    b = {s: v - 300.0 for s, v in a.items()}
    stat, verdict, _, seeds = seed_test(a, b)
    assert seeds.startswith("5 vs 5 (two-sample") and verdict == claims.HOLDS
    assert seed_test(b, a)[1] == claims.FAILS
    a[6], b[6] = 1060.0, 760.0
    stat, verdict, _, seeds = seed_test(a, b)
    assert seeds == "6 pairs" and "sign-flip p=0.0312" in stat and verdict == claims.HOLDS
