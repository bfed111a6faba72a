"""paper_figures/retrace_vs_traces.py: the tabular panel's logic (sampled updates reach Q^pi with
Retrace and diverge uncorrected), the script at toy size, and (slow) the MuJoCo sweeps."""

import csv
import importlib.util
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from timeouts import scaled

from theory import mdp as M
from theory.retrace import q_pi, traces

ROOT = Path(__file__).resolve().parents[2]
PATH = ROOT / "paper_figures" / "retrace_vs_traces.py"  # a script, not in a package
spec = importlib.util.spec_from_file_location("retrace_vs_traces", PATH)
fig = importlib.util.module_from_spec(spec)
spec.loader.exec_module(fig)


def two_state():
    """The 2-state, 2-action instance of tests/theory/test_theory_retrace.py (seeded search for
    a large spectral radius of the uncorrected operator): pi and nu nearly deterministic."""
    rng = np.random.default_rng(2542)
    rng.integers(2, 4)  # the search drew the state count first
    mdp = M.random_mdp(2, 2, rng, gamma=0.9, alpha=0.3)
    return mdp, M.random_policy(mdp, rng, 0.2), M.random_policy(mdp, rng, 0.2)


def test_sampled_retrace_reaches_q_pi_uncorrected_diverges():
    """alpha = 0.9, step 0.5, 20 paths of 8 steps per (x, a) and update, 200 updates: Retrace's
    sampled error ends near 0 (seen: 5e-3; ||Q^pi|| = 5.9) like its expected update (< 1e-3);
    uncorrected Q(lambda) passes CAP in both (its expected rule's rate is 1.96 here)."""
    mdp, pi, nu = two_state()
    mu = 0.1 * pi + 0.9 * nu
    errs = fig.stochastic_errors(mdp, pi, mu, 1.0, 8, 0.5, 200, 20, np.random.default_rng(0))
    start = np.max(np.abs(q_pi(mdp, pi)))
    assert errs["retrace"][0] == errs["q_lambda"][0] == pytest.approx(start)
    assert errs["retrace"][-1] < 0.01 * start
    assert errs["q_lambda"][-1] == fig.CAP
    assert np.argmax(errs["q_lambda"] >= fig.CAP) < 60  # diverged early, stopped there
    c = {k: traces(pi, mu, 1.0, k) for k in ("retrace", "q_lambda")}
    assert fig.expected_errors(mdp, pi, mu, c["retrace"], 8, 0.5, 200)[-1] < 1e-3
    assert fig.expected_errors(mdp, pi, mu, c["q_lambda"], 8, 0.5, 200)[-1] == fig.CAP
    assert fig.expected_rate(mdp, pi, mu, c["retrace"], 8, 0.5) < 1
    assert fig.expected_rate(mdp, pi, mu, c["q_lambda"], 8, 0.5) > 1.5


def test_on_policy_all_traces_but_tree_backup_agree():
    """mu = pi: Retrace's, IS's and Q(lambda)'s traces are all lambda, and the four kinds share
    their paths (common random numbers), so their sampled curves are identical."""
    mdp, pi, _ = two_state()
    errs = fig.stochastic_errors(mdp, pi, pi, 1.0, 8, 0.5, 30, 5, np.random.default_rng(1))
    np.testing.assert_array_equal(errs["retrace"], errs["q_lambda"])
    np.testing.assert_array_equal(errs["retrace"], errs["is"])
    assert not np.array_equal(errs["retrace"], errs["tree_backup"])
    assert errs["retrace"][-1] < 0.05 * errs["retrace"][0]


def test_tabular_panel_summary_on_the_chain(tmp_path):
    """The figure's chain at toy size: what the README row reports. IS's target variance far
    above Retrace's off-policy; uncorrected Q(lambda)'s expected rule diverges at alpha = 0.9
    only; Retrace's converges everywhere and is faster than tree backup near on-policy."""
    args = fig.parse(["--toy", "--out", str(tmp_path)])  # nothing written
    curves, summary = fig.tabular(args)
    assert len(curves) == 3 * 4 * (args.updates + 1)
    row = {(r["alpha"], r["kind"]): r for r in summary}
    for alpha in (0.5, 0.9):
        assert row[alpha, "is"]["target_var_mean"] > 30 * row[alpha, "retrace"]["target_var_mean"]
    assert row[0.9, "q_lambda"]["expected_rate"] > 1 > row[0.5, "q_lambda"]["expected_rate"]
    assert all(row[a, "retrace"]["expected_rate"] < 1 for a in (0.1, 0.5, 0.9))
    assert row[0.1, "retrace"]["expected_rate"] < row[0.1, "tree_backup"]["expected_rate"]
    assert all(row[a, "retrace"]["err_final_median"] < 0.5 * 8.2 for a in (0.1, 0.5, 0.9))
    assert row[0.9, "q_lambda"]["err_peak_median"] >= row[0.9, "retrace"]["err_peak_median"]


