"""The bandit-suite curves (paper_figures/bandit_suite.py): the declaration's toy runs read end to
end (every curve row its run's metrics.csv row, success normalised by the bandit's true optimum,
the PNG again from the curve CSV alone), bands over seeds from controlrl.stats, and the bandit
asked of the env."""

import csv
import shutil

import numpy as np
import pytest

from envs import bandits
from paper_figures import bandit_suite as suite
from paper_figures.lab import metrics, runner, spec

ROOT = suite.ROOT


@pytest.mark.slow  # the declaration's toy runs (grpo and ppo, 3 seeds, 128 pulls), then the figure
def test_toy_runs_give_the_curves_and_the_committed_cells_stay(tmp_path):
    exp = spec.load(ROOT / "paper_figures" / suite.EXPERIMENT)
    lab, out = tmp_path / "lab", tmp_path / "out"
    assert runner.run(exp, toy=True, workers=1, root=lab) == []
    suite.main(["--toy", "--root", str(lab), "--out", str(out)])
    curves = list(csv.DictReader((out / "bandit_suite_curves.csv").open()))
    assert list(curves[0]) == suite.CURVE_FIELDS
    assert {(c["bandit"], c["method"]) for c in curves} == {
        ("bandit:bernoulli-10", "grpo"),
        ("bandit:bernoulli-10", "ppo"),
    }
    assert {(c["seeds"], c["band"]) for c in curves} == {("3", "range")}  # 3 seeds: no CI
    optimal = bandits.make("bernoulli-10", 1).means.max()
    assert optimal < 0.95  # so a raw reward would not pass for a success
    for name, run_dir in [(n, runner.base(exp, True, lab) / n) for n in ("grpo", "ppo")]:
        (metrics,) = run_dir.glob("**/metrics.csv")
        rows = list(csv.DictReader(metrics.open()))
        mine = [c for c in curves if c["method"] == name]
        steps = sorted({int(r["step"]) for r in rows})
        assert [int(c["samples"]) for c in mine] == steps  # one pull per step
        per_seed = np.array([[float(r["train/episode_return"]) for r in rows if r["seed"] == s]
                             for s in ("1", "2", "3")])  # fmt: skip
        success = [float(c["success"]) for c in mine]
        np.testing.assert_allclose(success, per_seed.mean(0) / optimal, rtol=1e-4)
        lows = [float(c["success_lo"]) for c in mine]  # below 5 seeds the band is the range
        np.testing.assert_allclose(lows, per_seed.min(0) / optimal, rtol=1e-4)

    # the same runs read into a copy of the committed curves: their two cells replace the
    # committed ones, every other cell's lines are kept as committed, in the declaration's order
    grown = tmp_path / "grown"
    grown.mkdir()
    committed = ROOT / "paper_figures" / "out" / "bandit_suite_curves.csv"
    shutil.copy(committed, grown / committed.name)
    suite.main(["--toy", "--root", str(lab), "--out", str(grown)])
    fresh = ("bandit:bernoulli-10,grpo,", "bandit:bernoulli-10,ppo,")
    before = committed.read_text().splitlines()
    now = (grown / committed.name).read_text().splitlines()
    assert [x for x in now if not x.startswith(fresh)] == [
        x for x in before if not x.startswith(fresh)
    ]
    assert [x for x in now if x.startswith(fresh)] == (out / committed.name).read_text().split()[1:]
    order = [suite.cell_order(exp, {"bandit": b, "method": m})
             for b, m, *_ in (x.split(",") for x in now[1:])]  # fmt: skip
    assert order == sorted(order)

    # the figure again from the curve table alone, with no run left to read
    png = (out / "bandit_suite.png").read_bytes()
    (out / "bandit_suite.png").unlink()
    shutil.rmtree(lab)
    suite.main(["--replot", "--out", str(out)])
    assert (out / "bandit_suite.png").read_bytes() == png


def test_no_runs_is_an_error_naming_the_command(tmp_path):
    with pytest.raises(SystemExit, match="python -m paper_figures run"):
        suite.main(["--toy", "--root", str(tmp_path), "--out", str(tmp_path / "o")])
    assert not (tmp_path / "o").exists()


def test_bands_over_seeds_are_controlrl_stats():
    """The curve bands of 6 seeds are stats.band's 95% CI; with 3 seeds, the range."""
    from controlrl import stats

    rng = np.random.default_rng(0)
    for seeds, kind in ((6, "95% CI"), (3, "range")):
        success = rng.random((seeds, 20))
        nan = np.full(20, np.nan)
        runs = [{"bandit": "b", "method": "grpo",
                 "curves": {"samples": np.arange(20.0), "success": s, "train/entropy": s + 1,
                            "train/zero_variance_frac": nan}}
                for s in success]  # fmt: skip
        table = suite.curve_table(runs)
        mean, lo, hi, band_kind = stats.band(success)
        assert band_kind == kind and {r["band"] for r in table} == {kind}
        np.testing.assert_allclose([r["success_lo"] for r in table], lo, rtol=1e-12)
        np.testing.assert_allclose([r["success_hi"] for r in table], hi, rtol=1e-12)
        np.testing.assert_allclose([r["entropy"] for r in table], mean + 1, rtol=1e-12)
        assert np.isnan([r["zero_var_lo"] for r in table]).all()


def test_success_is_return_over_the_true_optimum_and_samples_are_episodes():
    """On a contextual bandit the optimum is the mean over contexts of the best arm (0.83
    here); on a sequence bandit samples are answers of L tokens, asked of the env."""
    ctx = metrics.bandit_truth("bandit:contextual-16-10")
    seq = metrics.bandit_truth("bandit:sequence-reverse-2-4")
    means = bandits.make("contextual-16-10", 1).means
    assert ctx["optimal"] == pytest.approx(means.max(1).mean()) and ctx["length"] == 1
    assert seq == {"length": 4, "optimal": 1.0, "sequence": True}
    returns = np.array([0.2, 0.45, 0.6, 0.8])
    columns = {"step": np.array([256.0, 512, 768, 1024]), "train/episode_return": returns}
    samples, success = suite.success_curve(columns, ctx["length"], ctx["optimal"])
    np.testing.assert_allclose(success, returns / means.max(1).mean())
    samples, _ = suite.success_curve(columns, seq["length"], seq["optimal"])
    np.testing.assert_array_equal(samples, [64, 128, 192, 256])
