"""Mountain Car's minimum steps to the goal by value iteration on a fine (x, v) grid.

The dynamics are Gymnasium's MountainCar-v0 (Moore 1990; Sutton and Barto), deterministic, three
actions (push left, none, right); a step costs 1 and the episode ends once x >= 0.5 and v >= 0
after a step. T*(s) is the minimum number of steps from s to the goal, the fixed point of
T(s) = min_a (1 if f(s, a) ends the episode else 1 + T(f(s, a))).

``values`` solves that equation on the nodes of an (nx + 1) x (nv + 1) grid, T between nodes
read by bilinear interpolation (the semi-Lagrangian scheme of Munos and Moore 2002): value
iteration from 0 to a Bellman residual below tol. ``greedy_steps`` steps the exact dynamics with
the controller greedy in that T: a real trajectory, so its steps bound T* from above, and they
fall to T* as the grid is refined. ``brute_force_steps`` is the exact T* by exhaustive search,
feasible where T* is small.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MIN_X, MAX_X, MAX_V = -1.2, 0.6, 0.07
GOAL_X, GOAL_V = 0.5, 0.0
FORCE, GRAVITY = 0.001, 0.0025
ACTIONS = 3
START_LOW, START_HIGH = -0.6, -0.4  # Gymnasium's reset: x ~ U(-0.6, -0.4), v = 0


def step(x: np.ndarray, v: np.ndarray, a: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(x', v', reached goal) of Gymnasium's update, elementwise in float64 (its own order)."""
    v = v + ((a - 1) * FORCE + np.cos(3 * x) * (-GRAVITY))
    v = np.clip(v, -MAX_V, MAX_V)
    x = np.clip(x + v, MIN_X, MAX_X)
    v = np.where((x == MIN_X) & (v < 0), 0.0, v)
    return x, v, (x >= GOAL_X) & (v >= GOAL_V)