@pytest.mark.slow  # the figure script end to end at toy size
def test_toy_run_writes_png_and_csvs(tmp_path):
    """--toy without --train: panel A in seconds, panel B says where runs are missing."""
    cmd = [sys.executable, str(PATH), "--toy", "--out", str(tmp_path)]
    cmd += ["--sweep-dir", str(tmp_path / "none")]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=scaled(120))
    assert done.returncode == 0, done.stderr[-3000:]
    assert "made by: python" in done.stdout and "--toy --out" in done.stdout
    assert f"panel B: no finished runs under {tmp_path / 'none'}" in done.stdout
    assert (tmp_path / "retrace_vs_traces.png").stat().st_size > 5000
    rows = list(csv.DictReader((tmp_path / "retrace_vs_traces_summary.csv").open()))
    assert [(r["alpha"], r["kind"]) for r in rows[:4]] == [
        ("0.1", k) for k in ("retrace", "is", "tree_backup", "q_lambda")
    ]
    assert not (tmp_path / "retrace_vs_traces_mujoco.csv").exists()


def test_bad_flags_fail_with_the_flag_named(tmp_path, capsys):
    cmd = [sys.executable, str(PATH), "--toy", "--out", str(tmp_path), "--step", "0"]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=scaled(60))
    assert done.returncode == 2 and "--step" in done.stderr.splitlines()[-1]
    cases = [(["--traces", "retrace,watkins"], "--traces"), (["--p-right", "1"], "--p-right")]
    cases += [(["--segment-length", "0"], "--segment-length")]
    for flags, name in cases:  # the same parse, in this process
        with pytest.raises(SystemExit) as exc:
            fig.parse(["--toy", "--out", str(tmp_path), *flags])
        assert exc.value.code == 2 and name in capsys.readouterr().err.splitlines()[-1]


@pytest.mark.slow  # one process per run starts torch and MuJoCo: about a minute here
def test_toy_train_runs_the_sweeps(tmp_path):
    cmd = [sys.executable, str(PATH), "--toy", "--train", "--out", str(tmp_path / "out")]
    cmd += ["--sweep-dir", str(tmp_path / "sweep")]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=scaled(900))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    rows = list(csv.DictReader((tmp_path / "out" / "retrace_vs_traces_mujoco.csv").open()))
    expected = ["ppo"]
    if (ROOT / "algos" / "retrace.py").exists():
        expected = [f"retrace-{k}" for k in ("retrace", "is", "tree_backup", "q_lambda")] + expected
    assert [r["config"] for r in rows] == expected
    for r in rows:
        run = tmp_path / "sweep" / r["config"] / "runs" / r["algo"] / "Hopper-v5" / "seed1"
        assert (run / "final_eval.json").exists() and int(r["steps"]) >= 256
        assert np.isfinite(float(r["final_eval_return"]))
    curves = list(csv.DictReader((tmp_path / "out" / "retrace_vs_traces_mujoco_curves.csv").open()))
    assert {r["config"] for r in curves if r["column"] == "eval"} == set(expected)
    assert "panel B (Hopper-v5)" in done.stdout


