"""Gymnasium backend: MuJoCo v5 and classic-control ids as a Sync/AsyncVectorEnv."""

from __future__ import annotations

import os

import gymnasium as gym
from gymnasium.vector import AutoresetMode

from envs.errors import check_known

# headless offscreen rendering (videos) by default; MuJoCo reads this when it first renders
os.environ.setdefault("MUJOCO_GL", "egl")


def check_id(name: str) -> None:
    """Raise if `name` is not a registered Gymnasium id, naming the closest ones."""
    check_known(name, lambda: gym.registry, "gym", form=" (Gymnasium)")


def make(
    name: str,
    num_envs: int,
    vectorization: str = "sync",
    render_mode: str | None = None,
    copy: bool = True,
) -> gym.vector.VectorEnv:
    """num_envs copies of gym.make(name) with SAME_STEP autoreset.

    copy=False returns the vector env's own observation array on each step (no deepcopy): for
    callers that copy it into a buffer at once, like controlrl's Collector.
    Async (one process per env) only pays off with many cores: on 2 cores sync is faster.
    """
    if vectorization not in ("sync", "async"):
        raise ValueError(f"vectorization must be 'sync' or 'async', got {vectorization!r}")
    kwargs = {"autoreset_mode": AutoresetMode.SAME_STEP, "copy": copy}
    if vectorization == "async":
        kwargs["context"] = "fork"
    return gym.make_vec(
        name,
        num_envs=num_envs,
        vectorization_mode=vectorization,
        vector_kwargs=kwargs,
        render_mode=render_mode,
    )
