"""Mountain Car's optimality gap of one finished run: its final policy (its mode, normaliser
frozen) stepped from evenly spaced start states x0 in [-0.6, -0.4], v0 = 0, at most 200 steps (the
time limit), against the reference controller (theory/mountain_car.py): per start state the fewer
steps of value iteration's greedy controller on the finest grid and of an exhaustive search over
full-throttle controllers with at most two switches; both are real trajectories. Regret = steps
minus the reference's, mean over the start states.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import numpy as np

from controlrl.evaluate import frozen_act
from theory import mountain_car as mc


def start_states(n: int) -> np.ndarray:
    return np.linspace(mc.START_LOW, mc.START_HIGH, n)


@cache
def reference_steps(grids: tuple[int, ...], starts: int, horizon: int) -> np.ndarray:
    """Per start state: the fewer steps to the goal of the finest grid's greedy controller and of
    the two-switch search (the coarser grids show the grid controller converging)."""
    x0 = start_states(starts)
    for n in grids:
        grid = mc.Grid(n, n)
        steps = mc.greedy_steps(mc.values(grid, tol=1e-6), grid, x0, np.zeros_like(x0))
        print(f"grid {n} x {n}: greedy steps {steps.min()}-{steps.max()}", flush=True)
    search = np.array([mc.bang_bang_steps(float(x), 0.0, horizon) for x in x0])
    return np.minimum(steps, search)


def load_act(run_dir: Path, env_id: str = "MountainCar-v0"):
    """(act(x, v) -> actions, parameter count) of a finished ppo run on Mountain Car."""
    act, n_params = frozen_act(run_dir, env_id)
    return (lambda x, v: act(np.stack([x, v], 1))), n_params


def metrics(exp, run_dir: Path, env_id: str, seed: int, toy: bool) -> dict[str, float]:
    cfg = exp.analysis_config(toy)
    ref = reference_steps(tuple(cfg["grids"]), cfg["starts"], cfg["switch_horizon"])
    act, n_params = load_act(run_dir, env_id)
    x0 = start_states(cfg["starts"])
    steps = mc.policy_steps(act, x0, np.zeros_like(x0), max_steps=200)
    return {"regret": float((steps - ref).mean()), "mean_steps": float(steps.mean()),
            "reference_mean_steps": float(ref.mean()), "reached": float(np.mean(steps < 200)),
            "params": n_params}  # fmt: skip
