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


def test_a_longer_budget_row_names_the_old_verdict_and_skips_untrained_policies():
    """A sweep of brax and ours only (no Gaussian policy) at another budget: one row per env,
    tagged, saying what the shorter budget's verdict was."""
    short = runs("h", [0, 400, 800, 1200, 1600])  # interval far wider than the bar
    long = [
        r | {"steps": "2048000", "return_at_budget": str(float(r["return_at_budget"]) + 3000)}
        for r in runs("h", [1200, 1201, 1202, 1203, 1204])
        if r["trainer"] != "ours_gaussian"
    ]
    data = {
        "long.csv": long,
        "long_table.csv": [{"env": "h", "target": "1000"}],
        "short.csv": short,
    }
    (row,) = rows(data.__getitem__, "long", "short", "-2m")
    assert row.id == "Brax-h-2m"
    assert row.verdict == claims.HOLDS
    assert row.budget.startswith("ours 2,048,000 env steps per run")
    assert "; was inconclusive at this power at 409,600 steps (diff -1, " in row.metric
    assert row.metric.endswith(f"-> {claims.HOLDS} at 2,048,000")
    assert row.evidence == "long.csv, short.csv"
