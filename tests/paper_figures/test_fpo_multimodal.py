"""The FPO multimodality figure: the mode-share metric on known actions, the toy run end to end
(its CSVs hold what the runs' checkpoints hold), and, in the slow tier,
what the committed budget shows on bandit:bimodal."""

import csv
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from timeouts import scaled

ROOT = Path(__file__).resolve().parents[2]


def _fig():
    path = ROOT / "paper_figures" / "fpo_multimodal.py"
    spec = importlib.util.spec_from_file_location("fpo_multimodal", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_mode_stats_on_known_actions():
    fig = _fig()
    both = np.array([-0.5] * 30 + [0.5] * 50 + [0.0] * 20)
    s = fig.mode_stats(both)
    assert (s["share_left"], s["share_right"], s["minority_share"]) == (0.3, 0.5, 0.3)
    assert s["keeps_both"] and not s["collapsed"]
    assert s["mean_reward"] == pytest.approx(0.8 + 0.2 * np.exp(-0.25 / 0.02))
    one = np.array([0.45] * 97 + [-0.35] * 3)  # -0.35 is inside the left mode's +-0.2
    s = fig.mode_stats(one)
    assert s["minority_share"] == pytest.approx(0.03) and s["collapsed"] and not s["keeps_both"]
    broad = np.linspace(-1, 1, 101)  # a wide unimodal spread: neither verdict
    s = fig.mode_stats(broad)
    assert not s["keeps_both"] and not s["collapsed"]


def run_toy(tmp_path):
    sweep, out = tmp_path / "sweep", tmp_path / "out"
    cmd = [sys.executable, "paper_figures/fpo_multimodal.py", "--toy", "--train"]
    cmd += ["--sweep-dir", str(sweep), "--out", str(out)]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=scaled(600))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert "command: python paper_figures/fpo_multimodal.py --toy" in done.stdout
    return sweep, out


def check_bandit_csvs(fig, sweep: Path, out: Path) -> None:
    rows = list(csv.DictReader((out / "fpo_multimodal.csv").open()))
    assert [(r["algo"], r["seed"], r["steps"]) for r in rows] == [
        ("fpo", "1", "1024"),
        ("ppo", "1", "1024"),
    ]
    for r in rows:
        run = sweep / "bandit" / "runs" / r["algo"] / "bandit_bimodal" / "seed1"
        policy = fig.load_policy(run, run / "checkpoints" / "step_000001024.pt")
        s = fig.mode_stats(fig.sampled_actions(policy, 500))
        assert float(r["minority_share"]) == pytest.approx(s["minority_share"], abs=1e-3)
        config = json.loads((run / "config.json").read_text())["args"]
        assert config["num_envs"] == 64 and config["norm_obs"] is False
    hist = list(csv.DictReader((out / "fpo_multimodal_hist.csv").open()))
    assert len(hist) == 2 * 40 and sum(int(h["count"]) for h in hist if h["algo"] == "fpo") == 500
    shares = list(csv.DictReader((out / "fpo_multimodal_shares.csv").open()))
    assert [int(s["step"]) for s in shares if s["algo"] == "ppo"] == [512, 1024]


@pytest.mark.slow  # the figure script end to end at toy size
def test_toy_bandit_part(tmp_path):
    sweep, out = run_toy(tmp_path)
    check_bandit_csvs(_fig(), sweep, out)
    assert (out / "fpo_multimodal.png").stat().st_size > 5000


@pytest.mark.slow  # two bandit runs of 15,360 steps with each script's defaults: ~2-4 min here
def test_bimodal_bandit_fpo_commits_to_one_mode_while_gaussian_ppo_stays_broad(tmp_path):
    """The paper's claim is that the flow policy keeps both modes where a Gaussian collapses to
    one. What holds here (the figure's settings, seed 1) is the reverse split: FPO reaches a
    mean reward near 1 by putting (almost) all mass on one mode, and Gaussian PPO neither
    collapses nor learns (a wide Gaussian centred between the modes, mean reward < 0.4)."""
    fig = _fig()
    stats = {}
    for algo in fig.ALGOS:
        run = tmp_path / algo
        cmd = [sys.executable, f"algos/{algo}.py", "--env-id", "bandit:bimodal", "--seed", "1"]
        cmd += [*fig.BANDIT_FLAGS, "--total-timesteps", "15360", "--run-dir", str(run)]
        cmd += ["--no-progress", "--eval-every", "0", "--eval-episodes", "1"]
        done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=scaled(900))
        assert done.returncode == 0, done.stderr[-2000:]
        policy = fig.load_policy(run, run / "checkpoints" / "latest.pt")
        stats[algo] = fig.mode_stats(fig.sampled_actions(policy, 4000))
    fpo, ppo = stats["fpo"], stats["ppo"]
    assert fpo["mean_reward"] > 0.8 and fpo["collapsed"], fpo
    assert ppo["mean_reward"] < 0.4 and not ppo["collapsed"] and ppo["minority_share"] > 0.1, ppo
