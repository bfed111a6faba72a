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
from timeouts import scaled

from controlrl.experiment import write_rows
from controlrl.plots import train_seconds

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
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=scaled(240))
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
        # the run's seconds collecting and updating, from its timing.csv (the ledger's wall time)
        (own,) = [f for f in fit_rows if f["method"] == method and f["seed"] == "1"]
        assert float(own["train_s"]) == pytest.approx(train_seconds(run), rel=1e-5)
        assert float(own["train_s"]) > 0
        assert float(pooled["train_s"]) == pytest.approx(float(own["train_s"]), rel=1e-5)
    # the covariance law's columns: PPO logs them every update, GRPO's groups have no
    # per-sample advantage batch and log none
    cov = list(csv.DictReader((out / "entropy_law_covariance.csv").open()))
    run = sweep / "Hopper-v5" / "ppo" / "runs" / "ppo" / "Hopper-v5" / "seed1"
    with (run / "metrics.csv").open() as f:
        logged = list(csv.DictReader(f))
    assert {c["method"] for c in cov} == {"ppo"} and len(cov) == len(logged) >= 4
    np.testing.assert_allclose(
        [float(c["logp_adv_cov"]) for c in cov],
        [float(x["train/logp_adv_cov"]) for x in logged],
        rtol=1e-5,
    )
    np.testing.assert_allclose(
        [float(c["entropy_change"]) for c in cov],
        [float(x["train/entropy_change"]) for x in logged],
        rtol=1e-5,
    )


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
    assert all(np.isnan(r["train_s"]) for r in back)  # no fits CSV beside it: not recorded
    timed = [r | {"train_s": 60.0 * r["seed"]} for r in runs]
    write_rows(tmp_path / "entropy_law_fits.csv", fig.fits(timed, ["ppo", "grpo"]), fig.FIT_FIELDS)
    back = fig.committed_points(tmp_path / "entropy_law.csv", ["grpo"])
    assert [r["train_s"] for r in back] == [60.0, 120.0]  # each run's own, not the pooled sum
    assert fig.fits(back, ["grpo"])[0]["train_s"] == 180.0  # the pooled row sums them
    for mine, stored in zip(back, runs[2:]):
        np.testing.assert_array_equal(mine["step"], stored["step"])
        np.testing.assert_allclose(mine["entropy"], stored["entropy"], rtol=1e-5)
        np.testing.assert_allclose(mine["return"], stored["return"], rtol=1e-5)


def test_covariance_law_correlation_and_direction_share():
    """Entropy changes of -2 eta Cov (the law exactly) give correlation 1 and every direction
    right (chance 1/2 with half the covariances positive; an entropy that falls every update
    is right half the time, as chance says); flipping a quarter of the updates' signs drops the
    share to 3/4; a run whose entropy moves with +Cov has correlation -1. Updates where nothing
    moved are not counted."""
    cov = np.array([0.5, -0.2, 0.1, -0.4, 0.3, -0.1, 0.2, -0.3])
    run = {"method": "ppo", "seed": 1, "logp_adv_cov": cov, "entropy_change": -2e-3 * cov}
    c = fig.covariance_law(run)
    assert c["corr"] == pytest.approx(1.0) and c["sign_share"] == 1.0 and c["updates"] == 8
    assert c["sign_chance"] == pytest.approx(0.5)  # half the covariances positive
    falling = run | {"entropy_change": -np.abs(cov)}  # falls every update whatever the Cov
    assert fig.covariance_law(falling)["sign_chance"] == pytest.approx(0.5)
    assert fig.covariance_law(falling)["sign_share"] == pytest.approx(0.5)
    flipped = run | {"entropy_change": -2e-3 * cov * np.array([1, 1, -1, 1, 1, -1, 1, 1])}
    assert fig.covariance_law(flipped)["sign_share"] == pytest.approx(0.75)
    assert fig.covariance_law(run | {"entropy_change": 2e-3 * cov})["corr"] == pytest.approx(-1)
    still = run | {"entropy_change": np.r_[0.0, -2e-3 * cov[1:]]}
    assert fig.covariance_law(still)["sign_share"] == 1.0


def test_read_covariance_and_its_csv_round_trip(tmp_path):
    """The law's columns come from metrics.csv (every update that logged them; a run without
    them gives None), each update's seconds from timing.csv, and write_covariance /
    committed_covariance store and restore them."""
    (tmp_path / "metrics.csv").write_text(
        "step,train/episode_return,train/entropy_change,train/logp_adv_cov\n"
        "2048,nan,-0.01,0.5\n4096,12.0,0.02,-0.25\n6144,13.0,,0.1\n"
    )
    (tmp_path / "timing.csv").write_text(
        "step,time/sps,time/rollout_s,time/update_s\n2048,1000,1.5,0.5\n"
    )
    cov = fig.read_covariance(tmp_path)
    np.testing.assert_array_equal(cov["step"], [2048, 4096])
    np.testing.assert_array_equal(cov["train_s"], [2.0, np.nan])  # 4096 not timed
    np.testing.assert_array_equal(cov["entropy_change"], [-0.01, 0.02])
    np.testing.assert_array_equal(cov["logp_adv_cov"], [0.5, -0.25])
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "metrics.csv").write_text("step,train/entropy\n2048,4.2\n")
    assert fig.read_covariance(tmp_path / "old") is None
    runs = [{"method": "ppo", "seed": s, **cov} for s in (1, 2)]
    fig.write_covariance(tmp_path / "cov.csv", runs)
    back = fig.committed_covariance(tmp_path / "cov.csv", ["ppo"])
    assert [(r["method"], r["seed"]) for r in back] == [("ppo", 1), ("ppo", 2)]
    np.testing.assert_allclose(back[1]["entropy_change"], cov["entropy_change"])
    fig.write_covariance(tmp_path / "again.csv", back)  # read back and written: the same bytes
    assert (tmp_path / "again.csv").read_text() == (tmp_path / "cov.csv").read_text()
    np.testing.assert_array_equal(back[1]["train_s"], [2.0, np.nan])
    assert fig.committed_covariance(tmp_path / "cov.csv", ["grpo"]) == []
    assert fig.committed_covariance(tmp_path / "missing.csv", ["ppo"]) == []
