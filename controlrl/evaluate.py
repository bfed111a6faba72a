"""Deterministic evaluation episodes with the observation normaliser frozen."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

import envs
from controlrl.normalize import ObsNormalizer


def evaluate(
    act: Callable[[torch.Tensor], torch.Tensor],
    env_id: str,
    obs_normalizer: ObsNormalizer | None,
    episodes: int,
    seed: int,
    video_path: Path | None = None,
) -> np.ndarray:
    """Returns [episodes] of the raw reward under act (e.g. the policy mean), never updating
    the normaliser; with video_path, the first episode is written there as MP4."""
    eval_envs = envs.make(env_id, 1, seed, render_mode="rgb_array" if video_path else None)
    space = eval_envs.single_action_space
    low = getattr(space, "low", None)
    high = getattr(space, "high", None)
    returns: list[float] = []
    frames: list[np.ndarray] = []
    obs, _ = eval_envs.reset(seed=seed)
    total = 0.0
    while len(returns) < episodes:
        if video_path is not None and not returns:
            frames.append(np.asarray(eval_envs.render()[0]))
        x = obs.astype(np.float32)
        if obs_normalizer is not None:
            x = obs_normalizer(x, update=False)
        with torch.inference_mode():
            action = act(torch.from_numpy(x)).numpy()
        if low is not None:
            action = np.clip(action, low, high)
        obs, reward, terminated, truncated, _ = eval_envs.step(action)
        total += float(reward[0])
        if terminated[0] or truncated[0]:
            returns.append(total)
            total = 0.0
    eval_envs.close()
    if video_path is not None and frames:
        import imageio

        video_path.parent.mkdir(parents=True, exist_ok=True)
        fps = eval_envs.metadata.get("render_fps") or 30
        imageio.mimsave(video_path, frames, fps=fps)
    return np.asarray(returns)
