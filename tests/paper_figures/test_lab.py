"""The experiment engine (paper_figures/lab): declarations, the protocol's kinds, the ledger's
multiplicity, the toy run of every declaration end to end, and `check` against hand edits."""

from __future__ import annotations

import csv
import math
import shutil
from pathlib import Path

import numpy as np
import pytest

from paper_figures.lab import judge, pages, protocol, report, results, runner, spec

ROOT = Path(__file__).resolve().parents[2]
DECLARED = spec.discover()
# an exact experiment's toy decides each claim it can judge at toy size (its table is too small to
# repeat the full verdicts), or says the claim cannot run here
TOY_VERDICTS = (protocol.HOLDS, protocol.FAILS, protocol.INCONCLUSIVE, protocol.CANNOT)


def test_every_declaration_loads_and_its_arms_flags_parse():
    assert DECLARED, "no experiment declared under paper_figures/"
    for folder in DECLARED:
        exp = spec.load(folder)
        spec.check_flags(exp)  # raises on a flag the algorithm refuses


@pytest.mark.parametrize("folder", DECLARED, ids=[p.name for p in DECLARED])
def test_every_declaration_runs_at_toy_size_end_to_end(folder, tmp_path):
    exp = spec.load(folder)
    assert not runner.run(exp, toy=True, workers=2, root=tmp_path)
    target = runner.write(exp, toy=True, root=tmp_path)
    if not exp.arms:  # an exact experiment: its analysis computed the toy's table and judges it
        judged = judge.analysis_module(exp).judge(exp, results.rows_of(exp, target))
        assert judged and all(j.verdict in TOY_VERDICTS and j.text for j in judged.values())
        if exp.id == "theory-statements":  # its toy's tests are exact statements that hold
            assert all(j.verdict == protocol.HOLDS for j in judged.values())
        return
    rows = results.read(target)
    planned = {(a, e, s) for a, e, s, *_ in exp.runs(toy=True)}
    assert {(r["arm"], r["env"], r["seed"]) for r in rows} == planned
    assert all(np.isfinite(r[exp.metrics[0]]) for r in rows)
    # the toy's rows carry the toy's flags: the declaration's full-size digests refuse them
    assert len(results.stale(exp, rows)) == len(rows)
    offline = all(a.algo == "iql" for a in exp.arms.values())  # it logs no train episodes
    assert results.curves_path(target).exists() != (offline or bool(exp.script) or not exp.curves)
    if results.curves_path(target).exists():  # each run's curve beside its row, tied by the digest
        curves = list(csv.DictReader(results.curves_path(target).open()))
        assert {(r["arm"], r["env"], int(r["seed"]), r["digest"]) for r in curves} == {
            (r["arm"], r["env"], r["seed"], r["digest"]) for r in rows
        }
    ran = {r["env"] for r in rows}  # a claim on an env the toy does not run is not judged
    arms = set(exp.toy.arms)  # a claim is judged at toy size where all its arms ran
    toy = [
        c
        for c in exp.claims  # paired claims: a and b (a contrast's c and d too) ran
        if {c.a, c.b} <= arms and {c.c, c.d} - {""} <= arms and set(c.envs or ran) & ran
    ]
    for claim in toy:
        envs = [e for e in results.claim_envs(exp, claim, rows) if e in ran]
        k = len(exp.toy.seeds)
        n = f"{k} vs {k} runs" if claim.kind == "unpaired" else f"{k} pairs"
        assert judge.compare(exp, claim, rows, envs).n == n


def _toml(claims: str, extra: str = "") -> str:
    return f"""
title = "two arms of GRPO on a bandit"
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
final_window = 128
[envs."bandit:bernoulli-10"]
[arms.grpo]
recipe = "project defaults"
[arms.rgra]
flags = ["--policy-loss", "reinforce", "--update-epochs", "1"]
recipe = "project defaults"
[toy]
seeds = 2
steps = 128
{extra}
{claims}
"""


CLAIM = """
[[claim]]
id = "NEW-1"
paper = "p"
claim = "GRPO beats RGRA"
kind = "superior"
a = "grpo"
b = "rgra"
metric = "final_success"
"""


def _fake_results(exp, diffs: list[float]) -> None:
    rows = []
    planned = sorted(exp.runs(), key=lambda r: r[0])  # grpo's six runs, then rgra's
    for (arm, env, seed, steps, flags), value in zip(planned, [0.5] * 6 + [0.5 - d for d in diffs]):
        rows.append(results.row(exp, arm, env, seed, steps, flags, {"final_success": value}))
    results.write(results.path(exp), exp, rows)


