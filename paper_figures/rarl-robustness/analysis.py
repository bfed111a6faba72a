"""RARL's robustness metrics of one finished run: its final deterministic policy (the
protagonist's mode, normaliser frozen) on InvertedPendulum-v5 with the pole's and the cart's
masses and the joints' damping scaled (envs/adversarial.py ScaledDynamics), no adversary.
grid_return is the mean return over every (mass, damping) pair of [analysis], nominal_return
the return at mass x 1 and damping x 1."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np

from controlrl.evaluate import frozen_act
from envs.adversarial import ScaledDynamics


def perturbed_return(act, env_id: str, mass: float, friction: float, episodes: int,
                     seed: int) -> float:  # fmt: skip
    """Mean return of `episodes` episodes of act (obs [n, d] -> actions) under the scales,
    episode i reset with seed + i."""
    env = ScaledDynamics(gym.make(env_id), mass_scale=mass, friction_scale=friction)
    low, high = env.action_space.low, env.action_space.high
    returns = []
    for episode in range(episodes):
        obs, _ = env.reset(seed=seed + episode)
        total, done = 0.0, False
        while not done:
            obs, reward, terminated, truncated, _ = env.step(np.clip(act(obs[None])[0], low, high))
            total += float(reward)
            done = terminated or truncated
        returns.append(total)
    env.close()
    return float(np.mean(returns))


def metrics(exp, run_dir: Path, env_id: str, seed: int, toy: bool) -> dict[str, float]:
    cfg = exp.analysis_config(toy)
    act, _ = frozen_act(run_dir, env_id)
    grid = {(m, f): perturbed_return(act, env_id, m, f, cfg["episodes"], 10_000 * seed)
            for m in cfg["masses"] for f in cfg["frictions"]}  # fmt: skip
    return {"grid_return": float(np.mean(list(grid.values()))), "nominal_return": grid[1.0, 1.0]}