@dataclass(frozen=True)
class Grid:
    """(nx + 1) x (nv + 1) nodes spanning [MIN_X, MAX_X] x [-MAX_V, MAX_V]; node (i, j) is flat
    index i * (nv + 1) + j."""

    nx: int
    nv: int

    @property
    def size(self) -> int:
        return (self.nx + 1) * (self.nv + 1)

    def nodes(self) -> tuple[np.ndarray, np.ndarray]:
        """(x, v) of every node, flat [size]."""
        x = np.linspace(MIN_X, MAX_X, self.nx + 1)
        v = np.linspace(-MAX_V, MAX_V, self.nv + 1)
        return np.repeat(x, self.nv + 1), np.tile(v, self.nx + 1)

    def weights(self, x: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Bilinear interpolation: (node indices [n, 4], weights [n, 4]) of states in the box."""
        fx = (np.clip(x, MIN_X, MAX_X) - MIN_X) / (MAX_X - MIN_X) * self.nx
        fv = (np.clip(v, -MAX_V, MAX_V) + MAX_V) / (2 * MAX_V) * self.nv
        i = np.minimum(np.floor(fx).astype(np.int64), self.nx - 1)
        j = np.minimum(np.floor(fv).astype(np.int64), self.nv - 1)
        tx, tv = fx - i, fv - j
        k = i * (self.nv + 1) + j
        idx = np.stack([k, k + 1, k + self.nv + 1, k + self.nv + 2], -1)
        w = np.stack([(1 - tx) * (1 - tv), (1 - tx) * tv, tx * (1 - tv), tx * tv], -1)
        return idx, w

    def interpolate(self, T: np.ndarray, x: np.ndarray, v: np.ndarray) -> np.ndarray:
        """T [size] read at the states (x, v) by bilinear interpolation."""
        idx, w = self.weights(x, v)
        return (T[idx] * w).sum(-1)


def successors(grid: Grid) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per action and node: interpolation indices [A, size, 4], weights [A, size, 4] of the
    exact successor, and whether that step ends the episode [A, size]."""
    x, v = grid.nodes()
    out = [step(x, v, np.full_like(x, a)) for a in range(ACTIONS)]
    pairs = [grid.weights(x1, v1) for x1, v1, _ in out]
    return (
        np.stack([p[0] for p in pairs]),
        np.stack([p[1] for p in pairs]),
        np.stack([d for _, _, d in out]),
    )


def bellman(T: np.ndarray, succ: tuple[np.ndarray, np.ndarray, np.ndarray]) -> np.ndarray:
    """One Bellman backup [size]: min over actions of 1, or 1 + T at the successor."""
    idx, w, done = succ
    return np.where(done, 1.0, 1.0 + (T[idx] * w).sum(-1)).min(axis=0)


def values(grid: Grid, tol: float = 1e-9, max_iter: int = 200_000) -> np.ndarray:
    """Steps to the goal at every node [size]: value iteration from 0 until the largest change
    of a backup (the Bellman residual) is below tol. From 0 the iterates rise monotonically."""
    succ = successors(grid)
    T = np.zeros(grid.size)
    for _ in range(max_iter):
        new = bellman(T, succ)
        if np.max(np.abs(new - T)) < tol:
            return new
        T = new
    raise RuntimeError(f"values: no convergence to {tol:g} in {max_iter} iterations")


def greedy_action(T: np.ndarray, grid: Grid, x: np.ndarray, v: np.ndarray) -> np.ndarray:
    """The controller greedy in T: argmin over actions of 0 for a step that ends the episode,
    else T at the exact successor (the lowest action on ties)."""
    cost = []
    for a in range(ACTIONS):
        x1, v1, done = step(x, v, np.full_like(x, a))
        cost.append(np.where(done, 0.0, grid.interpolate(T, x1, v1)))
    return np.argmin(np.stack(cost), axis=0)


def greedy_steps(
    T: np.ndarray, grid: Grid, x0: np.ndarray, v0: np.ndarray, max_steps: int = 1000
) -> np.ndarray:
    """Steps to the goal [n] of the controller greedy in T from (x0, v0), exact dynamics."""
    return policy_steps(lambda x, v: greedy_action(T, grid, x, v), x0, v0, max_steps=max_steps)


def policy_steps(act, x0: np.ndarray, v0: np.ndarray, max_steps: int = 200) -> np.ndarray:
    """Steps to the goal [n] of a deterministic controller act(x, v) -> actions [n] (ints in
    0..2), stepped with the exact dynamics; max_steps where it has not arrived (Gymnasium's
    MountainCar-v0 time limit is 200)."""
    x, v = np.asarray(x0, float).copy(), np.asarray(v0, float).copy()
    steps = np.full(x.shape, max_steps)
    alive = np.ones(x.shape, bool)
    for t in range(1, max_steps + 1):
        x, v, done = step(x, v, np.asarray(act(x, v), float))
        steps[alive & done] = t
        alive &= ~done
        if not alive.any():
            break
    return steps


def brute_force_steps(x0: float, v0: float, max_steps: int) -> int | None:
    """Exact T*(x0, v0) by breadth-first search over every action sequence of up to max_steps
    steps (3^max_steps leaves: small max_steps only); None if none reaches the goal."""
    x, v = np.array([x0], float), np.array([v0], float)
    for t in range(1, max_steps + 1):
        x, v = np.repeat(x, ACTIONS), np.repeat(v, ACTIONS)
        a = np.tile(np.arange(ACTIONS, dtype=float), x.size // ACTIONS)
        x, v, done = step(x, v, a)
        if done.any():
            return t
        states = np.unique(np.stack([x, v], 1), axis=0)  # identical states need one visit
        x, v = states[:, 0], states[:, 1]
    return None


def bang_bang_steps(x0: float, v0: float, max_steps: int = 200) -> int:
    """Fewest steps to the goal over every full-throttle controller with at most two switches
    (push one way, then the other, then back; switch times exhaustive), exact dynamics;
    max_steps if none arrives. An independent upper bound on T*(x0, v0)."""
    t = np.arange(max_steps)
    t1, t2 = np.meshgrid(t, t, indexing="ij")
    keep = t1 <= t2
    t1, t2 = t1[keep], t2[keep]  # switch before step t1 and before step t2 (t1 = t2: one switch)
    t1, t2 = np.concatenate([t1, t1]), np.concatenate([t2, t2])
    first = np.repeat([0.0, 2.0], keep.sum())
    x, v = np.full(first.shape, float(x0)), np.full(first.shape, float(v0))
    for k in range(max_steps):
        a = np.where((k >= t1) & (k < t2), 2.0 - first, first)
        x, v, done = step(x, v, a)
        if done.any():
            return k + 1
    return max_steps
