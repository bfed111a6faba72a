"""Stable-Baselines3's PPO (DLR-RM/stable-baselines3 stable_baselines3/ppo/ppo.py) as a sweep
runner task: the same command line and run-directory files as algos/ppo.py (metrics.csv with
train/episode_return and train/episodes per iteration, final_eval.json), so that
paper_figures/ppo_vs_sb3.py compares the two through one runner and one evaluation.

    python paper_figures/peers/sb3_ppo.py --env-id HalfCheetah-v5 --seed 1 \\
        --total-timesteps 300000 --run-dir runs/sb3_ppo_demo

Settings are algos/ppo.py's with --no-anneal-lr --no-clip-vloss (make, PPO_SETTINGS); it runs
total_timesteps // 2048 iterations. The final evaluation is controlrl.evaluate's (deterministic
action, normaliser frozen, ours' eval seed). No checkpoints: a killed run restarts from step 0.
paper_figures/bench_ppo.py times the same model.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import time
from pathlib import Path

import numpy as np
import torch

N_STEPS = 2048
# CleanRL's PPO settings under SB3's names (and algos/ppo.py's defaults)
PPO_SETTINGS = dict(learning_rate=3e-4, n_epochs=10, clip_range=0.2, ent_coef=0.0, vf_coef=0.5)
PPO_SETTINGS |= dict(max_grad_norm=0.5, target_kl=None)


def make(cls: type, env_id: str, n_envs: int, seed: int, **kwargs):
    """An SB3 model of class `cls` (PPO, or sb3-contrib's TRPO) on n_envs envs in a DummyVecEnv
    under VecNormalize (observations and rewards, clipped to 10), gamma 0.99, GAE lambda 0.95,
    normalised advantages, 64-64 tanh actor and critic (orthogonal init, log-std 0), on CPU."""
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

    env = make_vec_env(env_id, n_envs=n_envs, seed=seed, vec_env_cls=DummyVecEnv)
    env = VecNormalize(env, clip_obs=10.0, clip_reward=10.0, gamma=0.99, epsilon=1e-8)
    net = dict(net_arch=dict(pi=[64, 64], vf=[64, 64]), activation_fn=torch.nn.Tanh)
    policy_kwargs = net | dict(ortho_init=True, log_std_init=0.0)
    kwargs |= dict(gamma=0.99, gae_lambda=0.95, normalize_advantage=True, device="cpu")
    return cls("MlpPolicy", env, policy_kwargs=policy_kwargs, seed=seed, verbose=0, **kwargs)


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--env-id", default="HalfCheetah-v5")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--total-timesteps", type=int, default=300_000)
    p.add_argument("--run-dir", type=Path, required=True)
    p.add_argument("--eval-episodes", type=int, default=10)
    p.add_argument("--torch-threads", type=int, default=1)
    p.add_argument("--no-progress", action="store_true", help="accepted; SB3 shows none here")
    args = p.parse_args(argv)
    if args.seed < 0 or args.total_timesteps < N_STEPS or args.eval_episodes < 1:
        p.error(f"need --seed >= 0, --total-timesteps >= {N_STEPS}, --eval-episodes >= 1")
    return args


def main(argv: list[str] | None = None) -> None:
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback

    from controlrl.evaluate import evaluate
    from controlrl.normalize import ObsNormalizer
    from controlrl.seeding import eval_seed

    args = parse(argv)
    torch.set_num_threads(args.torch_threads)
    args.run_dir.mkdir(parents=True, exist_ok=True)
    config = {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}
    (args.run_dir / "config.json").write_text(json.dumps(config | {"algo": "sb3_ppo"}, indent=1))
    metrics = (args.run_dir / "metrics.csv").open("w", newline="")
    writer = csv.writer(metrics)
    writer.writerow(["step", "train/episode_return", "train/episodes", "time/iteration_s"])

    class EpisodeLog(BaseCallback):
        """One metrics row per rollout: the mean raw return of the episodes it ended (Monitor)."""

        def _on_rollout_start(self) -> None:
            self.returns: list[float] = []
            self.t0 = time.perf_counter()

        def _on_step(self) -> bool:
            self.returns += [i["episode"]["r"] for i in self.locals["infos"] if "episode" in i]
            return True

        def _on_rollout_end(self) -> None:
            mean = float(np.mean(self.returns)) if self.returns else math.nan
            row = [self.num_timesteps, mean, len(self.returns), time.perf_counter() - self.t0]
            writer.writerow(row)
            metrics.flush()

    settings = PPO_SETTINGS | dict(n_steps=N_STEPS, batch_size=64, clip_range_vf=None)
    model = make(PPO, args.env_id, 1, args.seed, **settings)
    env = model.get_env()
    steps = args.total_timesteps // N_STEPS * N_STEPS
    model.learn(total_timesteps=steps, callback=EpisodeLog(), progress_bar=False)
    metrics.close()

    norm = ObsNormalizer(env.observation_space.shape, clip=10.0, eps=1e-8)
    norm.rms.mean, norm.rms.var = env.obs_rms.mean.copy(), env.obs_rms.var.copy()
    norm.load_state_dict(norm.state_dict())  # refresh the cached float32 mean and 1/std

    def act(obs: torch.Tensor) -> torch.Tensor:
        return torch.as_tensor(model.predict(obs.numpy(), deterministic=True)[0])

    returns = evaluate(act, args.env_id, norm, args.eval_episodes, eval_seed(args.seed))
    final = {"step": model.num_timesteps, "eval_return_mean": float(returns.mean())}
    final |= {"eval_return_std": float(returns.std()), "eval_returns": returns.tolist()}
    (args.run_dir / "final_eval.json").write_text(json.dumps(final, indent=1))
    env.close()
    print(f"final eval {final['eval_return_mean']:.1f} over {len(returns)} episodes")


if __name__ == "__main__":
    main()
