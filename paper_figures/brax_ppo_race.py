"""Wall-clock race on a Brax task: Brax's own PPO trainer (google/brax
brax/training/agents/ppo/train.py) vs our torch PPO (algos/ppo.py on brax:<task>, 'ours') and our
JAX PPO (algos/ppo_brax.py, 'ours_jax'), at the same PPO settings (brax_train, our_flags: a brax
training step collects one unroll per env, our rollout, split into as many minibatches), on
inverted_pendulum's positional pipeline by default (on 'spring' not even a PD controller keeps
the pole up: brax_pipeline_check.py). Per seed (a repeat of controlrl.bench: each trainer in a
fresh process, the order rotated), the time of the first deterministic evaluation at or above
--target, in two clocks:

- wall: seconds since the process was launched, everything included (Brax's progress_fn stamps
  each evaluation; for ours the parent stamps each new row of <run_dir>/metrics.csv);
- train: training compute only (ours: rollout + update seconds of timing.csv; Brax: its
  'training/walltime'), less the JAX trainers' first-epoch compile (its excess over the median
  of the later epochs).

Each trainer has its own JAX compilation cache, emptied before every run (cold compiles). A
crashed or timed-out trainer leaves a row with its status.

Not matched (one trainer has no switch for them): brax minibatches whole env unrolls and
recomputes GAE per minibatch with the current value network (ours: once per rollout, single-step
minibatches); brax masks time limits, ours bootstraps them; brax updates its observation
statistics once per rollout without clipping (ours: every step, clipped to [-10, 10]); brax does
not clip actions to [-1, 1]; brax's autoreset replays each env's first initial state; Adam eps
1e-8 (brax) vs 1e-5 (ours, unless --adam-eps); LeCun-uniform vs orthogonal initialisation; our
evaluation env is a separate batch; ours writes diagnostics every iteration and a checkpoint.
brax 0.14.2 calls jax.device_put_replicated, which jax 0.10 removed: the brax extra pins jax
0.9.2, so brax's trainer runs as released (on JAX's older pmap path: see brax_worker).

    python paper_figures/brax_ppo_race.py                      # 3 seeds x 3 trainers
    python paper_figures/brax_ppo_race.py --toy --out runs/toy/brax_ppo_race   # tiny budget

Writes brax_ppo_race.csv (per trainer and seed: time to target in both clocks, training steps/s,
their ratios to Brax's), brax_ppo_race_curves.csv and brax_ppo_race.png into --out.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

from controlrl import bench
from controlrl.cli import ArgumentParser
from paper_figures.lab import scripts

ROOT = Path(__file__).resolve().parents[1]
TRAINERS = ("brax", "ours", "ours_jax")  # ours_jax: algos/ppo_brax.py (JAX rollout + update)
# the PPO settings given to every trainer, their defaults: FLAGS also as flags of the same name
# of algos/ppo.py and algos/ppo_brax.py
FLAGS = dict(num_envs=64, num_steps=32, num_minibatches=32, update_epochs=10, learning_rate=3e-4)
FLAGS |= dict(gamma=0.99, gae_lambda=0.95, clip_coef=0.2, ent_coef=0.0)
SHARED = dict(episode_length=1000, **FLAGS, reward_scale=1.0, eval_episodes=16)
HELP = {"num_steps": "ours --num-steps = brax unroll", "reward_scale": "brax reward_scaling"}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--env", default="inverted_pendulum", help="brax env name")
    p.add_argument("--pipeline", default="positional", help="brax pipeline (spring cannot balance)")
    p.add_argument("--target", type=float, default=900.0, help="evaluation return to reach")
    p.add_argument("--seeds", default="1,2,3", help="comma-separated seeds")
    for name, default in SHARED.items():
        flag = f"--{name.replace('_', '-')}"
        p.add_argument(flag, type=type(default), default=default, help=HELP.get(name))
    p.add_argument("--max-grad-norm", type=float, default=0.5, help="0: no clipping (brax None)")
    p.add_argument("--hidden-sizes", default="64,64", help="policy hidden layers")
    p.add_argument("--critic-hidden-sizes", default="64,64", help="value hidden layers")
    p.add_argument(
        "--activation", choices=("tanh", "swish"), default="tanh", help="swish: ours_jax"
    )
    what = "ours' Adam epsilon (brax's trainer: optax's 1e-8, not settable)"
    p.add_argument("--adam-eps", type=float, default=1e-5, help=what)
    p.add_argument("--total-timesteps", type=int, default=100_000, help="budget per run")
    p.add_argument("--num-evals", type=int, default=20, help="brax num_evals (incl. step 0)")
    p.add_argument("--out", type=Path, default=ROOT / "paper_figures" / "out")
    what = "run dirs and JAX caches (default: runs/brax_ppo_race, or <out>/brax_race with --toy)"
    p.add_argument("--work-dir", type=Path, default=None, help=what)
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds per trainer process")
    what = f"comma-separated subset of {', '.join(TRAINERS)} (brax is always run)"
    p.add_argument("--trainers", default=",".join(TRAINERS), help=what)
    p.add_argument("--toy", action="store_true", help="tiny budget, one seed (for the test)")
    args = p.parse_args(argv)
    if args.toy:
        args.seeds, args.num_envs, args.num_steps = "1", 16, 16
        args.num_minibatches, args.update_epochs = 4, 2
        args.total_timesteps, args.num_evals, args.eval_episodes = 2048, 3, 2
    if args.num_envs % args.num_minibatches:
        p.error("--num-envs must be divisible by --num-minibatches (brax minibatches whole envs)")
    if args.num_evals < 2:
        p.error("--num-evals must be >= 2")
    for name in ("hidden_sizes", "critic_hidden_sizes"):
        flag = f"--{name.replace('_', '-')}"
        setattr(args, name, tuple(bench.ints(p, getattr(args, name), flag, 1)))
    chosen = {t.strip() for t in args.trainers.split(",") if t.strip()}
    if not chosen <= set(TRAINERS):
        p.error(f"--trainers must name only {', '.join(TRAINERS)}, got {args.trainers}")
    args.trainers = tuple(t for t in TRAINERS if t in chosen | {"brax"})
    defaults = args.activation == "tanh" and args.adam_eps == 1e-5 and args.reward_scale == 1.0
    if "ours" in args.trainers and not (defaults and args.max_grad_norm):
        p.error(
            "--activation swish, --adam-eps, --reward-scale and --max-grad-norm 0 need"
            " --trainers without ours (ppo.py lacks them)"
        )
    default_work = args.out / "brax_race" if args.toy else ROOT / "runs" / "brax_ppo_race"
    args.work_dir = (args.work_dir or default_work).resolve()
    return args


def schedule(args) -> tuple[int, int]:
    """(eval_every, total steps) as brax's trainer will run them: num_evals - 1 epochs of
    ceil(total / ((num_evals - 1) * batch)) training steps of num_envs * num_steps env steps."""
    batch = args.num_envs * args.num_steps
    per_epoch = math.ceil(args.total_timesteps / ((args.num_evals - 1) * batch))
    eval_every = per_epoch * batch
    return eval_every, eval_every * (args.num_evals - 1)


# ---------------------------------------------------------------------------------------------
# brax worker (runs in its own process, started by controlrl.bench)


def brax_train(args) -> dict:
    """brax.training's ppo.train keyword arguments for these settings (the docstring's matching),
    the env and its pipeline, and `network`: brax_worker's arguments but seed, budget and log."""
    network = dict(hidden_sizes=list(args.hidden_sizes), activation=args.activation)
    network["critic_hidden_sizes"] = list(args.critic_hidden_sizes)
    return dict(
        env=args.env, pipeline=args.pipeline, network=network,
        episode_length=args.episode_length, num_envs=args.num_envs, unroll_length=args.num_steps,
        batch_size=args.num_envs // args.num_minibatches, num_minibatches=args.num_minibatches,
        num_updates_per_batch=args.update_epochs, learning_rate=args.learning_rate,
        entropy_cost=args.ent_coef, discounting=args.gamma, gae_lambda=args.gae_lambda,
        clipping_epsilon=args.clip_coef, max_grad_norm=args.max_grad_norm or None,
        normalize_advantage=True, vf_loss_coefficient=0.5, reward_scaling=args.reward_scale,
        num_evals=args.num_evals, num_eval_envs=args.eval_episodes,
    )  # fmt: skip


