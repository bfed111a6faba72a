"""Wall-clock race on a Brax task: Brax's own PPO trainer (brax.training.agents.ppo) vs our torch
PPO (algos/ppo.py on brax:<task>, 'ours') and our JAX PPO (algos/ppo_brax.py, 'ours_jax').

What it measures. For each seed, the trainers run the same PPO settings on the same Brax task
(default inverted_pendulum on the positional pipeline; on 'spring' not even a hand-tuned PD
controller keeps this pole up past ~90 steps, and PPO plateaus there too) in a fresh subprocess
each, and evaluate the deterministic policy every `eval_every` env steps (the same steps for
both). The time to target is the time of the first evaluation whose mean return is >= --target,
in two clocks:

- wall: seconds since the subprocess was launched, everything included (Python and JAX start-up,
  compiling, evaluations). Brax's trainer reports through progress_fn, which writes a time stamp
  per evaluation; for ours the parent polls <run_dir>/metrics.csv (flushed every iteration) every
  0.1 s and stamps each new row.
- train: training compute only, without start-up, compiling and evaluations. Ours: the cumulated
  rollout + update seconds of timing.csv (torch runs eagerly; the env compiles before the loop;
  ours_jax compiles in its first iteration, removed as for brax below).
  Brax: its 'training/walltime' (the jitted training epochs, evaluations excluded) minus the
  compile of the training epoch, estimated as the first epoch's excess over the median of the
  later epochs (all epochs have the same number of steps).

The ratio is ours / brax per seed; the issue's criterion is ratio <= 1.5. --jax-cache cold (the
default) gives every run an empty JAX compilation cache, --jax-cache warm a filled one per
trainer, so that the wall clock compares like with like.

How the settings are matched. Same num_envs; brax unroll_length = our --num-steps, and brax's
batch_size = num_envs / num_minibatches, so that one brax training step collects one unroll per
env (num_envs * num_steps env steps, our rollout) and splits it into the same number of
minibatches; num_updates_per_batch = --update-epochs; learning rate (constant: --no-anneal-lr),
discount, GAE lambda, clip 0.2, entropy coefficient, value coefficient 0.5, global grad-norm clip
0.5, per-minibatch advantage normalisation, observation normalisation on, no reward scaling
(brax reward_scaling 1, ours --no-norm-reward), no value clipping (ours --no-clip-vloss, brax
clipping_epsilon_value None), 64-64 tanh policy and value networks, a Gaussian policy with a
state-independent log-std starting at 1 (brax distribution_type 'normal', noise_std_type 'log'),
episode length 1000, deterministic evaluation on --eval-episodes episodes.

Not matched (brax's trainer has no switch for them, or ours has none): brax forms minibatches of
whole env unrolls and recomputes GAE inside every minibatch with the current value network (ours:
GAE once per rollout, minibatches of single steps); brax masks the advantage at time-limit steps,
ours bootstraps them; brax updates its observation statistics once per rollout and does not clip
normalised observations (ours: every step, clipped to [-10, 10]); brax does not clip actions to
[-1, 1] (ours does); brax's autoreset replays each env's first initial state (ours draws a fresh
one); Adam eps 1e-8 (brax, optax) vs 1e-5 (ours); LeCun-uniform vs orthogonal initialisation;
our evaluation env is a separate batch while brax's runs inside its jitted evaluator; ours writes
diagnostics every iteration (part of its update time) and a checkpoint at the end.

brax 0.14 needs jax.device_put_replicated, which the installed JAX dropped; the brax worker puts
back the documented replacement (mesh axis named like brax's pmap axis, so the first training
epoch compiles once). Under this JAX brax's evaluator still compiles twice (the eval state's
sharding changes after the first evaluation): that lands in brax's wall clock, not its train clock.

    python paper_figures/brax_ppo_race.py                      # 3 seeds, ~5 min on 2 cores
    python paper_figures/brax_ppo_race.py --toy --out /tmp/r   # tiny budget, for the test
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TRAINERS = ("brax", "ours", "ours_jax")  # ours_jax: algos/ppo_brax.py (JAX rollout + update)
# settings passed on to the brax worker subprocess: (flag, attribute)
SETTINGS = (
    "env",
    "pipeline",
    "episode_length",
    "num_envs",
    "num_steps",
    "num_minibatches",
    "update_epochs",
    "learning_rate",
    "gamma",
    "gae_lambda",
    "clip_coef",
    "ent_coef",
    "max_grad_norm",
    "total_timesteps",
    "num_evals",
    "eval_episodes",
)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--env", default="inverted_pendulum", help="brax env name")
    p.add_argument(
        "--pipeline", default="positional", help="brax physics pipeline (spring cannot balance)"
    )
    p.add_argument("--target", type=float, default=900.0, help="evaluation return to reach")
    p.add_argument("--seeds", default="1,2,3", help="comma-separated seeds")
    p.add_argument("--episode-length", type=int, default=1000)
    p.add_argument("--num-envs", type=int, default=64)
    p.add_argument("--num-steps", type=int, default=32, help="ours --num-steps = brax unroll")
    p.add_argument("--num-minibatches", type=int, default=32)
    p.add_argument("--update-epochs", type=int, default=10)
    p.add_argument("--learning-rate", type=float, default=3e-4)
    p.add_argument("--gamma", type=float, default=0.99)
    p.add_argument("--gae-lambda", type=float, default=0.95)
    p.add_argument("--clip-coef", type=float, default=0.2)
    p.add_argument("--ent-coef", type=float, default=0.0)
    p.add_argument("--max-grad-norm", type=float, default=0.5)
    p.add_argument("--total-timesteps", type=int, default=100_000, help="budget per run")
    p.add_argument("--num-evals", type=int, default=20, help="brax num_evals (incl. step 0)")
    p.add_argument("--eval-episodes", type=int, default=16)
    p.add_argument("--out", type=Path, default=ROOT / "paper_figures" / "out")
    p.add_argument(
        "--work-dir",
        type=Path,
        default=None,
        help="run dirs and logs (default: runs/brax_ppo_race, or <out>/brax_race with --toy)",
    )
    p.add_argument(
        "--jax-cache",
        choices=("cold", "warm"),
        default="cold",
        help="cold: every run compiles from scratch (no persistent cache for any trainer); warm:"
        " each trainer has its own persistent JAX cache under --work-dir, filled by an untimed"
        " warm-up run before the timed ones",
    )
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds per subprocess")
    p.add_argument("--toy", action="store_true", help="tiny budget, one seed (for the test)")
    p.add_argument("--worker-seed", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--worker-log", type=Path, default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.toy:
        args.seeds, args.num_envs, args.num_steps = "1", 16, 16
        args.num_minibatches, args.update_epochs = 4, 2
        args.total_timesteps, args.num_evals, args.eval_episodes = 2048, 3, 2
    if args.num_envs % args.num_minibatches:
        p.error("--num-envs must be divisible by --num-minibatches (brax minibatches whole envs)")
    if args.num_evals < 2:
        p.error("--num-evals must be >= 2")
    default_work = args.out / "brax_race" if args.toy else ROOT / "runs" / "brax_ppo_race"
    args.work_dir = args.work_dir or default_work
    return args


def schedule(args) -> tuple[int, int]:
    """(eval_every, total steps) as brax's trainer will run them: num_evals - 1 epochs of
    ceil(total / ((num_evals - 1) * batch)) training steps of num_envs * num_steps env steps."""
    batch = args.num_envs * args.num_steps
    per_epoch = math.ceil(args.total_timesteps / ((args.num_evals - 1) * batch))
    eval_every = per_epoch * batch
    return eval_every, eval_every * (args.num_evals - 1)


# ---------------------------------------------------------------------------------------------
# brax worker (runs in its own subprocess)


def _patch_jax() -> None:
    """brax 0.14 calls jax.device_put_replicated, which this JAX removed: the documented
    replacement (stack one copy per device, shard the new leading axis over the devices)."""
    import jax
    import numpy as np

    def device_put_replicated(x, devices):
        mesh = jax.sharding.Mesh(np.array(devices), ("i",))
        sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("i"))
        stack = lambda a: jax.numpy.stack([jax.numpy.asarray(a)] * len(devices))  # noqa: E731
        return jax.device_put(jax.tree_util.tree_map(stack, x), sharding)

    try:
        jax.device_put_replicated  # noqa: B018
    except AttributeError:
        jax.device_put_replicated = device_put_replicated


def brax_worker(args) -> None:
    """Train with brax.training.agents.ppo and append one JSON line per evaluation."""
    import functools

    from brax import envs as brax_envs
    from brax.training.agents.ppo import networks as ppo_networks
    from brax.training.agents.ppo import train as ppo
    from flax import linen

    _patch_jax()
    if args.jax_cache == "warm":
        import jax

        jax.config.update("jax_compilation_cache_dir", os.environ["CONTROLRL_JAX_CACHE"])
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    log = args.worker_log.open("a")

    def record(**fields) -> None:
        log.write(json.dumps({"time": time.time(), **fields}) + "\n")
        log.flush()

    def progress(step: int, metrics: dict) -> None:
        record(
            event="eval",
            step=int(step),
            ret=float(metrics["eval/episode_reward"]),
            train_walltime=float(metrics.get("training/walltime", 0.0)),
            eval_s=float(metrics.get("eval/epoch_eval_time", float("nan"))),
        )

    record(event="imported")
    network_factory = functools.partial(
        ppo_networks.make_ppo_networks,
        policy_hidden_layer_sizes=(64, 64),
        value_hidden_layer_sizes=(64, 64),
        activation=linen.tanh,
        distribution_type="normal",
        noise_std_type="log",
        init_noise_std=1.0,
    )
    _, total = schedule(args)
    ppo.train(
        environment=brax_envs.get_environment(args.env, backend=args.pipeline),
        num_timesteps=total,
        episode_length=args.episode_length,
        num_envs=args.num_envs,
        unroll_length=args.num_steps,
        batch_size=args.num_envs // args.num_minibatches,
        num_minibatches=args.num_minibatches,
        num_updates_per_batch=args.update_epochs,
        learning_rate=args.learning_rate,
        entropy_cost=args.ent_coef,
        discounting=args.gamma,
        gae_lambda=args.gae_lambda,
        clipping_epsilon=args.clip_coef,
        max_grad_norm=args.max_grad_norm,
        normalize_advantage=True,
        vf_loss_coefficient=0.5,
        normalize_observations=True,
        reward_scaling=1.0,
        network_factory=network_factory,
        num_evals=args.num_evals,
        num_eval_envs=args.eval_episodes,
        deterministic_eval=True,
        progress_fn=progress,
        seed=args.worker_seed,
    )
    record(event="done")
    log.close()


# ---------------------------------------------------------------------------------------------
# the two contenders, as seen from the parent


def _cache_env(args, trainer: str) -> dict:
    """Environment of a trainer's subprocess: its JAX persistent cache, or a fresh empty one."""
    cache = args.work_dir / "jax_cache" / trainer
    if args.jax_cache == "cold":
        shutil.rmtree(cache, ignore_errors=True)
    return {**os.environ, "CONTROLRL_JAX_CACHE": str(cache.resolve())}


