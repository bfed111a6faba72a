"""paper_figures/claims.py: the ledger regenerates byte for byte from the committed CSVs, refuses
a missing CSV, and fails --check when a quoted count or a CSV number is edited."""

import importlib.util
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def claims(tmp_path, monkeypatch):
    """The claims module reading a copy of paper_figures/out/ and of the ledger files."""
    spec = importlib.util.spec_from_file_location("claims", ROOT / "paper_figures" / "claims.py")
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "claims", module)  # dataclasses look their module up
    spec.loader.exec_module(module)
    out = tmp_path / "out"
    shutil.copytree(ROOT / "paper_figures" / "out", out)
    monkeypatch.setattr(module, "OUT", out)
    for name in ("CLAIMS.md", "README.md"):
        src = ROOT / ("paper_figures" if name == "CLAIMS.md" else "") / name
        shutil.copy(src, tmp_path / name)
    module.argv = [
        "--ledger", str(tmp_path / "CLAIMS.md"), "--csv", str(out / "claims.csv"),
        "--readme", str(tmp_path / "README.md"),
    ]  # fmt: skip
    return module


def test_committed_ledger_is_what_the_csvs_give(claims):
    assert claims.main([*claims.argv, "--check"]) == 0


def test_missing_csv_is_an_error_naming_it(claims):
    (claims.OUT / "depth_sweep.csv").unlink()
    with pytest.raises(FileNotFoundError, match="depth_sweep.csv"):
        claims.main([*claims.argv, "--check"])


def test_edited_quote_or_csv_number_fails_the_check(claims, tmp_path):
    readme = tmp_path / "README.md"
    text = readme.read_text()
    readme.write_text(text.replace(" holds,", " holds!,", 1))
    assert claims.main([*claims.argv, "--check"]) == 1
    readme.write_text(text)
    assert claims.main([*claims.argv, "--check"]) == 0
    path = claims.OUT / "trust_region_family.csv"
    lines = path.read_text().splitlines()
    fields = lines[1].split(",")
    fields[5] = str(float(fields[5]) + 100.0)  # final_eval_return of one run
    path.write_text("\n".join([lines[0], ",".join(fields), *lines[2:]]) + "\n")
    assert claims.main([*claims.argv, "--check"]) == 1


def test_every_catalogued_experiment_and_statement_has_a_row(claims):
    ids = [r.id for r in claims.all_rows()]
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
    np.testing.assert_allclose(d, [1.0, 0.5])
