"""Deterministic evaluation episodes with the observation normaliser frozen."""

from __future__ import annotations

import json
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
    quota = -(-episodes // n)
    frames: list[np.ndarray] = []

    def film() -> None:  # the first env's frames until its first episode ends
        if not per_env[0]:
            frames.append(np.asarray(eval_envs.render()[0]))

    obs, _ = eval_envs.reset(seed=seed)
    per_env = [[] for _ in range(n)]
    episode_returns(
        eval_envs,
        obs,
        act,
        obs_normalizer,
        lambda: sum(min(len(r), quota) for r in per_env) >= episodes,
        per_env,
        film if video_path is not None else None,
    )
    eval_envs.close()
    if video_path is not None and frames:
        import imageio

        video_path.parent.mkdir(parents=True, exist_ok=True)
        fps = eval_envs.metadata.get("render_fps") or 30
        imageio.mimsave(video_path, frames, fps=fps)
    return np.asarray([r for env in per_env for r in env[:quota]][:episodes])


def episode_returns(
    envs_,
    obs: np.ndarray,
    act: Callable[[torch.Tensor], torch.Tensor],
    obs_normalizer,
    enough: Callable[[], bool],
    per_env: list[list[float]],
    before_step: Callable[[], None] | None = None,
) -> None:
    """Step a vector env from obs with act until enough(): the normaliser frozen, actions
    clipped to the action space, each finished episode's raw return appended to per_env[i] of
    its env i (an env that has its episodes steps on, its returns appended too)."""
    space = envs_.single_action_space
    low, high = getattr(space, "low", None), getattr(space, "high", None)
    total = np.zeros(len(per_env))
    while not enough():
        if before_step is not None:
            before_step()
        x = obs.astype(np.float32)
        if obs_normalizer is not None:
            x = obs_normalizer(x, update=False)
        with torch.inference_mode():
            action = act(torch.from_numpy(x)).numpy()
        if low is not None:
            action = np.clip(action, low, high)
        obs, reward, terminated, truncated, _ = envs_.step(action)
        total += reward
        for i in np.flatnonzero(terminated | truncated):
            per_env[i].append(float(total[i]))
            total[i] = 0.0


def load_policy(run_dir: Path, env_id: str) -> tuple[torch.nn.Module, ObsNormalizer | None]:
    """(policy, observation normaliser or None) of a finished run's last checkpoint: the policy
    that its config.json's flags build for env_id's spaces (hidden sizes, activation, a
    Chebyshev policy's degree and span), the normaliser frozen."""
    import gymnasium as gym

    from controlrl import checkpoint
    from controlrl.nets import make_policy

    saved = json.loads((Path(run_dir) / "config.json").read_text())["args"]
    env = gym.make(env_id)
    space, kw = env.observation_space, {}
    if saved.get("chebyshev_degree"):  # ppo.py's features span [-r, r] of the normalised obs
        r = saved["chebyshev_range"]
        bounds = (torch.full(space.shape, -r), torch.full(space.shape, r))
        kw = dict(chebyshev_degree=saved["chebyshev_degree"])
        kw["chebyshev_bounds"] = bounds if saved["norm_obs"] else None
    hidden = tuple(saved["hidden_sizes"])
    policy = make_policy(space, env.action_space, hidden, saved.get("activation", "tanh"), **kw)
    env.close()
    state = checkpoint.load(Path(run_dir) / "checkpoints" / "latest.pt", ("policy",))
    policy.load_state_dict(state["policy"])
    normalizer = None
    if "obs_normalizer" in state:
        normalizer = ObsNormalizer(space.shape)
        normalizer.load_state_dict(state["obs_normalizer"])
        normalizer.frozen = True
    return policy, normalizer


def frozen_act(run_dir: Path, env_id: str) -> tuple[Callable[[np.ndarray], np.ndarray], int]:
    """(act, parameter count) of a finished run: act(obs [n, d]) -> its policy's mode [n, ...]
    on the raw observations, the normaliser frozen."""
    policy, normalizer = load_policy(run_dir, env_id)

    def act(obs: np.ndarray) -> np.ndarray:
        obs = obs.astype(np.float32)  # what the env hands the agent
        if normalizer is not None:
            obs = normalizer(obs, update=False)
        with torch.inference_mode():
            return policy.mode(torch.from_numpy(np.ascontiguousarray(obs))).numpy()

    return act, sum(p.numel() for p in policy.parameters())
