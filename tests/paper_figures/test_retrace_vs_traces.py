"""paper_figures/retrace_vs_traces.py: the tabular figure's logic (sampled updates reach Q^pi with
Retrace and diverge uncorrected) and the script at toy size."""

import csv
import importlib.util
import subprocess
import sys
from pathlib import Path

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
    """--toy: the tabular figure and its CSVs in seconds."""
    cmd = [sys.executable, str(PATH), "--toy", "--out", str(tmp_path)]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=scaled(120))
    assert done.returncode == 0, done.stderr[-3000:]
    assert "made by: python" in done.stdout and "--toy --out" in done.stdout
    assert (tmp_path / "retrace_vs_traces.png").stat().st_size > 5000
    rows = list(csv.DictReader((tmp_path / "retrace_vs_traces_summary.csv").open()))
    assert [(r["alpha"], r["kind"]) for r in rows[:4]] == [
        ("0.1", k) for k in ("retrace", "is", "tree_backup", "q_lambda")
    ]


def test_bad_flags_fail_with_the_flag_named(tmp_path, capsys):
    cmd = [sys.executable, str(PATH), "--toy", "--out", str(tmp_path), "--step", "0"]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=scaled(60))
    assert done.returncode == 2 and "--step" in done.stderr.splitlines()[-1]
    cases = [(["--alphas", "0.5,1.5"], "--alphas"), (["--p-right", "1"], "--p-right")]
    cases += [(["--segment-length", "0"], "--segment-length")]
    for flags, name in cases:  # the same parse, in this process
        with pytest.raises(SystemExit) as exc:
            fig.parse(["--toy", "--out", str(tmp_path), *flags])
        assert exc.value.code == 2 and name in capsys.readouterr().err.splitlines()[-1]


def test_plot_only_redraws_from_the_csvs(tmp_path, monkeypatch):
    """--plot-only reads the CSVs back and computes nothing; the title's seeds are the CSVs'."""
    fig.write_rows(tmp_path / "retrace_vs_traces.csv", [{"alpha": 0.1, "kind": "is", "update": 0}])
    fig.write_rows(tmp_path / "retrace_vs_traces_summary.csv", [{"kind": "is", "seeds": 7}])
    monkeypatch.setattr(fig, "tabular", lambda args: pytest.fail("recomputed"))
    drawn = {}
    monkeypatch.setattr(fig, "plot", lambda a, c, s: drawn.update(args=a, c=c, s=s))
    fig.main(["--plot-only", "--out", str(tmp_path)])
    assert drawn["c"] == [{"alpha": 0.1, "kind": "is", "update": 0}]
    assert drawn["s"] == [{"kind": "is", "seeds": 7}] and drawn["args"].tab_seeds == 7
