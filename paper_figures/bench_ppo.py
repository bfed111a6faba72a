"""Training throughput of algos/ppo.py vs Stable-Baselines3 PPO, and our overhead over the floor.

    python paper_figures/bench_ppo.py --out paper_figures/out/bench_ppo.csv --envs-list 1,8 \
        --iterations 3 --repeats 3

Three contenders, each timed in its own fresh process (no shared imports or warm caches), run in
a rotating order inside every repeat so that machine noise (about +-40 % here) hits all of them:

- ours:  algos.ppo.main(Args(...)); iteration times from the run's timing.csv
         (time/rollout_s + time/update_s; start-up, logging, checkpoints and final eval excluded).
- sb3:   stable_baselines3.PPO on DummyVecEnv + VecNormalize; a callback times each iteration
         (rollout start -> rollout end -> next rollout start / training end).
- floor: the same work with nothing around it: random-action stepping of the same `envs.make`
         vector env, a pure-torch actor forward at batch N per env step, the batched value and
         log-prob forwards over the rollout, and epochs x minibatches of actor+critic forward,
         PPO loss, backward, grad-norm clip and Adam on random data of the same shapes.

Identical settings for ours and SB3 (CleanRL MuJoCo defaults): num_steps per env 2048, 32
minibatches per epoch (so 64 * num_envs samples each), 10 epochs, lr 3e-4 constant (no anneal),
Adam eps 1e-5, gamma 0.99, lambda 0.95, clip 0.2, value clip 0.2, advantage normalisation, ent 0,
vf 0.5, max grad norm 0.5, separate 64-64 tanh actor and critic with orthogonal init and
log-std 0, observation and reward normalisation (clip 10), device cpu, equal torch threads.
The first `--warmup` iterations of every process are dropped. Ratios are formed per repeat
(contenders of one repeat run back to back) and reported as median (min-max) over repeats.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CONTENDERS = ("ours", "sb3", "floor")
FIELDS = [
    "algo",
    "contender",
    "num_envs",
    "repeat",
    "slot",
    "env_id",
    "num_steps",
    "num_minibatches",
    "epochs",
    "threads",
    "iterations",
    "steps_per_iter",
    "sps",
    "iter_s",
    "rollout_s",
    "update_s",
    "env_step_s",
    "actor_fwd_s",
    "batched_fwd_s",
    "train_s",
    "process_s",
]


# --------------------------------------------------------------------------------------------
# workers: each runs in its own process and writes a JSON dict of per-iteration seconds


def _ours_timed(module, cfg: dict, **algo_kwargs) -> dict:
    """Run one of our algorithm scripts' main() in-process on a temp run dir and read the
    per-iteration rollout/update seconds from its timing.csv."""
    T, N = cfg["num_steps"], cfg["num_envs"]
    with tempfile.TemporaryDirectory(prefix="bench_ours_") as tmp:
        run_dir = Path(tmp) / "run"
        args = module.Args(
            env_id=cfg["env_id"],
            seed=cfg["seed"],
            total_timesteps=(cfg["warmup"] + cfg["iterations"]) * T * N,
            num_envs=N,
            run_dir=str(run_dir),
            checkpoint_every=10**9,
            eval_every=0,
            eval_episodes=1,
            torch_threads=cfg["threads"],
            tensorboard=False,
            progress=False,
            num_steps=T,
            **algo_kwargs,
        )
        args.validate()
        module.main(args)
        with (run_dir / "timing.csv").open() as f:
            rows = list(csv.DictReader(f))
    return {
        "rollout_s": [float(r["time/rollout_s"]) for r in rows],
        "update_s": [float(r["time/update_s"]) for r in rows],
    }


def _worker_ours(cfg: dict) -> dict:
    from algos import ppo

    return _ours_timed(
        ppo,
        cfg,
        learning_rate=3e-4,
        anneal_lr=False,
        gamma=0.99,
        gae_lambda=0.95,
        num_minibatches=cfg["num_minibatches"],
        update_epochs=cfg["epochs"],
        norm_adv=True,
        clip_coef=0.2,
        clip_vloss=True,
        ent_coef=0.0,
        vf_coef=0.5,
        max_grad_norm=0.5,
        target_kl=None,
        norm_obs=True,
        norm_reward=True,
        hidden_sizes=(64, 64),
    )


def _sb3_timed_learn(algo_cls, cfg: dict, **algo_kwargs) -> dict:
    """Train an SB3 algorithm on DummyVecEnv + VecNormalize with our network shape, timing each
    iteration with a callback (rollout start -> rollout end -> next rollout start / end)."""
    import torch
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

    torch.set_num_threads(cfg["threads"])
    T, N = cfg["num_steps"], cfg["num_envs"]
    n_iter = cfg["warmup"] + cfg["iterations"]
    starts: list[float] = []
    ends: list[float] = []

    class IterationTimer(BaseCallback):
        def _on_rollout_start(self) -> None:
            starts.append(time.perf_counter())

        def _on_rollout_end(self) -> None:  # after compute_returns_and_advantage
            ends.append(time.perf_counter())

        def _on_training_end(self) -> None:
            starts.append(time.perf_counter())

        def _on_step(self) -> bool:
            return True

    env = make_vec_env(cfg["env_id"], n_envs=N, seed=cfg["seed"], vec_env_cls=DummyVecEnv)
    env = VecNormalize(
        env,
        norm_obs=True,
        norm_reward=True,
        clip_obs=10.0,
        clip_reward=10.0,
        gamma=0.99,
        epsilon=1e-8,
    )
    model = algo_cls(
        "MlpPolicy",
        env,
        n_steps=T,
        gamma=0.99,
        gae_lambda=0.95,
        normalize_advantage=True,
        policy_kwargs=dict(
            net_arch=dict(pi=[64, 64], vf=[64, 64]),
            activation_fn=torch.nn.Tanh,
            ortho_init=True,
            log_std_init=0.0,
        ),
        device="cpu",
        seed=cfg["seed"],
        verbose=0,
        **algo_kwargs,
    )
    model.learn(total_timesteps=n_iter * T * N, callback=IterationTimer(), progress_bar=False)
    env.close()
    assert len(ends) == n_iter and len(starts) == n_iter + 1, (len(starts), len(ends))
    return {
        "rollout_s": [e - s for s, e in zip(starts, ends)],
        "update_s": [s - e for e, s in zip(ends, starts[1:])],
    }


def _worker_sb3(cfg: dict) -> dict:
    from stable_baselines3 import PPO

    batch = cfg["num_steps"] * cfg["num_envs"]
    return _sb3_timed_learn(
        PPO,
        cfg,
        learning_rate=3e-4,
        batch_size=batch // cfg["num_minibatches"],
        n_epochs=cfg["epochs"],
        clip_range=0.2,
        clip_range_vf=0.2,
        ent_coef=0.0,
        vf_coef=0.5,
        max_grad_norm=0.5,
        target_kl=None,
    )


def _worker_floor(cfg: dict) -> dict:
    import numpy as np
    import torch
    from torch import nn

    import envs
    from controlrl.nets import fast_forward, flatten_parameters

    torch.set_num_threads(cfg["threads"])
    torch.manual_seed(cfg["seed"])
    T, N = cfg["num_steps"], cfg["num_envs"]
    vec_env = envs.make(cfg["env_id"], N, cfg["seed"], copy=False)
    obs_dim = int(np.prod(vec_env.single_observation_space.shape))
    space = vec_env.single_action_space
    act_dim = int(np.prod(space.shape))
    rng = np.random.default_rng(cfg["seed"])
    vec_env.reset(seed=cfg["seed"])

    def net(out: int) -> nn.Sequential:
        return nn.Sequential(
            nn.Linear(obs_dim, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, out)
        )

    actor, critic = net(act_dim), net(1)
    log_std = nn.Parameter(torch.zeros(act_dim))
    holder = nn.ParameterList([log_std])
    # the floor uses the fastest plain-torch form too: one flat parameter tensor, fused Adam,
    # and Module-call-free forwards on the per-step path
    flat = flatten_parameters(actor, holder, critic)
    params = [flat]
    optimizer = torch.optim.Adam(params, lr=3e-4, eps=1e-5, fused=True)
    half_log_2pi = 0.5 * math.log(2 * math.pi)

    def logp_of(obs: torch.Tensor, act: torch.Tensor) -> torch.Tensor:
        mean = actor(obs)
        z = (act - mean) * torch.exp(-log_std)
        return (-0.5 * z.pow(2) - log_std - half_log_2pi).sum(-1)

    B = T * N
    mb_size = B // cfg["num_minibatches"]
    data = {k: torch.randn(B, d) for k, d in (("obs", obs_dim), ("act", act_dim))}
    data.update({k: torch.randn(B) for k in ("logp", "adv", "ret", "val")})
    obs_np = rng.standard_normal((N, obs_dim)).astype(np.float32)
    out: dict[str, list[float]] = {
        k: [] for k in ("env_step_s", "actor_fwd_s", "batched_fwd_s", "train_s")
    }
    for _ in range(cfg["warmup"] + cfg["iterations"]):
        actions = rng.uniform(space.low, space.high, (T, N, act_dim)).astype(np.float32)
        t0 = time.perf_counter()
        for t in range(T):
            vec_env.step(actions[t])
        t1 = time.perf_counter()
        with torch.inference_mode():
            for _ in range(T):
                mean = fast_forward(actor, torch.from_numpy(obs_np))
                (mean + log_std.exp() * torch.randn_like(mean)).numpy()
        t2 = time.perf_counter()
        with torch.inference_mode():
            critic(data["obs"]).squeeze(-1).numpy()
            logp_of(data["obs"], data["act"]).numpy()
        t3 = time.perf_counter()
        for _ in range(cfg["epochs"]):
            for idx in torch.randperm(B).split(mb_size):
                obs, adv = data["obs"][idx], data["adv"][idx]
                adv = (adv - adv.mean()) / (adv.std() + 1e-8)
                ratio = (logp_of(obs, data["act"][idx]) - data["logp"][idx]).exp()
                pg_loss = torch.max(-adv * ratio, -adv * ratio.clamp(0.8, 1.2)).mean()
                v_new, v_old, ret = critic(obs).squeeze(-1), data["val"][idx], data["ret"][idx]
                v_clip = v_old + (v_new - v_old).clamp(-0.2, 0.2)
                v_loss = 0.5 * torch.max((v_new - ret).pow(2), (v_clip - ret).pow(2)).mean()
                loss = pg_loss + 0.5 * v_loss
                optimizer.zero_grad(set_to_none=False)
                loss.backward()
                nn.utils.clip_grad_norm_(params, 0.5)
                optimizer.step()
        t4 = time.perf_counter()
        for key, dt in zip(out, (t1 - t0, t2 - t1, t3 - t2, t4 - t3)):
            out[key].append(dt)
    vec_env.close()
    out["rollout_s"] = [
        a + b + c for a, b, c in zip(out["env_step_s"], out["actor_fwd_s"], out["batched_fwd_s"])
    ]
    out["update_s"] = list(out["train_s"])
    return out


def _worker_trpo_ours(cfg: dict) -> dict:
    from algos import trpo

    return _ours_timed(trpo, cfg, **TRPO_SETTINGS)


def _worker_trpo_sb3(cfg: dict) -> dict:
    from sb3_contrib import TRPO

    s = TRPO_SETTINGS
    return _sb3_timed_learn(
        TRPO,
        cfg,
        learning_rate=s["critic_learning_rate"],
        batch_size=s["critic_batch_size"],
        cg_max_steps=s["cg_max_steps"],
        cg_damping=s["cg_damping"],
        line_search_shrinking_factor=s["line_search_shrinking_factor"],
        line_search_max_iter=s["line_search_max_iter"],
        n_critic_updates=s["n_critic_updates"],
        target_kl=s["target_kl"],
    )


# RL Zoo's MuJoCo TRPO settings, given identically to both (algos/trpo.py's defaults)
TRPO_SETTINGS = dict(
    gamma=0.99,
    gae_lambda=0.95,
    target_kl=0.01,
    cg_max_steps=25,
    cg_damping=0.1,
    line_search_shrinking_factor=0.8,
    line_search_max_iter=10,
    critic_learning_rate=1e-3,
    n_critic_updates=20,
    critic_batch_size=128,
    norm_adv=True,
    norm_obs=True,
    norm_reward=True,
    hidden_sizes=(64, 64),
)
WORKERS = {
    "ppo": {"ours": _worker_ours, "sb3": _worker_sb3, "floor": _worker_floor},
    "trpo": {"ours": _worker_trpo_ours, "sb3": _worker_trpo_sb3},
}


# --------------------------------------------------------------------------------------------
# driver


def _run_worker(contender: str, cfg: dict) -> tuple[dict, float]:
    """Run one contender in a fresh interpreter; return (per-iteration seconds, process wall)."""
    with tempfile.TemporaryDirectory(prefix="bench_ppo_") as tmp:
        result = Path(tmp) / "result.json"
        cmd = [
            sys.executable,
            str(Path(__file__).resolve()),
            "--worker",
            contender,
            "--worker-config",
            json.dumps(cfg),
            "--worker-result",
            str(result),
        ]
        root = str(Path(__file__).resolve().parents[1])  # algos/, controlrl/, envs/ importable
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])),
        }
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp, env=env)
        wall = time.perf_counter() - t0
        if proc.returncode != 0 or not result.exists():
            tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-15:])
            raise RuntimeError(
                f"{contender} (num_envs {cfg['num_envs']}) failed (exit {proc.returncode}):\n{tail}"
            )
        return json.loads(result.read_text()), wall


def _row(contender: str, cfg: dict, repeat: int, slot: int, times: dict, wall: float) -> dict:
    """Mean seconds per timed iteration (warm-up dropped) and steps/s over the timed ones."""
    w = cfg["warmup"]
    timed = {k: v[w:] for k, v in times.items()}
    iters = len(timed["rollout_s"])
    iter_total = sum(timed["rollout_s"]) + sum(timed["update_s"])
    steps = cfg["num_steps"] * cfg["num_envs"]
    row = {
        "algo": cfg["algo"],
        "contender": contender,
        "num_envs": cfg["num_envs"],
        "repeat": repeat,
        "slot": slot,
        "env_id": cfg["env_id"],
        "num_steps": cfg["num_steps"],
        "num_minibatches": cfg["num_minibatches"],
        "epochs": cfg["epochs"],
        "threads": cfg["threads"],
        "iterations": iters,
        "steps_per_iter": steps,
        "sps": steps * iters / iter_total,
        "iter_s": iter_total / iters,
        "process_s": wall,
    }
    for key, values in timed.items():
        row[key] = sum(values) / iters
    return row


def _med_range(values: list[float], fmt: str) -> str:
    if not values:
        return "n/a"
    med = format(statistics.median(values), fmt)
    if len(values) == 1:
        return med
    return f"{med} ({format(min(values), fmt)}-{format(max(values), fmt)})"


def summarize(rows: list[dict]) -> str:
    """Markdown table: per num_envs, steps/s, ours/SB3 ratio, overhead ratio and components."""
    by = {(r["contender"], int(r["num_envs"]), int(r["repeat"])): r for r in rows}
    lines = [
        "| envs | ours steps/s | SB3 steps/s | ours/SB3 | floor steps/s | overhead ours/floor "
        "| ours rollout, update s/iter | floor env, actor fwd, batched fwd, update s/iter |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for n in sorted({int(r["num_envs"]) for r in rows}):
        reps = sorted({k[2] for k in by if k[1] == n})

        def col(contender: str, key: str, reps=reps, n=n) -> list[float]:
            return [float(by[(contender, n, r)][key]) for r in reps if (contender, n, r) in by]

        speed = [
            by[("ours", n, r)]["sps"] / by[("sb3", n, r)]["sps"]
            for r in reps
            if ("ours", n, r) in by and ("sb3", n, r) in by
        ]
        overhead = [
            by[("ours", n, r)]["iter_s"] / by[("floor", n, r)]["iter_s"]
            for r in reps
            if ("ours", n, r) in by and ("floor", n, r) in by
        ]
        med = {
            k: statistics.median(col("floor", k)) if col("floor", k) else float("nan")
            for k in ("env_step_s", "actor_fwd_s", "batched_fwd_s", "train_s")
        }
        ours_ru = [
            statistics.median(col("ours", k)) if col("ours", k) else float("nan")
            for k in ("rollout_s", "update_s")
        ]
        lines.append(
            f"| {n} | {_med_range(col('ours', 'sps'), ',.0f')} "
            f"| {_med_range(col('sb3', 'sps'), ',.0f')} | {_med_range(speed, '.2f')} "
            f"| {_med_range(col('floor', 'sps'), ',.0f')} | {_med_range(overhead, '.2f')} "
            f"| {ours_ru[0]:.2f}, {ours_ru[1]:.2f} "
            f"| {med['env_step_s']:.2f}, {med['actor_fwd_s']:.2f}, {med['batched_fwd_s']:.3f}, "
            f"{med['train_s']:.2f} |"
        )
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--out", default="paper_figures/out/bench_ppo.csv", help="CSV to write")
    p.add_argument(
        "--envs-list",
        default=None,
        help="comma-separated num_envs values (default 1,8; 1 with --toy)",
    )
    p.add_argument(
        "--iterations",
        type=int,
        default=None,
        help="timed iterations per process (default 3; 1 with --toy)",
    )
    p.add_argument("--repeats", type=int, default=None, help="repeats (default 3; 1 with --toy)")
    p.add_argument("--warmup", type=int, default=1, help="leading iterations dropped (default 1)")
    p.add_argument("--threads", type=int, default=1, help="torch threads of every contender")
    p.add_argument(
        "--num-steps",
        type=int,
        default=None,
        help="steps per env per iteration (default 2048; 256 with --toy)",
    )
    p.add_argument("--num-minibatches", type=int, default=32, help="minibatches per epoch")
    p.add_argument("--epochs", type=int, default=10, help="epochs per iteration")
    p.add_argument("--env-id", default="HalfCheetah-v5")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument(
        "--contenders", default=",".join(CONTENDERS), help="subset of ours,sb3,floor (default all)"
    )
    p.add_argument(
        "--algo",
        choices=sorted(WORKERS),
        default="ppo",
        help="ppo: ours vs SB3 PPO vs the floor; trpo: ours vs sb3-contrib TRPO",
    )
    p.add_argument("--toy", action="store_true", help="tiny run for tests (~30 s)")
    p.add_argument("--worker", choices=CONTENDERS, help=argparse.SUPPRESS)
    p.add_argument("--worker-config", help=argparse.SUPPRESS)
    p.add_argument("--worker-result", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        return args
    toy = args.toy
    default_envs = {"ppo": "1,8", "trpo": "2,8"}[args.algo]
    toy_envs = {"ppo": "1", "trpo": "2"}[args.algo]
    args.envs_list = [
        int(x) for x in (args.envs_list or (toy_envs if toy else default_envs)).split(",")
    ]
    if args.contenders == ",".join(CONTENDERS) and args.algo == "trpo":
        args.contenders = "ours,sb3"
    args.iterations = args.iterations if args.iterations is not None else (1 if toy else 3)
    args.repeats = args.repeats if args.repeats is not None else (1 if toy else 3)
    full_steps = {"ppo": 2048, "trpo": 1024}[args.algo]
    args.num_steps = args.num_steps if args.num_steps is not None else (256 if toy else full_steps)
    args.contenders = [c.strip() for c in args.contenders.split(",") if c.strip()]
    for name in ("iterations", "repeats", "threads", "num_steps", "num_minibatches", "epochs"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if args.warmup < 0:
        p.error(f"--warmup must be >= 0, got {args.warmup}")
    if any(n < 1 for n in args.envs_list):
        p.error(f"--envs-list values must be >= 1, got {args.envs_list}")
    bad = [c for c in args.contenders if c not in WORKERS[args.algo]]
    if bad or not args.contenders:
        p.error(f"--contenders must be a subset of {','.join(CONTENDERS)}, got {bad or 'none'}")
    for n in args.envs_list:
        if args.num_steps * n % args.num_minibatches:
            p.error(
                f"--num-minibatches {args.num_minibatches} must divide num_steps * num_envs "
                f"= {args.num_steps * n}"
            )
    if "sb3" in args.contenders:
        import importlib.util

        if importlib.util.find_spec("stable_baselines3") is None:
            p.error(
                "stable-baselines3 is not installed (pip install -e '.[sb3]'), "
                "or leave it out with --contenders ours,floor"
            )
    return args


def main(argv: list[str] | None = None) -> list[dict]:
    args = parse_args(argv)
    if args.worker:
        cfg = json.loads(args.worker_config)
        Path(args.worker_result).write_text(json.dumps(WORKERS[cfg["algo"]][args.worker](cfg)))
        return []
    command = "python " + shlex.join(sys.argv if argv is None else [__file__, *argv])
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    rows: list[dict] = []
    t_start = time.perf_counter()
    with out.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        writer.writeheader()
        for repeat in range(args.repeats):
            for n in args.envs_list:
                cfg = {
                    "algo": args.algo,
                    "env_id": args.env_id,
                    "num_envs": n,
                    "num_steps": args.num_steps,
                    "num_minibatches": args.num_minibatches,
                    "epochs": args.epochs,
                    "threads": args.threads,
                    "seed": args.seed,
                    "warmup": args.warmup,
                    "iterations": args.iterations,
                }
                k = repeat % len(args.contenders)  # rotate the order from repeat to repeat
                for slot, contender in enumerate(args.contenders[k:] + args.contenders[:k]):
                    times, wall = _run_worker(contender, cfg)
                    row = _row(contender, cfg, repeat, slot, times, wall)
                    rows.append(row)
                    writer.writerow(row)
                    f.flush()
                    print(
                        f"[{time.perf_counter() - t_start:6.0f} s] repeat {repeat} envs {n} "
                        f"{contender:5s} {row['sps']:8.0f} steps/s  "
                        f"(rollout {row['rollout_s']:.2f} s, update {row['update_s']:.2f} s "
                        f"per iteration)",
                        flush=True,
                    )
    print()
    print(
        f"{args.algo.upper()} training throughput, {args.env_id}, num_steps {args.num_steps} "
        f"per env, {args.num_minibatches} minibatches x {args.epochs} epochs (PPO only), threads "
        f"{args.threads}, {args.iterations} timed iterations (+{args.warmup} warm-up) x "
        f"{args.repeats} repeats; median (min-max) over repeats; ratios paired per repeat.\n"
    )
    print(summarize(rows))
    print(f"\ncommand: {command}\nCSV: {out}")
    return rows


if __name__ == "__main__":
    main()