def test_collect_keeps_diverged_runs_marked_and_leaves_running_ones_out(tmp_path):
    """A finished run (final_eval.json), a diverged one (its log names non-finite losses) and
    one still going: rows for the first two only, the diverged one with no final evaluation and
    its last logged step; the summary line names it."""
    base = tmp_path / "retrace-tree_backup" / "runs" / "retrace" / "Hopper-v5"
    header = "step,eval/return,train/episode_return,train/trace_mean\n"
    for seed, last in ((1, 3000), (2, 2000), (3, 1000)):
        run = base / f"seed{seed}"
        run.mkdir(parents=True)
        rows = [
            f"{s},{'' if s % 2000 else s / 10},{s / 20},{s / 10000}\n"
            for s in range(1000, last + 1, 1000)
        ]
        (run / "metrics.csv").write_text(header + "".join(rows))
    (base / "seed1" / "final_eval.json").write_text('{"step": 3000, "eval_return_mean": 250.0}')
    (base / "seed2.log").write_text("$ python ...\nerror: non-finite loss or parameters ...\n")
    (base / "seed3.log").write_text("$ python ...\n")
    args = SimpleNamespace(sweep_dir=tmp_path, env_id="Hopper-v5")
    cfgs = [dict(label="retrace-tree_backup", algo="retrace", trace="tree_backup")]
    runs = fig.collect(args, cfgs)
    rows = [r["row"] for r in runs]
    assert [(r["seed"], r["status"], r["steps"]) for r in rows] == [
        (1, "finished", 3000),
        (2, "diverged", 2000),
    ]
    assert rows[0]["final_eval_return"] == 250.0 and np.isnan(rows[1]["final_eval_return"])
    assert rows[1]["mean_eval_return"] == 200.0 and rows[1]["last_train_return"] == 100.0
    assert rows[0]["mean_trace"] == pytest.approx(0.2)  # mean of 0.1, 0.2, 0.3
    note = fig.diverged_note(runs, "retrace-tree_backup")
    assert note == ", diverged (non-finite losses): seed 2 at 2,000 steps"


def _runs():
    """Two configs: three finished seeds and one diverged (no final evaluation)."""
    runs = []
    for config, seed, status, final, evals in (
        ("retrace-retrace", 1, "finished", 900.0, [100.0, 200.0, 900.0]),
        ("retrace-retrace", 2, "finished", 500.0, [100.0, 300.0, 500.0]),
        ("ppo", 1, "finished", 300.0, [200.0, 250.0, 300.0]),
        ("ppo", 2, "diverged", float("nan"), [50.0]),
    ):
        row = dict(config=config, algo=config.split("-")[0], trace="", env_id="Hopper-v5")
        row |= dict(seed=seed, status=status, steps=1000 * len(evals), final_eval_return=final)
        row |= dict(mean_eval_return=float(np.mean(evals)), last_train_return=1.0)
        steps = np.arange(1, len(evals) + 1) * 1000.0
        runs.append({"row": row, "eval": (steps, np.array(evals)), "train": (steps, steps / 10)})
    return runs


def test_final_and_run_average_evaluation_drawn_side_by_side():
    """Panel B's summary: per config a bar at the finished seeds' mean final evaluation and one
    at their mean run-average evaluation (mean over all evaluations), both labelled; the
    diverged seed is left out and named under its config."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    f, ax = plt.subplots()
    fig.plot_final_vs_average(ax, _runs(), 5)
    final, average = ax.containers
    assert [b.get_height() for b in final] == [700.0, 300.0]
    assert [b.get_height() for b in average] == pytest.approx([(400 + 300) / 2, 250.0])
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == [
        "final evaluation (the last, 5 episodes)",
        "run average (mean over all evaluations)",
    ]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["retrace", "ppo\n(1 diverged)"]
    plt.close(f)


def test_plot_only_redraws_from_the_committed_csvs(tmp_path, monkeypatch):
    """--plot-only reads panel A's CSVs and panel B's runs back as write_mujoco wrote them and
    computes nothing; the title's budget is the runs' longest."""
    runs = _runs()
    fig.write_mujoco(tmp_path, runs)
    back = fig.load_mujoco(tmp_path)
    assert [r["row"] for r in back][:3] == [r["row"] for r in runs][:3]
    assert np.isnan(back[3]["row"]["final_eval_return"])
    for a, b in zip(back, runs):
        for column in ("eval", "train"):
            np.testing.assert_allclose(a[column][0], b[column][0])
            np.testing.assert_allclose(a[column][1], b[column][1])
    fig.write_rows(tmp_path / "retrace_vs_traces.csv", [{"alpha": 0.1, "kind": "is", "update": 0}])
    fig.write_rows(tmp_path / "retrace_vs_traces_summary.csv", [{"kind": "is", "seeds": 7}])
    monkeypatch.setattr(fig, "tabular", lambda args: pytest.fail("panel A recomputed"))
    drawn = {}
    monkeypatch.setattr(fig, "plot", lambda a, c, s, r: drawn.update(args=a, c=c, s=s, r=r))
    fig.main(["--plot-only", "--out", str(tmp_path)])
    assert drawn["c"] == [{"alpha": 0.1, "kind": "is", "update": 0}]
    assert len(drawn["r"]) == 4 and drawn["args"].tab_seeds == 7
    assert drawn["args"].total_timesteps == 3000
