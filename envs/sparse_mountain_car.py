"""SparseMountainCar-v0: Gymnasium's MountainCar-v0 with a sparse reward, 1 on the step that
reaches the goal (x >= 0.5, v >= 0) and 0 on every other step; the dynamics, the three actions,
Gymnasium's start states (x ~ U(-0.6, -0.4), v = 0: at rest in the valley, where the car must
swing to climb) and the 200-step time limit (a truncation) are MountainCar-v0's. An episode's
return is 1 if it reached the goal within the limit, else 0: the success of that start.

Registered with Gymnasium when envs is imported; other start states come from envs.start_states
(the --start-states option of the on-policy scripts)."""

from __future__ import annotations

import gymnasium as gym
from gymnasium.envs.classic_control.mountain_car import MountainCarEnv

ENV_ID = "SparseMountainCar-v0"
MAX_EPISODE_STEPS = 200  # MountainCar-v0's time limit


class SparseMountainCarEnv(MountainCarEnv):
    """MountainCarEnv whose reward is 1 on reaching the goal and 0 otherwise."""

    def step(self, action: int):
        """MountainCarEnv.step with the reward replaced by the success indicator."""
        obs, _, terminated, truncated, info = super().step(action)
        return obs, float(terminated), terminated, truncated, info


def register() -> None:
    """Register ENV_ID with Gymnasium (once)."""
    if ENV_ID not in gym.registry:
        gym.register(
            ENV_ID,
            entry_point="envs.sparse_mountain_car:SparseMountainCarEnv",
            max_episode_steps=MAX_EPISODE_STEPS,
        )
