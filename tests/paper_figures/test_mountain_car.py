"""The Mountain Car experiment's metrics (paper_figures/mountain-car-chebyshev/analysis.py): the
reference is no greater than either of its sources, the loaded controller's steps in the exact
dynamics are the steps Gymnasium's env takes under it, and the regret is the steps over the
reference."""

import importlib.util
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from paper_figures.lab import runner, spec
from theory import mountain_car as mc

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / "paper_figures/mountain-car-chebyshev"
loader = importlib.util.spec_from_file_location("mc_analysis", FOLDER / "analysis.py")
analysis = importlib.util.module_from_spec(loader)
loader.loader.exec_module(analysis)


def gym_steps(act, x0: float, max_steps: int = 200) -> int:
    """Steps of act in Gymnasium's own env from (x0, 0), up to its time limit."""
    env = gym.make("MountainCar-v0").unwrapped
    env.reset(seed=0)
    env.state = np.array([x0, 0.0])
    for t in range(1, max_steps + 1):
        x, v = env.state
        _, _, terminated, _, _ = env.step(int(act(np.array([x]), np.array([v]))[0]))
        if terminated:
            return t
    return max_steps


def test_the_reference_is_the_fewer_steps_of_its_two_sources():
    x0 = analysis.start_states(3)
    ref = analysis.reference_steps((20, 40), 3, 150)
    grid = mc.Grid(40, 40)
    greedy = mc.greedy_steps(mc.values(grid, tol=1e-6), grid, x0, np.zeros(3))
    search = [mc.bang_bang_steps(float(x), 0.0, 150) for x in x0]
    assert list(ref) == [min(g, s) for g, s in zip(greedy, search)]


@pytest.mark.slow  # two toy runs and their metrics
def test_the_scored_controller_is_the_one_the_env_runs(tmp_path):
    exp = spec.load(FOLDER)
    assert not runner.run(exp, toy=True, workers=1, root=tmp_path)
    rows = runner.collect(exp, toy=True, root=tmp_path)
    assert {(r["arm"], r["params"]) for r in rows} == {("mlp", 4547), ("chebyshev", 51)}
    for r in rows:
        assert r["regret"] == pytest.approx(r["mean_steps"] - r["reference_mean_steps"])
    for name in ("mlp", "chebyshev"):
        run = next((runner.base(exp, True, tmp_path) / name).glob("runs/**/seed1"))
        act, _ = analysis.load_act(run)
        x0 = np.array([-0.6, -0.47, -0.4])
        ours = mc.policy_steps(act, x0, np.zeros(3))
        assert list(ours) == [gym_steps(act, x) for x in x0]