@pytest.fixture
def tree(tmp_path):
    """A copy of paper_figures' declared experiments and both READMEs, to edit."""
    figures = tmp_path / "paper_figures"
    for folder in DECLARED:
        shutil.copytree(folder, figures / folder.name)
    shutil.copy(spec.FIGURES / "CLAIMS.md", figures / "CLAIMS.md")
    shutil.copy(spec.FIGURES / "README.md", figures / "README.md")
    shutil.copy(ROOT / "README.md", tmp_path / "README.md")
    return figures


def test_a_dropped_in_declaration_is_found_judged_and_listed_in_the_ledger(tree):
    folder = tree / "new-claim"
    folder.mkdir()
    (folder / "experiment.toml").write_text(_toml(CLAIM))
    exp = spec.load(folder)
    _fake_results(exp, [0.1, 0.2, 0.15, 0.12, 0.3, 0.25])
    readme, figures_readme = tree.parent / "README.md", tree / "README.md"
    texts, _ = report.outputs(tree, readme, figures_readme)
    line = next(t for t in texts[tree / "CLAIMS.md"].splitlines() if t.startswith("| NEW-1 |"))
    assert "| superior | holds |" in line and "[new-claim](new-claim/README.md#new-1)" in line
    assert "new-claim/README.md" in texts[figures_readme]
    assert (folder / "README.md") in texts
    assert report.check(tree, readme, figures_readme)  # not written yet: the check fails


def test_check_fails_on_a_hand_edit_of_the_ledger_a_page_or_an_edited_result(tree):
    readme, figures_readme = tree.parent / "README.md", tree / "README.md"
    assert report.check(tree, readme, figures_readme) == []
    ledger_text = (tree / "CLAIMS.md").read_text()
    (tree / "CLAIMS.md").write_text(ledger_text.replace("does not hold", "holds", 1))
    assert any("CLAIMS.md" in p for p in report.check(tree, readme, figures_readme))
    (tree / "CLAIMS.md").write_text(ledger_text)
    page = tree / DECLARED[0].name / "README.md"
    page_text = page.read_text()
    page.write_text(page_text.replace("holds", "does not hold", 1))
    assert any("README.md" in p for p in report.check(tree, readme, figures_readme))
    page.write_text(page_text)
    assert report.check(tree, readme, figures_readme) == []
    # an edited result is judged again, not read from what the same tree gave before
    runs = tree / DECLARED[0].name / "results" / "runs.csv"
    head, first, *rest = runs.read_text().split("\n")
    cells = first.split(",")
    column = head.split(",").index(spec.load(DECLARED[0]).metrics[0])
    cells[column] = str(float(cells[column]) + 1.0)
    runs.write_text("\n".join([head, ",".join(cells), *rest]))
    assert report.check(tree, readme, figures_readme)


def test_an_edited_flag_makes_the_committed_results_stale(tree):
    exp = spec.load(tree / DECLARED[0].name)
    toml = exp.folder / "experiment.toml"
    arm = next(a for a in exp.arms.values() if a.flags)
    text = toml.read_text()
    start = text.index(f'[arms."{arm.name}"]')
    toml.write_text(text[:start] + text[start:].replace(arm.flags[-1], arm.flags[-1] + "0", 1))
    problems = report.check(tree, tree.parent / "README.md", tree / "README.md")
    assert problems and "digest" in problems[0]


@pytest.mark.parametrize(
    "edit, message",
    [
        (('kind = "superior"', 'kind = "better"'), "kind must be one of"),
        (('b = "rgra"', 'b = "ppo"'), "'b' must name an arm"),
        (('metric = "final_success"\n', 'metric = "auc"\n'), "not in [run] metrics"),
        (('kind = "superior"', 'kind = "non-inferior"'), "needs a margin"),
        (('id = "NEW-1"', 'id = "NEW-1"\ncolour = "red"'), "unknown key(s) colour"),
    ],
)
def test_a_declaration_error_names_the_file_and_the_key(tmp_path, edit, message):
    folder = tmp_path / "bad"
    folder.mkdir()
    (folder / "experiment.toml").write_text(_toml(CLAIM.replace(*edit)))
    with pytest.raises(spec.SpecError, match="bad/experiment.toml") as err:
        spec.load(folder)
    assert message in str(err.value)


def test_a_flag_the_algorithm_refuses_fails_before_anything_runs(tmp_path):
    folder = tmp_path / "flags"
    folder.mkdir()
    (folder / "experiment.toml").write_text(_toml(CLAIM).replace('"reinforce"', '"reinforcee"'))
    with pytest.raises(spec.SpecError, match="refuses its flags"):
        spec.check_flags(spec.load(folder))


def test_superior_holds_only_on_the_claimed_side_and_inferior_mirrors_it():
    d = np.array([0.3, 0.2, 0.25, 0.4, 0.1, 0.35, 0.2, 0.3])
    up = protocol.paired(d, "superior", None, "")
    assert up.verdict_at(up.p) == (protocol.HOLDS, "")
    down = protocol.paired(-d, "superior", None, "")
    assert down.verdict_at(down.p) == (protocol.FAILS, "")
    mirror = protocol.paired(-d, "inferior", None, "")
    assert mirror.verdict_at(mirror.p) == (protocol.HOLDS, "")
    # the adjusted q decides: the same line above 0.05 is inconclusive
    assert up.verdict_at(0.2)[0] == protocol.INCONCLUSIVE


