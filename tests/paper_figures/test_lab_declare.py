"""`python -m paper_figures declare`: a declaration registered before its runs is in the ledger
with every line 'not run yet' and its page generated; declaring twice, or an experiment whose
results come from a script or an analysis, is refused."""

from __future__ import annotations

import shutil

import pytest

from paper_figures.lab import protocol, report, runner, spec

SOURCE = spec.FIGURES / "trust-region-1m-20"


def test_a_declared_experiment_without_runs_is_in_the_ledger_as_not_run_yet(tmp_path):
    tree = tmp_path / "paper_figures"
    shutil.copytree(SOURCE, tree / "declared", ignore=shutil.ignore_patterns("results", "*.md"))
    for name in ("CLAIMS.md", "README.md"):
        shutil.copy(spec.FIGURES / name, tree / name)
    shutil.copy(spec.ROOT / "README.md", tmp_path / "README.md")
    exp = spec.load(tree / "declared")
    target = runner.declare(exp)
    assert target.read_text().count("\n") == 1  # the header alone
    lines = [ln for ln in report.lines(tree) if ln.exp.id == "declared"]
    assert [ln.id for ln in lines] == [c.id for c in exp.claims]
    assert {ln.verdict for ln in lines} == {protocol.NOT_RUN}
    texts, _ = report.outputs(tree, tmp_path / "README.md", tree / "README.md")
    assert (tree / "declared" / "README.md") in texts
    with pytest.raises(SystemExit, match="has results already"):
        runner.declare(exp)


def test_an_exact_or_script_experiment_cannot_be_declared_without_results():
    for name in ("theory-statements", "tpo-tabular-single"):
        with pytest.raises(SystemExit, match="script or analysis"):
            runner.declare(spec.load(spec.FIGURES / name))
