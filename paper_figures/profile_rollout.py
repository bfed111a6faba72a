"""Where the rollout's time goes: per-step microseconds of raw Gymnasium stepping, envs.make
stepping and controlrl's Collector with a PPO policy, side by side in one process.

    python paper_figures/profile_rollout.py --env-id HalfCheetah-v5 --envs-list 1,8

Contenders, timed in alternating chunks of `--steps` vector steps (order rotated per repeat, so
machine noise hits all of them; median over `--repeats`):

- raw:       N `gym.make` envs stepped in a Python loop with random actions, reset on an end
- gymvec:    Gymnasium's own SyncVectorEnv (SAME_STEP autoreset, copy=False), same actions
- vec:       `envs.make(..., copy=False)` stepped with the same random actions
- floor:     vec + the floor's per-step actor forward (bench_ppo.py `_worker_floor`'s rollout)
- collector: `controlrl.rollout.Collector.collect` with a PPO GaussianPolicy, observation
             normaliser and reward scaler into a RolloutBuffer (the training rollout loop)
- bare:      the same Collector without the normalisers (which the floor does not run)

Prints per-step microseconds (one vector step of N envs) and the ratios vec/raw, gymvec/raw,
collector/floor and bare/floor. One torch thread. No file is written. `--clock cpu` (the
default) times with this process's CPU time, which other jobs on a shared machine disturb far
less than wall time; `--clock wall` uses perf_counter.
"""

from __future__ import annotations

import statistics
import time

import gymnasium as gym
import numpy as np
import torch

import envs
from controlrl.buffers import RolloutBuffer
from controlrl.cli import ArgumentParser
from controlrl.nets import GaussianPolicy, fast_forward
from controlrl.normalize import ObsNormalizer, RewardScaler
from controlrl.rollout import Collector


def _raw(env_id: str, n: int, seed: int, steps: int):
    env_list = [gym.make(env_id) for _ in range(n)]
    for i, env in enumerate(env_list):
        env.reset(seed=seed + i)
        env.action_space.seed(seed + i)
    space = env_list[0].action_space
    rng = np.random.default_rng(seed)
    actions = rng.uniform(space.low, space.high, (steps, n, *space.shape)).astype(space.dtype)

    def run() -> None:
        for t in range(steps):
            for i, env in enumerate(env_list):
                _, _, terminated, truncated, _ = env.step(actions[t, i])
                if terminated or truncated:
                    env.reset()

    return run


def _vec(env_id: str, n: int, seed: int, steps: int, actor: bool, gymnasium: bool = False):
    if gymnasium:
        vec = gym.make_vec(
            env_id,
            n,
            vectorization_mode="sync",
            vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP, "copy": False},
        )
    else:
        vec = envs.make(env_id, n, seed, copy=False)
    vec.reset(seed=seed)
    space = vec.single_action_space
    rng = np.random.default_rng(seed)
    actions = rng.uniform(space.low, space.high, (steps, n, *space.shape)).astype(space.dtype)
    obs_dim = vec.single_observation_space.shape[0]
    policy = GaussianPolicy(obs_dim, space.shape[0])
    obs_np = rng.standard_normal((n, obs_dim)).astype(np.float32)

    def run() -> None:
        for t in range(steps):
            vec.step(actions[t])

    def run_floor() -> None:
        with torch.inference_mode():
            for t in range(steps):
                vec.step(actions[t])
                mean = fast_forward(policy.mean, torch.from_numpy(obs_np))
                (mean + policy.log_std.exp() * torch.randn_like(mean)).numpy()

    return run_floor if actor else run


def _collector(env_id: str, n: int, seed: int, steps: int, normalise: bool = True):
    vec = envs.make(env_id, n, seed, copy=False)
    obs_shape = vec.single_observation_space.shape
    space = vec.single_action_space
    policy = GaussianPolicy(obs_shape[0], space.shape[0])
    normalisers = (ObsNormalizer(obs_shape), RewardScaler(n, 0.99)) if normalise else (None, None)
    collector = Collector(vec, *normalisers)
    collector.reset(seed=seed)
    buffer = RolloutBuffer(steps, n, obs_shape, space.shape, discrete=False)

    def run() -> None:
        collector.collect(buffer, policy.sample)

    return run


def measure(
    env_id: str, n: int, steps: int, repeats: int, clock=time.process_time, seed: int = 0
) -> dict[str, float]:
    """Median per-step microseconds of each contender at n envs."""
    runs = {
        "raw": _raw(env_id, n, seed, steps),
        "gymvec": _vec(env_id, n, seed, steps, actor=False, gymnasium=True),
        "vec": _vec(env_id, n, seed, steps, actor=False),
        "floor": _vec(env_id, n, seed, steps, actor=True),
        "collector": _collector(env_id, n, seed, steps),
        "bare": _collector(env_id, n, seed, steps, normalise=False),
    }
    names = list(runs)
    for run in runs.values():  # warm-up
        run()
    times: dict[str, list[float]] = {k: [] for k in names}
    for r in range(repeats):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            t0 = clock()
            runs[name]()
            times[name].append((clock() - t0) / steps * 1e6)
    return {k: statistics.median(v) for k, v in times.items()}


def main() -> None:
    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env-id", default="HalfCheetah-v5")
    parser.add_argument("--envs-list", default="1,8")
    parser.add_argument("--steps", type=int, default=1000, help="vector steps per timed chunk")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--clock", choices=("cpu", "wall"), default="cpu")
    args = parser.parse_args()
    torch.set_num_threads(1)
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    print(
        f"{args.env_id}, {args.clock} us per vector step "
        f"(median of {args.repeats} chunks of {args.steps})"
    )
    cols = ["raw", "gymvec", "vec", "floor", "collector", "bare"]
    ratios = [("gymvec", "raw"), ("vec", "raw"), ("collector", "floor"), ("bare", "floor")]
    print("| envs | " + " | ".join(cols) + " | " + " | ".join(f"{a}/{b}" for a, b in ratios) + " |")
    print("| --- " * (1 + len(cols) + len(ratios)) + "|")
    for n in (int(x) for x in args.envs_list.split(",")):
        us = measure(args.env_id, n, args.steps, args.repeats, clock)
        cells = [f"{us[c]:.1f}" for c in cols] + [f"{us[a] / us[b]:.2f}" for a, b in ratios]
        print(f"| {n} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
