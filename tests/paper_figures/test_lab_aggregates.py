"""The [aggregate] table (paper_figures/lab/aggregates.py): each arm's IQM across envs and its
probability of improvement over the baseline on the page, from the results table, by rliable's
definitions (controlrl/stats.py); a second metric's per-env table; declaration errors."""

from __future__ import annotations

import numpy as np
import pytest

from controlrl import stats
from paper_figures.lab import aggregates, pages, results, spec

TOML = """
title = "two arms on two bandits"
[[paper]]
key = "p"
title = "A paper"
arxiv = "0000.00000"
[run]
algo = "grpo"
mode = "population"
seeds = 8
steps = 256
metrics = ["final_success", "final_eval"]
[envs."bandit:bernoulli-10"]
label = "b10"
[envs."bandit:contextual-16-10"]
label = "ctx"
[arms.grpo]
recipe = "project defaults"
[arms.rgra]
flags = ["--policy-loss", "reinforce"]
recipe = "project defaults"
{aggregate}
[toy]
seeds = 2
steps = 128
[[claim]]
id = "A-1"
paper = "p"
claim = "RGRA beats GRPO"
kind = "superior"
a = "rgra"
b = "grpo"
metric = "final_success"
"""
AGGREGATE = '[aggregate]\nbaseline = "grpo"\nmetrics = ["final_success", "final_eval"]'


def _experiment(tmp_path, aggregate: str = AGGREGATE):
    folder = tmp_path / "agg"
    folder.mkdir(exist_ok=True)
    (folder / "experiment.toml").write_text(TOML.format(aggregate=aggregate))
    return spec.load(folder)


def test_the_page_shows_each_arms_iqm_and_probability_of_improvement(tmp_path):
    exp = _experiment(tmp_path)
    rng = np.random.default_rng(0)
    rows = []
    for arm, env, seed, steps, flags in exp.runs():
        shift = 0.6 if arm == "rgra" else 0.0
        values = {"final_success": float(rng.random() + shift), "final_eval": float(rng.random())}
        rows.append(results.row(exp, arm, env, seed, steps, flags, values))
    envs = list(exp.envs)
    x = aggregates.scores(rows, "rgra", "final_success", envs)  # [8 seeds, 2 envs]
    y = aggregates.scores(rows, "grpo", "final_success", envs)
    assert (
        x.shape == (8, 2) and x[0, 1] == results.values(rows, "rgra", envs[1], "final_success")[1]
    )
    s = aggregates.summary(exp, rows, "rgra", "final_success")
    assert s["iqm"] == stats.iqm(x) and s["poi"] == stats.probability_of_improvement(x, y) > 0.5
    assert s["lo"] <= s["iqm"] <= s["hi"] and s["poi_lo"] <= s["poi"] <= s["poi_hi"]
    text = pages.page(exp, [], rows, {})
    assert "final_eval: mean [95% CI] over seeds" in text  # the other metric's per-env table
    row = next(ln for ln in text.splitlines() if ln.startswith("| rgra | 2 |"))
    assert row.split(" | ")[3].startswith(f"{s['poi']:.3g} [")
    assert next(ln for ln in text.splitlines() if ln.startswith("| grpo | 2 |")).count("|  |") == 2
    assert aggregates.scores(rows, "ppo", "final_success", []).shape == (0, 0)  # none ran
    assert aggregates.summary(exp, rows[:16], "rgra", "final_success")["envs"] == []
    aggregates.draw(exp, rows, tmp_path / "aggregates.png")
    assert (tmp_path / "aggregates.png").stat().st_size > 0


@pytest.mark.parametrize(
    ("aggregate", "message"),
    [
        ('[aggregate]\nbaseline = "ppo"\nmetrics = ["final_success"]', "baseline 'ppo' is not"),
        ('[aggregate]\nbaseline = "grpo"\nmetrics = ["auc"]', r"metrics \['auc'\] are not in"),
    ],
)
def test_an_aggregate_naming_an_unknown_arm_or_metric_is_refused(tmp_path, aggregate, message):
    with pytest.raises(spec.SpecError, match=message):
        _experiment(tmp_path, aggregate)


def test_each_paired_claim_reports_the_other_metrics_difference_beside_its_verdict(tmp_path):
    """The [aggregate]'s other metric on a claim's own pairs (a minus b per seed), with its
    bootstrap CI, on the claim's line of the page: reported, not judged."""
    from paper_figures.lab import judge

    exp = _experiment(tmp_path)
    rng = np.random.default_rng(1)
    rows = []
    for arm, env, seed, steps, flags in exp.runs():
        values = {"final_success": float(rng.random()), "final_eval": float(rng.random())}
        values["final_eval"] -= 0.5 if arm == "rgra" else 0.0
        rows.append(results.row(exp, arm, env, seed, steps, flags, values))
    (line,) = judge.lines(exp, rows)
    (metric, summary), envs = line.also[0], list(exp.envs)
    d = [results.values(rows, "rgra", e, "final_eval")[s] - results.values(rows, "grpo", e,
         "final_eval")[s] for e in envs for s in range(1, 9)]  # fmt: skip
    assert metric == "final_eval" and len(line.also) == 1
    assert summary.n == 16 and np.isclose(summary.mean, np.mean(d)) and summary.hi < 0
    assert summary.text() == stats.summarize(d).text()
    block = "\n".join(pages._claim_block(line, {}))
    assert f"- also (not judged): final_eval, the same difference: {summary.text()}" in block
    no_aggregate = _experiment(tmp_path, aggregate="")
    assert judge.lines(no_aggregate, rows)[0].also == []


def test_an_aggregates_tables_show_a_metric_per_env_for_the_arms_that_have_it(tmp_path):
    aggregate = '[aggregate]\nbaseline = "grpo"\nmetrics = ["final_success"]\ntables = ["{m}"]'
    exp = _experiment(tmp_path, aggregate=aggregate.format(m="final_eval"))
    assert exp.aggregate["tables"] == ("final_eval",)
    rows = [results.row(exp, arm, env, seed, steps, flags, {"final_success": 0.5,
            "final_eval": 0.25 if arm == "rgra" else float("nan")})
            for arm, env, seed, steps, flags in exp.runs()]  # fmt: skip
    lines = pages.page(exp, [], rows, {}).splitlines()
    at = lines.index(
        "final_eval: mean [95% CI] over seeds (a range below 5 seeds), results/runs.csv."
    )
    body = lines[at + 4 : lines.index("", at + 2)]
    assert body == ["| rgra | 0.25 [0.25, 0.25] | 0.25 [0.25, 0.25] |"]  # grpo has none: left out
    with pytest.raises(spec.SpecError, match=r"metrics \['auc'\] are not in"):
        _experiment(tmp_path, aggregate=aggregate.format(m="auc"))
