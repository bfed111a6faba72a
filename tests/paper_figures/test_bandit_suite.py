"""The bandit-suite figure (paper_figures/bandit_suite.py): the toy run end to end (PNG and
CSVs with the runs' own numbers, the PNG again from the curve CSV alone), success normalised by
each bandit's true optimum, bands over seeds from controlrl.stats, the (bandit, method) plan
asked of the envs, and bad flags."""

import csv
import importlib.util
import subprocess
import sys

import numpy as np
import pytest
from timeouts import scaled

from envs import bandits

ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]


def _suite():
    spec = importlib.util.spec_from_file_location(
        "bandit_suite", ROOT / "paper_figures/bandit_suite.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _metrics(run_dir):
    with (run_dir / "metrics.csv").open() as f:
        return list(csv.DictReader(f))


@pytest.mark.slow  # the figure script end to end at toy size
def test_toy_run_writes_png_and_csvs_from_the_runs(tmp_path):
    """--toy --train: three runs (pg, grpo, tpo on bernoulli-10, 512 pulls in 8 rollouts of
    64); every curve row is its run's metrics.csv row, success = return / 0.935 (the instance's
    best arm), and the per-run and summary rows agree with the curves."""
    sweep, out = tmp_path / "sweep", tmp_path / "out"
    cmd = [sys.executable, "paper_figures/bandit_suite.py", "--toy", "--train"]
    cmd += ["--sweep-dir", str(sweep), "--out", str(out)]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=scaled(240))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert "command: python paper_figures/bandit_suite.py --toy --train" in done.stdout
    assert 5_000 < (out / "bandit_suite.png").stat().st_size < 200_000
    optimal = bandits.make("bernoulli-10", 1).means.max()
    assert optimal < 0.95  # so a raw reward would not pass for a success

    suite = _suite()
    rows = list(csv.DictReader((out / "bandit_suite.csv").open()))
    assert list(rows[0]) == list(suite.RUN_FIELDS)
    assert [(r["bandit"], r["method"], r["algo"], r["seed"]) for r in rows] == [
        ("bandit:bernoulli-10", "pg", "grpo", "1"),
        ("bandit:bernoulli-10", "grpo", "grpo", "1"),
        ("bandit:bernoulli-10", "tpo", "tpo", "1"),
    ]
    curves = list(csv.DictReader((out / "bandit_suite_curves.csv").open()))
    assert list(curves[0]) == suite.CURVE_FIELDS
    assert {(c["seeds"], c["band"]) for c in curves} == {("1", "range")}  # one seed: no CI
    for row in rows:  # every method here is a population run (of one seed at toy size)
        run = sweep / "bernoulli-10" / row["method"] / "population"
        metrics = [m for m in _metrics(run) if m.pop("seed") == "1"]
        mine = [c for c in curves if c["method"] == row["method"]]
        assert [int(c["samples"]) for c in mine] == list(range(64, 513, 64))
        assert [int(m["step"]) for m in metrics] == list(range(64, 513, 64))
        raw = np.array([float(m["train/episode_return"]) for m in metrics])
        success = np.array([float(c["success"]) for c in mine])
        np.testing.assert_allclose(success, raw / optimal, rtol=1e-4)  # 5 digits
        entropy = [float(m["train/entropy"]) for m in metrics]
        np.testing.assert_allclose([float(c["entropy"]) for c in mine], entropy, rtol=1e-4)
        zero_var = [float(m["train/zero_variance_frac"]) for m in metrics]
        np.testing.assert_allclose([float(c["zero_var"]) for c in mine], zero_var, atol=1e-4)
        for key in ("success_lo", "success_hi"):  # the range of one seed is its value
            np.testing.assert_allclose([float(c[key]) for c in mine], success, rtol=1e-4)
        assert float(row["optimal_reward"]) == pytest.approx(optimal, rel=1e-5)
        # final window 1280 > 512 pulls: the whole run
        assert float(row["final_success"]) == pytest.approx(success.mean(), rel=1e-5)
        assert float(row["entropy_last"]) == pytest.approx(entropy[-1], rel=1e-5)
    summary = list(csv.DictReader((out / "bandit_suite_summary.csv").open()))
    assert [(s["method"], s["seeds"]) for s in summary] == [
        ("pg", "1"),
        ("grpo", "1"),
        ("tpo", "1"),
    ]
    for s, row in zip(summary, rows):  # one seed: mean = both range ends = the run's number
        for key in ("final_success", "final_success_lo", "final_success_hi"):
            assert float(s[key]) == pytest.approx(float(row["final_success"]), rel=1e-5)
        assert s["band"] == "range" and s["final_success_sd"] == "nan"
        assert s["command"].startswith("python paper_figures/bandit_suite.py --toy --train")

    # the same runs read into a copy of the committed tables: their three cells replace the
    # committed ones, every other cell's lines are kept as committed, in the suite's order
    grown = tmp_path / "grown"
    grown.mkdir()
    names = ("bandit_suite.csv", "bandit_suite_curves.csv", "bandit_suite_summary.csv")
    for name in names:
        __import__("shutil").copy(ROOT / "paper_figures/out" / name, grown / name)
    suite.main(["--toy", "--sweep-dir", str(sweep), "--out", str(grown)])
    fresh = ("bandit:bernoulli-10,pg,", "bandit:bernoulli-10,grpo,", "bandit:bernoulli-10,tpo,")
    for name in names:
        committed = (ROOT / "paper_figures/out" / name).read_text().splitlines()
        now = (grown / name).read_text().splitlines()
        new = (out / name).read_text().splitlines()[1:]
        assert now[0] == committed[0]
        assert [x for x in now if not x.startswith(fresh)] == [
            x for x in committed if not x.startswith(fresh)
        ]
        numbers = [x.split(",python ")[0] for x in now if x.startswith(fresh)]  # not the command
        assert numbers == [x.split(",python ")[0] for x in new]  # the toy's lines
        cells = [x.split(",")[:2] for x in now[1:]]
        order = [suite.cell_order({"bandit": b, "method": m}) for b, m in cells]
        assert order == sorted(order)

    # the figure again from the committed curve table alone, with no run left to read
    png = (out / "bandit_suite.png").read_bytes()
    (out / "bandit_suite.png").unlink()
    __import__("shutil").rmtree(sweep)
    suite.main(["--replot", "--out", str(out)])
    assert (out / "bandit_suite.png").read_bytes() == png


