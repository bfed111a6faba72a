"""paper_figures/lab/run_csvs.py: the committed run and curve CSVs of three figures read back and
written again byte for byte; finished runs found by seed; a missing CSV names --replot."""

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from paper_figures.lab import run_csvs

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "paper_figures" / "out"
TOY = ROOT / "paper_figures" / "dppo-finetune-100k" / "toy"

CASES = {  # folder, name: key, curves, value column, exact rows, ints, floats
    "iql_tau": (OUT, "iql_tau", ("dataset", "method", "tau", "online_steps", "seed"),
                {"curve": "score"}, "score", True, ("seed", "steps"),
                ("final_normalized_score", "final_return")),
    "dppo": (TOY, "toy", ("dataset", "policy", "seed"),
             {"curve": "eval_return", "train": "train_return"}, "value", True,
             ("seed", "steps"), ("final_return", "clone_return", "train_s")),
    "fpo": (OUT, "fpo_underconditioned", ("algo", "env", "seed"), {"curve": "eval_return"},
            "eval_return", False, ("seed", "steps"),
            ("final_eval_return", "mean_eval_return", "train_s")),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(CASES))
def test_committed_csvs_round_trip_byte_for_byte(case, tmp_path):
    folder, name, key, curves, value, exact, ints, floats = CASES[case]
    runs = run_csvs.read(folder, name, key, curves, value, ints, floats)
    assert runs and all(len(r[k][0]) == len(r[k][1]) for r in runs for k in curves)
    with (folder / f"{name}.csv").open() as f:
        fields = next(csv.reader(f))
    run_csvs.write(tmp_path, name, runs, fields, key, curves, value, exact)
    for part in ("", "_curves"):
        written = (tmp_path / f"{name}{part}.csv").read_bytes()
        assert written == (folder / f"{name}{part}.csv").read_bytes(), part


def test_a_run_keeps_its_own_curve_points(tmp_path):
    a, b = (np.array([1.0, 2.0]), np.array([3.0, 4.0])), (np.array([5.0]), np.array([6.0]))
    runs = [{"row": {"who": "a", "seed": 1, "x": 0.5}, "curve": a},
            {"row": {"who": "b", "seed": 1, "x": 0.25}, "curve": b}]  # fmt: skip
    run_csvs.write(tmp_path, "f", runs, ("who", "seed", "x"), ("who", "seed"), {"curve": "m"}, "v")
    back = run_csvs.read(tmp_path, "f", ("who", "seed"), {"curve": "m"}, "v", ("seed",), ("x",))
    assert [r["row"] for r in back] == [r["row"] for r in runs]
    for got, want in zip(back, runs):
        np.testing.assert_array_equal(got["curve"][0], want["curve"][0])
        np.testing.assert_array_equal(got["curve"][1], want["curve"][1])


def test_finished_runs_by_seed_and_a_missing_csv_names_replot(tmp_path):
    for seed in (2, 1, 3):
        run = tmp_path / f"seed{seed}"
        run.mkdir()
        if seed != 3:  # not finished
            (run / "final_eval.json").write_text(json.dumps({"step": 10 * seed}))
    got = run_csvs.finished(tmp_path)
    assert [(s, d.name, f["step"]) for s, d, f in got] == [(1, "seed1", 10), (2, "seed2", 20)]
    with pytest.raises(SystemExit, match="--replot needs .*none.csv"):
        run_csvs.read(tmp_path, "none", ("seed",), {"curve": "m"}, "v")
