"""d3rlpy's IQL (takuseno/d3rlpy d3rlpy/algos/qlearning/iql.py, torch/iql_impl.py; PyPI d3rlpy
2.8.1) on a D4RL-layout HDF5 file: gradient updates/s on CPU and, if asked, the mean return of
deterministic evaluation episodes. Run with the python of its own venv (d3rlpy pins gymnasium
1.0.0; built by `make bench-iql` from paper_figures/peers/d3rlpy-requirements.txt); it imports
nothing of this project. paper_figures/bench_iql.py runs it side by side with algos/iql.py.

    ~/.cache/controlrl/venvs/d3rlpy/bin/python paper_figures/peers/d3rlpy_iql.py \\
        --dataset FILE.hdf5 --updates 20000 --warmup 1000 --out result.json \\
        [--eval-episodes 10 --env-id HalfCheetah-v5]

Settings: SETTINGS (tinkoff-ai/CORL algorithms/offline/iql.py's, as algos/iql.py's; rewards
scaled as d3rlpy's own reproductions/offline/iql.py), every IQLConfig field set by make_iql.
What d3rlpy does its own way (no config field changes it):
- one Adam over Q and V together on the summed loss (CORL and algos/iql.py: one per net); the
  two Q heads' MSEs are summed (original IQL), CORL averages them;
- update order critic (Q onto r + gamma V(s'), V onto the target critic's min Q) then actor
  with the updated V, then the target critic;
- the policy: mean tanh(mu), state-independent log-std through a sigmoid into [-5, 2]
  (initial -1.5); deterministic action tanh(mu);
- dataset: episodes are cut at terminals and timeouts; s' is the next row's observation
  (the file's next_observations are not read) and the last transition of a timed-out episode is
  dropped (it has no next row), as D4RL's qlearning_dataset; a file whose last row ends no
  episode gets a timeout there.

Timing: d3rlpy's own training loop, timed by its per-step callback after the first --warmup
updates (wall and process CPU). Output: one JSON object (stdout, and --out).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

KEYS = ("observations", "actions", "rewards", "terminals", "timeouts")
# CORL's IQL settings for D4RL locomotion: the one place they are written; bench_iql.py gives
# the same numbers to algos/iql.py (importing this dict, so the two cannot drift apart)
# (critic_lr: d3rlpy's Q and V share it, one optimiser; beta: its weight_temp; polyak: its tau;
# cosine_actor_lr: annealed to 0 over all the updates; rewards r * 1000 / (max - min return))
SETTINGS = dict(hidden_sizes=(256, 256), batch_size=256, actor_lr=3e-4, critic_lr=3e-4)
SETTINGS |= dict(expectile=0.7, beta=3.0, max_weight=100.0, gamma=0.99, polyak=0.005)
SETTINGS |= dict(cosine_actor_lr=True, normalize_obs=True, reward_scale=1000.0)


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dataset", type=Path, required=True, help="D4RL-layout HDF5 file")
    p.add_argument("--updates", type=int, default=20_000, help="gradient updates in all")
    p.add_argument("--warmup", type=int, default=1000, help="leading updates left out of timing")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--threads", type=int, default=1, help="torch threads")
    p.add_argument("--eval-episodes", type=int, default=0, help="0: no evaluation")
    p.add_argument("--env-id", help="Gymnasium id to evaluate in (needed with --eval-episodes)")
    p.add_argument("--out", type=Path, help="also write the JSON here")
    args = p.parse_args(argv)
    if args.updates < 1 or args.threads < 1 or args.eval_episodes < 0 or args.seed < 0:
        p.error("--updates and --threads must be >= 1; --eval-episodes and --seed >= 0")
    if not 0 <= args.warmup < args.updates:
        p.error(f"--warmup must be in [0, --updates), got {args.warmup}")
    if args.eval_episodes and not args.env_id:
        p.error("--eval-episodes needs --env-id")
    if not args.dataset.is_file():
        p.error(f"--dataset {args.dataset}: no such file")
    return args


def read_hdf5(path: Path) -> dict:
    """The five D4RL arrays; a missing key or a row count that differs names the file and key."""
    import h5py
    import numpy as np

    with h5py.File(path, "r") as f:
        missing = [k for k in KEYS if k not in f]
        if missing:
            sys.exit(f"{path}: missing key '{missing[0]}'")
        data = {k: np.asarray(f[k][()]) for k in KEYS}
    rows = len(data["observations"])
    for k, v in data.items():
        if v.dtype == object or len(v) != rows:
            sys.exit(f"{path}: '{k}' has {len(v)} rows of {v.dtype}, observations {rows}")
    return data


def build_dataset(data: dict):
    """d3rlpy's MDPDataset: terminals as terminals, timeouts as timeouts (never terminals)."""
    import d3rlpy
    import numpy as np

    terminals = data["terminals"].astype(np.float32)
    timeouts = data["timeouts"].astype(np.float32)
    if not (terminals[-1] or timeouts[-1]):
        timeouts[-1] = 1.0  # d3rlpy needs every episode ended; an unfinished one is cut here
    return d3rlpy.dataset.MDPDataset(
        observations=data["observations"].astype(np.float32),
        actions=data["actions"].astype(np.float32),
        rewards=data["rewards"].astype(np.float32).reshape(-1, 1),
        terminals=terminals,
        timeouts=timeouts,
        action_space=d3rlpy.ActionSpace.CONTINUOUS,
    )