def _launch(cmd: list[str], log_path: Path, env: dict) -> tuple[subprocess.Popen, float, object]:
    log_path.parent.mkdir(parents=True, exist_ok=True)
    out = log_path.open("w")
    launched = time.time()
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, env=env)
    return proc, launched, out


def _wait(proc: subprocess.Popen, out, log_path: Path, timeout: float, poll=None) -> float:
    """Wait for the process (calling poll() every 0.1 s); returns its exit time."""
    deadline = time.time() + timeout
    while proc.poll() is None:
        if time.time() > deadline:
            proc.kill()
            proc.wait()
            break
        if poll is not None:
            poll()
        time.sleep(0.1)
    ended = time.time()
    out.close()
    if proc.returncode != 0:
        tail = log_path.read_text()[-3000:]
        raise RuntimeError(f"{proc.args[:3]} exited with {proc.returncode}:\n{tail}")
    return ended


def run_brax(args, seed: int) -> dict:
    """Brax's trainer in a subprocess; curve points from its progress_fn records."""
    work = args.work_dir / f"brax_seed{seed}"
    work.mkdir(parents=True, exist_ok=True)
    records = work / "progress.jsonl"
    records.unlink(missing_ok=True)
    flags = [f"--{name.replace('_', '-')}={getattr(args, name)}" for name in SETTINGS]
    flags.append(f"--jax-cache={args.jax_cache}")
    cmd = [sys.executable, str(Path(__file__).resolve()), *flags]
    cmd += [f"--worker-seed={seed}", f"--worker-log={records}"]
    proc, launched, out = _launch(cmd, work / "stdout.log", _cache_env(args, "brax"))
    ended = _wait(proc, out, work / "stdout.log", args.timeout)
    rows = [json.loads(line) for line in records.read_text().splitlines()]
    evals = [r for r in rows if r["event"] == "eval"]
    # epoch times from the cumulated training walltime; the first one includes the compile
    epochs = [b["train_walltime"] - a["train_walltime"] for a, b in zip(evals, evals[1:])]
    steady = statistics.median(epochs[1:]) if len(epochs) > 1 else 0.0
    compile_s = max(epochs[0] - steady, 0.0) if epochs and len(epochs) > 1 else 0.0
    points = [
        {
            "step": r["step"],
            "wall_s": r["time"] - launched,
            "train_s": max(r["train_walltime"] - compile_s, 0.0),
            "return": r["ret"],
        }
        for r in evals
    ]
    return {
        "points": points,
        "total_wall_s": ended - launched,
        "startup_s": evals[0]["time"] - launched,  # imports, env, compiles, step-0 evaluation
        "train_compile_s": compile_s,
        "eval_s": sum(r["eval_s"] for r in evals),
    }


