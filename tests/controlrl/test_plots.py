"""Plot helpers: bootstrap CI, smoothing, alignment, and the CLI on fake runs."""

import json

import numpy as np

from controlrl import plots


def test_bootstrap_ci_brackets_the_mean_and_shrinks_with_seeds():
    rng = np.random.default_rng(0)
    few = rng.normal(0, 1, size=(3, 5))
    many = rng.normal(0, 1, size=(300, 5))
    for data in (few, many):
        mean, lo, hi = plots.bootstrap_ci(data)
        np.testing.assert_allclose(mean, data.mean(0))
        assert np.all(lo <= mean) and np.all(mean <= hi)
    _, lo_f, hi_f = plots.bootstrap_ci(few)
    _, lo_m, hi_m = plots.bootstrap_ci(many)
    assert np.all(hi_m - lo_m < hi_f - lo_f)
    # for many seeds the CI is close to mean +- 1.96 sd / sqrt(n)
    np.testing.assert_allclose(hi_m - lo_m, 2 * 1.96 * many.std(0) / np.sqrt(300), rtol=0.15)
    const = np.ones((4, 3))
    _, lo, hi = plots.bootstrap_ci(const)
    np.testing.assert_array_equal(lo, hi)


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


def test_iqm_hand_computed():
    assert plots.iqm(np.arange(1, 9)) == 4.5  # middle 50% of 1..8 is 3, 4, 5, 6
    assert plots.iqm(np.array([[1.0, 100.0], [2.0, 3.0]])) == 2.5  # drops 1 and 100
    assert plots.iqm(np.array([0, 1, 2, 3, 4, 5, 6, 7, 8, 1000.0])) == 4.5  # trims 2 each end


def test_stratified_bootstrap_resamples_within_tasks():
    # each task has one constant value per run: every resample has the same IQM
    scores = np.array([[1.0, 5.0], [1.0, 5.0], [1.0, 5.0]])
    assert plots.stratified_bootstrap_ci(scores, np.mean) == (3.0, 3.0, 3.0)
    # two runs per task, one task: the resampled mean takes 3 values with probs 1/4, 1/2, 1/4
    scores = np.array([[0.0], [1.0]])
    value, lo, hi = plots.stratified_bootstrap_ci(scores, np.mean, n_boot=4000, ci=0.5)
    assert value == 0.5 and lo == 0.5 and hi == 0.5  # the middle half is the value 0.5
    value, lo, hi = plots.stratified_bootstrap_ci(scores, np.mean, n_boot=4000, ci=0.9)
    assert (lo, hi) == (0.0, 1.0)


def test_performance_profile_and_normalisation():
    scores = np.array([[0.1, 0.9], [0.5, 0.6]])  # runs x tasks
    prof = plots.performance_profile(scores, np.array([0.0, 0.3, 0.55, 1.0]))
    np.testing.assert_allclose(prof, [1.0, 0.75, 0.5, 0.0])
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
    try:
        plt.Axes.set_ylabel = lambda ax, text, **kw: labels.append(text) or real(ax, text, **kw)
        plots.main([str(run), "--out", str(tmp_path / "c.png"), "--column", "eval/return"])
    finally:
        plt.Axes.set_ylabel = real
    assert labels == ["evaluation return (deterministic policy)"]
    fig, axes = plt.subplots(1, 2)
    scores = {"a": np.array([[0.5, 1.0], [0.7, 0.9]]), "b": np.array([[0.1, 0.2], [0.3, 0.2]])}
    plots.plot_aggregates(axes, scores, np.linspace(0, 1, 5), "0 = random, 1 = best algorithm")
    assert axes[0].get_xlabel() == "IQM of normalised score\n(0 = random, 1 = best algorithm)"
    assert axes[1].get_xlabel().endswith("(0 = random, 1 = best algorithm)")
    plt.close(fig)
