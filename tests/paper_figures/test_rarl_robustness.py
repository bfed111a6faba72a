"""The RARL robustness figure (paper_figures/rarl_robustness.py): a toy run trains both variants
on the same seed and evaluates each final policy on every perturbation, and the nominal
perturbation is the plain env."""

import csv
import importlib.util
import json
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location(
    "rarl_robustness", ROOT / "paper_figures/rarl_robustness.py"
)
fig = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = fig
spec.loader.exec_module(fig)


def plain_return(act, seed: int) -> float:
    env = gym.make(fig.ENV)
    obs, _ = env.reset(seed=seed)
    total, done = 0.0, False
    while not done:
        obs, reward, terminated, truncated, _ = env.step(np.clip(act(obs), -3, 3))
        total, done = total + reward, terminated or truncated
    return total


@pytest.mark.slow  # the figure script end to end at toy size
def test_toy_run(tmp_path):
    sweeps = tmp_path / "sweeps"
    argv = ["--seeds", "1", "--total-timesteps", "512", "--num-steps", "128", "--episodes", "1"]
    argv += ["--masses", "1,3", "--frictions", "1", "--out", str(tmp_path)]
    fig.main([*argv, "--sweeps-root", str(sweeps), "--adversary-force", "7"])
    with open(tmp_path / "rarl_robustness.csv") as f:
        rows = list(csv.DictReader(f))
    cells = [(r["variant"], r["seed"], r["mass_scale"], r["friction_scale"]) for r in rows]
    assert cells == [(v, "1", m, "1") for v in fig.VARIANTS for m in ("1", "3")]
    for variant in fig.VARIANTS:
        run = sweeps / f"{variant}_512" / "runs" / fig.ALGO[variant] / fig.ENV / "seed1"
        config = json.loads((run / "config.json").read_text())["args"]
        assert config["total_timesteps"] == 512 and config["seed"] == 1
        if variant != "ppo":  # the control runs rarl.py with no force
            assert config["adversary_force"] == (7.0 if variant == "rarl" else 0.0)
        act = fig.load_act(run)
        nominal = next(r for r in rows if r["variant"] == variant and r["mass_scale"] == "1")
        # one episode from the row's seed: the nominal scales are the plain env
        assert float(nominal["mean_return"]) == plain_return(act, 10_000)
    assert [r["adversary_force"] for r in rows] == ["0", "0", "7", "7", "0", "0"]
