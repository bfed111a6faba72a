"""An equal tuning budget (paper_figures/lab/tuning.py): the tuning seeds of every declaration
are disjoint from its evaluation seeds, the grid runs through the sweep runner and picks the best
configuration (its runs' training seconds in results/tuning-compute.csv, on the page), and a
tuned arm takes its flags from results/tuning.csv (none before: no runs)."""

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
    if not exp.tunings:
        return
    for t in exp.tunings:
        assert not set(t.seeds) & set(exp.seeds)
        assert not set(t.toy_seeds) & set(exp.toy.seeds)


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
    target, failed = tuning.run(exp, exp.tunings[0], False, tmp_path / "sweeps", workers=2)
    assert not failed and target == folder / "results" / "tuning.csv"
    rows = list(csv.DictReader(target.open()))
    assert [(r["config"], r["seeds"]) for r in rows] == [("0", "3"), ("1", "3")]
    scores = [float(r["score"]) for r in rows]
    assert scores[1] > scores[0] + 0.1  # a learning rate of 1e-8 learns nothing
    assert [r["chosen"] for r in rows] == ["0", "1"]
    (timed,) = csv.DictReader((folder / "results" / "tuning-compute.csv").open())
    assert (timed["arm"], timed["processes"], timed["seeds"]) == ("tuned", "2", "6")
    exp = spec.load(folder)  # the tuned arm now runs with the chosen configuration's flags
    assert not exp.arms["tuned"].pending
    assert exp.arms["tuned"].flags == ("--learning-rate", "0.05", "--update-epochs", "1")
    assert {(a, s) for a, _, s, *_ in exp.runs()} == {(a, s) for a in ("grpo", "tuned")
                                                       for s in range(1, 5)}  # fmt: skip
    assert "`--learning-rate 0.05 --update-epochs 1`" in "\n".join(tuning.page_lines(exp))
    page = pages.page(exp, [], [], {})
    assert "## Tuning" in page and "Tuning: 0.00 CPU-hours over 2 processes" in page
    assert set(runner.configs(exp)) == {"grpo", "tuned"}
    assert runner.configs(exp, only=("bandit:sparse-1000",)) == {}  # run --envs: only those


def _tuning_table(folder, arm: str, configs, chosen: int, name: str = "tuning.csv") -> None:
    """A tuning table as `tune` writes it: one env, three seeds, configuration `chosen` marked."""
    (folder / "results").mkdir(exist_ok=True)
    rows = [",".join(tuning.FIELDS)]
    rows += [f"{arm},{k},{' '.join(c)},bandit:bernoulli-10,3,0.5,{int(k == chosen)}"
             for k, c in enumerate(configs)]  # fmt: skip
    (folder / "results" / name).write_text("\n".join(rows) + "\n")


def test_a_tuning_table_made_with_another_grid_is_refused_not_reused(tmp_path):
    folder = _declare(tmp_path)
    old = spec.load(folder).tunings[0].configs()  # learning rates 1e-8 and 0.05
    _tuning_table(folder, "tuned", old, chosen=1)
    assert spec.load(folder).arms["tuned"].flags == (
        "--learning-rate",
        "0.05",
        "--update-epochs",
        "1",
    )
    text = (folder / "experiment.toml").read_text()
    wide = text.replace('["1e-8", "0.05"]', '["1e-8", "0.05", "0.5"]')  # the choice stays in it
    (folder / "experiment.toml").write_text(wide)
    with pytest.raises(spec.SpecError, match=r"results/tuning.csv was made with another grid for "
                       r"tuned: it scored 2 configurations, the grid declares 3 \(1 not scored, "
                       r"0 not in the grid\) \(tune again"):  # fmt: skip
        spec.load(folder)


def test_a_second_named_grid_tunes_arms_of_its_own_into_its_own_table(tmp_path):
    folder = _declare(tmp_path)
    text = (folder / "experiment.toml").read_text()
    second = ('[arms.wide]\nrecipe = "the wide grid"\n[[tuning]]\nname = "wide"\n'
              'why = "declared post hoc: the first grid chose its edge"\narms = ["wide"]\n'
              'grid = { "--learning-rate" = ["0.05", "0.5"] }\nseeds = 3\nfirst_seed = 101\n'
              'metric = "final_success"\n[[tuning]]')  # fmt: skip
    (folder / "experiment.toml").write_text(text.replace("[tuning]", second))
    first = spec.load(folder).tunings[1]
    _tuning_table(folder, "tuned", first.configs(), chosen=1)
    exp = spec.load(folder)
    wide, first = exp.tunings
    assert (wide.name, wide.file, first.file) == ("wide", "tuning-wide.csv", "tuning.csv")
    assert exp.arms["wide"].pending and not exp.arms["tuned"].pending
    page = "\n".join(tuning.page_lines(exp))
    assert "declared post hoc: the first grid chose its edge" in page
    assert "tune tuned --grid wide`) |" in page
    assert "| `--learning-rate 0.05 --update-epochs 1` | 0.5 | largest --learning-rate |" in page
    _tuning_table(folder, "wide", wide.configs(), chosen=0, name="tuning-wide.csv")
    assert spec.load(folder).arms["wide"].flags == ("--learning-rate", "0.05")
    both_wide = text.replace("[tuning]", second + '\nname = "wide"')
    one_arm_twice = text.replace("[tuning]", second.replace('arms = ["wide"]', 'arms = ["tuned"]'))
    for twice, match in ((both_wide, r"grid names \['wide'\] appear twice"),
                         (one_arm_twice, r"arms \['tuned'\] are tuned by two grids")):  # fmt: skip
        (folder / "experiment.toml").write_text(twice)
        with pytest.raises(spec.SpecError, match=match):
            spec.load(folder)


def test_edges_name_the_numeric_flags_chosen_at_the_grid_s_largest_or_smallest_value():
    grid = (("--learning-rate", ("1e-3", "3e-3")), ("--update-epochs", ("1", "4", "8")),
            ("--kl-coef", ("0", "0.04")), ("--adv-norm", ("grpo", "bnpo")))  # fmt: skip
    t = tuning.Tuning(("a",), grid, (1,), "m", (), (1,), {"a": ()})
    flags = ("--learning-rate", "3e-3", "--update-epochs", "1", "--kl-coef", "0")
    assert tuning.edges(t, flags) == ["largest --learning-rate", "smallest --update-epochs"]
    middle = ("--learning-rate", "3e-3", "--update-epochs", "4", "--kl-coef", "0.04")
    assert tuning.edges(t, middle) == ["largest --learning-rate", "largest --kl-coef"]


def test_tune_refuses_a_grid_the_declaration_does_not_have(capsys):
    from paper_figures.__main__ import main

    with pytest.raises(SystemExit) as exit_:
        main(["tune", "objective-zoo-recipes", "--grid", "nope"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "--grid 'nope': not a grid of objective-zoo-recipes (its grids: '', 'wide')" in err
