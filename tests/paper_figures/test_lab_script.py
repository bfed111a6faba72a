"""A script experiment: paper_figures/<script>.py runs its arms, its analysis.py's `table` reads
the outputs into the results table, and the standard kinds judge it (a ratio difference too)."""

from __future__ import annotations

import pytest

from paper_figures.lab import judge, pages, results, runner, spec

TOML = """
title = "a scripted allocation"
[[paper]]
key = "p"
title = "A paper"
arxiv = "0000.00000"
[run]
script = "fake_allocation"
seeds = 6
steps = 40
unit = "epochs"
flags = ["--epochs", "40"]
metrics = ["success", "effective"]
[envs."lr-0.01"]
[arms.uniform]
recipe = "every prompt the same rollouts"
[arms.knapsack]
recipe = "the reference's allocation rule"
[toy]
seeds = 2
steps = 4
flags = ["--epochs", "4"]
[[claim]]
id = "K-1"
paper = "p"
claim = "knapsack raises the effective ratio by 20%"
kind = "superior"
a = "knapsack"
b = "uniform"
metric = "effective"
difference = "ratio"
margin = 0.2
margin_why = "the abstract's 20-40%"
shift = "margin"
"""

ANALYSIS = """
import csv
from pathlib import Path

def run_script(exp, toy, out):
    seeds = exp.toy.seeds if toy else exp.seeds
    with (Path(out) / "alloc.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["lr", "arm", "seed", "success", "effective"])
        for s in seeds:
            w.writerow(["0.01", "uniform", s, 0.5, 0.4])
            w.writerow(["0.01", "knapsack", s, 0.6, 0.4 * (1.5 + 0.01 * s)])

def table(exp, source):
    with (Path(source) / "alloc.csv").open() as f:
        return [{"env": "lr-" + r["lr"], **r} for r in csv.DictReader(f)]
"""


@pytest.fixture
def exp(tmp_path):
    folder = tmp_path / "alloc"
    folder.mkdir()
    (folder / "experiment.toml").write_text(TOML)
    (folder / "analysis.py").write_text(ANALYSIS)
    return spec.load(folder)


def test_a_script_runs_its_arms_and_its_table_feeds_the_standard_kinds(exp, tmp_path):
    assert exp.script == "fake_allocation" and exp.arms["knapsack"].algo == "fake_allocation"
    assert runner.run(exp, toy=True, root=tmp_path / "runs") == []
    rows = results.read(runner.write(exp, toy=True, root=tmp_path / "runs"))
    assert {(r["arm"], r["seed"]) for r in rows} == {(a, s) for a in exp.arms for s in (1, 2)}
    assert all(r["flags"] == "--epochs 40 --epochs 4" for r in rows)  # the toy's flags last
    assert len(results.stale(exp, rows)) == len(rows)  # toy rows are not the declared runs
    # the full table, from outputs the script already made: every digest is the declaration's
    runner.run_script(exp, False, tmp_path / "made")
    rows = results.read(runner.write(exp, source=tmp_path / "made"))
    assert results.stale(exp, rows) == []
    d = results.differences(rows, exp.claims[0], ["lr-0.01"])
    assert d == pytest.approx([0.5 + 0.01 * s for s in range(1, 7)])
    j = judge.compare(exp, exp.claims[0], rows, ["lr-0.01"])
    assert j.direction == 1 and j.p == pytest.approx(2 / 64)  # every pair above the 0.2 margin
    assert (
        pages.command(exp, "uniform", "lr-0.01") == "python -m paper_figures.fake_allocation "
        "--epochs 40"
    )
    # the page's arms section: one command for every arm (no arm named)
    assert "python -m paper_figures.fake_allocation --epochs 40" in "\n".join(pages._arms(exp))


def test_a_script_table_row_that_is_not_declared_is_refused(exp, tmp_path):
    runner.run_script(exp, False, tmp_path / "made")
    path = tmp_path / "made" / "alloc.csv"
    text = path.read_text().replace("0.01,knapsack,6", "0.01,knapsack,7")
    path.write_text(text)
    with pytest.raises(ValueError, match="not a declared"):
        runner.write(exp, source=tmp_path / "made")


def test_a_script_arm_takes_no_algo_or_flags(tmp_path):
    folder = tmp_path / "bad"
    folder.mkdir()
    (folder / "experiment.toml").write_text(
        TOML.replace('recipe = "the reference', 'flags = ["--x"]\nrecipe = "the reference')
    )
    (folder / "analysis.py").write_text(ANALYSIS)
    with pytest.raises(spec.SpecError, match="takes no algo or flags"):
        spec.load(folder)
    (folder / "analysis.py").unlink()
    (folder / "experiment.toml").write_text(TOML)
    with pytest.raises(spec.SpecError, match="need an analysis.py"):
        spec.load(folder)
