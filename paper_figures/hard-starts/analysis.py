"""Hard-start guidance in sparse Mountain Car: the files the guided arms read, made before the
runs, and each run's score.

prepare_inputs: the exact dynamic-programming reference (theory/mountain_car.py, value iteration
on a [analysis] grid x grid (x, v) grid); its greedy controller from `demos` evenly spaced hard
starts gives the optimal demonstrations (demos.npz, the bc arm's --bc-demos); pope_starts.npy
holds every demonstration state and as many evenly spaced hard starts, mixed_starts.npy the
`easy_starts` easy starts (right of the valley, moving right) and as many hard starts (the
--start-states of the pope and mixed arms).

metrics: solved_frac, the fraction of `eval_starts` evenly spaced hard starts that the final
deterministic policy (its mode, normaliser frozen) brings to the goal within the 200-step limit of
the exact dynamics; auc_eval_solved, the mean of the run's periodic evaluations (eval/return: 1
for an episode that reaches the goal); final_eval_solved, its final evaluation's.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from controlrl.evaluate import frozen_act
from controlrl.plots import read_metrics
from theory import mountain_car as mc

HARD_LOW, HARD_HIGH = mc.START_LOW, mc.START_HIGH  # Gymnasium's reset: at rest in the valley
EASY_LOW, EASY_HIGH, EASY_V = -0.2, 0.3, 0.045  # right of the valley, moving right
LIMIT = 200  # the env's time limit


def demonstrations(T: np.ndarray, grid: mc.Grid, x0: np.ndarray, max_steps: int = 1000):
    """Per start (x0, 0): the greedy controller's trajectory (states [t, 2], actions [t]) up to
    the step that reaches the goal; ValueError if one does not arrive in max_steps."""
    out = []
    for x in x0:
        xs, vs = np.array([float(x)]), np.zeros(1)
        states, actions = [], []
        for _ in range(max_steps):
            a = mc.greedy_action(T, grid, xs, vs)
            states.append((xs[0], vs[0]))
            actions.append(int(a[0]))
            xs, vs, done = mc.step(xs, vs, a.astype(float))
            if done[0]:
                break
        else:
            raise ValueError(f"demonstration from x0 = {x:.3f} does not reach the goal")
        out.append((np.array(states), np.array(actions)))
    return out


def hard(n: int) -> np.ndarray:
    """n hard starts (x0, 0), evenly spaced."""
    return np.stack([np.linspace(HARD_LOW, HARD_HIGH, n), np.zeros(n)], 1)


def start_sets(demos, easy: np.ndarray) -> dict[str, np.ndarray]:
    """The --start-states arrays: pope (demonstration states and as many hard starts) and mixed
    (easy starts and as many hard starts)."""
    demo_states = np.concatenate([s for s, _ in demos])
    return {
        "pope": np.concatenate([demo_states, hard(len(demo_states))]),
        "mixed": np.concatenate([easy, hard(len(easy))]),
    }


def prepare_inputs(exp, toy: bool, folder: Path) -> None:
    cfg = exp.analysis_config(toy)
    grid = mc.Grid(cfg["grid"], cfg["grid"])
    demos = demonstrations(mc.values(grid, tol=1e-6), grid, hard(cfg["demos"])[:, 0])
    easy_x = np.linspace(EASY_LOW, EASY_HIGH, cfg["easy_starts"])
    easy = np.stack([easy_x, np.full_like(easy_x, EASY_V)], 1)
    for name, states in start_sets(demos, easy).items():
        np.save(Path(folder) / f"{name}_starts.npy", states)
    obs = np.concatenate([s for s, _ in demos]).astype(np.float32)
    np.savez(Path(folder) / "demos.npz", obs=obs, actions=np.concatenate([a for _, a in demos]))
    lengths = [len(a) for _, a in demos]
    print(f"demonstrations: {min(lengths)}-{max(lengths)} steps", flush=True)


def metrics(exp, run_dir: Path, env_id: str, seed: int, toy: bool) -> dict[str, float]:
    x0 = hard(exp.analysis_config(toy)["eval_starts"])[:, 0]
    act, _ = frozen_act(run_dir, env_id)
    steps = mc.policy_steps(lambda x, v: act(np.stack([x, v], 1)), x0, np.zeros_like(x0),
                            max_steps=LIMIT + 1)  # fmt: skip
    _, curve = read_metrics(run_dir, "eval/return")
    final = json.loads((Path(run_dir) / "final_eval.json").read_text())["eval_return_mean"]
    return {"solved_frac": float(np.mean(steps <= LIMIT)),
            "auc_eval_solved": float(np.mean(curve)) if len(curve) else float("nan"),
            "final_eval_solved": float(final)}  # fmt: skip