def brax_worker(seed: int, total: int, log: str, env: str, pipeline: str,
                network: dict | None = None, **train) -> dict:  # fmt: skip
    """Brax's PPO trainer (brax.training.agents.ppo) on `env`, `train` its keyword arguments,
    `network` the sizes and activation of a Gaussian policy (log-std from 1) and of the value net
    (None: make_ppo_networks' defaults), observations normalised, evaluation deterministic; one
    JSON line per evaluation appended to `log`."""
    import functools

    from envs.brax import configured_jax

    jax = configured_jax()  # the cache of CONTROLRL_JAX_CACHE, as for ours
    # jax 0.9.2 runs pmap through shard_map by default, and its device_put_replicated names the
    # mesh axis unlike brax's pmap axis, so brax's training epoch compiles again in its second
    # epoch (1.1-1.2 s on brax's train clock, measured); on the older pmap path (a config option
    # of this JAX) it compiles once and steps as fast (paper_figures/README.md, the JAX stack)
    jax.config.update("jax_pmap_shmap_merge", False)
    from brax import envs as brax_envs
    from brax.training.agents.ppo import networks as ppo_networks
    from brax.training.agents.ppo import train as ppo
    from flax import linen

    def progress(step: int, metrics: dict) -> None:  # one line per evaluation, flushed
        record = dict(time=time.time(), step=int(step), ret=float(metrics["eval/episode_reward"]))
        record["train_walltime"] = float(metrics.get("training/walltime", 0.0))
        with open(log, "a") as f:
            f.write(json.dumps(record) + "\n")

    if network is not None:
        train["network_factory"] = functools.partial(
            ppo_networks.make_ppo_networks,
            policy_hidden_layer_sizes=tuple(network["hidden_sizes"]),
            value_hidden_layer_sizes=tuple(network["critic_hidden_sizes"]),
            activation=linen.swish if network["activation"] == "swish" else linen.tanh,
            distribution_type="normal",
            noise_std_type="log",
            init_noise_std=1.0,
        )
    ppo.train(
        environment=brax_envs.get_environment(env, backend=pipeline),
        num_timesteps=total,
        normalize_observations=True,
        deterministic_eval=True,
        progress_fn=progress,
        seed=seed,
        **train,
    )
    return {}