def run_ours(args, seed: int, trainer: str = "ours") -> dict:
    """algos/ppo.py (trainer 'ours') or algos/ppo_brax.py ('ours_jax') in a subprocess; each
    metrics.csv row is time-stamped when it appears."""
    jax_path = trainer == "ours_jax"
    work = args.work_dir / f"{trainer}_seed{seed}"
    run_dir = work / "run"
    for name in ("metrics.csv", "timing.csv", "config.json", "final_eval.json"):
        (run_dir / name).unlink(missing_ok=True)
    eval_every, total = schedule(args)
    cmd = [sys.executable, str(ROOT / "algos" / ("ppo_brax.py" if jax_path else "ppo.py"))]
    cmd += ["--env-id", f"brax:{args.env}", "--brax-pipeline", args.pipeline]
    cmd += ["--seed", str(seed), "--total-timesteps", str(total)]
    cmd += ["--num-envs", str(args.num_envs), "--num-steps", str(args.num_steps)]
    cmd += ["--num-minibatches", str(args.num_minibatches)]
    cmd += ["--update-epochs", str(args.update_epochs)]
    cmd += ["--learning-rate", str(args.learning_rate), "--no-anneal-lr"]
    cmd += ["--gamma", str(args.gamma), "--gae-lambda", str(args.gae_lambda)]
    cmd += ["--clip-coef", str(args.clip_coef), "--ent-coef", str(args.ent_coef)]
    cmd += ["--vf-coef", "0.5", "--max-grad-norm", str(args.max_grad_norm)]
    cmd += ["--norm-adv", "--no-clip-vloss", "--norm-obs", "--no-norm-reward"]
    cmd += ["--hidden-sizes", "64", "64"]
    cmd += ["--eval-every", str(eval_every), "--eval-episodes", str(args.eval_episodes)]
    cmd += ["--checkpoint-every", str(10**9), "--run-dir", str(run_dir)]
    cmd += ["--no-progress", "--no-tensorboard"]
    if jax_path:
        cmd += ["--episode-length", str(args.episode_length)]
    elif args.episode_length != 1000:
        raise SystemExit("ours runs brax: ids with the adapter's episode length 1000")
    stamps: list[float] = []
    metrics_path = run_dir / "metrics.csv"

    def poll() -> None:
        if metrics_path.exists():
            rows = metrics_path.read_text().count("\n") - 1  # complete rows after the header
            stamps.extend([time.time()] * (rows - len(stamps)))

    proc, launched, out = _launch(cmd, work / "stdout.log", _cache_env(args, trainer))
    ended = _wait(proc, out, work / "stdout.log", args.timeout, poll)
    with metrics_path.open() as f:
        metrics = list(csv.DictReader(f))
    with (run_dir / "timing.csv").open() as f:
        timing = list(csv.DictReader(f))
    stamps.extend([ended] * (len(metrics) - len(stamps)))  # rows written just before the exit
    points, train_s = [], 0.0
    row_s = [float(t["time/rollout_s"]) + float(t["time/update_s"]) for t in timing]
    first_row_s = row_s[0]
    # the JAX path compiles inside its first iteration: its excess over the median iteration
    compile_s = max(first_row_s - statistics.median(row_s[1:]), 0.0) if jax_path else 0.0
    for row, t_row, stamp in zip(metrics, timing, stamps):
        train_s += float(t_row["time/rollout_s"]) + float(t_row["time/update_s"])
        if t_row is timing[0]:
            train_s -= compile_s
        ret = float(row["eval/return"])
        if not math.isnan(ret):
            points.append(
                {
                    "step": int(row["step"]),
                    "wall_s": stamp - launched,
                    "train_s": train_s,
                    "return": ret,
                }
            )
    return {
        "points": points,
        "total_wall_s": ended - launched,
        "startup_s": stamps[0] - launched - first_row_s,  # imports, env compile
        "train_compile_s": compile_s,  # torch runs eagerly: 0
        "eval_s": float("nan"),
    }


