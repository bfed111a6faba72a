"""Kind contrast: (a - b) - (c - d) per (env, seed), an interaction of two cells (SPO - PPO with
the deep policy against SPO - PPO with the shallow one), judged as superior."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from paper_figures.lab import judge, pages, protocol, results, spec

TOML = """
title = "an interaction of two cells"
[[paper]]
key = "p"
title = "A paper"
arxiv = "0000.00000"
[run]
algo = "grpo"
seeds = 4
steps = 256
metrics = ["final_success"]
[envs."bandit:bernoulli-10"]
suffix = "-B10"
[envs."bandit:bernoulli-5"]
suffix = "-B5"
[arms.new_deep]
flags = ["--hidden-sizes", "32", "32"]
recipe = "project defaults"
[arms.old_deep]
flags = ["--hidden-sizes", "32", "32", "--update-epochs", "1"]
recipe = "project defaults"
[arms.new_shallow]
flags = ["--hidden-sizes", "16"]
recipe = "project defaults"
[arms.old_shallow]
flags = ["--hidden-sizes", "16", "--update-epochs", "1"]
recipe = "project defaults"
[toy]
seeds = 2
steps = 128
[[claim]]
id = "GAP"
paper = "p"
claim = "the new method's advantage grows with depth"
kind = "contrast"
a = "new_deep"
b = "old_deep"
c = "new_shallow"
d = "old_shallow"
metric = "final_success"
normalise = "minmax-pair"
"""
ARMS = ("new_deep", "old_deep", "new_shallow", "old_shallow")


def _load(tmp_path, text: str = TOML) -> spec.Experiment:
    folder = tmp_path / "gap"
    folder.mkdir(exist_ok=True)
    (folder / "experiment.toml").write_text(text)
    return spec.load(folder)


def _rows(table: dict[str, dict[str, list[float]]]) -> list[dict]:
    """{env: {arm: values by seed 1..n}} as results rows (nan: the run is missing)."""
    rows = []
    for env, arms in table.items():
        for arm, vals in arms.items():
            rows += [{"env": env, "arm": arm, "seed": s, "final_success": v}
                     for s, v in enumerate(vals, 1) if not np.isnan(v)]  # fmt: skip
    return rows


def test_a_contrast_names_four_arms_and_only_a_contrast_names_c_and_d(tmp_path):
    claim = _load(tmp_path).claims[0]
    assert (claim.kind, claim.a, claim.b, claim.c, claim.d) == ("contrast", *ARMS)
    with pytest.raises(spec.SpecError, match="'d' must name an arm"):
        _load(tmp_path, TOML.replace('d = "old_shallow"', 'd = "ppo"'))
    with pytest.raises(spec.SpecError, match="'c' must name an arm"):
        _load(tmp_path, TOML.replace('c = "new_shallow"\n', ""))
    with pytest.raises(spec.SpecError, match="belong to kind contrast"):
        _load(tmp_path, TOML.replace('kind = "contrast"', 'kind = "superior"'))


def test_the_contrast_is_per_env_and_seed_normalised_by_the_spread_of_all_four_arms(tmp_path):
    exp = _load(tmp_path)
    nan = float("nan")
    rows = _rows({
        "bandit:bernoulli-5": {"new_deep": [4, 6], "old_deep": [1, 1], "new_shallow": [2, 2],
                               "old_shallow": [1, 0]},
        # seed 3 of old_shallow is missing: that seed drops, but its other runs set the spread
        "bandit:bernoulli-10": {"new_deep": [10, 30, 50], "old_deep": [20, 10, 0],
                                "new_shallow": [0, 20, 40], "old_shallow": [10, 10, nan]},
    })  # fmt: skip
    envs = list(exp.envs)  # canonical order: the declared one (bernoulli-10 first)
    got = results.contrasts(rows, exp.claims[0], envs)
    want = [((10 - 20) - (0 - 10)) / 50, ((30 - 10) - (20 - 10)) / 50]
    want += [((4 - 1) - (2 - 1)) / 6, ((6 - 1) - (2 - 0)) / 6]
    np.testing.assert_allclose(got, want)
    raw = results.contrasts(rows, dataclasses.replace(exp.claims[0], normalise="none"), envs)
    np.testing.assert_allclose(raw, [0, 10, 2, 3])


def test_a_contrast_is_judged_as_superior_of_the_interaction(tmp_path):
    exp = _load(tmp_path)
    gap = [0.3, 0.2, 0.25, 0.4]
    rows = _rows({env: {"new_deep": [1 + g for g in gap], "old_deep": [1.0] * 4,
                        "new_shallow": [0.5] * 4, "old_shallow": [0.5] * 4}
                  for env in exp.envs})  # fmt: skip
    (line,) = judge.lines(exp, rows)
    assert line.judgement.kind == "contrast" and line.judgement.n == "8 pairs"
    assert line.judgement.verdict_at(line.judgement.p)[0] == protocol.HOLDS
    assert [d.id for d in line.details] == ["GAP-B10", "GAP-B5"]
    # the same gaps in the shallow cell instead: the interaction is below 0
    flipped = [dict(r, arm={"new_deep": "new_shallow", "new_shallow": "new_deep",
                            "old_deep": "old_shallow", "old_shallow": "old_deep"}[r["arm"]])
               for r in rows]  # fmt: skip
    (line,) = judge.lines(exp, flipped)
    assert line.judgement.verdict_at(line.judgement.p)[0] == protocol.FAILS
    block = "\n".join(pages._claim_block(line, {}))
    assert "(new_deep minus old_deep) minus (new_shallow minus old_shallow)" in block


def test_a_contrast_is_judged_only_where_all_four_arms_ran(tmp_path):
    exp = _load(tmp_path)
    rows = _rows({env: {arm: [1.0, 2.0] for arm in ARMS} for env in exp.envs})
    rows = [r for r in rows if not (r["arm"] == "old_shallow" and r["env"].endswith("-5"))]
    assert results.claim_envs(exp, exp.claims[0], rows) == ["bandit:bernoulli-10"]


def test_the_rules_state_the_contrast():
    assert any(rule.startswith("contrast") and "all four arms" in rule for rule in protocol.RULES)


def test_a_declaration_loads_as_typed_dataclasses_with_their_defaults(tmp_path):
    """spec._build: lists become tuples of strings, an integer margin a float, an absent key the
    field's default (an arm's label its name, its flags none, its envs every env)."""
    text = TOML.replace(
        'normalise = "minmax-pair"', 'margin = 1\nmargin_why = "w"\nenvs = ["bandit:bernoulli-5"]'
    )
    text = text.replace(
        '[arms.new_shallow]\nflags = ["--hidden-sizes", "16"]\n', "[arms.new_shallow]\n"
    )
    exp = _load(tmp_path, text)
    claim = exp.claims[0]
    assert claim.envs == ("bandit:bernoulli-5",) and claim.of == () and claim.short == claim.claim
    assert type(claim.margin) is float and claim.margin == 1.0 and claim.normalise == "none"
    arm = exp.arms["new_shallow"]
    assert (arm.label, arm.flags, arm.algo) == ("new_shallow", (), "grpo")
    assert arm.envs == ("bandit:bernoulli-10", "bandit:bernoulli-5")
    assert exp.arms["old_deep"].flags == ("--hidden-sizes", "32", "32", "--update-epochs", "1")
    assert exp.papers["p"] == spec.Paper("p", "A paper", "0000.00000", "")
    assert exp.envs["bandit:bernoulli-5"] == spec.Env(
        "bandit:bernoulli-5", "bandit:bernoulli-5", "-B5", 256, "env steps", "", "separate"
    )