def stamped(name: str, cmd: list[str], run_dir: Path, timeout: float, env: dict):
    """One of our trainers as a contender whose metrics.csv rows are time-stamped as they appear
    (polled while it runs), and what parse_ours needs beside its run."""
    stamps: list[float] = []
    metrics = run_dir / "metrics.csv"

    def poll() -> None:  # complete rows after the header, stamped when first seen
        if metrics.exists():
            rows = metrics.read_text().count("\n") - 1
            stamps.extend([time.time()] * (rows - len(stamps)))

    contender = bench.Contender(name, cmd, {}, timeout, env, poll=poll)
    return contender, {"run_dir": run_dir, "stamps": stamps}


# ---------------------------------------------------------------------------------------------
# the three contenders, and their curves read back from what they wrote


def our_flags(args, seed: int, trainer: str) -> list[str]:
    """The command-line flags of algos/ppo.py (trainer 'ours') or algos/ppo_brax.py ('ours_jax')
    for these settings and seed, without --run-dir."""
    eval_every, total = schedule(args)
    flags = [f"--{k.replace('_', '-')}={getattr(args, k)}" for k in FLAGS]
    flags += ["--no-anneal-lr", "--vf-coef=0.5", "--norm-adv", "--no-clip-vloss", "--norm-obs"]
    flags += ["--no-norm-reward", "--hidden-sizes", *map(str, args.hidden_sizes)]
    if args.critic_hidden_sizes != args.hidden_sizes:
        flags += ["--critic-hidden-sizes", *map(str, args.critic_hidden_sizes)]
    if args.max_grad_norm:
        flags.append(f"--max-grad-norm={args.max_grad_norm}")
    flags.append(f"--eval-every={eval_every}")
    flags += [f"--eval-episodes={args.eval_episodes}", "--checkpoint-every=1000000000"]
    flags += ["--no-progress", "--no-tensorboard", f"--total-timesteps={total}"]
    flags += [f"--env-id=brax:{args.env}", f"--brax-pipeline={args.pipeline}", f"--seed={seed}"]
    if trainer == "ours_jax":
        flags.append(f"--episode-length={args.episode_length}")
        flags += [f"--activation={args.activation}", f"--reward-scale={args.reward_scale}"]
        flags.append(f"--adam-eps={args.adam_eps}")
        if not args.max_grad_norm:
            flags.append("--no-clip-grad")
    elif args.episode_length != 1000:
        raise SystemExit("ours runs brax: ids with the adapter's episode length 1000")
    return flags


