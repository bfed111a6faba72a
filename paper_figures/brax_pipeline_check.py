"""Physics check of Brax's pipelines: can a fixed PD controller balance brax:inverted_pendulum?

    python paper_figures/brax_pipeline_check.py --out paper_figures/out/brax_pipeline_check.csv

A cart-pole is balanced by pushing the cart towards the pole's lean: a = clip(2.0 theta +
0.5 theta_dot + 0.1 x + 0.2 x_dot, -1, 1) (observation [x, theta, x_dot, theta_dot]). The
script runs it through envs.make('brax:inverted_pendulum', --num-envs, brax_pipeline=p) from
--num-envs random initial states and reports how many steps each episode lasts (the env ends an
episode when |theta| > 0.2; 1000 steps is the time limit), next to the zero action. A pipeline
on which the controller falls as fast as doing nothing does not model this system well enough to
learn it: found by paper_figures/brax_ppo_race.py (PPO plateaus at ~90 on 'spring').
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from controlrl import bench
from controlrl.cli import ArgumentParser

ROOT = Path(__file__).resolve().parents[1]

GAINS = np.array([0.1, 2.0, 0.2, 0.5], np.float32)  # x, theta, x_dot, theta_dot


def episode_lengths(pipeline: str, num_envs: int, controller: str, seed: int) -> np.ndarray:
    """Steps until each env's first episode ends, under the PD controller or zero action."""
    import envs

    vec = envs.make("brax:inverted_pendulum", num_envs, seed, brax_pipeline=pipeline)
    obs, _ = vec.reset(seed=seed)
    lengths = np.zeros(num_envs, int)
    alive = np.ones(num_envs, bool)
    for _ in range(1000):
        if controller == "pd":
            action = np.clip(obs @ GAINS, -1.0, 1.0)[:, None]
        else:
            action = np.zeros((num_envs, 1), np.float32)
        obs, _, terminated, truncated, _ = vec.step(action)
        lengths += alive
        alive &= ~(terminated | truncated)
        if not alive.any():
            break
    return lengths


def main(argv: list[str] | None = None) -> None:
    p = ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=ROOT / "paper_figures/out/brax_pipeline_check.csv")
    p.add_argument("--pipelines", default="spring,positional,generalized,mjx")
    p.add_argument("--num-envs", type=int, default=8)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    rows = []
    for pipeline in args.pipelines.split(","):
        for controller in ("pd", "zero"):
            lengths = episode_lengths(pipeline, args.num_envs, controller, args.seed)
            row = dict(pipeline=pipeline, controller=controller, episodes=args.num_envs)
            row |= dict(min_length=int(lengths.min()), mean_length=float(lengths.mean()))
            rows.append(row | {"max_length": int(lengths.max())})
            print(f"  {pipeline:12s} {controller:4s} episode lengths {lengths}", flush=True)
    bench.write_csv(args.out, rows, None)
    command = bench.command_line("paper_figures/brax_pipeline_check.py", argv)
    print(f"wrote {args.out}; command: {command}")


if __name__ == "__main__":
    main()
