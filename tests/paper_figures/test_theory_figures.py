"""The two theory figure scripts run at toy size and write PNG + CSV."""

import csv
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "script,files",
    [
        ("regret.py", ["regret.png", "regret.csv", "regret_slopes.csv"]),
        ("retrace_contraction.py", ["retrace_contraction.png", "retrace_contraction.csv"]),
    ],
)
def test_figure_script_toy(script, files, tmp_path):
    proc = subprocess.run(
        [sys.executable, str(ROOT / "paper_figures" / script), "--toy", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    assert f"made by: python paper_figures/{script} --toy --out" in proc.stdout.replace(
        str(ROOT) + "/", ""
    )
    for name in files:
        assert (tmp_path / name).stat().st_size > 100
    rows = list(csv.DictReader(open(tmp_path / files[1])))
    assert len(rows) > 10
    if script == "retrace_contraction.py":
        for r in rows:
            if r["kind"] in ("retrace", "is", "tree_backup"):
                assert float(r["max_factor"]) <= 0.9 + 1e-9
