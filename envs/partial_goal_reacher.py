"""ReacherPartialGoal-v5: Gymnasium's Reacher-v5 with the goal partly hidden from the policy, the
"under-conditioned" setting of Flow Matching Policy Gradients (arXiv 2507.21053), where the
policy sees only part of the goal it is rewarded for reaching.

The observation drops Reacher-v5's target y and the y of the fingertip-to-target vector (its
entries 5 and 9), so the policy sees the arm's angles and velocities and the target's x only: 8
entries, in Reacher-v5's order. The dynamics, the target's draw (uniform in the disc of radius
0.2), the reward (minus the fingertip-target distance, minus the control cost, both computed on
the full state) and the 50-step time limit are Reacher-v5's.

Registered with Gymnasium when envs is imported; MuJoCo (Reacher-v5's class) is imported when the
env class is first asked for (gym.make of ENV_ID), not by the registration."""

from __future__ import annotations

import gymnasium as gym
import numpy as np

ENV_ID = "ReacherPartialGoal-v5"
MAX_EPISODE_STEPS = 50  # Reacher-v5's time limit
HIDDEN = (5, 9)  # target y, fingertip-minus-target y in Reacher-v5's observation
KEPT = np.array([i for i in range(10) if i not in HIDDEN])


def _env_class() -> type:
    """ReacherPartialGoalEnv: Reacher-v5's env class whose observation leaves out the target's
    y coordinate (made on first use: Reacher-v5's module imports MuJoCo)."""
    from gymnasium.envs.mujoco.reacher_v5 import ReacherEnv

    class ReacherPartialGoalEnv(ReacherEnv):
        """ReacherEnv whose observation leaves out the target's y coordinate."""

        def __init__(self, **kwargs) -> None:
            super().__init__(**kwargs)
            self.observation_space = gym.spaces.Box(-np.inf, np.inf, (KEPT.size,), np.float64)

        def _get_obs(self) -> np.ndarray:
            return super()._get_obs()[KEPT]

    ReacherPartialGoalEnv.__qualname__ = "ReacherPartialGoalEnv"  # picklable by name
    return ReacherPartialGoalEnv


def __getattr__(name: str) -> type:
    """ReacherPartialGoalEnv, made (and kept) on first use."""
    if name == "ReacherPartialGoalEnv":
        cls = globals()[name] = _env_class()
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def register() -> None:
    """Register ENV_ID with Gymnasium (once)."""
    if ENV_ID not in gym.registry:
        gym.register(
            ENV_ID,
            entry_point="envs.partial_goal_reacher:ReacherPartialGoalEnv",
            max_episode_steps=MAX_EPISODE_STEPS,
        )
