"""The entropy-law figure (paper_figures/entropy_law.py): the fit of R = -a exp(H) + b on
points of known law, the pooled and early-half fits, the toy run end to end (its CSV points are
the runs' own metrics.csv rows), and bad flags."""

import csv
import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("entropy_law", ROOT / "paper_figures/entropy_law.py")
fig = importlib.util.module_from_spec(spec)
spec.loader.exec_module(fig)


def test_fit_recovers_the_law_and_scores_it():
    """Points on R = -40 e^H + 3000 give a, b back and R^2 = 1; noise lowers R^2 below 1; a
    straight line in H over 2 nats is fitted worse by the exponential than by a line."""
    h = np.linspace(2.0, 4.3, 50)
    assert fig.law(np.array([0.0, 1.0]), 40.0, 3000.0) == pytest.approx([2960, 3000 - 40 * np.e])
    a, b, r2 = fig.fit_law(h, -40.0 * np.exp(h) + 3000.0)
    assert a == pytest.approx(40.0, rel=1e-6) and b == pytest.approx(3000.0, rel=1e-6)
    assert r2 == pytest.approx(1.0, abs=1e-9)
    noisy = fig.law(h, 40.0, 3000.0) + np.random.default_rng(0).normal(0, 100, len(h))
    assert 0.5 < fig.fit_law(h, noisy)[2] < 0.999
    line = -300 * h + 2000
    assert fig.linear_r2(h, line) == pytest.approx(1.0)
    assert fig.fit_law(h, line)[2] < 0.99
    assert fig.r_squared(np.array([1.0, 2.0]), np.array([1.5, 1.5])) == pytest.approx(0.0)


def test_pooled_fit_row_and_early_half_prediction():
    """Two runs on one law: the pooled row has both runs' points and the law's a, b, ceiling
    b - a; the fit on the first halves predicts the last quarters exactly. A second law for the
    late points makes the prediction miss by the laws' difference there."""
    runs = []
    for seed, h in ((1, np.linspace(4.3, 3.1, 12)), (2, np.linspace(4.2, 3.5, 8))):
        runs.append({"method": "ppo", "seed": seed, "step": np.arange(len(h)), "entropy": h,
                     "return": fig.law(h, 25.0, 2000.0)})  # fmt: skip
    row = fig.fit_row("ppo", "all", runs)
    assert row["points"] == 20 and row["early_points"] == 6 + 4
    assert row["a"] == pytest.approx(25.0, rel=1e-6) and row["ceiling"] == pytest.approx(1975.0)
    late_h = np.concatenate([runs[0]["entropy"][-3:], runs[1]["entropy"][-2:]])
    assert row["late_entropy"] == pytest.approx(late_h.mean())
    assert row["late_predicted"] == pytest.approx(row["late_return"], rel=1e-6)
    runs[0]["return"][-3:] += 100.0  # the last quarter of run 1 beats the early law by 100
    row = fig.fit_row("ppo", "all", runs)
    assert row["late_return"] - row["late_predicted"] == pytest.approx(100 * 3 / 5, rel=1e-3)
    rows = fig.fits(runs, ["ppo", "grpo"])
    assert [(r["method"], r["seed"], r["points"]) for r in rows] == [
        ("ppo", "all", 20), ("ppo", 1, 12), ("ppo", 2, 8)]  # fmt: skip


def test_read_run_drops_iterations_without_an_episode(tmp_path):
    """An iteration where no episode ended logs an empty or nan return: not a point."""
    (tmp_path / "metrics.csv").write_text(
        "step,train/episode_return,train/entropy\n"
        "2048,15.5,4.25\n4096,nan,4.24\n6144,,4.23\n8192,30.0,4.2\n"
    )
    run = fig.read_run(tmp_path)
    np.testing.assert_array_equal(run["step"], [2048, 8192])
    np.testing.assert_array_equal(run["entropy"], [4.25, 4.2])
    np.testing.assert_array_equal(run["return"], [15.5, 30.0])


