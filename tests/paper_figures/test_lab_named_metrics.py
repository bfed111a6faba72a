"""Named metrics of paper_figures/lab/metrics.py beyond a column's aggregate: a rate's first and
last tenth of a run's rows (first-tenth, last-tenth, tenth-drop) and the entropy law against a
straight line (entropy-law-r2-gain, entropy-law-late-gain), per seed of a population run."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from paper_figures.lab import entropy_law, metrics

NAMES = ["first-tenth:train/inject_frac", "last-tenth:train/inject_frac"]
NAMES += ["tenth-drop:train/inject_frac"]


def _run(tmp_path, rates: dict[int, list[float]]):
    with (tmp_path / "metrics.csv").open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["step", "seed", "train/episode_return", "train/inject_frac"])
        for seed, xs in rates.items():
            for i, x in enumerate(xs):
                writer.writerow([256 * (i + 1), seed, 0.5, x])
    final = {"seeds": list(rates), "eval_return_mean": 0.5, "eval_return_per_seed": [0.5] * 2}
    (tmp_path / "final_eval.json").write_text(json.dumps(final))
    return tmp_path


def test_a_tenth_is_the_mean_of_the_first_or_last_tenth_of_each_seeds_rows(tmp_path):
    # 25 rows: a tenth is 2 rows; seed 2's rows are seed 1's reversed
    one = [1.0, 0.5] + [0.3] * 21 + [0.25, 0.05]
    run = _run(tmp_path, {1: one, 2: one[::-1]})
    got = metrics.extract(run, "bandit:contextual-16-10", NAMES, 1000)
    assert got[1][NAMES[0]] == pytest.approx(0.75)
    assert got[1][NAMES[1]] == pytest.approx(0.15)
    assert got[1][NAMES[2]] == pytest.approx(0.6)
    assert got[2][NAMES[0]] == pytest.approx(0.15)
    assert got[2][NAMES[2]] == pytest.approx(-0.6)


def test_a_run_shorter_than_ten_rows_takes_one_row_and_a_rate_never_logged_is_nan(tmp_path):
    run = _run(tmp_path, {1: [0.4, 0.2, 0.1], 2: [float("nan")] * 3})
    got = metrics.extract(run, "bandit:contextual-16-10", NAMES, 1000)
    assert (got[1][NAMES[0]], got[1][NAMES[1]]) == (pytest.approx(0.4), pytest.approx(0.1))
    assert all(got[2][n] != got[2][n] for n in NAMES)  # nan
    for name in NAMES:
        metrics.check_name(name)


def test_the_entropy_law_gains_favour_the_law_on_exponential_points_and_the_line_on_linear_ones():
    h = np.linspace(2.3, 0.05, 40)
    exponential = entropy_law.law_gains(h, 5.0 - 2.0 * np.exp(h))
    assert exponential["entropy-law-r2-gain"] > 0.01
    # fitted on the first half (high entropy), the law extrapolates the last quarter exactly
    assert exponential["entropy-law-late-gain"] > 1e-6
    linear = entropy_law.law_gains(h, 3.0 - 0.5 * h)
    assert linear["entropy-law-r2-gain"] < -0.01
    assert linear["entropy-law-late-gain"] < -1e-9


def test_the_entropy_law_metrics_read_each_seeds_points_in_order_and_skip_empty_returns(tmp_path):
    h = np.linspace(2.3, 0.05, 40)
    with (tmp_path / "metrics.csv").open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["step", "seed", "train/entropy", "train/episode_return"])
        for i, x in enumerate(h):
            writer.writerow([256 * (i + 1), 1, x, 5.0 - 2.0 * np.exp(x)])
            writer.writerow([256 * (i + 1), 2, x, 3.0 - 0.5 * x])
            writer.writerow([256 * (i + 1), 1, 9.0, ""])  # no return: not a point
    final = {"seeds": [1, 2], "eval_return_mean": 0.5, "eval_return_per_seed": [0.5, 0.5]}
    (tmp_path / "final_eval.json").write_text(json.dumps(final))
    got = metrics.extract(tmp_path, "bandit:bernoulli-10", entropy_law.LAW, 1000)
    for seed, rewards in ((1, 5.0 - 2.0 * np.exp(h)), (2, 3.0 - 0.5 * h)):
        want = entropy_law.law_gains(h, rewards)
        assert got[seed] == pytest.approx(want)


def test_the_covariance_metrics_follow_minus_cov_and_discount_a_sign_share_by_chance(tmp_path):
    rng = np.random.default_rng(0)
    cov = rng.normal(0.2, 1.0, 60)
    follows = entropy_law.covariance_gains(-2.0 * 0.1 * cov + rng.normal(0, 0.01, 60), cov)
    assert follows["entropy-cov-corr"] > 0.99 and follows["entropy-cov-sign-gain"] > 0.3
    # the entropy always falls and Cov is mostly positive: a high share, yet no more than chance
    falls = entropy_law.covariance_gains(-np.abs(rng.normal(size=60)), cov)
    assert falls["entropy-cov-sign-gain"] == pytest.approx(0.0, abs=1e-12)
    # read from metrics.csv's columns, rows without them (an iteration with no update) skipped
    with (tmp_path / "metrics.csv").open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["step", "train/entropy_change", "train/logp_adv_cov"])
        for i, c in enumerate(cov):
            writer.writerow([100 * (i + 1), -0.2 * c, c])
            writer.writerow([100 * (i + 1), "", ""])
    (tmp_path / "final_eval.json").write_text(json.dumps({"eval_return_mean": 1.0}))
    (tmp_path / "config.json").write_text(json.dumps({"args": {"seed": 3}}))
    got = metrics.extract(tmp_path, "Hopper-v5", entropy_law.COVARIANCE, 1000)
    assert got[3]["entropy-cov-corr"] == pytest.approx(1.0)
    assert np.isnan(entropy_law.covariance_gains(np.zeros(3), cov[:3])["entropy-cov-corr"])
