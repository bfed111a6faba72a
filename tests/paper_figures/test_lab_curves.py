"""Each run's learning curve beside the results table (results/curves.csv): at most
metrics.POINTS points a run, each a chunk's last step and mean return, drawn below the figure."""

from __future__ import annotations

import csv
import json

import matplotlib.image
import numpy as np

from paper_figures.lab import figures, metrics, results, spec
from tests.paper_figures.test_lab_figures import DECLARATION


def _run_dir(path, returns, seeds=(1,)):
    path.mkdir()
    (path / "final_eval.json").write_text(json.dumps({"seeds": list(seeds)}))
    with (path / "metrics.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["step", "seed", "train/episode_return", "train/loss"])
        for seed in seeds:
            for i, r in enumerate(returns):
                w.writerow([64 * (i + 1), seed, r, 0.1])
                w.writerow([64 * (i + 1), seed, "", 0.2])  # an update row without a return
    return path


def _experiment(tmp_path) -> spec.Experiment:
    """The figure tests' declaration (three arms, two bandits) with one superior claim."""
    folder = tmp_path / "exp"
    folder.mkdir()
    claim = 'id = "X"\npaper = "p"\nclaim = "x"\nkind = "superior"\na = "grpo"\nb = "rgra"\n'
    (folder / "experiment.toml").write_text(DECLARATION + f"\n[[claim]]\n{claim}"
                                            'metric = "final_success"\n')  # fmt: skip
    return spec.load(folder)


def test_a_curve_keeps_at_most_points_chunks_of_the_logged_returns(tmp_path):
    run = _run_dir(tmp_path / "run", list(range(10)), seeds=(3, 4))
    short = metrics.curves(run, points=4)
    assert set(short) == {3, 4}
    # 10 rows in chunks of 3, 3, 2, 2: the last step of each, the mean of its returns
    assert short[3] == [(192, 1.0), (384, 4.0), (512, 6.5), (640, 8.5)]
    assert metrics.curves(run, points=100)[4] == [(64 * (i + 1), float(i)) for i in range(10)]


def test_the_figure_draws_a_curve_axis_per_env_below_the_panels(tmp_path):
    exp = _experiment(tmp_path)
    rows, points = [], []
    rng = np.random.default_rng(0)
    for arm, env, seed, steps, flags in exp.runs():
        row = results.row(exp, arm, env, seed, steps, flags, {"final_success": rng.random()})
        rows.append(row)
        points += [{"env": env, "arm": arm, "seed": seed, "digest": row["digest"], "step": s,
                    "train_return": float(rng.random())} for s in (64, 128, 256)]  # fmt: skip
    table = tmp_path / "results" / "runs.csv"
    results.write(table, exp, rows)
    results.write_curves(results.curves_path(table), exp, points)
    curves = results.read_curves(table)
    assert len(curves[("bandit:bernoulli-10", "gpg")]) == 6
    plain, drawn = tmp_path / "plain.png", tmp_path / "curves.png"
    figures.draw(exp, figures.toy_lines(exp, results.read(table)), results.read(table), plain)
    figures.draw(exp, figures.toy_lines(exp, results.read(table)), results.read(table), drawn,
                 curves)  # fmt: skip
    # the curves add a row of axes: the figure is taller by that row
    assert matplotlib.image.imread(drawn).shape[0] > matplotlib.image.imread(plain).shape[0] + 200


def test_check_refuses_curves_of_a_run_the_table_does_not_hold(tmp_path):
    exp = _experiment(tmp_path)
    rows = [results.row(exp, a, e, s, n, f, {"final_success": 0.5}) for a, e, s, n, f in exp.runs()]
    table = results.path(exp)
    results.write(table, exp, rows)
    point = {"env": rows[0]["env"], "arm": "grpo", "seed": 1, "step": 64, "train_return": 0.1}
    results.write_curves(results.curves_path(table), exp, [point | {"digest": rows[0]["digest"]}])
    assert results.stray_curves(exp) == []
    results.write_curves(results.curves_path(table), exp, [point | {"digest": "0123456789ab"}])
    assert results.stray_curves(exp) == [
        "curves of grpo bandit:bernoulli-10 seed 1: digest 0123456789ab is no run of the table"
    ]
