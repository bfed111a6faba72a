"""The `final_train_return_weighted` metric: the episode-weighted final training return of one
seed's rows, what controlrl.plots.final_return gives on the run's metrics.csv (the GAE grid's
committed final_return)."""

from __future__ import annotations

import csv

import pytest

from controlrl import plots
from paper_figures.lab import metrics


def test_weighted_final_return_is_plots_final_return(tmp_path):
    rows = [
        {"step": "1024", "train/episodes": "4", "train/episode_return": "10"},
        {"step": "2048", "train/episodes": "1", "train/episode_return": "100"},
        {"step": "3072", "train/episodes": "0", "train/episode_return": ""},
        {"step": "4096", "train/episodes": "3", "train/episode_return": "20"},
    ]
    with (tmp_path / "metrics.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    metrics.check_name("final_train_return_weighted")
    got = metrics._one("final_train_return_weighted", rows, 0.0, "Hopper-v5", 3000)
    assert got == pytest.approx((100 + 3 * 20) / 4)  # steps 2048 and 4096, by episodes
    assert got == pytest.approx(plots.final_return(tmp_path, 3000))
    unweighted = metrics._one("final_train_return", rows, 0.0, "Hopper-v5", 3000)
    assert unweighted == pytest.approx(60.0) and unweighted != got
