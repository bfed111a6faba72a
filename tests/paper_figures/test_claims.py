"""paper_figures/claims.py (the rows not yet declared): the ledger and both READMEs regenerate
byte for byte from the committed CSVs, a missing CSV is named, and the check fails when a quoted
count or a CSV number is edited."""

import shutil
from pathlib import Path

import numpy as np
import pytest

from controlrl import stats

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def claims(tmp_path, monkeypatch):
    """The claims module reading a copy of paper_figures/out/, checked (`claims.check()`, the
    problems `python -m paper_figures check` prints) against copies of both READMEs."""
    from paper_figures import claims as module
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
    from paper_figures.lab import ledger, spec

    ids = [r.id for r in claims.all_rows()] + [ln.id for ln in ledger.judged(spec.load_all())]
    for e in range(1, 19):
        assert any(i == f"E{e}" or i.startswith(f"E{e}-") for i in ids), f"E{e}"
    assert len([i for i in ids if i.startswith("T-")]) == 46
    assert len(set(ids)) == len(ids)


def test_paired_verdict_needs_a_significant_difference_in_the_claimed_direction(claims):
    up = np.array([1.0, 2.0, 1.5, 1.2, 0.8, 1.1])
    assert claims.paired_verdict(up)[1] == claims.HOLDS
    assert claims.paired_verdict(-up)[1] == claims.FAILS
    # 5 pairs cannot reject at 0.05 with the exact sign-flip test (smallest p is 2/32)
    assert claims.paired_verdict(up[:5])[1] == claims.INCONCLUSIVE
    assert claims.paired_verdict(np.array([1.0, -1.0, 0.5, -0.4, 0.2, -0.3]))[1] == (
        claims.INCONCLUSIVE
    )


def test_normalised_differences_are_per_task_min_max(claims):
    rows = [
        {"algo": a, "env_id": e, "seed": s, "v": str(v)}
        for a, e, s, v in [
            ("x", "A", "1", 10), ("y", "A", "1", 0), ("x", "B", "1", 1000), ("y", "B", "1", 500),
            ("z", "B", "1", 0),
        ]
    ]  # fmt: skip
    d = claims.normalised_diffs(rows, "v", "x", "y", ["A", "B"])
    # on B the spread is x's and y's (1000 - 500): the third algorithm z does not enter
    np.testing.assert_allclose(d, [1.0, 1.0])


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


def test_bar_verdict_decides_only_with_the_whole_interval_on_one_side():
    from paper_figures.claims import FAILS, HOLDS, INCONCLUSIVE, bar_verdict

    assert bar_verdict("95% CI", 0.3, 0.5, 0.2) == HOLDS
    assert bar_verdict("95% CI", 0.05, 0.1, 0.2) == FAILS
    assert bar_verdict("95% CI", 0.1, 0.3, 0.2) == INCONCLUSIVE
    assert bar_verdict("range", 0.3, 0.5, 0.2) == INCONCLUSIVE
    assert bar_verdict("95% CI", 0.47, 0.49, 0.55, above=False) == HOLDS
    assert bar_verdict("95% CI", 0.6, 0.7, 0.55, above=False) == FAILS
    assert bar_verdict("95% CI", 0.5, 0.6, 0.55, above=False) == INCONCLUSIVE


def test_cut_tasks_names_the_locomotion_tasks_a_rerun_left_out(claims):
    assert claims.cut_tasks(["Hopper-v5"]) == (
        "; HalfCheetah-v5 and Walker2d-v5 not rerun at this budget (cut to fit the compute)"
    )
    assert claims.cut_tasks(["HalfCheetah-v5", "Hopper-v5", "Walker2d-v5", "Swimmer-v5"]) == ""


@pytest.mark.parametrize("algo", ["ppo", "gae", "retrace", "grpo"])
def test_stated_layouts_are_the_algorithm_files_defaults(claims, algo):
    """The rows state the layout of runs the Makefile made at the files' defaults: a changed
    default would make the statement wrong for a rerun, so it must fail here."""
    import importlib

    defaults = importlib.import_module(f"algos.{algo}").Args()
    for name, value in claims.LAYOUT_SETTINGS[algo].items():
        assert getattr(defaults, name) == value, f"algos/{algo}.py --{name.replace('_', '-')}"
    assert claims.layout(algo).startswith("Gymnasium, ")


def test_layout_text_names_envs_batch_and_epochs(claims):
    assert claims.layout("ppo") == (
        "Gymnasium, 1 env x 2,048 steps per batch, 32 minibatches x 10 epochs"
    )
    assert claims.layout("gae") == "Gymnasium, 2 envs x 1,024 steps per batch"
    assert claims.layout("retrace") == (
        "Gymnasium, 1 env, 1 gradient step per env step on 256 transitions (32 replayed segments "
        "of 8 steps)"
    )
    assert claims.layout("grpo") == (
        "Gymnasium, 64 envs per iteration (8 groups of 8 episodes), 4 epochs"
    )


def test_wall_time_states_the_summed_run_seconds_or_that_none_were_recorded():
    from paper_figures import claims

    assert claims.wall_time([{"steps": "1"}]) == claims.NO_WALL_TIME  # a CSV before the column
    assert claims.wall_time([{"train_s": "nan"}]) == claims.NO_WALL_TIME
    timed = [{"train_s": "1800"}, {"train_s": "5400"}]
    assert claims.wall_time(timed) == ("2.0 hours of collection and updates summed over the 2 runs")
    assert claims.wall_time([*timed, {"train_s": ""}]) == (
        "2.0 hours of collection and updates summed over the 2 of 3 runs that recorded it"
    )


def _write_csv(path, rows):
    import csv

    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def test_every_control_and_offline_rerun_row_states_its_compute_or_that_none_was_recorded(claims):
    """The experiments rerun at a power that can decide state their total wall time once, in the
    row (or, for runs from before it was recorded, say so)."""
    import re

    families = "E1|E2|E3|E5|E6|E7-mujoco|E7-under|E12-ppo|E12-grpo|E16|Brax"
    rerun = re.compile(rf"({families})(-|$)")
    ran = [r for r in claims.all_rows() if r.verdict not in (claims.CANNOT, claims.NOT_RUN)]
    rows = [r for r in ran if rerun.match(r.id)]
    assert len(rows) >= 4  # the rows not yet declared of these families
    for r in rows:
        assert "hours" in r.budget or "wall time" in r.budget, r.id
