"""Robust adversarial RL against plain PPO under mass and friction changes (Pinto et al. 2017,
arXiv 1703.02702: training against an adversary makes policies robust to mass and friction
changes, and better even without the adversary). The declared experiment
paper_figures/rarl-robustness/ states the setting and its sources.

    python -m paper_figures run rarl-robustness        # this script at the declared size
    python paper_figures/rarl_robustness.py --out DIR  # 8 paired seeds x 3 variants, 40,960 steps

InvertedPendulum-v5, the same seeds and flags for every variant: algos/ppo.py; algos/rarl.py with
an adversary of at most --adversary-force newtons; and rarl-no-force (force 0: the same scheme,
no push). Each final deterministic policy (normaliser frozen) runs --episodes episodes under
every perturbation: masses of pole and cart times each --masses factor, the joints' damping
times each --frictions factor (envs/adversarial.py ScaledDynamics), without the adversary.
Writes <out>/rarl_robustness.csv (per variant, seed and perturbation: mean return). --variants
runs a subset (each variant's runs stand alone).
"""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np

from controlrl.cli import ArgumentParser
from controlrl.experiment import SweepConfig, write_rows
from envs.adversarial import ScaledDynamics
from paper_figures.lab import scripts
from paper_figures.lab.script_flags import ROOT, some_of, wrote
from paper_figures.mountain_car import frozen_act

ENV = "InvertedPendulum-v5"
VARIANTS = ("ppo", "rarl", "rarl-no-force")
ALGO = {"ppo": "ppo", "rarl": "rarl", "rarl-no-force": "rarl"}  # the script each variant runs


def floats(text: str) -> list[float]:
    """'0.5,1,2' -> [0.5, 1.0, 2.0]."""
    return [float(x) for x in text.split(",")]


def load_act(run_dir: Path):
    """obs [d] -> action of a finished ppo or rarl run's (protagonist's) mode, normaliser
    frozen."""
    act, _ = frozen_act(run_dir, ENV)
    return lambda obs: act(obs[None])[0]


def perturbed_return(act, mass: float, friction: float, episodes: int, seed: int) -> float:
    """Mean return of `episodes` episodes of act on ENV with masses x mass, damping x friction."""
    env = ScaledDynamics(gym.make(ENV), mass_scale=mass, friction_scale=friction)
    low, high = env.action_space.low, env.action_space.high
    returns = []
    for episode in range(episodes):
        obs, _ = env.reset(seed=seed + episode)
        total, done = 0.0, False
        while not done:
            obs, reward, terminated, truncated, _ = env.step(np.clip(act(obs), low, high))
            total += float(reward)
            done = terminated or truncated
        returns.append(total)
    env.close()
    return float(np.mean(returns))


def main(argv: list[str] | None = None) -> None:
    p = ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=8)
    p.add_argument("--total-timesteps", type=int, default=40_960)
    p.add_argument("--num-steps", type=int, default=1024, help="steps per env per rollout")
    p.add_argument("--adversary-force", type=float, default=5.0, help="newtons (rarl)")
    p.add_argument("--masses", type=floats, default=[0.5, 1.0, 1.5, 2.0, 4.0, 8.0])
    p.add_argument("--frictions", type=floats, default=[0.5, 1.0, 2.0, 10.0])
    p.add_argument("--episodes", type=int, default=5, help="per policy and perturbation")
    p.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--sweeps-root", type=Path, default=None, help="default: <out>/sweeps")
    p.add_argument("--out", type=Path, default=ROOT / "runs" / "rarl_robustness")
    args = p.parse_args(argv)
    if 1.0 not in args.masses or 1.0 not in args.frictions:
        p.error("--masses and --frictions must include 1 (the nominal model)")
    variants = some_of(p, "variants", args.variants, VARIANTS)
    args.sweeps_root = args.sweeps_root or args.out / "sweeps"
    common = ["--num-steps", str(args.num_steps), "--eval-every", "0", "--eval-episodes", "5"]
    common += ["--no-tensorboard", "--no-progress"]
    flags = {"ppo": [], "rarl": ["--adversary-force", str(args.adversary_force)]}
    flags["rarl-no-force"] = ["--adversary-force", "0"]
    rows = []
    for name in variants:
        extra = common + flags[name]
        config = SweepConfig([ALGO[name]], [ENV], args.seeds, args.total_timesteps, extra)
        out = args.sweeps_root / f"{name}_{args.total_timesteps}"
        runs = scripts.train(config, out, name, args.workers)
        for seed, run_dir in scripts.finished(runs, out, "rarl_robustness.py"):
            act = load_act(run_dir)
            for mass in args.masses:
                for friction in args.frictions:
                    ret = perturbed_return(act, mass, friction, args.episodes, 10_000 * seed)
                    force = args.adversary_force if name == "rarl" else 0.0
                    rows.append({"variant": name, "seed": seed, "steps": args.total_timesteps,
                                 "adversary_force": force, "mass_scale": mass,
                                 "friction_scale": friction, "episodes": args.episodes,
                                 "mean_return": ret})  # fmt: skip
            cells = len(args.masses) * len(args.frictions)
            grid = np.mean([r["mean_return"] for r in rows[-cells:]])
            print(f"{name} seed {seed}: mean return over the grid {grid:.1f}", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    write_rows(args.out / "rarl_robustness.csv", rows)
    wrote(f"{args.out}/rarl_robustness.csv", "rarl_robustness", argv)


if __name__ == "__main__":
    main()
