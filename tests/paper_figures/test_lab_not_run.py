"""A pooled claim is judged once every env its arms are declared on has their runs (before, its
line says which envs are not run yet), and a line that supersedes another replaces it in the
headline only once it has run."""

from __future__ import annotations

from paper_figures.lab import judge, ledger, protocol, spec

TOML = """
title = "three arms of GRPO on two bandits"
[[paper]]
key = "p"
title = "A paper"
arxiv = "0000.00000"
[run]
algo = "grpo"
mode = "population"
seeds = 6
steps = 1024
flags = ["--num-envs", "64"]
metrics = ["final_success"]
final_window = 128
[envs."bandit:bernoulli-10"]
[envs."bandit:contextual-16-10"]
[arms.a]
recipe = "project defaults"
[arms.b]
flags = ["--update-epochs", "1"]
recipe = "one epoch"
[arms.c]
flags = ["--update-epochs", "2"]
recipe = "two epochs"
[toy]
seeds = 2
steps = 128
[[claim]]
id = "OLD"
paper = "p"
claim = "a beats b"
kind = "superior"
a = "a"
b = "b"
metric = "final_success"
[[claim]]
id = "NEW"
paper = "p"
claim = "c beats b"
kind = "superior"
a = "c"
b = "b"
metric = "final_success"
supersedes = ["OLD"]
"""
ENVS = ("bandit:bernoulli-10", "bandit:contextual-16-10")


def _rows(arms, envs=ENVS, seeds=range(1, 7)):
    return [
        {"env": e, "arm": a, "seed": s, "algo": "grpo", "steps": 1024, "digest": "x",
         "flags": "", "final_success": (0.9 if a != "b" else 0.5) + 0.01 * s}
        for a in arms for e in envs for s in seeds
    ]  # fmt: skip


def _exp(tmp_path):
    (tmp_path / "e").mkdir()
    (tmp_path / "e" / "experiment.toml").write_text(TOML)
    return spec.load(tmp_path / "e")


def test_a_pooled_claim_with_an_env_not_run_is_not_run_yet_naming_it(tmp_path):
    exp = _exp(tmp_path)
    rows = _rows("ab") + _rows("c", envs=ENVS[:1])
    by = {ln.id: ln for ln in judge.lines(exp, rows)}
    assert by["NEW"].judgement.verdict == protocol.NOT_RUN
    assert by["NEW"].judgement.text == "not run yet: no results of c, b on bandit:contextual-16-10"
    assert by["OLD"].judgement.verdict != protocol.NOT_RUN and by["OLD"].judgement.n == "12 pairs"
    by = {ln.id: ln for ln in judge.lines(exp, _rows("abc"))}
    assert by["NEW"].judgement.verdict != protocol.NOT_RUN and by["NEW"].judgement.n == "12 pairs"


def test_a_line_supersedes_another_in_the_headline_only_once_it_has_run(tmp_path):
    exp = _exp(tmp_path)
    lines = judge.lines(exp, _rows("ab"))
    assert {ln.id for ln in ledger.headline(lines)} == {"OLD", "NEW"}
    lines = judge.lines(exp, _rows("abc"))
    assert {ln.id for ln in ledger.headline(lines)} == {"NEW"}