# ---------------------------------------------------------------------------------------------
# summary, CSVs, figure


def first_at_target(points: list[dict], target: float) -> dict | None:
    return next((p for p in points if p["return"] >= target), None)


def summarise(args, results: dict) -> list[dict]:
    rows = []
    for (trainer, seed), res in results.items():
        hit = first_at_target(res["points"], args.target)
        last = res["points"][-1] if res["points"] else {"step": 0, "train_s": float("nan")}
        rows.append(
            {
                "trainer": trainer,
                "seed": seed,
                "env": args.env,
                "pipeline": args.pipeline,
                "target": args.target,
                "step_at_target": hit["step"] if hit else "",
                "wall_to_target_s": hit["wall_s"] if hit else float("nan"),
                "train_to_target_s": hit["train_s"] if hit else float("nan"),
                "final_return": res["points"][-1]["return"] if res["points"] else float("nan"),
                "best_return": max((p["return"] for p in res["points"]), default=float("nan")),
                "total_steps": last["step"],
                "total_wall_s": res["total_wall_s"],
                "startup_s": res["startup_s"],
                "train_compile_s": res["train_compile_s"],
                "train_sps": last["step"] / last["train_s"] if last["train_s"] else float("nan"),
            }
        )
    by_key = {(r["trainer"], r["seed"]): r for r in rows}
    for r in rows:
        brax = by_key.get(("brax", r["seed"]))
        for clock in ("wall", "train"):
            num, den = r[f"{clock}_to_target_s"], brax[f"{clock}_to_target_s"] if brax else 0
            r[f"{clock}_ratio_vs_brax"] = num / den if den and den == den else float("nan")
    return rows


