"""Training time per iteration: our PPO, SPO and BPO side by side, PPO and TRPO against
Stable-Baselines3, and our PPO's overhead over the floor.

    python paper_figures/bench_ppo.py --out paper_figures/out/bench_ppo.csv --envs-list 1,8 \\
        --iterations 3 --repeats 3 --algos ppo,spo,bpo

Contenders, each in its own fresh process (controlrl.bench), the order rotated in every repeat:
ours (algos/<algo>.py's main; iteration times from its timing.csv), sb3 (stable_baselines3.PPO
or sb3_contrib.TRPO on DummyVecEnv + VecNormalize, timed by a callback) and floor (PPO's work
with nothing around it: a plain-torch actor forward and one env step per step, the batched value
and log-prob passes, the same update on random data; env steps and actor forwards also timed in
separate loops). PPO, SPO and BPO get vwxyzjn/cleanrl cleanrl/ppo_continuous_action.py's settings
(ours_kwargs, given to SB3's PPO too), each keeping its own objective's constants; TRPO gets RL
Zoo's MuJoCo settings (DLR-RM/rl-baselines3-zoo hyperparams/trpo.yml: TRPO_SETTINGS) on both
sides. The first --warmup iterations of every process are dropped; ratios are paired per repeat.
Writes one CSV row per process to --out and prints the summary table.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import math
import time
from pathlib import Path

from controlrl import bench
from paper_figures.lab import scripts

ALGOS = ("ppo", "spo", "bpo", "trpo")
CONTENDERS = ("ours", "sb3", "floor")
AVAILABLE = {"ppo": CONTENDERS, "trpo": ("ours", "sb3"), "spo": ("ours",), "bpo": ("ours",)}
CONFIG = ("env_id", "num_envs", "num_steps", "num_minibatches", "epochs", "threads")
# floor components: the interleaved step loop (what its rollout counts), and the same env steps
# and actor forwards timed in separate loops (cheaper: no data dependency, warm caches)
TIMES = ("rollout_s", "update_s", "step_loop_s", "batched_fwd_s", "train_s", "env_step_s")
TIMES += ("actor_fwd_s",)
FIELDS = [  # CSV columns; 'status' and controlrl.bench's 'command' come last
    *"algo contender num_envs repeat slot env_id num_steps num_minibatches epochs".split(),
    *"threads iterations steps_per_iter sps iter_s".split(),
    *TIMES,
    *"process_s status".split(),
]


def ours_kwargs(algo: str, minibatches: int, epochs: int) -> dict:
    """Args of our algorithm: CleanRL's PPO settings for ppo, spo, bpo; RL Zoo's for trpo."""
    if algo == "trpo":
        return TRPO_SETTINGS
    same = dict(num_minibatches=minibatches, update_epochs=epochs, hidden_sizes=(64, 64))
    same |= dict(learning_rate=3e-4, anneal_lr=False, gamma=0.99, gae_lambda=0.95, ent_coef=0.0)
    same |= dict(vf_coef=0.5, max_grad_norm=0.5, norm_obs=True, norm_reward=True)
    own = {
        "ppo": dict(norm_adv=True, clip_coef=0.2, clip_vloss=True, target_kl=None),
        "spo": dict(norm_adv=True, clip_vloss=True, critic_hidden_sizes=(64, 64)),
        "bpo": dict(activation="tanh"),  # its critic trunk takes hidden_sizes too
    }
    return same | own[algo]


# RL Zoo's MuJoCo TRPO settings, given identically to both (algos/trpo.py's defaults)
TRPO_SETTINGS = dict(gamma=0.99, gae_lambda=0.95, max_kl=0.01, cg_max_steps=25, cg_damping=0.1)
TRPO_SETTINGS |= dict(line_search_shrinking_factor=0.8, line_search_max_iter=10)
TRPO_SETTINGS |= dict(critic_learning_rate=1e-3, n_critic_updates=20, critic_batch_size=128)
TRPO_SETTINGS |= dict(norm_adv=True, norm_obs=True, norm_reward=True, hidden_sizes=(64, 64))


# --------------------------------------------------------------------------------------------
# workers: each runs in its own process (controlrl.bench) and returns per-iteration seconds


def work(algo: str, contender: str, **cfg) -> dict:
    """Train one contender for warmup + iterations iterations; its per-iteration seconds."""
    return {"ours": _ours, "sb3": _sb3, "floor": _floor}[contender](algo, cfg)


def _ours(algo: str, cfg: dict) -> dict:
    module = importlib.import_module(f"algos.{algo}")
    T, N = cfg["num_steps"], cfg["num_envs"]
    kwargs = ours_kwargs(algo, cfg["num_minibatches"], cfg["epochs"])
    kwargs |= dict(env_id=cfg["env_id"], seed=cfg["seed"], num_envs=N, num_steps=T)
    kwargs |= dict(total_timesteps=(cfg["warmup"] + cfg["iterations"]) * T * N)
    with bench.trained(module, torch_threads=cfg["threads"], **kwargs) as (_, rows, _):
        pass
    return {k: [float(r[f"time/{k}"]) for r in rows] for k in ("rollout_s", "update_s")}


def _sb3(algo: str, cfg: dict) -> dict:
    """SB3's model as paper_figures/peers/sb3_ppo.py makes it, an iteration timer callback."""
    import torch
    from stable_baselines3.common.callbacks import BaseCallback

    from paper_figures.peers import sb3_ppo

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

    if algo == "ppo":
        from stable_baselines3 import PPO as cls

        kwargs = sb3_ppo.PPO_SETTINGS | dict(n_epochs=cfg["epochs"], clip_range_vf=0.2)
        kwargs["batch_size"] = T * N // cfg["num_minibatches"]
    else:
        from sb3_contrib import TRPO as cls

        s = TRPO_SETTINGS  # sb3-contrib's target_kl is the trust-region radius, our max_kl
        same = "cg_max_steps cg_damping line_search_shrinking_factor line_search_max_iter"
        kwargs = {k: s[k] for k in [*same.split(), "n_critic_updates"]}
        kwargs |= dict(learning_rate=s["critic_learning_rate"], target_kl=s["max_kl"])
        kwargs |= dict(batch_size=s["critic_batch_size"])
    model = sb3_ppo.make(cls, cfg["env_id"], N, cfg["seed"], n_steps=T, **kwargs)
    model.learn(total_timesteps=n_iter * T * N, callback=IterationTimer(), progress_bar=False)
    model.get_env().close()
    assert len(ends) == n_iter and len(starts) == n_iter + 1, (len(starts), len(ends))
    return {
        "rollout_s": [e - s for s, e in zip(starts, ends)],
        "update_s": [s - e for e, s in zip(ends, starts[1:])],
    }