@pytest.mark.slow  # the figure script end to end at toy size
def test_toy_run_writes_png_and_csvs_from_the_runs(tmp_path):
    """--toy --train: PPO and GRPO on Hopper-v5 (4,096 steps, one seed); every point is an
    iteration of the run's metrics.csv with an episode return (entropy and return as logged),
    and the pooled fit row is the fit of those points."""
    sweep, out = tmp_path / "sweep", tmp_path / "out"
    cmd = [sys.executable, "paper_figures/entropy_law.py", "--toy", "--train"]
    cmd += ["--sweep-dir", str(sweep), "--out", str(out)]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert "command: python paper_figures/entropy_law.py --toy --train" in done.stdout
    assert 5_000 < (out / "entropy_law.png").stat().st_size < 200_000
    points = list(csv.DictReader((out / "entropy_law.csv").open()))
    fit_rows = list(csv.DictReader((out / "entropy_law_fits.csv").open()))
    assert list(fit_rows[0]) == list(fig.FIT_FIELDS)
    for method in ("ppo", "grpo"):
        run = sweep / "Hopper-v5" / method / "runs" / method / "Hopper-v5" / "seed1"
        with (run / "metrics.csv").open() as f:
            logged = [r for r in csv.DictReader(f) if r["train/episode_return"] != "nan"]
        mine = [p for p in points if p["method"] == method]
        assert len(mine) == len(logged) >= 4
        assert [int(p["step"]) for p in mine] == [int(r["step"]) for r in logged]
        h = np.array([float(p["entropy"]) for p in mine])
        r = np.array([float(p["return"]) for p in mine])
        np.testing.assert_allclose(h, [float(x["train/entropy"]) for x in logged], rtol=1e-5)
        np.testing.assert_allclose(r, [float(x["train/episode_return"]) for x in logged], rtol=1e-5)
        assert 4.0 < h.max() < 4.3  # Hopper's 3-D Gaussian at log_std 0: 4.257 nats
        pooled = next(f for f in fit_rows if f["method"] == method and f["seed"] == "all")
        a, b, r2 = fig.fit_law(h, r)
        assert float(pooled["a"]) == pytest.approx(a, rel=1e-3, abs=1e-3)
        assert float(pooled["r2"]) == pytest.approx(r2, rel=1e-3, abs=1e-4)
        assert int(pooled["points"]) == len(mine)


@pytest.mark.parametrize(
    "argv, flag",
    [
        (["--seeds", "0"], "--seeds"),
        (["--steps", "0"], "--steps"),
        (["--workers", "0"], "--workers"),
        (["--methods", "ppo,sac"], "--methods"),
        (["--env-id", "Nope-v9"], "--env-id"),
        (["--env-id", "bandit:bernoulli-10"], "--env-id"),
    ],
)
def test_bad_flags_exit_2_naming_the_flag(argv, flag, capsys, tmp_path):
    with pytest.raises(SystemExit) as exc:
        fig.main([*argv, "--sweep-dir", str(tmp_path / "s"), "--out", str(tmp_path / "o")])
    assert exc.value.code == 2
    assert flag in capsys.readouterr().err.strip().splitlines()[-1]
    assert not (tmp_path / "s").exists() and not (tmp_path / "o").exists()


def test_committed_points_read_back_the_runs_write_points_stored(tmp_path):
    """--keep-committed refits a method from entropy_law.csv: the points come back per run,
    in order, to the 6 digits the CSV keeps, and only for the methods asked for."""
    rng = np.random.default_rng(0)
    runs = [
        {"method": m, "seed": s, "step": np.arange(1, 6) * 2048,
         "entropy": rng.normal(4, 0.1, 5), "return": rng.normal(100, 10, 5)}
        for m in ("ppo", "grpo") for s in (1, 2)
    ]  # fmt: skip
    fig.write_points(tmp_path / "entropy_law.csv", runs)
    back = fig.committed_points(tmp_path / "entropy_law.csv", ["grpo"])
    assert [(r["method"], r["seed"]) for r in back] == [("grpo", 1), ("grpo", 2)]
    for mine, stored in zip(back, runs[2:]):
        np.testing.assert_array_equal(mine["step"], stored["step"])
        np.testing.assert_allclose(mine["entropy"], stored["entropy"], rtol=1e-5)
        np.testing.assert_allclose(mine["return"], stored["return"], rtol=1e-5)
