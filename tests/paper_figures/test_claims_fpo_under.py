"""The under-conditioned FPO rows: FPO minus PPO on the hidden-goal task, paired by seed, and
that gain minus the one with the goal shown, on known returns."""

from paper_figures import claims
from paper_figures.claims_fpo_under import FULL, PARTIAL, rows


def runs(gain_hidden, gain_shown, seeds=6):
    """fpo_underconditioned.csv rows: PPO returns -10 - seed, FPO that plus the gain."""
    out = []
    for s in range(1, seeds + 1):
        for env, gain in ((FULL, gain_shown), (PARTIAL, gain_hidden)):
            ppo = -10.0 - s
            for algo, ret in (("ppo", ppo), ("fpo", ppo + gain(s))):
                out.append({"algo": algo, "env": env, "seed": str(s), "steps": "1000",
                            "final_eval_return": str(ret), "train_s": "360"})  # fmt: skip
    return out


def by_id(data):
    return {r.id: r for r in rows(lambda name: data)}


def test_hidden_goal_gain_and_its_excess_over_the_shown_one():
    got = by_id(runs(lambda s: 2.0 + 0.1 * s, lambda s: 0.5 + 0.01 * s))
    under, gap = got["E7-under"], got["E7-under-gap"]
    assert under.verdict == claims.HOLDS and under.seeds == "6 pairs"
    assert "diff 2.35 " in under.statistic  # mean of 2.1 ... 2.6
    assert gap.verdict == claims.HOLDS and "diff 1.815 " in gap.statistic  # 2.35 - 0.535
    assert "2.4 hours of collection" in under.budget  # 24 runs x 360 s


def test_fpo_behind_when_hidden_and_a_gain_only_when_shown_fail():
    got = by_id(runs(lambda s: -1.0 - 0.1 * s, lambda s: 1.0 + 0.1 * s))
    assert got["E7-under"].verdict == claims.FAILS
    assert got["E7-under-gap"].verdict == claims.FAILS


def test_unpaired_seed_is_left_out():
    data = runs(lambda s: 2.0 + 0.1 * s, lambda s: 0.0 + 0.1 * s)
    data = [
        r for r in data if not (r["seed"] == "6" and r["algo"] == "ppo" and r["env"] == PARTIAL)
    ]
    got = by_id(data)
    assert (
        got["E7-under"].seeds == "5 pairs; too few for the exact sign-flip test to reach p < 0.05"
    )
    assert got["E7-under-gap"].seeds.startswith("5 pairs (seed k")
    assert got["E7-under"].verdict == claims.INCONCLUSIVE  # the smallest p at 5 pairs: 0.0625
    assert got["E7-under"].statistic.count("n=5") == 1


def test_grown_sweep_states_the_first_populations_verdict():
    got = by_id(runs(lambda s: 2.0 + 0.1 * s, lambda s: 0.5 + 0.01 * s, seeds=7))
    under = got["E7-under"]
    assert under.our_setting.endswith(
        "; was inconclusive at this power at 5 seeds (seeds 1-5) -> holds"
    )
    assert (
        "; was " not in by_id(runs(lambda s: 2.0, lambda s: 0.5, seeds=5))["E7-under"].our_setting
    )