def contenders(args, seed: int) -> tuple[list[bench.Contender], dict]:
    """brax, ours, ours_jax for one seed (each with its own JAX cache, emptied first), and
    per trainer what its parse needs (files it writes, metrics.csv row time stamps)."""
    _, total = schedule(args)
    out, info = [], {}
    for trainer in args.trainers:
        work = args.work_dir / f"{trainer}_seed{seed}"
        shutil.rmtree(work, ignore_errors=True)  # a fresh run dir (ours would resume otherwise)
        work.mkdir(parents=True)
        cache = args.work_dir / "jax_cache" / trainer
        shutil.rmtree(cache, ignore_errors=True)
        env = {"CONTROLRL_JAX_CACHE": str(cache)}
        if trainer == "brax":
            info[trainer] = {"log": work / "progress.jsonl"}
            config = dict(seed=seed, total=total, log=str(info[trainer]["log"]), **brax_train(args))
            worker = f"{Path(__file__).resolve()}:brax_worker"
            out.append(bench.Contender(trainer, worker, config, args.timeout, env))
            continue
        script = ROOT / "algos" / ("ppo_brax.py" if trainer == "ours_jax" else "ppo.py")
        cmd = [sys.executable, str(script), *our_flags(args, seed, trainer)]
        contender, info[trainer] = stamped(trainer, cmd + [f"--run-dir={work / 'run'}"],
                                           work / "run", args.timeout, env)  # fmt: skip
        out.append(contender)
    return out, info


def brax_epochs(evals: list[dict]) -> list[float]:
    """Epoch seconds from brax's progress records (cumulated 'training/walltime' per eval)."""
    return [b["train_walltime"] - a["train_walltime"] for a, b in zip(evals, evals[1:])]


def compile_excess(seconds: list[float]) -> float:
    """A JAX trainer's compile in its first epoch (or iteration): its excess over the median of
    the others."""
    return max(seconds[0] - statistics.median(seconds[1:]), 0.0) if len(seconds) > 1 else 0.0


def parse_brax(run: bench.Run, log: Path) -> dict:
    """Curve points from brax's progress_fn records; its epoch compile removed from train_s."""
    evals = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    compile_s = compile_excess(brax_epochs(evals))
    points = [
        {
            "step": r["step"],
            "wall_s": r["time"] - run.launched,
            "train_s": max(r["train_walltime"] - compile_s, 0.0),
            "return": r["ret"],
        }
        for r in evals
    ]
    # start-up: imports, env, compiles, step-0 evaluation
    startup = evals[0]["time"] - run.launched if evals else float("nan")
    return {"points": points, "startup_s": startup, "train_compile_s": compile_s}


def parse_ours(run: bench.Run, run_dir: Path, stamps: list[float], jax_path: bool) -> dict:
    """Curve points from metrics.csv (wall: the row's stamp) and timing.csv (train seconds)."""
    if not (run_dir / "timing.csv").exists():
        return {"points": [], "startup_s": float("nan"), "train_compile_s": float("nan")}
    with (run_dir / "metrics.csv").open() as f:
        metrics = list(csv.DictReader(f))
    with (run_dir / "timing.csv").open() as f:
        row_s = [float(t["time/rollout_s"]) + float(t["time/update_s"]) for t in csv.DictReader(f)]
    ended = run.launched + run.wall_s
    stamps = stamps + [ended] * (len(metrics) - len(stamps))  # rows written just before exit
    compile_s = compile_excess(row_s) if jax_path else 0.0  # in the JAX path's first iteration
    points, train_s = [], -compile_s
    for row, seconds, stamp in zip(metrics, row_s, stamps):
        train_s += seconds
        if not math.isnan(ret := float(row["eval/return"])):
            step, wall = int(row["step"]), stamp - run.launched
            points.append({"step": step, "wall_s": wall, "train_s": train_s, "return": ret})
    startup = stamps[0] - run.launched - row_s[0]  # imports, env compile
    return {"points": points, "startup_s": startup, "train_compile_s": compile_s}


# ---------------------------------------------------------------------------------------------
# summary, CSVs, figure


def first_at_target(points: list[dict], target: float) -> dict | None:
    return next((p for p in points if p["return"] >= target), None)


