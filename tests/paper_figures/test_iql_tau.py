"""The IQL tau figure at toy size: a random-kind dataset generated into the sweep directory,
BC, IQL at two taus and the offline-to-online run, end to end; the CSVs hold what the runs
wrote (the scores read back from each run's final_eval.json and metrics.csv)."""

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest
from timeouts import scaled

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow  # about 20 s of CPU (5 processes start torch and MuJoCo), minutes here
def test_iql_tau_toy(tmp_path):
    sweep, out = tmp_path / "sweep", tmp_path / "out"
    cmd = [sys.executable, "paper_figures/iql_tau.py", "--toy", "--train"]
    cmd += ["--sweep-dir", str(sweep), "--out", str(out)]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=scaled(300))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert (
        "generating: python -m envs.offline generate --env Hopper-v5 --kind random" in done.stdout
    )
    assert "command: python paper_figures/iql_tau.py --toy" in done.stdout
    rows = list(csv.DictReader((out / "iql_tau.csv").open()))
    name = "hopper-random-v5-s0-n2000"
    keys = [(r["dataset"], r["method"], r["tau"], r["online_steps"], r["seed"]) for r in rows]
    assert keys == [
        (name, "bc", "", "0", "1"),
        (name, "iql", "0.5", "0", "1"),
        (name, "iql", "0.9", "0", "1"),
        (name, "iql", "0.7", "100", "1"),
    ]
    labels = ["bc", "iql_tau0.5", "iql_tau0.9", "iql_tau0.7_online100"]
    for row, label in zip(rows, labels):
        run = sweep / name / label / "runs" / "iql" / "Hopper-v5" / "seed1"
        final = json.loads((run / "final_eval.json").read_text())
        assert float(row["final_normalized_score"]) == final["eval_normalized_score"]
        assert float(row["final_return"]) == final["eval_return_mean"]
        assert int(row["steps"]) == final["step"] == 100 + int(row["online_steps"])
        assert 0 < float(row["train_s"]) < 300  # the run's update laps from its timing.csv
        config = json.loads((run / "config.json").read_text())["args"]
        assert config["bc"] == (label == "bc") and config["online_steps"] == int(
            row["online_steps"]
        )
        if label != "bc":
            assert config["tau"] == float(row["tau"])
    curves = list(csv.DictReader((out / "iql_tau_curves.csv").open()))
    online = [r for r in curves if r["online_steps"] == "100"]
    assert [int(r["step"]) for r in online] == [50, 100, 150, 200]  # offline, then online
    assert float(online[-1]["score"]) == pytest.approx(
        float(rows[-1]["final_normalized_score"]), rel=1e-5
    )
    assert (out / "iql_tau.png").stat().st_size > 5000


def _iql_tau():
    import importlib.util

    spec = importlib.util.spec_from_file_location("iql_tau", ROOT / "paper_figures/iql_tau.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_several_envs_each_run_on_their_own_datasets(tmp_path):
    """--envs: every env gets the configurations on its own datasets, its sweep runs in that
    env, and a missing dataset is generated for the env it belongs to."""
    import argparse

    fig = _iql_tau()
    args = argparse.Namespace(
        envs="Hopper-v5,Walker2d-v5", kinds="medium,medium-replay", taus="0.7",
        online_steps=10, online_kind="medium-replay", online_tau="0.7", data_seed=0,
        dataset_steps=1_000_000, ppo_budget=1_000_000, score_episodes=100, data_dir=tmp_path,
        log_every=5, eval_every=5, eval_episodes=1, toy=False, extra=[], steps=20, seeds=3,
        gen_args="",
    )  # fmt: skip
    cfgs = fig.configs(args)
    got = [(c["env"], c["dataset"], c["label"]) for c in cfgs]
    assert got == [
        ("Hopper-v5", "hopper-medium-v5-s0", "bc"),
        ("Hopper-v5", "hopper-medium-v5-s0", "iql_tau0.7"),
        ("Hopper-v5", "hopper-medium-replay-v5-s0", "bc"),
        ("Hopper-v5", "hopper-medium-replay-v5-s0", "iql_tau0.7"),
        ("Hopper-v5", "hopper-medium-replay-v5-s0", "iql_tau0.7_online10"),
        ("Walker2d-v5", "walker2d-medium-v5-s0", "bc"),
        ("Walker2d-v5", "walker2d-medium-v5-s0", "iql_tau0.7"),
        ("Walker2d-v5", "walker2d-medium-replay-v5-s0", "bc"),
        ("Walker2d-v5", "walker2d-medium-replay-v5-s0", "iql_tau0.7"),
        ("Walker2d-v5", "walker2d-medium-replay-v5-s0", "iql_tau0.7_online10"),
    ]
    for c in cfgs:
        sweep = fig.sweep_config(args, c)
        assert sweep.envs == [c["env"]]
        assert str(tmp_path / f"{c['dataset']}.hdf5") in sweep.extra
    cmd = fig.generate_command(args, "Walker2d-v5", "medium")
    assert cmd[cmd.index("--env") + 1] == "Walker2d-v5" and "medium" in cmd


def test_curves_figure_has_a_panel_per_dataset_in_the_bars_colours(tmp_path, monkeypatch):
    """--curves: one panel of evaluation curves per dataset below the bars; a label keeps its
    bar's colour in every panel, also where a dataset lacks an earlier label."""
    import matplotlib.pyplot as plt
    from matplotlib.colors import to_rgb
    from matplotlib.container import BarContainer

    fig_module = _iql_tau()
    out = tmp_path / "out"
    out.mkdir()
    runs = [("hopper-medium-v5-s0", m, t) for m, t in (("iql", "0.5"), ("iql", "0.7"), ("bc", ""))]
    runs += [("walker2d-medium-replay-v5-s0", m, t) for m, t in (("iql", "0.7"), ("bc", ""))]
    with (out / "iql_tau.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["env", "dataset", "kind", "method", "tau", "online_steps", "seed", "steps",
                    "final_normalized_score", "final_return"])  # fmt: skip
        w.writerows([["Hopper-v5", ds, "medium", m, t, 0, s, 20, 40.0 + s, 0.0]
                     for ds, m, t in runs for s in (1, 2)])  # fmt: skip
    with (out / "iql_tau_curves.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["dataset", "method", "tau", "online_steps", "seed", "step", "score"])
        w.writerows([[ds, m, t, 0, s, k, 30.0 + s + k]
                     for ds, m, t in runs for s in (1, 2) for k in (10, 20)])  # fmt: skip
    saved = {}
    monkeypatch.setattr(plt.Figure, "savefig", lambda self, *a, **k: saved.setdefault("fig", self))
    fig_module.main(["--replot", "--curves", "--out", str(out)])
    bars, *panels = saved["fig"].axes
    titles = [p.get_title().splitlines()[-1] for p in panels]
    assert titles == ["hopper-medium", "walker2d-medium-replay"]
    colour = {c.get_label(): to_rgb(c.patches[0].get_facecolor()) for c in bars.containers
              if isinstance(c, BarContainer) and not c.get_label().startswith("_")}  # fmt: skip
    assert set(colour) == {"iql_tau0.5", "iql_tau0.7", "bc"}
    drawn = [(line.get_label().split(" (")[0], to_rgb(line.get_color()))
             for p in panels for line in p.get_lines()]  # fmt: skip
    assert [d[0] for d in drawn] == ["iql_tau0.5", "iql_tau0.7", "bc", "iql_tau0.7", "bc"]
    for label, rgb in drawn:
        assert rgb == pytest.approx(colour[label]), label
