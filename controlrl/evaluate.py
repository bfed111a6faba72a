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
    brax_pipeline: str | None = None,
) -> np.ndarray:
    """Returns [episodes] of the raw reward under act (e.g. the policy mean), never updating
    the normaliser; with video_path, the first episode is written there as MP4.

    Episodes run in envs.eval_num_envs(env_id, episodes) envs (one for most backends): each env
    contributes its first ceil(episodes / n) episodes, in env order, so that short episodes are
    not favoured."""
    n = envs.eval_num_envs(env_id, episodes)
    eval_envs = envs.make(
        env_id,
        n,
        seed,
        brax_pipeline=brax_pipeline,
        render_mode="rgb_array" if video_path else None,
    )
    space = eval_envs.single_action_space
    low = getattr(space, "low", None)
    high = getattr(space, "high", None)
    quota = -(-episodes // n)
    per_env: list[list[float]] = [[] for _ in range(n)]
    frames: list[np.ndarray] = []
    obs, _ = eval_envs.reset(seed=seed)
    total = np.zeros(n)
    while sum(min(len(r), quota) for r in per_env) < episodes:
        if video_path is not None and not per_env[0]:
            frames.append(np.asarray(eval_envs.render()[0]))
        x = obs.astype(np.float32)
        if obs_normalizer is not None:
            x = obs_normalizer(x, update=False)
        with torch.inference_mode():
            action = act(torch.from_numpy(x)).numpy()
        if low is not None:
            action = np.clip(action, low, high)
        obs, reward, terminated, truncated, _ = eval_envs.step(action)
        total += reward
        for i in np.flatnonzero(terminated | truncated):
            per_env[i].append(float(total[i]))
            total[i] = 0.0
    eval_envs.close()
    if video_path is not None and frames:
        import imageio

        video_path.parent.mkdir(parents=True, exist_ok=True)
        fps = eval_envs.metadata.get("render_fps") or 30
        imageio.mimsave(video_path, frames, fps=fps)
    return np.asarray([r for env in per_env for r in env[:quota]][:episodes])
