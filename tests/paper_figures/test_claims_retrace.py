"""paper_figures/claims_retrace.py: trace kinds are compared paired by seed only where the exact
sign-flip test can decide (>= 6 pairs); with 5 seeds a side the two-sample permutation test, which
can; the old verdict comes from the earlier runs; a kind not rerun keeps its earlier rows."""

import re

import pytest

from paper_figures import claims, claims_retrace


def runs(config: str, returns: list[float], steps: int = 100_000) -> list[dict]:
    return [
        {"config": config, "status": "finished", "seed": str(s + 1), "steps": str(steps),
         "final_eval_return": str(r), "mean_eval_return": str(r / 2), "eval_every": "10000",
         "eval_episodes": "10", "train_s": "3600"}
        for s, r in enumerate(returns)
    ]  # fmt: skip


def ledger(n: int, gap: float) -> dict[str, claims.Row]:
    retrace = [1000.0 + 10 * s for s in range(n)]
    now = runs("retrace-retrace", retrace) + runs("retrace-is", [r - gap for r in retrace])
    now += runs("ppo", [500.0 + 7 * s for s in range(5)], steps=98_304)
    old = runs("retrace-retrace", [300.0, 310, 320], 30_000)
    old += runs("retrace-is", [200.0, 400, 250], 30_000)
    old += runs("retrace-q_lambda", [250.0, 260, 270], 30_000)
    old += runs("ppo", [100.0, 150, 90], 28_672)
    files = {claims_retrace.NOW: now, claims_retrace.OLD: old}
    return {r.id: r for r in claims_retrace.rows(files.__getitem__)}


def test_five_seeds_a_side_are_compared_two_sample_and_can_decide():
    rows = ledger(5, gap=300.0)
    row = rows["E4-mujoco-is-final"]
    assert row.seeds.startswith("5 vs 5 (two-sample")
    p = float(re.search(r"permutation p=([0-9.e-]+)", row.statistic).group(1))
    assert p < 0.01  # all 5 above all 5: 2 of the 252 splits are as extreme
    assert row.verdict == claims.HOLDS
    assert "was inconclusive at this power at 3 seeds, 30,000 steps -> holds" in row.our_setting
    assert row.budget.endswith("; 15.0 CPU-hours of collection and updates in all")  # 15 x 1 h
    # each row's own paper's budget beside ours: Retrace's for the traces, ACER's for PPO
    assert f"batches); {claims_retrace.RETRACE_BUDGET}; 15.0 CPU-hours" in row.budget
    assert claims_retrace.ACER_BUDGET in rows["E4-mujoco-ppo-final"].budget
    assert claims_retrace.RETRACE_BUDGET not in rows["E4-mujoco-ppo-final"].budget
    assert ledger(5, gap=-300.0)["E4-mujoco-is-mean"].verdict == claims.FAILS
    # the paired test at 5 pairs could not have said more than this
    assert claims.paired_verdict(claims_retrace.np.full(5, 300.0))[1] == claims.INCONCLUSIVE


def test_six_pairs_are_compared_paired_by_seed():
    row = ledger(6, gap=300.0)["E4-mujoco-is-final"]
    assert row.seeds == "6 pairs" and "sign-flip p=0.0312" in row.statistic
    assert row.verdict == claims.HOLDS


def test_ppo_is_two_sample_and_a_kind_not_rerun_keeps_its_earlier_rows():
    rows = ledger(5, gap=300.0)
    assert rows["E4-mujoco-ppo-final"].seeds == "5 vs 5 (unpaired)"
    assert rows["E4-mujoco-ppo-final"].verdict == claims.HOLDS
    q = rows["E4-mujoco-q_lambda-final"]
    assert "not rerun" in q.our_setting and q.evidence == claims_retrace.OLD
    assert q.budget.startswith("ours 30,000 env steps") and q.verdict == claims.INCONCLUSIVE


def test_mixed_evaluation_protocols_are_refused():
    def read(name):
        rows = runs("retrace-retrace", [1.0] * 5) + runs("ppo", [1.0] * 5)
        rows[0]["eval_episodes"] = "5"
        return rows if name == claims_retrace.NOW else runs("ppo", [1.0] * 3)

    with pytest.raises(ValueError, match="mixes evaluation protocols"):
        claims_retrace.rows(read)