def test_bands_over_seeds_are_controlrl_stats(monkeypatch):
    """The curve and summary bands of 6 seeds are stats.band's 95% CI and stats.summarize's
    sample SD; with 3 seeds, the range."""
    from controlrl import stats

    suite = _suite()
    rng = np.random.default_rng(0)
    for seeds, kind in ((6, "95% CI"), (3, "range")):
        success = rng.random((seeds, 20))
        runs = [
            {
                "row": {
                    "bandit": "b",
                    "method": "grpo",
                    "final_success": s[-1],
                    "mean_success": s.mean(),
                    "samples_to_half": 3,
                    "entropy_last": 1.0,
                    "entropy_rise_frac": 0.0,
                    "zero_variance_frac": 0.0,
                    "clip_frac": 0.0,
                },
                "curves": {
                    "samples": np.arange(20.0),
                    "success": s,
                    "entropy": s + 1,
                    "zero_variance_frac": np.full(20, np.nan),
                },
            }  # fmt: skip
            for s in success
        ]
        table = suite.curve_table(runs)
        mean, lo, hi, band_kind = stats.band(success)
        assert band_kind == kind and {r["band"] for r in table} == {kind}
        np.testing.assert_allclose([r["success_lo"] for r in table], lo, rtol=1e-12)
        np.testing.assert_allclose([r["success_hi"] for r in table], hi, rtol=1e-12)
        np.testing.assert_allclose([r["entropy"] for r in table], mean + 1, rtol=1e-12)
        assert np.isnan([r["zero_var_lo"] for r in table]).all()
        (row,) = suite.summary(runs, "cmd")
        assert row["final_success_sd"] == pytest.approx(np.std(success[:, -1], ddof=1))
        assert row["band"] == kind and row["seeds"] == seeds


def test_success_is_return_over_the_true_optimum_and_samples_are_episodes():
    """Unit check of the normalisation on a contextual bandit (optimum: the mean over contexts
    of the best arm, 0.83 here) and on a sequence bandit (samples are answers of L tokens)."""
    suite = _suite()
    args = suite.parse(["--bandits", "bandit:contextual-16-10,bandit:sequence-reverse-2-4",
                        "--samples", "2048", "--methods", "grpo"])  # fmt: skip
    ctx, seq = suite.configs(args)
    means = bandits.make("contextual-16-10", 1).means
    assert ctx["optimal"] == pytest.approx(means.max(1).mean()) and ctx["length"] == 1
    assert seq["optimal"] == 1.0 and seq["length"] == 4 and seq["steps"] == 4 * 2048
    returns = np.array([0.2, 0.45, 0.6, 0.8])
    columns = {"step": np.array([256.0, 512, 768, 1024]), "train/episode_return": returns,
               "train/entropy": np.array([2.3, 2.0, 2.1, 1.0])}  # fmt: skip
    samples, success = suite.success_curve(columns, ctx["length"], ctx["optimal"])
    np.testing.assert_allclose(success, returns / means.max(1).mean())
    row = suite.run_row(ctx, 3, columns, final_window=512)
    assert row["final_success"] == pytest.approx((0.6 + 0.8) / 2 / means.max(1).mean())
    assert row["samples_to_half"] == 512  # 0.45 / 0.83 > 0.5 while 0.45 itself is not
    assert row["entropy_rise_frac"] == pytest.approx(1 / 3)
    assert np.isnan(row["zero_variance_frac"])  # a run without the column (PPO)
    samples, _ = suite.success_curve(columns, seq["length"], seq["optimal"])
    np.testing.assert_array_equal(samples, [64, 128, 192, 256])


