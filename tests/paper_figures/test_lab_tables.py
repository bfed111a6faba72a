"""The engine's table reader (paper_figures/lab/tables.py) bounds what it reads: a results table
over the size limit, a cell over csv's field limit, a renamed or missing column, a row that does
not fit its header, a cell that is not a number: one line naming the file, from the readers
(results.py, metrics.py) and from `check`, never a traceback or an unbounded read."""

from __future__ import annotations

import shutil

import pytest

from paper_figures.lab import metrics, report, results, spec, tables

EXPERIMENT = next(p for p in spec.discover() if spec.load(p).arms)


@pytest.fixture
def tree(tmp_path):
    """One declared experiment with arms, its committed results, and both READMEs."""
    figures = tmp_path / "paper_figures"
    shutil.copytree(EXPERIMENT, figures / EXPERIMENT.name)
    shutil.copy(spec.FIGURES / "README.md", figures / "README.md")
    shutil.copy(spec.ROOT / "README.md", tmp_path / "README.md")
    return figures


def check(tree) -> list[str]:
    return report.check(tree, tree.parent / "README.md", tree / "README.md")


def runs_csv(tree):
    return tree / EXPERIMENT.name / "results" / "runs.csv"


def edit_header(path, old: str, new: str) -> None:
    lines = path.read_text().split("\n")
    cells = lines[0].split(",")
    lines[0] = ",".join(new if c == old else c for c in cells)
    path.write_text("\n".join(lines))


def only_line_naming(problems: list[str], path) -> str:
    assert len(problems) == 1 and "\n" not in problems[0], problems
    assert str(path) in problems[0], problems[0]
    return problems[0]


def test_a_renamed_or_missing_column_is_one_line_naming_the_file(tree):
    table = runs_csv(tree)
    exp = spec.load(tree / EXPERIMENT.name)
    text = table.read_text()
    edit_header(table, "seed", "seeds")
    assert "no column seed" in only_line_naming(check(tree), table)
    table.write_text(text)
    metric = next(iter(exp.metrics))
    edit_header(table, metric, metric + "_renamed")
    assert f"no column {metric}" in only_line_naming(check(tree), table)
    with pytest.raises(tables.TableError, match=f"no column {metric}"):
        results.rows_of(exp)


def test_a_table_over_the_size_limit_is_refused_before_it_is_read(tree, monkeypatch):
    table = runs_csv(tree)
    monkeypatch.setattr(tables, "MAX_BYTES", table.stat().st_size - 1)
    assert "over the" in only_line_naming(check(tree), table)


def test_a_cell_over_the_field_limit_or_a_broken_row_is_one_line(tree):
    table = runs_csv(tree)
    lines = table.read_text().split("\n")
    text = "\n".join(lines)
    cells = lines[1].split(",")
    lines[1] = ",".join([*cells[:-1], '"' + "9" * (tables.MAX_FIELD + 1) + '"'])
    table.write_text("\n".join(lines))
    assert "field larger than field limit" in only_line_naming(check(tree), table)
    lines = text.split("\n")
    lines[2] += ",1"
    table.write_text("\n".join(lines))
    assert "line 3:" in only_line_naming(check(tree), table)
    lines = text.split("\n")
    header = lines[0].split(",")
    cells = lines[1].split(",")
    cells[header.index("seed")] = "one"
    lines[1] = ",".join(cells)
    table.write_text("\n".join(lines))
    assert "row 1 [seed]: 'one' is not int" in only_line_naming(check(tree), table)


def test_the_curves_and_a_runs_metrics_are_read_through_the_same_bounds(tmp_path):
    table = tmp_path / "runs.csv"
    (tmp_path / "curves.csv").write_text("env,arm,seed,digest,stp,train_return\nx,a,1,d,1,2\n")
    with pytest.raises(tables.TableError, match="curves.csv: no column step"):
        results.read_curves(table)
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.csv").write_text("steps,train/episode_return\n1,2\n")
    with pytest.raises(tables.TableError, match="metrics.csv: no column step"):
        metrics._by_seed(run, [1])
    (run / "metrics.csv").write_bytes(b"step,x\n1,\xff\n")
    with pytest.raises(tables.TableError, match="not UTF-8"):
        metrics._by_seed(run, [1])


def test_the_field_limit_of_the_csv_module_is_left_as_it_was(tmp_path):
    before = __import__("csv").field_size_limit()
    (tmp_path / "t.csv").write_text("a\n1\n")
    assert tables.read_rows(tmp_path / "t.csv", ("a",)) == [{"a": "1"}]
    assert __import__("csv").field_size_limit() == before


def test_the_command_reports_an_unreadable_table_in_one_line(tmp_path, monkeypatch, capsys):
    from paper_figures.__main__ import main

    def broken(*args, **kwargs):
        raise tables.TableError(f"{tmp_path / 'runs.csv'}: no column seed")

    monkeypatch.setattr("paper_figures.lab.report.write", broken)
    assert main(["report"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: {tmp_path / 'runs.csv'}: no column seed"]


def test_a_runs_configuration_is_stated_once_per_arm_and_env_and_read_back_with_every_seed(tree):
    exp = spec.load(tree / EXPERIMENT.name)
    table = runs_csv(tree)
    rows = results.rows_of(exp)
    configs = tables.read_rows(results.configs_path(table))
    assert len(configs) == len({(r["env"], r["arm"]) for r in rows}) < len(rows)
    assert "flags" not in tables.read_rows(table)[0]
    before = table.read_bytes(), results.configs_path(table).read_bytes()
    results.write(table, exp, rows)  # a table read and written again is the same bytes
    assert (table.read_bytes(), results.configs_path(table).read_bytes()) == before
    assert repr(results.rows_of(exp)) == repr(rows)  # repr: nan equals nan


def test_a_run_without_its_configuration_is_one_line_naming_the_configurations(tree):
    exp = spec.load(tree / EXPERIMENT.name)
    configs = results.configs_path(runs_csv(tree))
    head, first, *rest = configs.read_text().split("\n")
    configs.write_text("\n".join([head, *rest]))
    arm = first.split(",")[1]
    assert f"no configuration of {arm}" in only_line_naming(check(tree), configs)
    with pytest.raises(tables.TableError, match=f"no configuration of {arm}"):
        results.rows_of(exp)


def test_two_configurations_of_one_arm_and_env_are_refused(tree):
    exp = spec.load(tree / EXPERIMENT.name)
    rows = results.rows_of(exp)
    rows[-1] = {**rows[-1], "flags": rows[-1]["flags"] + " --other"}
    with pytest.raises(ValueError, match="ran two configurations"):
        results.write(runs_csv(tree), exp, rows)