def test_non_inferiority_tests_at_minus_the_margin_and_a_shift_at_plus_it():
    d = np.full(8, -0.005) + np.linspace(-1e-3, 1e-3, 8)  # a little below 0, well above -0.01
    sup = protocol.paired(d, "superior", 0.01, "")
    assert sup.verdict_at(sup.p)[0] == protocol.FAILS  # significantly below 0
    non = protocol.paired(d, "non-inferior", 0.01, "")
    assert non.verdict_at(non.p)[0] == protocol.HOLDS  # significantly above -0.01
    gap = protocol.paired(-d, "superior", 0.01, "margin")
    assert gap.verdict_at(gap.p)[0] == protocol.FAILS  # +0.005 is not a gap beyond 0.01


def test_equivalence_holds_inside_the_margin_and_fails_beyond_it():
    inside = protocol.paired(np.linspace(-2e-3, 2e-3, 9), "equivalent", 0.01, "")
    assert inside.verdict_at(inside.p)[0] == protocol.HOLDS
    beyond = protocol.paired(np.linspace(0.02, 0.03, 9), "equivalent", 0.01, "")
    assert beyond.verdict_at(beyond.p)[0] == protocol.FAILS


def test_inconclusive_says_which_kind():
    tight = protocol.paired(np.linspace(-1e-4, 1.2e-4, 30), "superior", 0.01, "")
    assert tight.verdict_at(tight.p) == (protocol.INCONCLUSIVE, protocol.EQUIVALENT)
    noisy = protocol.paired(np.array([1.0, -0.8, 0.5, -0.4, 0.9, -1.1, 0.2]), "superior", None, "")
    assert noisy.verdict_at(noisy.p) == (protocol.INCONCLUSIVE, protocol.UNDERPOWERED)
    few = protocol.paired(np.array([0.3, 0.2, 0.25, 0.4, 0.1]), "superior", None, "")
    assert few.verdict_at(few.p) == (protocol.INCONCLUSIVE, protocol.NO_TEST)
    assert math.isinf(few.detectable)
    same = protocol.paired(np.zeros(10), "superior", None, "")
    assert same.verdict_at(same.p) == (protocol.INCONCLUSIVE, protocol.CEILING)


def test_the_ledger_adjusts_every_p_value_with_benjamini_hochberg():
    lines = report.lines()
    family = [ln for ln in lines if not math.isnan(ln.judgement.p)]
    p = np.array([ln.judgement.p for ln in family])
    order = np.argsort(p)
    m = p.size
    # the largest rank whose p is under its BH threshold: every line at or below it is rejected
    passing = [i for i, k in enumerate(order) if p[k] <= (i + 1) / m * protocol.ALPHA]
    rejected = {family[k].id for k in order[: passing[-1] + 1]} if passing else set()
    decided = {ln.id for ln in family if ln.verdict in (protocol.HOLDS, protocol.FAILS)}
    guarded = {ln.id for ln in family if ln.cause == protocol.GUARD}  # decides nothing
    assert decided <= rejected and rejected - decided <= guarded and not decided & guarded


def test_a_page_names_the_exact_command_of_every_arm():
    exp = spec.load(DECLARED[0])
    text = pages.command(exp, next(iter(exp.arms)), next(iter(exp.envs)))
    assert text.startswith(f"python algos/{next(iter(exp.arms.values())).algo}.py --env-id ")
    page = (exp.folder / "README.md").read_text()
    for arm in exp.arms.values():
        assert pages.command(exp, arm.name, arm.envs[0]) in page


def test_committed_ledger_pages_and_readme_blocks_are_what_the_results_give():
    assert report.check() == []


def test_an_env_declared_separate_runs_one_process_per_seed_in_a_population_experiment():
    """objective-zoo-recipes runs its populations in one process each, but the stop bandit
    (answers that end at different steps) as separate runs: its own sweep, not a population."""
    from controlrl import experiment as sweep

    exp = spec.load(spec.FIGURES / "objective-zoo-recipes")
    configs = runner.configs(exp)
    together, apart = configs["grpo"], configs["grpo-separate"]
    assert together.population and not apart.population
    assert (
        apart.envs == ["bandit:sequence-stop-2-4"]
        and "bandit:sequence-stop-2-4" not in together.envs
    )
    tasks = sweep.plan(apart, runner.base(exp, False) / "grpo-separate")
    assert len(tasks) == len(exp.seeds) and all(len(t.seeds) == 1 for t in tasks)
    sweep.check_config(apart)  # a population of the stop bandit is refused; separate runs are not