def test_default_plan():
    """25 sweeps: pg, ppo, grpo, tpo everywhere, pg-filter on the contextual bandit, the ratio
    variants on the two sequence bandits; PPO's rollout is one episode per env."""
    suite = _suite()
    args = suite.parse([])
    assert (args.seeds, args.ppo_seeds) == (200, 200)
    cfgs = suite.configs(args)
    plan = {(c["bandit"].removeprefix("bandit:"), c["method"]) for c in cfgs}
    core = {"pg", "ppo", "grpo", "tpo"}
    sequences = ("sequence-reverse-2-6", "sequence-add-2-3")
    bandit_ids = ("bernoulli-10", "sparse-1000", "contextual-16-10", *sequences)
    expected = {(b, m) for b in bandit_ids for m in core}
    expected |= {("contextual-16-10", "pg-filter")}
    expected |= {(b, m) for b in sequences for m in ("grpo-seq", "grpo-kalman")}
    assert plan == expected and len(cfgs) == 25
    add = next(c for c in cfgs if c["bandit"] == "bandit:sequence-add-2-3")
    assert add["length"] == 4 and add["steps"] == 4 * 20480  # answers of 3 + 1 digits
    for c in cfgs:
        flags = c["extra"]
        assert flags[flags.index("--num-envs") + 1] == "256"
        if c["algo"] == "ppo":
            assert flags[flags.index("--num-steps") + 1] == str(c["length"])
        if c["method"] == "grpo-kalman":
            assert flags[flags.index("--ratio") + 1] == "kalman"
        if c["method"].startswith("pg"):
            assert flags[flags.index("--update-epochs") + 1] == "1"
            assert ("--filter-zero-variance" in flags) == (c["method"] == "pg-filter")


def test_the_plan_asks_the_env_what_it_is(monkeypatch):
    """applies() reads the env's answers, not its id: an env that says it is a sequence bandit
    gets the ratio variants, one with hard contexts the filter, whatever its name."""
    suite = _suite()
    seq = {"sequence": True, "hard_contexts": 0}
    hard = {"sequence": False, "hard_contexts": 3}
    assert suite.applies("grpo-seq", seq) and not suite.applies("grpo-seq", hard)
    assert suite.applies("pg-filter", hard) and not suite.applies("pg-filter", seq)
    truth = suite.bandit_truth("bandit:sequence-add-10-2")
    assert truth["sequence"] and truth["rule"] == "add" and truth["length"] == 3
    real = suite.bandit_truth
    monkeypatch.setattr(suite, "bandit_truth", lambda env_id: real(env_id) | seq)
    args = suite.parse(["--bandits", "bandit:bernoulli-10", "--samples", "512"])
    assert "grpo-kalman" in {c["method"] for c in suite.configs(args)}


@pytest.mark.parametrize(
    "argv, flag",
    [
        (["--seeds", "0"], "--seeds"),
        (["--bandits", "Hopper-v5"], "--bandits"),
        (["--bandits", "bandit:nope-3"], "--bandits"),
        (["--bandits", "bandit:gaussian-10"], "--bandits"),
        (["--methods", "pg,sac"], "--methods"),
        (["--samples", "100"], "--samples"),
        (["--samples", "1024,2048"], "--samples"),
        (["--samples", "many"], "--samples"),
        (["--num-envs", "12"], "--num-envs"),
        (["--workers", "0"], "--workers"),
        (["--final-window", "0"], "--final-window"),
    ],
)
def test_bad_flags_exit_2_naming_the_flag(argv, flag, capsys, tmp_path):
    suite = _suite()
    with pytest.raises(SystemExit) as exc:
        suite.main([*argv, "--sweep-dir", str(tmp_path / "s"), "--out", str(tmp_path / "o")])
    assert exc.value.code == 2
    assert flag in capsys.readouterr().err.strip().splitlines()[-1]
    assert not (tmp_path / "s").exists() and not (tmp_path / "o").exists()