def _floor(algo: str, cfg: dict) -> dict:
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

    def net(out: int) -> nn.Sequential:
        return nn.Sequential(
            nn.Linear(obs_dim, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, out)
        )

    actor, critic = net(act_dim), net(1)
    log_std = nn.Parameter(torch.zeros(act_dim))
    # the floor uses the fastest plain-torch form too: one flat parameter tensor, fused Adam,
    # and Module-call-free forwards on the per-step path
    params = [flatten_parameters(actor, nn.ParameterList([log_std]), critic)]
    optimizer = torch.optim.Adam(params, lr=3e-4, eps=1e-5, fused=True)
    half_log_2pi = 0.5 * math.log(2 * math.pi)

    def logp_of(obs: torch.Tensor, act: torch.Tensor) -> torch.Tensor:
        z = (act - actor(obs)) * torch.exp(-log_std)
        return (-0.5 * z.pow(2) - log_std - half_log_2pi).sum(-1)

    B = T * N
    data = {k: torch.randn(B, d) for k, d in (("obs", obs_dim), ("act", act_dim))}
    data.update({k: torch.randn(B) for k in ("logp", "adv", "ret", "val")})
    obs_np = rng.standard_normal((N, obs_dim)).astype(np.float32)
    obs, _ = vec_env.reset(seed=cfg["seed"])
    out: dict[str, list[float]] = {k: [] for k in TIMES[2:]}
    for _ in range(cfg["warmup"] + cfg["iterations"]):
        t0 = time.perf_counter()
        with torch.inference_mode():
            for _ in range(T):
                mean = fast_forward(actor, torch.from_numpy(obs.astype(np.float32, copy=False)))
                action = (mean + log_std.exp() * torch.randn_like(mean)).numpy()
                obs = vec_env.step(np.clip(action, space.low, space.high))[0]
        t1 = time.perf_counter()
        with torch.inference_mode():
            critic(data["obs"]).squeeze(-1).numpy()
            logp_of(data["obs"], data["act"]).numpy()
        t2 = time.perf_counter()
        for _ in range(cfg["epochs"]):
            for idx in torch.randperm(B).split(B // cfg["num_minibatches"]):
                mb_obs, adv = data["obs"][idx], data["adv"][idx]
                adv = (adv - adv.mean()) / (adv.std() + 1e-8)
                ratio = (logp_of(mb_obs, data["act"][idx]) - data["logp"][idx]).exp()
                pg_loss = torch.max(-adv * ratio, -adv * ratio.clamp(0.8, 1.2)).mean()
                v_new, v_old, ret = critic(mb_obs).squeeze(-1), data["val"][idx], data["ret"][idx]
                v_clip = v_old + (v_new - v_old).clamp(-0.2, 0.2)
                v_loss = 0.5 * torch.max((v_new - ret).pow(2), (v_clip - ret).pow(2)).mean()
                optimizer.zero_grad(set_to_none=False)
                (pg_loss + 0.5 * v_loss).backward()
                nn.utils.clip_grad_norm_(params, 0.5)
                optimizer.step()
        t3 = time.perf_counter()
        actions = rng.uniform(space.low, space.high, (T, N, act_dim)).astype(np.float32)
        for t in range(T):
            vec_env.step(actions[t])
        t4 = time.perf_counter()
        with torch.inference_mode():
            for _ in range(T):
                mean = fast_forward(actor, torch.from_numpy(obs_np))
                (mean + log_std.exp() * torch.randn_like(mean)).numpy()
        t5 = time.perf_counter()
        for key, dt in zip(out, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4)):
            out[key].append(dt)
    vec_env.close()
    out["rollout_s"] = [a + b for a, b in zip(out["step_loop_s"], out["batched_fwd_s"])]
    out["update_s"] = list(out["train_s"])
    return out


