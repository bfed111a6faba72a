"""Hard-start guidance in sparse Mountain Car: plain PPO on the hard starts against POPE-style
demonstration resets and a TREK-style short behaviour clone, and the ray-interference arm (hard
starts mixed with easy ones), every arm on the same seeds. The declared experiment
paper_figures/hard-starts/ states the task, the arms and their sources.

    python -m paper_figures run hard-starts        # this script at the declared size
    python paper_figures/hard_starts.py --out DIR  # 8 seeds x 4 arms, 102,400 steps each

SparseMountainCar-v0 (reward 1 at the goal); hard starts at rest in the valley (x0 in [-0.6,
-0.4]), easy starts right of it moving right. Demonstrations: the greedy controller of the exact
dynamic-programming reference (theory/mountain_car.py, a --grid x --grid grid) from --demos hard
starts. Arms (algos/ppo.py with the mountain-car-chebyshev declaration's flags): ppo; pope
(--start-states: half the episodes from demonstration states); bc (--bc-demos, --bc-steps of
behaviour cloning first); mixed (--start-states: half the episodes from --easy-starts easy
starts).

Metric: the fraction of --eval-starts hard starts the final deterministic policy (normaliser
frozen) brings to the goal within 200 steps of the exact dynamics; against samples, each run's
evaluations every --eval-every steps. Writes <out>/hard_starts.csv (per arm and seed),
hard_starts_curves.csv (per evaluation), hard_starts_reference.csv (per start: kind, DP steps,
swings).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from controlrl.cli import ArgumentParser
from controlrl.evaluate import frozen_act
from controlrl.experiment import SweepConfig, write_rows
from controlrl.plots import read_metrics
from paper_figures.lab import scripts, spec
from paper_figures.lab.script_flags import ROOT, some_of, wrote
from theory import mountain_car as mc

ENV = "SparseMountainCar-v0"
HARD_LOW, HARD_HIGH = mc.START_LOW, mc.START_HIGH  # Gymnasium's reset: at rest in the valley
EASY_LOW, EASY_HIGH, EASY_V = -0.2, 0.3, 0.045  # right of the valley, moving right
LIMIT = 200  # the env's time limit
ARMS = ("ppo", "pope", "bc", "mixed")
# rl-baselines3-zoo's MountainCar-v0 settings, as the Mountain Car experiment declares them
ZOO = list(spec.load(spec.FIGURES / "mountain-car-chebyshev").flags)


def load_act(run_dir: Path):
    """(act(x, v) -> actions, parameter count) of a finished ppo run on ENV."""
    act, n_params = frozen_act(run_dir, ENV)
    return (lambda x, v: act(np.stack([x, v], 1))), n_params


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


def swings(actions: np.ndarray) -> int:
    """How often a demonstration reverses its push (left <-> right, pauses skipped)."""
    pushes = actions[actions != 1]
    return int(np.sum(pushes[1:] != pushes[:-1]))


def start_sets(demos, n_hard: int, easy: np.ndarray) -> dict[str, np.ndarray]:
    """The --start-states arrays: pope (demonstration states and as many hard starts, evenly
    spaced) and mixed (easy starts and as many hard starts)."""
    demo_states = np.concatenate([s for s, _ in demos])

    def hard(n: int) -> np.ndarray:
        return np.stack([np.linspace(HARD_LOW, HARD_HIGH, n), np.zeros(n)], 1)

    return {
        "pope": np.concatenate([demo_states, hard(len(demo_states))]),
        "mixed": np.concatenate([easy, hard(len(easy))]),
    }


def main(argv: list[str] | None = None) -> None:
    p = ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=8)
    p.add_argument("--total-timesteps", type=int, default=102_400)
    p.add_argument("--grid", type=int, default=200, help="DP grid resolution (nodes per axis)")
    p.add_argument("--demos", type=int, default=5, help="demonstrations (hard starts)")
    p.add_argument("--easy-starts", type=int, default=41, help="easy starts in the mixed arm")
    p.add_argument("--eval-starts", type=int, default=21, help="hard starts scored at the end")
    p.add_argument("--eval-every", type=int, default=10_240, help="steps between evaluations")
    p.add_argument("--bc-steps", type=int, default=100, help="the bc arm's clone steps")
    p.add_argument("--arms", default=",".join(ARMS))
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--sweeps-root", type=Path, default=None, help="default: <out>/sweeps")
    p.add_argument("--out", type=Path, default=ROOT / "runs" / "hard_starts")
    args = p.parse_args(argv)
    args.sweeps_root = args.sweeps_root or args.out / "sweeps"
    arms = some_of(p, "arms", args.arms, ARMS)
    scripts.at_least(p, args, ("seeds", "demos", "easy_starts", "eval_starts"))

    grid = mc.Grid(args.grid, args.grid)
    T = mc.values(grid, tol=1e-6)
    demo_x0 = np.linspace(HARD_LOW, HARD_HIGH, args.demos)
    demos = demonstrations(T, grid, demo_x0)
    easy_x = np.linspace(EASY_LOW, EASY_HIGH, args.easy_starts)
    easy = np.stack([easy_x, np.full_like(easy_x, EASY_V)], 1)
    eval_x0 = np.linspace(HARD_LOW, HARD_HIGH, args.eval_starts)
    ref_rows = [{"kind": "demo", "x0": float(x), "v0": 0.0, "dp_steps": len(a),
                 "swings": swings(a)} for x, (_, a) in zip(demo_x0, demos)]  # fmt: skip
    easy_steps = mc.greedy_steps(T, grid, easy[:, 0], easy[:, 1], max_steps=LIMIT + 1)
    ref_rows += [{"kind": "easy", "x0": float(x), "v0": EASY_V, "dp_steps": int(s), "swings": 0}
                 for x, s in zip(easy_x, easy_steps)]  # fmt: skip
    lengths = [len(a) for _, a in demos]
    print(f"demonstrations: {min(lengths)}-{max(lengths)} steps; easy starts: DP "
          f"{easy_steps.min()}-{easy_steps.max()} steps", flush=True)  # fmt: skip

    files = args.sweeps_root / "inputs"
    files.mkdir(parents=True, exist_ok=True)
    for name, states in start_sets(demos, args.eval_starts, easy).items():
        np.save(files / f"{name}_starts.npy", states)
    np.savez(files / "demos.npz", obs=np.concatenate([s for s, _ in demos]).astype(np.float32),
             actions=np.concatenate([a for _, a in demos]))  # fmt: skip
    flags = {
        "ppo": [],
        "pope": ["--start-states", str(files / "pope_starts.npy")],
        "bc": ["--bc-demos", str(files / "demos.npz"), "--bc-steps", str(args.bc_steps)],
        "mixed": ["--start-states", str(files / "mixed_starts.npy")],
    }
    common = [*ZOO, "--eval-every", str(args.eval_every), "--no-tensorboard", "--no-progress"]
    rows, curve_rows = [], []
    for arm in arms:
        config = SweepConfig(["ppo"], [ENV], args.seeds, args.total_timesteps, common + flags[arm])
        out = args.sweeps_root / f"{arm}_{args.total_timesteps}"
        runs = scripts.train(config, out, arm, args.workers)
        for seed, run_dir in scripts.finished(runs, out, "hard_starts.py"):
            act, _ = load_act(run_dir)
            steps = mc.policy_steps(act, eval_x0, np.zeros_like(eval_x0), max_steps=LIMIT + 1)
            solved = steps <= LIMIT
            final = json.loads((run_dir / "final_eval.json").read_text())["eval_return_mean"]
            curve_steps, curve = read_metrics(run_dir, "eval/return")
            curve_rows += [{"arm": arm, "seed": seed, "step": int(s), "eval_solved": float(v)}
                           for s, v in zip(curve_steps, curve)]  # fmt: skip
            rows.append({"arm": arm, "seed": seed, "steps": args.total_timesteps,
                         "hard_starts": args.eval_starts, "demos": args.demos,
                         "bc_steps": args.bc_steps if arm == "bc" else 0,
                         "solved_frac": float(solved.mean()),
                         "mean_steps_solved": float(steps[solved].mean()) if solved.any() else "",
                         "auc_eval_solved": float(np.mean(curve)) if len(curve) else "",
                         "final_eval_solved": float(final)})  # fmt: skip
            print(f"{arm} seed {seed}: {solved.sum()}/{solved.size} hard starts solved")

    args.out.mkdir(parents=True, exist_ok=True)
    write_rows(args.out / "hard_starts.csv", rows)
    write_rows(args.out / "hard_starts_curves.csv", curve_rows)
    write_rows(args.out / "hard_starts_reference.csv", ref_rows)
    wrote(f"{args.out}/hard_starts.csv, _curves.csv and _reference.csv", "hard_starts", argv)


if __name__ == "__main__":
    main()