def _fmt(x) -> str:
    return f"{x:.4g}" if isinstance(x, float) else str(x)


def write_csv(path: Path, rows: list[dict]) -> None:
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows([{k: _fmt(v) for k, v in r.items()} for r in rows])


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
    for ax, clock, title in (
        (axes[0], "wall_s", "wall-clock since launch (all included)"),
        (axes[1], "train_s", "training compute (no compile, no eval)"),
    ):
        for (trainer, seed), res in results.items():
            pts = res["points"]
            ax.plot(
                [p[clock] for p in pts],
                [p["return"] for p in pts],
                color=colors[trainer],
                marker=".",
                alpha=0.8,
                label=labels[trainer] if seed == min(s for _, s in results) else None,
            )
        ax.axhline(args.target, color="gray", ls="--", lw=1)
        ax.set_xlabel("seconds")
        ax.set_title(title, fontsize=10)
    axes[0].set_ylabel(f"eval return ({args.env}, {args.pipeline})")
    axes[0].legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.worker_seed is not None:
        brax_worker(args)
        return
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    args.out.mkdir(parents=True, exist_ok=True)
    eval_every, total = schedule(args)
    print(
        f"{args.env} ({args.pipeline}): {total} steps, evaluation every {eval_every} steps, "
        f"target {args.target:g}, seeds {seeds}",
        flush=True,
    )
    results = {}
    if args.jax_cache == "warm":  # fill every trainer's cache with an untimed run first
        for trainer in TRAINERS:
            print(f"  warm-up {trainer} (untimed)", flush=True)
            run_brax(args, seeds[0]) if trainer == "brax" else run_ours(args, seeds[0], trainer)
    for seed in seeds:
        for trainer in TRAINERS:
            if trainer == "brax":
                res = run_brax(args, seed)
            else:
                res = run_ours(args, seed, trainer)
            results[(trainer, seed)] = res
            hit = first_at_target(res["points"], args.target)
            reached = f"target at {hit['wall_s']:.1f} s wall" if hit else "target not reached"
            print(f"  seed {seed} {trainer:8s}: {reached}, total {res['total_wall_s']:.1f} s")
    rows = summarise(args, results)
    write_csv(args.out / "brax_ppo_race.csv", rows)
    curves = [
        {"trainer": t, "seed": s, **p} for (t, s), res in results.items() for p in res["points"]
    ]
    write_csv(args.out / "brax_ppo_race_curves.csv", curves)
    plot(args, results, args.out / "brax_ppo_race.png")

    print(
        "\n| trainer | seed | steps to target | wall to target s | train to target s | "
        "ratio wall | ratio train | total wall s | start-up s | epoch compile s |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        cols = ("trainer", "seed", "step_at_target", "wall_to_target_s", "train_to_target_s",
                "wall_ratio_vs_brax", "train_ratio_vs_brax", "total_wall_s", "startup_s",
                "train_compile_s")  # fmt: skip
        print("| " + " | ".join(_fmt(r[c]) for c in cols) + " |")
    for trainer in TRAINERS[1:]:
        ours = [r for r in rows if r["trainer"] == trainer]
        for clock in ("wall", "train"):
            ratios = [r[f"{clock}_ratio_vs_brax"] for r in ours]
            if ours and all(x == x for x in ratios):
                verdict = "holds" if max(ratios) <= 1.5 else "does not hold"
                print(
                    f"{trainer} {clock}: {trainer}/brax time to target per seed "
                    f"{', '.join(f'{x:.2f}' for x in ratios)}; median "
                    f"{statistics.median(ratios):.2f}; <= 1.5 on every seed: {verdict}"
                )
            else:
                print(f"{trainer} {clock}: a trainer missed the target on some seed; no ratio")
    cmd = " ".join(shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]))
    print(
        f"wrote {args.out}/brax_ppo_race.csv, brax_ppo_race_curves.csv, brax_ppo_race.png; "
        f"command: python paper_figures/brax_ppo_race.py {cmd}".rstrip()
    )


if __name__ == "__main__":
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    main()