# --------------------------------------------------------------------------------------------
# what is compared, rows and summary


def contenders(args: argparse.Namespace, num_envs: int) -> list[bench.Contender]:
    """Every (algo, contender) pair asked for, at `num_envs` envs."""
    names = ("env_id", "num_steps", "num_minibatches", "epochs", "threads", "seed", "warmup")
    cfg = {k: getattr(args, k) for k in (*names, "iterations")}
    cfg["num_envs"] = num_envs
    worker = f"{Path(__file__).resolve()}:work"
    return [
        bench.Contender(f"{a}-{c}", worker, {"algo": a, "contender": c, **cfg}, args.timeout)
        for a in args.algos
        for c in args.contenders
        if c in AVAILABLE[a]
    ]


def row(run: bench.Run, warmup: int) -> dict:
    """Mean seconds per timed iteration (warm-up dropped) and steps/s over the timed ones."""
    cfg = run.contender.config
    steps = cfg["num_steps"] * cfg["num_envs"]
    out = {k: cfg[k] for k in ("algo", "contender", *CONFIG)} | {"steps_per_iter": steps}
    out |= dict(repeat=run.repeat, slot=run.slot, process_s=run.wall_s, status=run.status)
    if run.ok:
        timed = {k: v[warmup:] for k, v in run.result.items()}
        iters = len(timed["rollout_s"])
        total = sum(timed["rollout_s"]) + sum(timed["update_s"])
        out |= {"iterations": iters, "sps": steps * iters / total, "iter_s": total / iters}
        out |= {k: sum(v) / iters for k, v in timed.items()}
    return {k: out.get(k, "") for k in FIELDS}


