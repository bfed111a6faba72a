"""IQL vs BC at the larger budget: one row per dataset, unpaired, with the earlier run's verdict,
the late-curve slopes and the compute, on known scores."""

import pytest

from paper_figures import claims
from paper_figures.claims_iql import CURVES, NOW, OLD, rows, slopes

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


def ledger(now, old, curves):
    files = {NOW: now, OLD: old, CURVES: curves}
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
        "E5-vs-BC-<dataset>)"
    )
