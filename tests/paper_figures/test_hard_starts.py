"""The hard-start figure (paper_figures/hard_starts.py): its hard starts are hard (the optimum
from them swings, takes several times the steps of an easy start, and pushing right alone never
arrives), its demonstrations are real trajectories that reach the goal, its start sets hold the
stated shares, and the toy run writes the per-seed scores of the final policies."""

import csv
import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from theory import mountain_car as mc

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("hard_starts", ROOT / "paper_figures/hard_starts.py")
fig = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = fig
spec.loader.exec_module(fig)

GRID = mc.Grid(100, 100)


def easy_starts(n: int = 11) -> np.ndarray:
    x = np.linspace(fig.EASY_LOW, fig.EASY_HIGH, n)
    return np.stack([x, np.full(n, fig.EASY_V)], 1)


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
        assert fig.swings(actions) >= 2 and len(actions) >= 3 * easy_steps.max()
    assert mc.policy_steps(right, hard_x, np.zeros(5), max_steps=201).min() == 201
    assert mc.policy_steps(right, easy[:, 0], easy[:, 1], max_steps=201).max() <= 30


def test_start_sets_hold_the_stated_shares():
    states = [np.array([[-0.5, 0.0], [0.0, 0.05], [0.4, 0.03]])]
    demos = [(states[0], np.array([2, 2, 2]))]
    sets = fig.start_sets(demos, 3, easy_starts(4))
    pope, mixed = sets["pope"], sets["mixed"]
    assert pope.shape == (6, 2) and mixed.shape == (8, 2)
    np.testing.assert_array_equal(pope[:3], states[0])  # the demonstration states ...
    hard = lambda s: (s[:, 1] == 0) & (s[:, 0] >= -0.6) & (s[:, 0] <= -0.4)  # noqa: E731
    assert hard(pope[3:]).all() and hard(mixed[4:]).all()  # ... and as many hard starts
    np.testing.assert_array_equal(mixed[:4], easy_starts(4))


@pytest.mark.slow  # the figure script end to end at toy size
def test_toy_run(tmp_path):
    out = tmp_path / "out"
    argv = ["--seeds", "1", "--total-timesteps", "1024", "--grid", "30", "--demos", "2"]
    argv += ["--eval-starts", "3", "--eval-every", "512", "--bc-steps", "5"]
    fig.main([*argv, "--out", str(out), "--sweeps-root", str(tmp_path / "s")])
    with open(out / "hard_starts.csv") as f:
        rows = list(csv.DictReader(f))
    assert [r["arm"] for r in rows] == list(fig.ARMS)
    x0 = np.linspace(fig.HARD_LOW, fig.HARD_HIGH, 3)
    for r in rows:  # the final policy's score, recounted from its checkpoint
        assert r["seed"] == "1" and r["hard_starts"] == "3"
        run = tmp_path / "s" / f"{r['arm']}_1024" / "runs" / "ppo" / fig.ENV / "seed1"
        act, _ = fig.load_act(run)
        steps = mc.policy_steps(act, x0, np.zeros(3), max_steps=201)
        assert abs(float(r["solved_frac"]) - np.mean(steps <= 200)) < 1e-5
    with open(out / "hard_starts_curves.csv") as f:
        curves = list(csv.DictReader(f))
    assert {(c["arm"], c["step"]) for c in curves} == {
        (a, s) for a in fig.ARMS for s in ("512", "1024")
    }
    names = {p.name for p in (tmp_path / "s" / "inputs").iterdir()}
    assert names == {"demos.npz", "pope_starts.npy", "mixed_starts.npy"}