def summarise(args, results: dict) -> list[dict]:
    """One row per (trainer, seed): time to target in both clocks and its ratio to brax's."""
    nan = float("nan")
    rows = []
    for (trainer, seed), res in results.items():
        hit = first_at_target(res["points"], args.target) or {}
        last = res["points"][-1] if res["points"] else {"step": 0, "train_s": nan, "return": nan}
        best, run = max((p["return"] for p in res["points"]), default=nan), res["run"]
        row = dict(trainer=trainer, seed=seed, env=args.env, pipeline=args.pipeline)
        row |= dict(target=args.target, step_at_target=hit.get("step", ""))
        row |= {f"{c}_to_target_s": hit.get(f"{c}_s", nan) for c in ("wall", "train")}
        row |= dict(final_return=last["return"], best_return=best, total_steps=last["step"])
        row |= dict(total_wall_s=run.wall_s, startup_s=res["startup_s"])
        row |= dict(train_compile_s=res["train_compile_s"])
        row |= dict(train_sps=last["step"] / last["train_s"] if last["train_s"] else nan)
        rows.append(row | {"status": run.status})
    by_key = {(r["trainer"], r["seed"]): r for r in rows}
    for r in rows:
        brax = by_key.get(("brax", r["seed"]), {})
        # training compute per env step over the whole run, relative to brax's (same steps)
        sps = r["train_sps"]
        r["train_cost_vs_brax"] = brax.get("train_sps", nan) / sps if sps else nan
        for clock in ("wall", "train"):
            den = brax.get(f"{clock}_to_target_s", nan)
            r[f"{clock}_ratio_vs_brax"] = r[f"{clock}_to_target_s"] / den if den == den else nan
    return rows


def plot(args, results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), sharey=True)
    colors = {"brax": "tab:orange", "ours": "tab:blue", "ours_jax": "tab:green"}
    labels = {
        "brax": "brax.training PPO (jax)",
        "ours": "algos/ppo.py (torch)",
        "ours_jax": "algos/ppo_brax.py (jax)",
    }
    first_seed = min(s for _, s in results)
    for ax, clock, title in (
        (axes[0], "wall_s", "wall-clock since launch (all included)"),
        (axes[1], "train_s", "training compute (no compile, no eval)"),
    ):
        for (trainer, seed), res in results.items():
            xs, ys = [p[clock] for p in res["points"]], [p["return"] for p in res["points"]]
            label = labels[trainer] if seed == first_seed else None
            ax.plot(xs, ys, color=colors[trainer], marker=".", alpha=0.8, label=label)
        ax.axhline(args.target, color="gray", ls="--", lw=1)
        ax.set_xlabel("seconds")
        ax.set_title(title, fontsize=10)
    axes[0].set_ylabel(f"eval return ({args.env}, {args.pipeline})")
    axes[0].legend(fontsize=8, loc="lower right")
    scripts.save_figure(fig, path, 110)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    command = bench.command_line("paper_figures/brax_ppo_race.py", argv)
    args.out.mkdir(parents=True, exist_ok=True)
    eval_every, total = schedule(args)
    print(
        f"{args.env} ({args.pipeline}): {total} steps, evaluation every {eval_every} steps, "
        f"target {args.target:g}, seeds {seeds}",
        flush=True,
    )
    results = {}
    for repeat, seed in enumerate(seeds):
        trainers, info = contenders(args, seed)
        for run in bench.run_repeat(trainers, repeat):
            i = info[run.name]
            if run.name == "brax":
                res = parse_brax(run, i["log"])
            else:
                res = parse_ours(run, i["run_dir"], i["stamps"], run.name == "ours_jax")
            results[(run.name, seed)] = res | {"run": run}
            hit = first_at_target(res["points"], args.target)
            reached = f"target at {hit['wall_s']:.1f} s wall" if hit else "target not reached"
            print(f"  seed {seed} {run.name:8s}: {run.status}, {reached}, {run.wall_s:.1f} s")
            if not run.ok:
                print(run.log[-2000:])
    results = dict(sorted(results.items(), key=lambda kv: (kv[0][1], TRAINERS.index(kv[0][0]))))
    rows = summarise(args, results)
    bench.write_csv(args.out / "brax_ppo_race.csv", rows, command)
    curves = [
        {"trainer": t, "seed": s, **p} for (t, s), res in results.items() for p in res["points"]
    ]
    bench.write_csv(args.out / "brax_ppo_race_curves.csv", curves, command)
    plot(args, results, args.out / "brax_ppo_race.png")
    for trainer in args.trainers[1:]:
        for key in ("train_cost_vs_brax", "wall_ratio_vs_brax", "train_ratio_vs_brax"):
            ratios = ", ".join(f"{r[key]:.2f}" for r in rows if r["trainer"] == trainer)
            print(f"{trainer} {key} per seed: {ratios}")
    print(f"wrote {args.out}/brax_ppo_race.csv, brax_ppo_race_curves.csv, brax_ppo_race.png")
    print(f"command: {command}")


if __name__ == "__main__":
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # inherited by the trainers
    main()