def make_iql(updates: int):
    """IQLConfig from SETTINGS (every field set here, none left to d3rlpy's defaults)."""
    import d3rlpy

    c = SETTINGS
    nets = d3rlpy.models.VectorEncoderFactory(hidden_units=list(c["hidden_sizes"]))
    actor_adam = d3rlpy.optimizers.AdamFactory()
    if c["cosine_actor_lr"]:
        cosine = d3rlpy.optimizers.CosineAnnealingLRFactory(T_max=updates)
        actor_adam = d3rlpy.optimizers.AdamFactory(lr_scheduler_factory=cosine)
    preprocessing = d3rlpy.preprocessing
    obs_scaler = preprocessing.StandardObservationScaler() if c["normalize_obs"] else None
    return d3rlpy.algos.IQLConfig(
        actor_learning_rate=c["actor_lr"],
        critic_learning_rate=c["critic_lr"],
        actor_optim_factory=actor_adam,
        critic_optim_factory=d3rlpy.optimizers.AdamFactory(),
        actor_encoder_factory=nets,  # ReLU, d3rlpy's default activation
        critic_encoder_factory=nets,
        value_encoder_factory=nets,
        batch_size=c["batch_size"],
        gamma=c["gamma"],
        tau=c["polyak"],
        n_critics=2,
        expectile=c["expectile"],
        weight_temp=c["beta"],
        max_weight=c["max_weight"],
        observation_scaler=obs_scaler,
        reward_scaler=preprocessing.ReturnBasedRewardScaler(multiplier=c["reward_scale"]),
        compile_graph=False,
    ).create(device="cpu:0")


def evaluate(iql, env_id: str, episodes: int, seed: int) -> list[float]:
    """Returns of `episodes` episodes with the deterministic action (d3rlpy's predict)."""
    import gymnasium as gym
    import numpy as np

    env = gym.make(env_id)
    returns = []
    for k in range(episodes):
        obs, _ = env.reset(seed=seed * 1000 + k)
        total, done = 0.0, False
        while not done:
            action = iql.predict(np.asarray(obs, dtype=np.float32)[None])[0]
            obs, reward, terminated, truncated, _ = env.step(action)
            total += float(reward)
            done = terminated or truncated
        returns.append(total)
    env.close()
    return returns


def main(argv: list[str] | None = None) -> dict:
    args = parse(argv)
    import d3rlpy
    import torch

    torch.set_num_threads(args.threads)
    d3rlpy.seed(args.seed)
    t0 = time.perf_counter()
    dataset = build_dataset(read_hdf5(args.dataset))
    dataset_s = time.perf_counter() - t0
    iql = make_iql(args.updates)
    stamps: list[float] = []  # perf_counter after each update
    cpu_stamps: list[float] = []  # process CPU time after each update (robust to a busy CPU)

    def after_update(algo, epoch: int, step: int) -> None:
        stamps.append(time.perf_counter())
        cpu_stamps.append(time.process_time())

    fit = iql.fitter(
        dataset,
        n_steps=args.updates,
        n_steps_per_epoch=args.updates,  # one epoch: no end-of-epoch work inside the timing
        logger_adapter=d3rlpy.logging.NoopAdapterFactory(),
        show_progress=False,
        save_interval=10**9,
        callback=after_update,
    )
    metrics = [m for _, m in fit][-1]  # one epoch: d3rlpy's means over all its updates
    if len(stamps) != args.updates:
        sys.exit(f"d3rlpy made {len(stamps)} updates, asked {args.updates}")
    # stamps[warmup - 1] ends the warm-up (with warmup 0: the first update's time is lost)
    first = max(args.warmup, 1) - 1
    timed = args.updates - 1 - first
    update_s = stamps[-1] - stamps[first]
    cpu_s = cpu_stamps[-1] - cpu_stamps[first]
    out = dict(contender="d3rlpy", d3rlpy=d3rlpy.__version__, torch=torch.__version__)
    out |= dict(threads=args.threads, seed=args.seed, transitions=int(dataset.transition_count))
    out |= dict(dataset_s=dataset_s, updates=args.updates, timed_updates=timed, update_s=update_s)
    out |= dict(updates_per_s=timed / update_s, cpu_s=cpu_s, updates_per_cpu_s=timed / cpu_s)
    # d3rlpy's own split of a step (means over all updates, warm-up included)
    out["d3rlpy_sample_ms"] = 1000 * metrics.get("time_sample_batch", float("nan"))
    out["d3rlpy_update_ms"] = 1000 * metrics.get("time_algorithm_update", float("nan"))
    if args.eval_episodes:
        returns = evaluate(iql, args.env_id, args.eval_episodes, args.seed)
        out |= dict(
            env_id=args.env_id, eval_returns=returns, eval_return=sum(returns) / len(returns)
        )
    text = json.dumps(out)
    if args.out is not None:
        args.out.write_text(text)
    print(text)
    return out


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
