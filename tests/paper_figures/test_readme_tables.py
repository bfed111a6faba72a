"""The table blocks of both READMEs (paper_figures/readme_tables.py, figures_tables.py) regenerate
byte for byte from the committed CSVs of paper_figures/out/, a missing CSV is named, the check
fails when a quoted count or a CSV number is edited, and every catalogued experiment and theory
statement has a ledger line."""

import shutil
from pathlib import Path

import pytest

from controlrl import stats

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def claims(tmp_path, monkeypatch):
    """The README tables reading a copy of paper_figures/out/, checked (`claims.check()`, the
    problems `python -m paper_figures check` prints) against copies of both READMEs."""
    from paper_figures import readme_tables as module
    from paper_figures.lab import report

    out = tmp_path / "out"
    shutil.copytree(ROOT / "paper_figures" / "out", out)
    monkeypatch.setattr(module, "OUT", out)
    shutil.copy(ROOT / "README.md", tmp_path / "README.md")
    (tmp_path / "figures").mkdir()
    shutil.copy(ROOT / "paper_figures" / "README.md", tmp_path / "figures" / "README.md")
    paths = {"readme": tmp_path / "README.md", "figures_readme": tmp_path / "figures" / "README.md"}
    monkeypatch.setattr(module, "check", lambda: report.check(**paths), raising=False)

    def write():  # the two READMEs as the CSVs give them
        texts, _ = report.outputs(**paths)
        for path in paths.values():
            path.write_text(texts[path])

    monkeypatch.setattr(module, "write", write, raising=False)
    return module


def test_committed_ledger_is_what_the_csvs_give(claims):
    assert claims.check() == []


def test_missing_csv_is_an_error_naming_it(claims):
    (claims.OUT / "iql_vs_bc.csv").unlink()
    assert any("iql_vs_bc.csv" in p for p in claims.check())


def test_edited_quote_or_csv_number_fails_the_check(claims, tmp_path):
    readme = tmp_path / "README.md"
    text = readme.read_text()
    readme.write_text(text.replace(" holds,", " holds!,", 1))
    assert claims.check()
    readme.write_text(text)
    assert claims.check() == []
    path = claims.OUT / "iql_vs_bc.csv"
    lines = path.read_text().splitlines()
    fields = lines[1].split(",")
    fields[8] = str(float(fields[8]) + 10.0)  # final_normalized_score of one run
    path.write_text("\n".join([lines[0], ",".join(fields), *lines[2:]]) + "\n")
    assert claims.check()


def test_every_catalogued_experiment_and_statement_has_a_row(claims):
    from paper_figures.lab import report

    ids = [ln.id for ln in report.lines()]
    for e in range(1, 19):
        assert any(i == f"E{e}" or i.startswith(f"E{e}-") for i in ids), f"E{e}"
    assert len([i for i in ids if i.startswith("T-")]) == 46
    assert len(set(ids)) == len(ids)


def edit_in_block(text: str, name: str, old: str, new: str) -> str:
    """`text` with the first `old` inside block table:<name> replaced by `new`."""
    start = text.index(f"<!-- table:{name} -->")
    end = text.index("<!-- table:end -->", start)
    assert old in text[start:end], (name, old)
    return text[:start] + text[start:end].replace(old, new, 1) + text[end:]


@pytest.mark.parametrize(
    "readme, block, old, new",
    [
        ("README.md", "learning", "3,309 (2,871-3,665)", "3,310 (2,871-3,665)"),
        ("figures/README.md", "retrace-traces", "0.912 / 0.961", "0.913 / 0.961"),
    ],
)
def test_an_edited_number_in_a_table_block_fails_the_check_naming_the_block(
    claims, tmp_path, capsys, readme, block, old, new
):
    path = tmp_path / readme
    text = path.read_text()
    path.write_text(edit_in_block(text, block, old, new))
    assert any(f"table:{block} differs" in p for p in claims.check())
    claims.write()  # rewriting restores the committed text
    assert path.read_text() == text


def test_a_block_without_its_function_fails_the_check(claims, monkeypatch):
    from paper_figures import readme_tables

    tables = dict(readme_tables.TABLES)
    del tables["population"]
    monkeypatch.setattr(readme_tables, "TABLES", tables)
    assert any("table:population has no function" in p for p in claims.check())


def test_a_function_without_its_block_fails_the_check(claims, tmp_path):
    readme = tmp_path / "README.md"
    text = readme.read_text()
    start = text.index("<!-- table:speed -->")
    end = text.index("<!-- table:end -->", start) + len("<!-- table:end -->")
    readme.write_text(text[:start] + text[end:])
    assert any("speed" in p for p in claims.check())


def test_a_table_block_reads_its_csv(claims):
    (claims.OUT / "bench_population.csv").unlink()
    assert any("bench_population.csv" in p for p in claims.check())


def test_spread_is_a_range_below_five_seeds_and_an_interval_from_five():
    from paper_figures.readme_tables import kind, spread

    assert spread([1.0, 2.0, 6.0], ".1f") == "3.0 (1.0-6.0)"
    assert spread([-1.0, 2.0], ".1f") == "0.5 (-1.0 to 2.0)"
    text = spread([1.0, 2.0, 3.0, 4.0, 5.0], ".2f")
    assert text.startswith("3.00 [") and "-" not in text
    # the interval is the ledger's (stats.summarize): a README cell and a row on the same runs agree
    x = [61.0, 55.2, 70.3, 58.8, 62.1]
    s = stats.summarize(x)
    assert spread(x, ".2f") == f"{s.mean:.2f} [{s.lo:.2f}, {s.hi:.2f}]"
    assert kind(4) == "mean (range)" and kind(5) == "mean [95% bootstrap CI]"


def _write_csv(path, rows):
    import csv

    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
