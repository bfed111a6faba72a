"""The IQL-vs-d3rlpy README table's guards: our bench side equals iql_tau.py's IQL runs, and the
larger budget's side comes from the declared experiment iql-100k."""

import pytest

DS = "hopper-medium-v5-s0"


def result_rows(iql, steps):
    return [{"env": "Hopper-v5", "dataset": DS, "kind": "medium", "method": "iql", "tau": "0.7",
             "online_steps": "0", "seed": str(seed), "steps": str(steps),
             "final_normalized_score": str(score)}
            for seed, score in enumerate(iql, 1)]  # fmt: skip


def test_the_bench_ours_must_equal_the_iql_runs_at_the_same_seed_and_budget():
    from paper_figures.figures_tables import same_iql

    runs = result_rows([27.5, 31.5], 20_000)
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


def test_the_larger_budget_reads_the_declared_iql_runs_of_that_dataset_and_budget():
    from paper_figures.figures_tables import IQL_100K, iql_100k_scores
    from paper_figures.lab import results, spec

    exp = spec.load(spec.FIGURES / IQL_100K)
    rows = results.rows_of(exp)
    want = [r["final_eval_normalized_score"] for r in rows if r["arm"] == "iql-hopper-medium"]
    assert iql_100k_scores(DS, 100_000) == want and len(want) == 5
    with pytest.raises(ValueError, match="no IQL run of hopper-medium-v5-s0 at 20,000 steps"):
        iql_100k_scores(DS, 20_000)
    with pytest.raises(ValueError, match="no IQL run of walker2d-medium-v5-s0"):
        iql_100k_scores("walker2d-medium-v5-s0", 100_000)
