"""The hard-start experiment (paper_figures/hard-starts/analysis.py): its hard starts are hard
(the optimum from them swings, takes several times the steps of an easy start, and pushing right
alone never arrives), its demonstrations are real trajectories that reach the goal, its start sets
hold the stated shares, its arms train with the Mountain Car experiment's settings, and the toy
run scores each final policy."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from controlrl.plots import read_metrics
from paper_figures.lab import runner, spec
from theory import mountain_car as mc

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / "paper_figures/hard-starts"
loader = importlib.util.spec_from_file_location("hard_starts_analysis", FOLDER / "analysis.py")
fig = importlib.util.module_from_spec(loader)
loader.loader.exec_module(fig)

GRID = mc.Grid(100, 100)


def easy_starts(n: int = 11) -> np.ndarray:
    x = np.linspace(fig.EASY_LOW, fig.EASY_HIGH, n)
    return np.stack([x, np.full(n, fig.EASY_V)], 1)


def swings(actions: np.ndarray) -> int:
    """How often a trajectory reverses its push (left <-> right, pauses skipped)."""
    pushes = actions[actions != 1]
    return int(np.sum(pushes[1:] != pushes[:-1]))


def test_hard_starts_are_hard_and_the_demonstrations_reach_the_goal():
    T = mc.values(GRID, tol=1e-8)
    hard_x = np.linspace(fig.HARD_LOW, fig.HARD_HIGH, 5)
    demos = fig.demonstrations(T, GRID, hard_x)
    easy = easy_starts()
    easy_steps = mc.greedy_steps(T, GRID, easy[:, 0], easy[:, 1], max_steps=201)
    right = lambda x, v: np.full(x.shape, 2)  # noqa: E731
    for x0, (states, actions) in zip(hard_x, demos):
        # a real trajectory of the exact dynamics from the hard start, ending at the goal
        x, v = np.array([x0]), np.zeros(1)
        np.testing.assert_array_equal(states[0], [x0, 0.0])
        for t, a in enumerate(actions):
            np.testing.assert_array_equal(states[t], [x[0], v[0]])
            x, v, done = mc.step(x, v, np.array([float(a)]))
            assert bool(done[0]) == (t == len(actions) - 1)
        # the optimum (two-switch search agrees within 2 steps) swings at least twice
        assert abs(len(actions) - mc.bang_bang_steps(x0, 0.0)) <= 2
        assert swings(actions) >= 2 and len(actions) >= 3 * easy_steps.max()
    assert mc.policy_steps(right, hard_x, np.zeros(5), max_steps=201).min() == 201
    assert mc.policy_steps(right, easy[:, 0], easy[:, 1], max_steps=201).max() <= 30


def test_start_sets_hold_the_stated_shares():
    states = [np.array([[-0.5, 0.0], [0.0, 0.05], [0.4, 0.03]])]
    demos = [(states[0], np.array([2, 2, 2]))]
    sets = fig.start_sets(demos, easy_starts(4))
    pope, mixed = sets["pope"], sets["mixed"]
    assert pope.shape == (6, 2) and mixed.shape == (8, 2)
    np.testing.assert_array_equal(pope[:3], states[0])  # the demonstration states ...
    hard = lambda s: (s[:, 1] == 0) & (s[:, 0] >= -0.6) & (s[:, 0] <= -0.4)  # noqa: E731
    assert hard(pope[3:]).all() and hard(mixed[4:]).all()  # ... and as many hard starts
    np.testing.assert_array_equal(mixed[:4], easy_starts(4))


def test_the_arms_train_with_the_mountain_car_experiments_settings():
    mountain_car = spec.load(ROOT / "paper_figures/mountain-car-chebyshev").flags
    zoo = [
        f for i, f in enumerate(mountain_car) if "--eval-every" not in mountain_car[i - 1 : i + 1]
    ]
    assert list(spec.load(FOLDER).flags[: len(zoo)]) == zoo


@pytest.mark.slow  # the declaration's toy end to end
def test_toy_run_scores_each_final_policy(tmp_path):
    exp = spec.load(FOLDER)
    assert not runner.run(exp, toy=True, workers=1, root=tmp_path)
    inputs = runner.inputs_dir(exp, True, tmp_path)
    assert {p.name for p in inputs.iterdir()} == {
        "demos.npz",
        "pope_starts.npy",
        "mixed_starts.npy",
    }
    rows = runner.collect(exp, toy=True, root=tmp_path)
    assert {(r["arm"], r["seed"]) for r in rows} == {(a, s) for a in ("ppo", "bc") for s in (1, 2)}
    x0 = np.linspace(fig.HARD_LOW, fig.HARD_HIGH, 3)
    for r in rows:  # the final policy's score, recounted from its checkpoint
        assert "{inputs}" in r["flags"] if r["arm"] == "bc" else "{inputs}" not in r["flags"]
        run = next((runner.base(exp, True, tmp_path) / r["arm"]).glob(f"runs/**/seed{r['seed']}"))
        act, _ = fig.frozen_act(run, "SparseMountainCar-v0")
        steps = mc.policy_steps(
            lambda x, v, act=act: act(np.stack([x, v], 1)), x0, np.zeros(3), 201
        )
        assert r["solved_frac"] == np.mean(steps <= 200)
        _, curve = read_metrics(run, "eval/return")
        assert len(curve) == 2 and r["auc_eval_solved"] == pytest.approx(np.mean(curve))
