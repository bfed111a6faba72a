"""Mountain Car's optimality gap: PPO with an MLP and with a Chebyshev policy against the
minimum steps to the goal (the analytic Mountain Car solution and Chebyshev policies paper).

    python -m paper_figures run mountain-car-chebyshev   # the declared experiment's runs
    python paper_figures/mountain_car.py --toy --out DIR  # the pipeline at toy size

The reference (theory/mountain_car.py): value iteration on a grid of (x, v) nodes, its greedy
controller stepped with the exact dynamics, and an exhaustive search over full-throttle
controllers with up to two switches; both are real trajectories, the reference is the fewer steps
of the two from each start state. Gymnasium's start states x0 in [-0.6, -0.4], v0 = 0, evenly
spaced. The runs are algos/ppo.py on MountainCar-v0 with the rl-baselines3-zoo PPO settings
(16 envs x 16 steps, GAE lambda 0.98, 4 epochs, observation and reward normalisation), the actor
an MLP (64, 64) or --chebyshev-degree; each final policy (its mode, normaliser frozen) is stepped
from the same start states, at most 200 steps (the time limit). Regret = steps - reference steps,
mean over the start states. Writes <out>/mountain_car.csv (per run), mountain_car_reference.csv
(per start state: the grid controller at each resolution, the bang-bang search, the reference).
"""

from __future__ import annotations

import json
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch

from controlrl import checkpoint
from controlrl.cli import ArgumentParser
from controlrl.experiment import SweepConfig, apply_toy, write_rows
from controlrl.nets import make_policy
from controlrl.normalize import ObsNormalizer
from paper_figures.lab import scripts
from paper_figures.lab.script_flags import OUT, wrote
from theory import mountain_car as mc

# the task and the PPO settings of both arms (hard_starts.py trains with them too)
ENV = "MountainCar-v0"
ZOO = [  # rl-baselines3-zoo hyperparams/ppo.yml, MountainCar-v0 (batch 64: 4 minibatches)
    *("--num-envs", "16", "--num-steps", "16", "--gae-lambda", "0.98"),
    *("--update-epochs", "4", "--num-minibatches", "4", "--ent-coef", "0.0"),
]
TOY = {"seeds": 2, "total_timesteps": 4096, "grids": "20,40", "starts": 3, "switch_horizon": 150}


def load_policy(run_dir: Path, env_id: str, chebyshev: bool = False):
    """(policy, observation normaliser or None) of a finished run's last checkpoint: the policy
    built for env_id's spaces as its config.json says (chebyshev: with its Chebyshev
    features), the normaliser frozen."""
    saved = json.loads((Path(run_dir) / "config.json").read_text())["args"]
    env = gym.make(env_id)
    space, kw = env.observation_space, {}
    if chebyshev:  # the features span [-r, r] of the normalised observations
        r = saved["chebyshev_range"]
        bounds = (torch.full(space.shape, -r), torch.full(space.shape, r))
        bounds = bounds if saved["norm_obs"] else None
        kw = dict(chebyshev_degree=saved["chebyshev_degree"], chebyshev_bounds=bounds)
    policy = make_policy(space, env.action_space, tuple(saved["hidden_sizes"]), **kw)
    env.close()
    state = checkpoint.load(Path(run_dir) / "checkpoints" / "latest.pt", ("policy",))
    policy.load_state_dict(state["policy"])
    normalizer = None
    if "obs_normalizer" in state:
        normalizer = ObsNormalizer(space.shape)
        normalizer.load_state_dict(state["obs_normalizer"])
        normalizer.frozen = True
    return policy, normalizer


def frozen_act(run_dir: Path, env_id: str, chebyshev: bool = False):
    """(act, parameter count) of a finished run: act(obs [n, d]) -> its policy's mode [n, ...],
    the normaliser frozen."""
    policy, normalizer = load_policy(run_dir, env_id, chebyshev)

    def act(obs: np.ndarray) -> np.ndarray:
        obs = obs.astype(np.float32)  # what the env hands the agent
        if normalizer is not None:
            obs = normalizer(obs, update=False)
        with torch.inference_mode():
            return policy.mode(torch.from_numpy(np.ascontiguousarray(obs))).numpy()

    return act, sum(p.numel() for p in policy.parameters())


