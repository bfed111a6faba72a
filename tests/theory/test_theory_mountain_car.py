"""The Mountain Car reference: Gymnasium's dynamics reproduced bit for bit, value iteration's
Bellman residual ~0, its greedy controller equal to exhaustive search where that is feasible, and
the two-switch bang-bang search an upper bound that the grid's controller matches."""

import gymnasium as gym
import numpy as np

from theory import mountain_car as mc


def test_step_is_gymnasium_bit_for_bit():
    env = gym.make("MountainCar-v0").unwrapped
    rng = np.random.default_rng(0)
    checked = 0
    for episode in range(10):
        env.reset(seed=episode)
        x, v = np.array([env.state[0]]), np.array([env.state[1]])
        for _ in range(400):
            a = int(rng.choice(3, p=[0.2, 0.2, 0.6]))  # drift right: reach the goal sometimes
            _, _, terminated, _, _ = env.step(a)
            x, v, done = mc.step(x, v, np.array([float(a)]))
            assert (x[0], v[0], bool(done[0])) == (env.state[0], env.state[1], terminated)
            checked += 1
            if terminated:
                break
    assert checked > 1000


def test_value_iteration_fixed_point():
    grid = mc.Grid(30, 30)
    T = mc.values(grid, tol=1e-10)
    residual = mc.bellman(T, mc.successors(grid)) - T
    assert np.max(np.abs(residual)) < 1e-9
    assert T.min() == 1.0 and 50 < T.max() < 1000  # one step from the goal's edge; finite


def test_greedy_controller_equals_exhaustive_search_near_the_goal():
    grid = mc.Grid(100, 100)
    T = mc.values(grid, tol=1e-8)
    rng = np.random.default_rng(1)
    x0, v0 = rng.uniform(0.25, 0.49, 40), rng.uniform(-0.01, 0.04, 40)
    exact = np.array([mc.brute_force_steps(x, v, 9) or 99 for x, v in zip(x0, v0)])
    keep = exact < 99
    assert keep.sum() >= 20
    greedy = mc.greedy_steps(T, grid, x0[keep], v0[keep], max_steps=200)
    np.testing.assert_array_equal(greedy, exact[keep])


def test_bang_bang_search_bounds_and_matches_the_grid_controller():
    # where exhaustive search reaches, the two-switch search is never below the optimum
    for x, v in [(0.3, 0.03), (0.4, 0.01), (0.35, 0.02)]:
        exact = mc.brute_force_steps(x, v, 10)
        assert exact is not None and mc.bang_bang_steps(x, v) >= exact
    # from Gymnasium's start states the grid's greedy controller is within 2 steps of it
    x0 = np.array([-0.6, -0.5, -0.4])
    grid = mc.Grid(100, 100)
    greedy = mc.greedy_steps(mc.values(grid, tol=1e-8), grid, x0, np.zeros(3), max_steps=300)
    bang = np.array([mc.bang_bang_steps(x, 0.0) for x in x0])
    assert np.all(bang < 200) and np.all(np.abs(greedy - bang) <= 2)