def test_an_arm_declared_separate_runs_one_process_per_seed_beside_population_arms(tmp_path):
    """An arm's own mode (TRPO and FixPO in trust-region-300k-20, whose solves are not batched
    over seeds) overrides the run's: its own sweep of one process per seed, and its page's
    command takes --seed K where the population arms' take --num-seeds."""
    from controlrl import experiment as sweep

    folder = tmp_path / "mixed"
    folder.mkdir()
    text = _toml(CLAIM).replace("[arms.rgra]", '[arms.rgra]\nmode = "separate"')
    (folder / "experiment.toml").write_text(text)
    exp = spec.load(folder)
    configs = runner.configs(exp)
    assert set(configs) == {"grpo", "rgra-separate"}
    assert configs["grpo"].population and not configs["rgra-separate"].population
    tasks = sweep.plan(configs["rgra-separate"], tmp_path / "rgra-separate")
    assert len(tasks) == len(exp.seeds) and all(len(t.seeds) == 1 for t in tasks)
    env = next(iter(exp.envs))
    assert "--num-seeds 6" in pages.command(exp, "grpo", env)
    assert pages.command(exp, "rgra", env).endswith("--seed K")
    assert "(rgra: one process per seed)" in pages.page(exp, [], [], {})
    (folder / "experiment.toml").write_text(text.replace('"separate"', '"batched"'))
    with pytest.raises(spec.SpecError, match="mode must be 'separate' or 'population'"):
        spec.load(folder)


ANALYSIS = """
from pathlib import Path

def metrics(exp, run_dir, env_id, seed, toy):
    calls = Path(exp.folder) / "calls.txt"
    calls.write_text(calls.read_text() + "x" if calls.exists() else "x")
    return {"seed_scaled": seed * exp.analysis_config(toy)["scale"]}
"""


def test_an_analysis_metric_is_computed_per_run_once_and_again_when_its_table_changes(tmp_path):
    folder = tmp_path / "own"
    folder.mkdir()
    extra = '[analysis]\nmetrics = ["seed_scaled"]\nscale = 10\ntoy = { scale = 100 }'
    text = _toml(CLAIM, extra).replace('metrics = ["final_success"]',
                                       'metrics = ["final_success", "seed_scaled"]')  # fmt: skip
    (folder / "experiment.toml").write_text(text)
    with pytest.raises(spec.SpecError, match="needs one"):  # no analysis.py to compute it
        spec.load(folder)
    (folder / "analysis.py").write_text(ANALYSIS)
    exp = spec.load(folder)
    assert not runner.run(exp, toy=True, workers=1, root=tmp_path / "runs")
    rows = runner.collect(exp, toy=True, root=tmp_path / "runs")
    assert {(r["seed"], r["seed_scaled"]) for r in rows} == {(1, 100.0), (2, 200.0)}
    assert list(rows[0])[-2:] == ["final_success", "seed_scaled"]  # the declared order
    calls = folder / "calls.txt"
    assert calls.read_text() == "x" * len(rows)  # once per run and seed
    runner.collect(exp, toy=True, root=tmp_path / "runs")
    assert calls.read_text() == "x" * len(rows)  # kept in the run directories
    (folder / "experiment.toml").write_text(text.replace("scale = 100", "scale = 1000"))
    exp = spec.load(folder)
    rows = runner.collect(exp, toy=True, root=tmp_path / "runs")
    assert {(r["seed"], r["seed_scaled"]) for r in rows} == {(1, 1000.0), (2, 2000.0)}
    assert calls.read_text() == "x" * 2 * len(rows)


def test_a_line_waits_for_every_declared_seed_of_its_arms(tmp_path):
    """A sweep part-way through an arm's seeds (its rows collected as they finish) leaves the
    line 'not run yet'; with the last seed in, it is judged on every declared pair."""
    folder = tmp_path / "partial"
    folder.mkdir()
    (folder / "experiment.toml").write_text(_toml(CLAIM))
    exp = spec.load(folder)
    _fake_results(exp, [0.1, 0.2, 0.15, 0.12, 0.3, 0.25])
    rows = results.rows_of(exp)
    partial = [r for r in rows if not (r["arm"] == "rgra" and r["seed"] == 6)]
    (line,) = judge.lines(exp, partial)
    assert line.judgement.verdict == protocol.NOT_RUN
    page = pages.page(exp, [line], partial, {})  # the arm's table says how far it is
    assert "(5 of 6 seeds so far)" in page and page.count("seeds so far") == 1
    (line,) = judge.lines(exp, rows)
    assert line.judgement.verdict != protocol.NOT_RUN and line.judgement.n == "6 pairs"
    assert line.judgement.p == pytest.approx(2 / 64)  # every pair on a's side: the exact floor
