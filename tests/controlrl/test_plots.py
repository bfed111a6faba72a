"""Plot helpers: bootstrap CI, smoothing, alignment, and the CLI on fake runs."""

import json

import numpy as np
import pytest

from controlrl import plots


def test_band_is_an_interval_from_five_seeds_and_a_range_below():
    rng = np.random.default_rng(0)
    few = rng.normal(0, 1, size=(3, 5))
    many = rng.normal(0, 1, size=(300, 5))
    mean, lo, hi, kind = plots.band(few)
    assert kind == "range"
    np.testing.assert_array_equal((lo, hi), (few.min(0), few.max(0)))
    mean, lo, hi, kind = plots.band(many)
    assert kind == "95% CI" and np.all(lo <= mean) and np.all(mean <= hi)
    # for many seeds the CI is close to mean +- 1.96 sd / sqrt(n)
    np.testing.assert_allclose(hi - lo, 2 * 1.96 * many.std(0) / np.sqrt(300), rtol=0.15)


def test_smooth_and_align():
    np.testing.assert_allclose(plots.smooth(np.array([1.0, 3, 5, 7]), 2), [1, 2, 4, 6])
    grid, data = plots.aligned(
        [(np.array([0, 10.0]), np.array([0, 10.0])), (np.array([0, 5.0]), np.array([0, 10.0]))],
        points=6,
    )
    assert grid[-1] == 5.0
    np.testing.assert_allclose(data[0], grid)
    np.testing.assert_allclose(data[1], 2 * grid)


def test_cli_writes_png(tmp_path):
    runs = []
    for seed in range(2):
        run = tmp_path / f"r{seed}"
        run.mkdir()
        (run / "config.json").write_text(json.dumps({"algo": "ppo", "args": {"env_id": "X-v0"}}))
        rows = ["step,train/episode_return"] + [f"{s},{s * 0.1 + seed}" for s in range(1, 20)]
        rows.insert(3, "3,nan")
        (run / "metrics.csv").write_text("\n".join(rows) + "\n")
        runs.append(str(run))
    out = tmp_path / "c.png"
    plots.main([*runs, "--out", str(out)])
    assert out.stat().st_size > 5000


def test_normalisation():
    norm = plots.normalize_scores(np.array([[10.0, 0.0]]), np.array([0.0, -10]), np.array([20, 10]))
    np.testing.assert_allclose(norm, [[0.5, 0.5]])


def test_final_return_weights_by_episode_count(tmp_path):
    rows = [
        "step,train/episode_return,train/episodes",
        "100,50.0,1",
        "200,nan,0",
        "300,10.0,3",
        "400,20.0,1",
    ]
    (tmp_path / "metrics.csv").write_text("\n".join(rows) + "\n")
    assert plots.final_return(tmp_path, window=250) == (10.0 * 3 + 20.0) / 4  # steps 200..400
    assert plots.final_return(tmp_path, window=50) == 20.0


def test_train_seconds_sums_collection_and_update_time(tmp_path):
    rows = ["step,time/sps,time/rollout_s,time/update_s", "2048,1000,0.5,1.25", "4096,900,0.75,2.0"]
    (tmp_path / "timing.csv").write_text("\n".join(rows) + "\n")
    assert plots.train_seconds(tmp_path) == 0.5 + 1.25 + 0.75 + 2.0
    # an off-policy loop times collection and updates together (algos/retrace.py)
    rows = ["step,time/sps,time/train_s,time/eval_s", "1000,500,0.25,9.0", "2000,400,0.5,9.0"]
    (tmp_path / "timing.csv").write_text("\n".join(rows) + "\n")
    assert plots.train_seconds(tmp_path) == 0.25 + 0.5
    (tmp_path / "timing.csv").write_text("step,time/sps\n1000,500\n")
    with pytest.raises(ValueError, match="timing.csv has none of"):
        plots.train_seconds(tmp_path)


def test_axis_labels_are_words_not_column_names(tmp_path):
    """The learning-curve CLI labels its axis in words (a known column from COLUMN_LABELS, any
    other one worded), and the IQM panels state the normalisation they were given."""
    import matplotlib.pyplot as plt

    assert plots.column_label("train/episode_return") == "training episode return"
    assert plots.column_label("eval/return") == "evaluation return (deterministic policy)"
    assert plots.column_label("train/kl_max") == "kl max (training)"
    assert plots.column_label("losses/q_loss") == "q loss (losses)"
    assert plots.column_label("step") == "step"
    run = tmp_path / "r0"
    run.mkdir()
    (run / "config.json").write_text(json.dumps({"algo": "ppo", "args": {"env_id": "X-v0"}}))
    rows = ["step,eval/return"] + [f"{s},{s * 0.1}" for s in range(1, 20)]
    (run / "metrics.csv").write_text("\n".join(rows) + "\n")
    labels = []
    real = plt.Axes.set_ylabel
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(
            plt.Axes,
            "set_ylabel",
            lambda ax, text, **kw: labels.append(text) or real(ax, text, **kw),
        )
        plots.main([str(run), "--out", str(tmp_path / "c.png"), "--column", "eval/return"])
    assert labels == ["evaluation return (deterministic policy)"]
    fig, axes = plt.subplots(1, 2)
    scores = {
        "a": np.linspace(0.5, 1.0, 10).reshape(5, 2),
        "b": np.linspace(0, 0.3, 10).reshape(5, 2),
    }
    plots.plot_aggregates(axes, scores, np.linspace(0, 1, 5), "0 = random, 1 = best algorithm")
    assert axes[0].get_xlabel() == "IQM of normalised score\n(0 = random, 1 = best algorithm)"
    assert axes[1].get_xlabel().endswith("(0 = random, 1 = best algorithm)")
    plt.close(fig)


def test_no_interval_below_five_seeds_and_the_legend_names_the_band():
    """plot_points draws a CI error bar only from 5 seeds; plot_curves' legend names the band
    and its seeds; the titles' words follow the same rule."""
    import matplotlib.pyplot as plt
    from matplotlib.container import ErrorbarContainer

    fig, ax = plt.subplots()
    assert plots.plot_points(ax, 0, [1.0, 2.0, 3.0, 4.0]) == "no interval"
    assert not any(isinstance(c, ErrorbarContainer) for c in ax.containers)
    assert len(ax.lines) == 2  # the seeds' dots and the mean
    assert plots.plot_points(ax, 1, [1.0, 2.0, 3.0, 4.0, 5.0]) == "95% CI"
    assert sum(isinstance(c, ErrorbarContainer) for c in ax.containers) == 1
    assert plots.plot_points(ax, 2, np.arange(6.0), interval=False) == "no interval"
    assert sum(isinstance(c, ErrorbarContainer) for c in ax.containers) == 1
    steps = np.arange(10.0)
    curves = {"a": [(steps, steps + s) for s in range(3)]}
    curves["b"] = [(steps, steps * s) for s in range(5)]
    plots.plot_curves(ax, curves)
    labels = [line.get_label() for line in ax.lines[-2:]]
    assert labels == ["a (mean, range (3 seeds))", "b (mean, 95% CI (5 seeds))"]
    plt.close(fig)
    assert plots.band_words([3, 3]) == "mean and min-max range over 3 seeds (no interval below 5)"
    assert plots.band_words([5, 8]).startswith("mean and 95% bootstrap CI over 5-8 seeds")
    assert "95% CI" not in plots.points_words([4, 10]) and "no interval" in plots.points_words([4])
    assert plots.points_words([5]) == "mean and 95% bootstrap CI over 5 seeds, dots: seeds"
