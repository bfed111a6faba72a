"""The Brax ledger rows: per env, ppo_brax.py's two policies against Brax's PPO, with the budget
and the wall time of that env's runs."""

from paper_figures import claims
from paper_figures.claims_brax import rows


def runs(env, returns, wall_s=600.0):
    return [
        {"env": env, "trainer": t, "seed": str(s), "steps": "409600", "status": "ok",
         "return_at_budget": str(r + (t == "brax")), "step_to_target": "1", "wall_s": str(wall_s)}
        for t in ("brax", "ours", "ours_gaussian")
        for s, r in enumerate(returns, 1)
    ]  # fmt: skip


def test_rows_state_the_verdict_and_the_envs_wall_time():
    data = {
        "brax_locomotion.csv": runs("h", [1200, 1201, 1202, 1203, 1204])
        + runs("a", [900, 950, 1000, 1050, 1100], wall_s=1200.0),
        "brax_locomotion_table.csv": [
            {"env": "h", "target": "1000"},
            {"env": "a", "target": "2000"},
        ],
    }
    got = {r.id: r for r in rows(data.__getitem__)}
    assert list(got) == ["Brax-h", "Brax-h-gaussian", "Brax-a", "Brax-a-gaussian"]
    assert got["Brax-h"].verdict == claims.HOLDS  # means 1 apart, bar -120
    assert got["Brax-h"].budget.endswith(
        "; 2.5 hours of wall time for the h runs of all trainers, one at a time"
    )  # 15 runs x 600 s
    assert "; 5.0 hours of wall time for the a runs" in got["Brax-a-gaussian"].budget
    assert got["Brax-a"].seeds == "5 vs 5 (unpaired)"
