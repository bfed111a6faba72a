"""The experiment figure (paper_figures/lab/figures.py): drawn from a results table and its
judged lines, one forest row per headline line that carries an effect."""

from __future__ import annotations

import matplotlib.image
import numpy as np
import pytest

from paper_figures.lab import figures, ledger, protocol, results, spec
from paper_figures.lab.figures import plt

DECLARATION = """
title = "three arms of GRPO on two bandits"
[[paper]]
key = "p"
title = "A paper"
arxiv = "0000.00000"
[run]
algo = "grpo"
mode = "population"
seeds = 6
steps = 256
flags = ["--num-envs", "64", "--hidden-sizes", "16", "--eval-episodes", "2"]
metrics = ["final_success"]
[envs."bandit:bernoulli-10"]
suffix = ""
[envs."bandit:sparse-1000"]
suffix = "-sparse"
[arms.grpo]
recipe = "project defaults"
[arms.rgra]
flags = ["--policy-loss", "reinforce", "--update-epochs", "1"]
recipe = "project defaults"
[arms.gpg]
flags = ["--policy-loss", "reinforce"]
recipe = "project defaults"
[toy]
seeds = 3
steps = 128
envs = ["bandit:bernoulli-10"]
arms = ["grpo", "rgra"]
[[claim]]
id = "F-1"
paper = "p"
claim = "GRPO beats RGRA"
kind = "superior"
a = "grpo"
b = "rgra"
metric = "final_success"
per_env = true
[[claim]]
id = "F-2"
paper = "p"
claim = "GPG is no worse than GRPO"
kind = "non-inferior"
a = "gpg"
b = "grpo"
metric = "final_success"
margin = 0.05
margin_why = "a test"
part = true
[[claim]]
id = "F-3"
paper = "p"
claim = "RGRA is above a bar"
kind = "above"
a = "rgra"
metric = "final_success"
bar = 0.1
bar_why = "a test"
[[claim]]
id = "F-ALL"
paper = "p"
claim = "both"
kind = "all-of"
of = ["F-2", "F-3"]
"""
MEANS = {"grpo": 0.6, "rgra": 0.4, "gpg": 0.58}


@pytest.fixture
def exp(tmp_path):
    folder = tmp_path / "figure-test"
    folder.mkdir()
    (folder / "experiment.toml").write_text(DECLARATION)
    return spec.load(folder)


def _rows(exp, toy: bool) -> list[dict]:
    """A results table of every planned run (the toy's with toy=True): each arm's mean plus
    a small per-seed wobble, as runner.collect would give it."""
    return [results.row(exp, arm, env, seed, steps, flags,
                        {"final_success": MEANS[arm] + 0.01 * np.sin(seed)})
            for arm, env, seed, steps, flags in exp.runs(toy)]  # fmt: skip


def test_the_toy_figure_is_drawn_from_a_toy_results_table(exp, tmp_path):
    table = tmp_path / "toy" / "results" / "runs.csv"
    results.write(table, exp, _rows(exp, toy=True))
    target = figures.write_toy(exp, table)
    assert target == table.parent / "figure.png"
    assert target.stat().st_size > 20_000
    pixels = matplotlib.image.imread(target)
    assert pixels.shape[0] >= 400 and pixels.shape[1] >= 1000
    assert pixels.std() > 0.05  # not a blank canvas
    # the toy judges only what ran (grpo and rgra on one env): F-1 and F-3, at their raw p
    lines = figures.toy_lines(exp, results.read(table))
    assert [ln.id for ln in lines] == ["F-1", "F-3"]
    assert all(ln.judgement.interval == "range" for ln in lines)


def test_the_forest_has_one_row_per_headline_line_with_an_effect(exp, tmp_path):
    results.write(results.path(exp), exp, _rows(exp, toy=False))
    lines = ledger.judged([exp])
    every = [ln.id for ln in lines]
    assert every == ["F-1", "F-1-sparse", "F-2", "F-3", "F-ALL"]
    assert all(ln.verdict for ln in lines)
    want = ["F-1", "F-1-sparse", "F-3"]  # F-2 is a part, F-ALL an all-of: not in the forest
    fig, ax = plt.subplots()
    plotted = figures.forest(ax, exp, lines)
    labels = [t.get_text() for t in ax.get_yticklabels()]
    plt.close(fig)
    assert plotted == want
    assert labels == want
    assert [ln.verdict for ln in lines if ln.id in want] == [protocol.HOLDS] * 2 + [protocol.HOLDS]
    figures.draw(exp, lines, results.read(results.path(exp)), tmp_path / "figure.png")
    assert (tmp_path / "figure.png").stat().st_size > 20_000
