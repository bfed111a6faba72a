"""An equal tuning budget (paper_figures/lab/tuning.py): the tuning seeds of every declaration
are disjoint from its evaluation seeds, the grid runs through the sweep runner and picks the best
configuration, and a tuned arm takes its flags from results/tuning.csv (none before: no runs)."""

from __future__ import annotations

import csv

import pytest

from paper_figures.lab import judge, pages, protocol, runner, spec, tuning

DECLARED = spec.discover()

TOML = """
title = "a tuned arm of GRPO on a bandit"
[[paper]]
key = "p"
title = "A paper"
arxiv = "0000.00000"
[run]
algo = "grpo"
mode = "population"
seeds = 4
steps = 1024
flags = ["--num-envs", "64", "--hidden-sizes", "16", "--eval-episodes", "2", "--eval-every", "0",
         "--no-tensorboard"]
metrics = ["final_success"]
final_window = 128
[envs."bandit:bernoulli-10"]
[arms.grpo]
recipe = "project defaults"
[arms.tuned]
recipe = "the grid below, on its tuning seeds"
[tuning]
arms = ["tuned"]
grid = {{ "--learning-rate" = ["1e-8", "0.05"], "--update-epochs" = ["1"] }}
seeds = 3
first_seed = {first}
metric = "final_success"
[toy]
seeds = 2
steps = 128
[[claim]]
id = "T-1"
paper = "p"
claim = "tuned GRPO beats GRPO"
kind = "superior"
a = "tuned"
b = "grpo"
metric = "final_success"
per_env = true
envs = ["bandit:bernoulli-10"]
"""


@pytest.mark.parametrize("folder", DECLARED, ids=[p.name for p in DECLARED])
def test_every_declarations_tuning_seeds_are_disjoint_from_its_evaluation_seeds(folder):
    exp = spec.load(folder)
    if exp.tuning is None:
        return
    assert not set(exp.tuning.seeds) & set(exp.seeds)
    assert not set(exp.tuning.toy_seeds) & set(exp.toy.seeds)


def _declare(tmp_path, first: int = 101):
    folder = tmp_path / "tuned"
    folder.mkdir(exist_ok=True)
    (folder / "experiment.toml").write_text(TOML.format(first=first))
    return folder


def test_tuning_seeds_that_are_evaluation_seeds_are_refused(tmp_path):
    with pytest.raises(spec.SpecError, match=r"tuning seeds \[3, 4\] are evaluation seeds"):
        spec.load(_declare(tmp_path, first=3))


def test_a_grid_flag_the_arm_sets_itself_and_a_large_grid_are_refused(tmp_path):
    folder = _declare(tmp_path)
    text = (folder / "experiment.toml").read_text()
    own = text.replace('recipe = "the grid below', 'flags = ["--update-epochs", "2"]\nrecipe = "x')
    (folder / "experiment.toml").write_text(own)
    with pytest.raises(spec.SpecError, match=r"arm tuned sets \['--update-epochs'\] itself"):
        spec.load(folder)
    values = ", ".join(f'"{i}"' for i in range(1, 66))
    big = text.replace('"--update-epochs" = ["1"]', f'"--update-epochs" = [{values}]')
    (folder / "experiment.toml").write_text(big)
    with pytest.raises(spec.SpecError, match=r"the grid has 130 configurations, at most 64"):
        spec.load(folder)


def test_pick_takes_the_best_mean_over_envs_first_on_a_tie_and_never_an_incomplete_config():
    rows = [("a", 0, "e1", 1, 0.5), ("a", 0, "e2", 1, 0.5), ("a", 1, "e1", 1, 0.9),
            ("a", 1, "e2", 1, 0.1), ("a", 2, "e1", 1, 0.9)]  # fmt: skip
    table = tuning.scores(rows)
    assert tuning.pick(table, "a") == 0  # 0 and 1 tie at 0.5; 2 lacks e2
    table[("a", 1, "e2")] = (1, 0.2)
    assert tuning.pick(table, "a") == 1


def test_tune_runs_the_grid_picks_the_best_and_the_tuned_arm_takes_its_flags(tmp_path):
    folder = _declare(tmp_path)
    exp = spec.load(folder)
    assert exp.arms["tuned"].pending and {a for a, *_ in exp.runs()} == {"grpo"}
    assert "not tuned yet" in "\n".join(tuning.page_lines(exp))
    (line,) = judge.lines(exp, [])  # a declared claim with no runs: its line says so
    assert line.judgement.verdict_at(0.0) == (protocol.NOT_RUN, "")
    assert "not run yet: no results of tuned, grpo" in line.judgement.text
    target, failed = tuning.run(exp, False, tmp_path / "sweeps", workers=2)
    assert not failed and target == folder / "results" / "tuning.csv"
    rows = list(csv.DictReader(target.open()))
    assert [(r["config"], r["seeds"]) for r in rows] == [("0", "3"), ("1", "3")]
    scores = [float(r["score"]) for r in rows]
    assert scores[1] > scores[0] + 0.1  # a learning rate of 1e-8 learns nothing
    assert [r["chosen"] for r in rows] == ["0", "1"]
    exp = spec.load(folder)  # the tuned arm now runs with the chosen configuration's flags
    assert not exp.arms["tuned"].pending
    assert exp.arms["tuned"].flags == ("--learning-rate", "0.05", "--update-epochs", "1")
    assert {(a, s) for a, _, s, *_ in exp.runs()} == {(a, s) for a in ("grpo", "tuned")
                                                       for s in range(1, 5)}  # fmt: skip
    assert "`--learning-rate 0.05 --update-epochs 1`" in "\n".join(tuning.page_lines(exp))
    assert "## Tuning" in pages.page(exp, [], [], {})
    assert set(runner.configs(exp)) == {"grpo", "tuned"}
    assert runner.configs(exp, only=("bandit:sparse-1000",)) == {}  # run --envs: only those