def summarize(runs: list[bench.Run], warmup: int) -> str:
    """Markdown table per num_envs and algo: s/iter, steps/s, paired ratios; floor components."""
    header = "envs|algo|ours s/iter|ours steps/s|ours rollout, update s/iter|time vs ppo"
    header += "|SB3 steps/s|speed ours/SB3|floor steps/s|time ours/floor"
    lines, notes, mr = [], [], bench.median_range
    for n in sorted({r.contender.config["num_envs"] for r in runs}):
        at_n = [r for r in runs if r.contender.config["num_envs"] == n]

        def col(name: str, key: str, at_n=at_n) -> list[float]:
            return [row(r, warmup)[key] for r in at_n if r.name == name and r.ok]

        def ratio(a: str, b: str, key: str, at_n=at_n) -> list[float]:
            return bench.paired_ratios(at_n, a, b, lambda run: row(run, warmup)[key])

        for algo in dict.fromkeys(r.contender.config["algo"] for r in at_n):
            ours = f"{algo}-ours"
            mid = [mr(col(ours, k), ".2f") for k in ("rollout_s", "update_s")]
            vs_ppo = "-" if algo == "ppo" else mr(ratio(ours, "ppo-ours", "iter_s"))
            sb3, floor = f"{algo}-sb3", f"{algo}-floor"
            lines.append([str(n), algo, mr(col(ours, "iter_s")), mr(col(ours, "sps"), ",.0f")])
            lines[-1] += [", ".join(mid), vs_ppo, mr(col(sb3, "sps"), ",.0f")]
            lines[-1] += [mr(ratio(ours, sb3, "sps")), mr(col(floor, "sps"), ",.0f")]
            lines[-1].append(mr(ratio(ours, floor, "iter_s")))
        if col("ppo-floor", "sps"):
            parts = ", ".join(mr(col("ppo-floor", k), ".3f") for k in TIMES[2:])
            notes.append(
                f"floor at {n} envs, step loop, batched fwd, update; split env steps, actor "
                f"fwds: {parts} s"
            )
    for r in runs:
        if not r.ok:
            envs = r.contender.config["num_envs"]
            notes.append(f"FAILED {r.name} at {envs} envs, repeat {r.repeat}: {r.status}")
    return "\n".join(bench.table(header.split("|"), lines) + notes)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = bench.parser(__doc__, "paper_figures/out/bench_ppo.csv", names=CONTENDERS)
    p.add_argument("--envs-list", help="comma-separated num_envs (default 1,8; 1 with --toy)")
    p.add_argument("--iterations", type=int, help="timed iterations per process (3; 1 --toy)")
    p.add_argument("--repeats", type=int, help="repeats (default 3; 1 with --toy)")
    p.add_argument("--warmup", type=int, default=1, help="leading iterations dropped (default 1)")
    p.add_argument("--num-steps", type=int, help="steps per env per iteration (2048; 256 --toy)")
    p.add_argument("--num-minibatches", type=int, default=32, help="minibatches per epoch")
    p.add_argument("--epochs", type=int, default=10, help="epochs per iteration")
    p.add_argument("--env-id", default="HalfCheetah-v5")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--algos", default="ppo,spo,bpo", help=f"subset of {','.join(ALGOS)}")
    p.add_argument("--algo", choices=("ppo", "trpo"), help="one algorithm: same as --algos ALGO")
    args = p.parse_args(argv)
    args.algos = bench.subset(p, args.algo or args.algos, ALGOS, "--algos")
    trpo_only = args.algos == ["trpo"]  # RL Zoo's TRPO runs 2 envs x 1024 steps
    envs_list = args.envs_list or ("2" if trpo_only else "1") + ("" if args.toy else ",8")
    args.envs_list = bench.ints(p, envs_list, "--envs-list", 1)
    full = dict(iterations=3, repeats=3, num_steps=1024 if trpo_only else 2048)
    bench.fill(args, full, dict(iterations=1, repeats=1, num_steps=256))
    args.contenders = bench.subset(p, args.contenders, CONTENDERS, "--contenders")
    scripts.at_least(
        p, args, ("iterations", "repeats", "threads", "num_steps", "num_minibatches", "epochs")
    )
    scripts.at_least(p, args, ("warmup",), 0)
    for n in args.envs_list:
        if args.num_steps * n % args.num_minibatches:
            batch = args.num_steps * n
            p.error(f"--num-minibatches {args.num_minibatches} must divide {batch} (steps x envs)")
    needs = {"ppo": "stable_baselines3", "trpo": "sb3_contrib"}
    for algo, package in needs.items():
        if "sb3" in args.contenders and algo in args.algos:
            if importlib.util.find_spec(package) is None:
                hint = "(pip install -e '.[sb3]'), or leave sb3 out: --contenders ours,floor"
                p.error(f"{package} is not installed {hint}")
    return args


def main(argv: list[str] | None = None) -> list[bench.Run]:
    args = parse_args(argv)
    command = bench.command_line("paper_figures/bench_ppo.py", argv)

    def describe(r: dict) -> str:
        return (f"at {r['num_envs']} envs: {r['sps']:8.0f} steps/s (rollout {r['rollout_s']:.2f} "
                f"s, update {r['update_s']:.2f} s per iteration)")  # fmt: skip

    report = bench.Recorder(args.out, command, lambda run: row(run, args.warmup), describe)
    for repeat in range(args.repeats):
        for n in args.envs_list:
            bench.run_repeat(contenders(args, n), repeat, on_run=report)
    bench.report(summarize(report.runs, args.warmup), args.repeats, command, args.out)
    return report.runs


if __name__ == "__main__":
    main()