def load_act(run_dir: Path):
    """(act(x, v) -> actions, parameter count) of a finished ppo run on Mountain Car."""
    act, n_params = frozen_act(run_dir, ENV, chebyshev=True)
    return (lambda x, v: act(np.stack([x, v], 1))), n_params


def reference(x0: np.ndarray, grids: list[int], horizon: int) -> list[dict]:
    """Per start state: greedy grid-controller steps at each resolution, the two-switch search,
    and the reference (the fewer of the finest grid's and the search's)."""
    rows = [{"x0": float(x)} for x in x0]
    for n in grids:
        grid = mc.Grid(n, n)
        steps = mc.greedy_steps(mc.values(grid, tol=1e-6), grid, x0, np.zeros_like(x0))
        for row, s in zip(rows, steps):
            row[f"grid{n}_steps"] = int(s)
        print(f"grid {n} x {n}: greedy steps {steps.min()}-{steps.max()}", flush=True)
    for row in rows:
        row["bang_bang_steps"] = mc.bang_bang_steps(row["x0"], 0.0, horizon)
        row["reference_steps"] = min(row[f"grid{grids[-1]}_steps"], row["bang_bang_steps"])
    return rows


def main(argv: list[str] | None = None) -> None:
    p = ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=8)
    p.add_argument("--total-timesteps", type=int, default=100_000)
    p.add_argument("--degree", type=int, default=3, help="Chebyshev degree per coordinate")
    p.add_argument("--grids", default="100,200,400", help="grid resolutions, finest last")
    p.add_argument("--starts", type=int, default=21, help="start states in [-0.6, -0.4]")
    p.add_argument("--switch-horizon", type=int, default=200, help="bang-bang search horizon")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--toy", action="store_true", help="tiny sizes (a test of the pipeline)")
    p.add_argument("--sweeps-root", type=Path, default=None, help="default: <out>/sweeps")
    p.add_argument("--out", type=Path, default=OUT)
    args = p.parse_args(argv)
    if args.toy:
        apply_toy(args, argv, TOY)
    grids = [int(g) for g in args.grids.split(",")]
    sweeps = args.sweeps_root or args.out / "sweeps"
    x0 = np.linspace(mc.START_LOW, mc.START_HIGH, args.starts)
    ref_rows = reference(x0, grids, args.switch_horizon)
    ref = np.array([r["reference_steps"] for r in ref_rows])

    policies = {"mlp": [], "chebyshev": ["--chebyshev-degree", str(args.degree)]}
    rows = []
    for name, flags in policies.items():
        extra = [*ZOO, *flags, "--eval-every", "0", "--no-tensorboard", "--no-progress"]
        config = SweepConfig(["ppo"], [ENV], args.seeds, args.total_timesteps, extra)
        out = sweeps / f"{name}_{args.total_timesteps}"
        runs = scripts.train(config, out, name, args.workers)
        for seed, run_dir in scripts.finished(runs, out, "mountain_car.py"):
            act, n_params = load_act(run_dir)
            steps = mc.policy_steps(act, x0, np.zeros_like(x0), max_steps=200)
            final = json.loads((run_dir / "final_eval.json").read_text())["eval_return_mean"]
            rows.append({"policy": name, "seed": seed, "steps": args.total_timesteps,
                         "params": n_params, "mean_steps": float(steps.mean()),
                         "reference_mean_steps": float(ref.mean()),
                         "regret": float((steps - ref).mean()),
                         "reached": float(np.mean(steps < 200)),
                         "final_eval_return": float(final)})  # fmt: skip
            print(f"{name} seed {seed}: {steps.mean():.1f} steps, regret {rows[-1]['regret']:.1f}")

    args.out.mkdir(parents=True, exist_ok=True)
    write_rows(args.out / "mountain_car.csv", rows)
    write_rows(args.out / "mountain_car_reference.csv", ref_rows)
    wrote(f"{args.out}/mountain_car.csv and _reference.csv", "mountain_car", argv)


if __name__ == "__main__":
    main()
