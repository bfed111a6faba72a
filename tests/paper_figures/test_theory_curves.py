"""The two theory-curve scripts at toy size: paper_figures/dynamic_pg.py (exact iteration counts)
and paper_figures/regret_polylog.py (regret fits per seed), their CSVs and what they hold."""

import csv
import importlib.util
from pathlib import Path

import numpy as np
import pytest

from theory.regret import fit_sqrt

ROOT = Path(__file__).resolve().parents[2]


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "paper_figures" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_dynamic_pg_toy(tmp_path):
    _load("dynamic_pg").main(["--toy", "--out", str(tmp_path)])
    rows = list(csv.DictReader(open(tmp_path / "dynamic_pg.csv")))
    assert [int(r["H"]) for r in rows] == [2, 4]
    for r in rows:
        assert float(r["dynamic_gap"]) <= 0.01 and float(r["simultaneous_gap"]) <= 0.01
        assert float(r["ratio"]) == pytest.approx(
            int(r["simultaneous_iterations"]) / int(r["dynamic_iterations"]), rel=1e-5
        )


def test_fit_sqrt_recovers_a_sqrt_curve():
    K = np.arange(100, 5000)
    a, c, rmse = fit_sqrt(K, 3.0 + 2.0 * np.sqrt(K))
    assert (a, c, rmse) == pytest.approx((3.0, 2.0, 0.0), abs=1e-8)


@pytest.mark.slow
def test_regret_polylog_toy(tmp_path):
    _load("regret_polylog").main(["--toy", "--out", str(tmp_path)])
    rows = list(csv.DictReader(open(tmp_path / "regret_polylog.csv")))
    curves = list(csv.DictReader(open(tmp_path / "regret_polylog_curves.csv")))
    assert len(rows) == 2 and {r["seed"] for r in curves} == {"0", "1"}
    for r in rows:
        assert float(r["rmse_log"]) >= 0 and float(r["rmse_sqrt"]) >= 0
        assert float(r["regret_K"]) > 0
