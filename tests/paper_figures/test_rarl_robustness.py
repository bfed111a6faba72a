"""RARL's robustness metrics (paper_figures/rarl-robustness/analysis.py): at the nominal scales
the perturbed env is the plain env, and a scaled mass changes what a policy scores."""

import importlib.util
from pathlib import Path

import gymnasium as gym
import numpy as np

ROOT = Path(__file__).resolve().parents[2]
ENV = "InvertedPendulum-v5"
spec = importlib.util.spec_from_file_location(
    "rarl_analysis", ROOT / "paper_figures/rarl-robustness/analysis.py"
)
analysis = importlib.util.module_from_spec(spec)
spec.loader.exec_module(analysis)


def push(obs: np.ndarray) -> np.ndarray:
    """A fixed controller: push against the pole's lean and its angular velocity."""
    return np.clip(2.0 * obs[:, 1:2] + 0.3 * obs[:, 3:4], -3, 3)


def plain_return(seed: int) -> float:
    env = gym.make(ENV)
    obs, _ = env.reset(seed=seed)
    total, done = 0.0, False
    while not done:
        obs, reward, terminated, truncated, _ = env.step(push(obs[None])[0])
        total, done = total + reward, terminated or truncated
    return total


def test_the_nominal_scales_are_the_plain_env():
    got = analysis.perturbed_return(push, ENV, 1.0, 1.0, 2, 10_000)
    assert got == np.mean([plain_return(10_000), plain_return(10_001)])


def test_a_heavier_model_changes_the_return():
    nominal = analysis.perturbed_return(push, ENV, 1.0, 1.0, 2, 10_000)
    assert analysis.perturbed_return(push, ENV, 8.0, 1.0, 2, 10_000) != nominal
