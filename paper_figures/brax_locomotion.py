"""Locomotion on Brax: Brax's own PPO trainer (google/brax brax/training/agents/ppo/train.py) vs
algos/ppo_brax.py (--policy tanh_normal: Brax's NormalTanhDistribution; ours_gaussian: CleanRL's
Gaussian) on brax:ant and brax:halfcheetah, with Brax's published PPO settings (google/brax
notebooks/training.ipynb, the `train_fn` table: PUBLISHED; train.py's defaults for the rest;
networks.py's make_ppo_networks sizes) and num_envs and batch_size divided by --scale (a training
step of 20,480 env steps instead of 327,680; everything else as published). ours runs the same
settings mapped one to one (our_flags: one rollout = one Brax training step).

    python paper_figures/brax_locomotion.py                    # 2 envs x 3 trainers x 3 seeds
    python paper_figures/brax_locomotion.py --plot-only        # redraw from --out's CSVs
    python paper_figures/brax_locomotion.py --toy --out runs/toy/brax_locomotion  # tiny budget
    python paper_figures/brax_locomotion.py --seeds 1,2,3,4,5 --total-timesteps 2048000 \
        --timeout 3600 --name brax_locomotion_2m               # another budget, its own files

Writes <name>.csv (one row per run), <name>_curves.csv (evaluation return against env steps, wall
and train seconds), <name>_standing.csv (the zero-action policy's episode returns: a standing ant
earns ~1000) and <name>.png into --out. The declared experiments brax-locomotion-410k and
brax-locomotion-2m run it and judge <name>.csv. Runs go one at a time, the trainers' order
rotated; a finished run leaves result.json in its work dir and is skipped next time (--fresh
starts over); runs in --out's CSVs that a call does not make are kept with their own command.

Differences that remain (one trainer has no switch for them):
- init: LeCun-uniform on every layer (brax) vs orthogonal, gain sqrt 2 in hidden layers and
  0.01 on the policy's output (ours): ours starts with loc ~0 and std ~softplus(0) + 0.001 =
  0.69 in every state, brax's initial (loc, scale) vary from state to state;
- random streams: the entropy sample's key, the permutation's and the actions' are drawn from
  different splits (one entropy key per minibatch in both);
- advantage normalisation: brax divides by the population std, ours by the unbiased one;
- brax's kl_mean diagnostic adds 1e-5 inside its log (ours is exact; neither trains on it);
- GAE: brax recomputes it per minibatch over each unroll of unroll_length steps with the current
  value network; ours computes it once per rollout over the whole --num-steps;
- time limits: brax masks them (bootstrap_on_timeout False); ours bootstraps from V(final obs);
- observation normalisation: brax updates once per training step, no clip; ours every step,
  normalised observations clipped to [-10, 10];
- brax's autoreset replays each env's first initial state, ours draws a fresh one.
"""

from __future__ import annotations

import argparse
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
from paper_figures import brax_ppo_race as race
from paper_figures.brax_ppo_race import parse_brax, parse_ours
from paper_figures.lab import scripts
from paper_figures.lab.script_flags import some_of

ROOT = Path(__file__).resolve().parents[1]

TRAINERS = ("brax", "ours", "ours_gaussian")
# ours runs Brax's published policy (make_ppo_networks' tanh_normal); ours_gaussian the
# CleanRL-style Gaussian
POLICY = {"ours": "tanh_normal", "ours_gaussian": "gaussian"}
# google/brax notebooks/training.ipynb, the `train_fn` table (ppo.train keyword arguments)
PUBLISHED = {
    "ant": dict(num_envs=4096, batch_size=2048, num_minibatches=32, unroll_length=5,
                num_updates_per_batch=4, discounting=0.97, learning_rate=3e-4, entropy_cost=1e-2,
                reward_scaling=10.0),
    "halfcheetah": dict(num_envs=2048, batch_size=512, num_minibatches=32, unroll_length=20,
                        num_updates_per_batch=8, discounting=0.95, learning_rate=3e-4,
                        entropy_cost=1e-3, reward_scaling=1.0),
}  # fmt: skip
# brax/training/agents/ppo/train.py defaults for what the table leaves out
BRAX_DEFAULTS = dict(gae_lambda=0.95, clipping_epsilon=0.3, vf_loss_coefficient=0.5)
POLICY_SIZES, VALUE_SIZES = (32,) * 4, (256,) * 5  # brax ppo/networks.py make_ppo_networks
EPISODE_LENGTH = 1000
# the stated return for "time to return", fixed before any run: ant earns ~1000 by standing
# (healthy reward 1 per step; a random policy scores ~1000), so its bar is 2000
TARGETS = {"ant": 2000.0, "halfcheetah": 1000.0}
# the declared experiments' toy: the CSVs of `--toy` (one seed per trainer and env), as that
# toy's six processes each compile a JAX trainer (minutes on 2 cores)
TOY_FIXTURE = ROOT / "paper_figures" / "brax-locomotion-410k" / "toy"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--envs", default="ant,halfcheetah", help="comma-separated brax env names")
    p.add_argument("--pipeline", default="spring", help="brax physics pipeline, both trainers")
    p.add_argument("--seeds", default="1,2,3", help="comma-separated seeds")
    what = f"comma-separated, of {', '.join(TRAINERS)}"
    p.add_argument("--trainers", default=",".join(TRAINERS), help=what)
    p.add_argument("--scale", type=int, default=16, help="num_envs and batch_size divided by this")
    p.add_argument("--total-timesteps", type=int, default=409_600, help="budget per run")
    p.add_argument("--num-evals", type=int, default=11, help="brax num_evals (incl. step 0)")
    p.add_argument("--eval-episodes", type=int, default=16, help="brax num_eval_envs")
    p.add_argument("--out", type=Path, default=ROOT / "paper_figures" / "out")
    what = "stem of the CSVs and the PNG in --out (another budget: another name, so one CSV "
    p.add_argument("--name", default="brax_locomotion", help=what + "never mixes budgets)")
    p.add_argument("--work-dir", type=Path, default=None, help="run dirs (default: runs/<name>)")
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds per trainer process")
    p.add_argument("--fresh", action="store_true", help="rerun finished runs too")
    p.add_argument("--toy", action="store_true", help="tiny sizes, one seed (for the test)")
    what = "redraw the PNG from --out's <name>_curves.csv (no training)"
    p.add_argument("--plot-only", action="store_true", help=what)
    args = p.parse_args(argv)
    if args.toy:
        args.seeds, args.scale, args.total_timesteps = "1", 512, 2560
        args.num_evals, args.eval_episodes = 3, 2
    args.trainer_names = some_of(p, "trainers", args.trainers, TRAINERS)
    args.env_names = some_of(p, "envs", args.envs, PUBLISHED)  # those with published settings
    for env in args.env_names:
        pub = PUBLISHED[env]
        if args.scale < 1 or pub["batch_size"] % args.scale or pub["num_envs"] % args.scale:
            p.error(f"--scale must divide {env}'s num_envs and batch_size, got {args.scale}")
    if args.num_evals < 2:
        p.error("--num-evals must be >= 2")
    if args.total_timesteps <= 0:
        p.error("--total-timesteps must be > 0")
    args.seed_list = [int(s) for s in args.seeds.split(",") if s.strip()]
    default_work = args.out / f"{args.name}_runs" if args.toy else ROOT / "runs"
    args.work_dir = (args.work_dir or default_work / args.name).resolve()
    return args


def settings(env: str, scale: int) -> dict:
    """Brax's published ppo.train settings for `env`, num_envs and batch_size divided by scale."""
    s = dict(PUBLISHED[env], **BRAX_DEFAULTS)
    s["num_envs"] //= scale
    s["batch_size"] //= scale
    return s


def rollout_steps(s: dict) -> int:
    """Steps per env per brax training step: ours' --num-steps."""
    return s["unroll_length"] * s["batch_size"] * s["num_minibatches"] // s["num_envs"]


def schedule(s: dict, total: int, num_evals: int) -> tuple[int, int]:
    """(eval_every, total steps) as brax's trainer runs them: num_evals - 1 epochs of
    ceil(total / ((num_evals - 1) * step)) training steps of `step` env steps."""
    step = s["batch_size"] * s["num_minibatches"] * s["unroll_length"]
    per_epoch = math.ceil(total / ((num_evals - 1) * step))
    return per_epoch * step, per_epoch * step * (num_evals - 1)


def our_flags(
    env: str, s: dict, pipeline: str, seed: int, args, policy: str = "tanh_normal"
) -> list[str]:
    """algos/ppo_brax.py flags for the same settings (the docstring's mapping)."""
    eval_every, total = schedule(s, args.total_timesteps, args.num_evals)
    return [
        f"--env-id=brax:{env}", f"--brax-pipeline={pipeline}", f"--seed={seed}",
        f"--num-envs={s['num_envs']}", f"--num-steps={rollout_steps(s)}",
        f"--num-minibatches={s['num_minibatches']}",
        f"--update-epochs={s['num_updates_per_batch']}", f"--gamma={s['discounting']}",
        f"--gae-lambda={s['gae_lambda']}", f"--learning-rate={s['learning_rate']}",
        "--no-anneal-lr", f"--ent-coef={s['entropy_cost']}",
        f"--clip-coef={s['clipping_epsilon']}", "--no-clip-vloss",
        f"--vf-coef={s['vf_loss_coefficient']}", "--norm-adv", "--norm-obs", "--no-norm-reward",
        f"--reward-scale={s['reward_scaling']}", "--hidden-sizes", *map(str, POLICY_SIZES),
        "--critic-hidden-sizes", *map(str, VALUE_SIZES), "--activation=swish", "--no-clip-grad",
        "--adam-eps=1e-8", f"--policy={policy}", f"--episode-length={EPISODE_LENGTH}",
        f"--total-timesteps={total}", f"--eval-every={eval_every}",
        f"--eval-episodes={args.eval_episodes}", "--checkpoint-every=1000000000",
        "--no-progress", "--no-tensorboard",
    ]  # fmt: skip


# ---------------------------------------------------------------------------------------------
# the sweep: one run at a time, resumable


def contender(args, env: str, trainer: str, seed: int) -> tuple[bench.Contender, dict]:
    """One run's contender and what its parse needs."""
    s = settings(env, args.scale)
    work = args.work_dir / env / f"{trainer}_seed{seed}"
    shutil.rmtree(work, ignore_errors=True)  # a fresh run dir (ours would resume otherwise)
    work.mkdir(parents=True)
    # each trainer's JAX cache is kept between runs (warm after its first run); XLA:CPU's
    # cache-load log lines (paper_figures/README.md, the JAX stack) silenced
    cache = {"CONTROLRL_JAX_CACHE": str(args.work_dir / "jax_cache" / trainer)}
    cache["TF_CPP_MIN_LOG_LEVEL"] = "3"
    if trainer == "brax":  # its published settings, brax's default networks
        _, total = schedule(s, args.total_timesteps, args.num_evals)
        config = dict(env=env, pipeline=args.pipeline, seed=seed, total=total, action_repeat=1)
        config |= dict(s, num_evals=args.num_evals, num_eval_envs=args.eval_episodes)
        config |= dict(episode_length=EPISODE_LENGTH, log=str(work / "progress.jsonl"))
        worker = f"{Path(race.__file__).resolve()}:brax_worker"
        contender = bench.Contender("brax", worker, config, args.timeout, cache)
        return contender, {"log": work / "progress.jsonl"}
    flags = our_flags(env, s, args.pipeline, seed, args, POLICY[trainer])
    cmd = [sys.executable, str(ROOT / "algos" / "ppo_brax.py"), *flags, f"--run-dir={work / 'run'}"]
    return race.stamped(trainer, cmd, work / "run", args.timeout, cache)


def run_or_load(args, env: str, trainer: str, seed: int, slot: int) -> dict:
    """A run's result ({points, startup_s, train_compile_s, status, wall_s}), from its
    result.json when a previous sweep finished it."""
    done = args.work_dir / env / f"{trainer}_seed{seed}" / "result.json"
    if done.exists() and not args.fresh:
        return json.loads(done.read_text())
    c, info = contender(args, env, trainer, seed)
    run = bench.run_one(c, repeat=seed, slot=slot)
    if trainer == "brax":
        res = parse_brax(run, info["log"])
    else:
        res = parse_ours(run, info["run_dir"], info["stamps"], jax_path=True)
    res |= {"status": run.status, "wall_s": run.wall_s}
    (done.parent / "output_tail.log").write_text(run.log)  # the process's last output
    if run.ok:
        done.write_text(json.dumps(res))
    else:
        print(run.log[-2000:])
    return res


def sweep(args) -> dict:
    """{(env, trainer, seed): result}: seed by seed, env by env, the trainers' order rotated."""
    results = {}
    for k, seed in enumerate(args.seed_list):
        for j, env in enumerate(args.env_names):
            for slot, trainer in enumerate(bench.rotation(args.trainer_names, k + j)):
                t0 = time.time()
                res = run_or_load(args, env, trainer, seed, slot)
                results[(env, trainer, seed)] = res
                last = res["points"][-1]["return"] if res["points"] else float("nan")
                what = f"final return {last:.1f}, {time.time() - t0:.0f} s"
                print(f"  {env} seed {seed} {trainer}: {res['status']}, {what}", flush=True)
    return results


# ---------------------------------------------------------------------------------------------
# summary, verdict, CSVs, figure


def summarise(results: dict, targets: dict) -> list[dict]:
    """One row per run: return at the budget, training steps/s, time to the stated return."""
    nan = float("nan")
    rows = []
    for (env, trainer, seed), res in results.items():
        pts = res["points"]
        last = pts[-1] if pts else {"step": 0, "train_s": nan, "wall_s": nan, "return": nan}
        hit = next((p for p in pts if p["return"] >= targets[env]), {})
        best = max((p["return"] for p in pts), default=nan)
        row = dict(env=env, trainer=trainer, seed=seed, steps=last["step"])
        row |= dict(return_at_budget=last["return"], best_return=best)
        row |= dict(train_sps=last["step"] / last["train_s"] if last["train_s"] else nan)
        row |= dict(train_s=last["train_s"], wall_s=res["wall_s"], startup_s=res["startup_s"])
        row |= dict(target=targets[env], step_to_target=hit.get("step", ""))
        row |= {f"{c}_to_target_s": hit.get(f"{c}_s", nan) for c in ("train", "wall")}
        rows.append(row | {"status": res["status"]})
    return rows


def merged(path: Path, fresh: list[dict], key=("env", "trainer", "seed")) -> list[dict]:
    """The rows of the figure's committed CSV at `path` whose run this call did not make (each
    with its own command), then the call's rows: a figure grown seed by seed keeps its runs."""
    made = {tuple(r[k] for k in key) for r in fresh}
    old = bench.read_csv(path) if path.exists() else []
    return [r for r in old if tuple(r[k] for k in key) not in made] + fresh


def standing_returns(env: str, pipeline: str, episodes: int, seed: int = 0) -> list[float]:
    """Returns of `episodes` episodes of the zero-action policy (the body standing still), each
    from its own reset key, EPISODE_LENGTH steps or until the env ends it: what a trainer earns
    without moving (ant: healthy reward 1 per step, no control cost)."""
    from envs.brax import configured_jax

    jax = configured_jax()
    import jax.numpy as jnp
    from brax import envs as brax_envs

    e = brax_envs.get_environment(env, backend=pipeline)
    zero = jnp.zeros(e.action_size)

    def episode(key):
        def step(carry, _):
            state, alive, total = carry
            state = e.step(state, zero)
            return (state, alive * (1.0 - state.done), total + alive * state.reward), None

        carry = (e.reset(key), jnp.float32(1.0), jnp.float32(0.0))
        return jax.lax.scan(step, carry, None, length=EPISODE_LENGTH)[0][2]

    keys = jax.random.split(jax.random.PRNGKey(seed), episodes)
    return [float(r) for r in jax.jit(jax.vmap(episode))(keys)]


def standing(args, command: str) -> dict[str, float]:
    """{env: mean standing return} from <name>_standing.csv in --out, the envs it lacks computed
    by standing_returns (one row per episode) and the CSV rewritten."""
    path = args.out / f"{args.name}_standing.csv"
    rows = bench.read_csv(path) if path.exists() else []
    have = {(r["env"], r["pipeline"]) for r in rows}
    missing = [e for e in args.env_names if (e, args.pipeline) not in have]
    for env in missing:  # rows already there keep the command that made them
        for k, ret in enumerate(standing_returns(env, args.pipeline, args.eval_episodes)):
            rows.append({"env": env, "pipeline": args.pipeline, "episode": k, "return": ret})
    if missing:
        bench.write_csv(path, rows, command, keep_commands=True)
    mine = [r for r in rows if r["pipeline"] == args.pipeline]
    return {e: statistics.mean(r["return"] for r in mine if r["env"] == e) for e in args.env_names}


def load_results(path: Path) -> dict:
    """{(env, trainer, seed): {"points": [...]}} from a brax_locomotion_curves.csv."""
    results: dict = {}
    for r in bench.read_csv(path):
        point = {k: r[k] for k in ("step", "wall_s", "train_s", "return")}
        results.setdefault((r["env"], r["trainer"], r["seed"]), {"points": []})["points"].append(
            point
        )
    return results


def plot(args, results: dict, path: Path, standing: dict[str, float] | None = None) -> None:
    scripts.save_figure(figure(args, results, standing), path, 110)


def figure(args, results: dict, standing: dict[str, float] | None = None):
    """Evaluation return against env steps and against wall clock, one row per env, per seed
    (thin) and the mean over seeds; the return of standing still (zero action) drawn as a
    reference, the return axis from 0."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    colors = {"brax": "tab:orange", "ours": "tab:green", "ours_gaussian": "tab:blue"}
    labels = {"brax": "brax.training PPO (tanh-normal)"}
    labels |= {t: f"algos/ppo_brax.py --policy {POLICY[t]}" for t in POLICY}
    envs = args.env_names
    fig, axes = plt.subplots(len(envs), 2, figsize=(10, 3.6 * len(envs)), squeeze=False)
    for row, env in zip(axes, envs):
        for trainer in args.trainer_names:
            runs = [results.get((env, trainer, s), {}).get("points") for s in args.seed_list]
            runs = [r for r in runs if r]
            n = min((len(p) for p in runs), default=0)  # every seed evaluates at the same steps
            for ax, clock in ((row[0], "step"), (row[1], "wall_s")):
                xy = [([p[clock] for p in pts], [p["return"] for p in pts]) for pts in runs]
                for xs, ys in xy:  # per seed, thin
                    ax.plot(xs, ys, color=colors[trainer], alpha=0.3, lw=0.8)
                if n:
                    xs, ys = (np.mean([v[i][:n] for v in xy], axis=0) for i in (0, 1))
                    label = f"{labels[trainer]} (mean of {len(runs)})"
                    ax.plot(xs, ys, color=colors[trainer], lw=2, marker=".", label=label)
        for ax in row:
            if standing and env in standing:
                label = f"standing still, zero action ({standing[env]:.0f})"
                ax.axhline(standing[env], color="0.3", ls="--", lw=1, label=label)
            # from 0: a few percent around the standing return must not look like a ranking
            ax.set_ylim(bottom=min(0.0, ax.get_ylim()[0]))
        row[0].set_xlabel("env steps")
        row[1].set_xlabel("wall-clock seconds since launch (compiles, evaluations in)")
        row[0].set_ylabel(f"evaluation return, {env} ({args.pipeline})")
        row[0].legend(fontsize=8, loc="best")
    return fig


def table(exp, source: Path) -> list[dict]:
    """A declaration's results rows (its analysis.py's `table`): the runs of <source>/<name>.csv,
    <name> the one its [run] flags give, each run's arm its trainer; a run that did not finish
    is an error (its return at the budget is not the budget's)."""
    rows = bench.read_csv(Path(source) / f"{parse_args(list(exp.flags)).name}.csv")
    bad = [f"{r['env']} {r['trainer']} seed {r['seed']}: {r['status']}" for r in rows
           if r["status"] != "ok"]  # fmt: skip
    if bad:
        raise ValueError(f"brax_locomotion: unfinished runs in {source}: {'; '.join(bad)}")
    return [dict(r, arm=r["trainer"]) for r in rows]


def run_script(exp, toy: bool, out: Path) -> None:
    """A declaration's run (its analysis.py's `run_script`): main with its flags; the toy redraws
    the figure (--plot-only) from TOY_FIXTURE: no run, no compile."""
    from paper_figures.lab import runner

    argv = runner.script_argv(exp, toy, out)
    if not toy:
        return main(argv)
    parts = ("", "_curves", "_standing")
    scripts.replot_fixture(main, argv, parse_args(argv), TOY_FIXTURE, parts, "--plot-only")


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    command = bench.command_line("paper_figures/brax_locomotion.py", argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for env in args.env_names:
        s = settings(env, args.scale)
        eval_every, total = schedule(s, args.total_timesteps, args.num_evals)
        print(
            f"{env} ({args.pipeline}): num_envs {s['num_envs']}, batch_size {s['batch_size']}, "
            f"ours --num-steps {rollout_steps(s)}; {total} steps, evaluation every {eval_every}",
            flush=True,
        )
    stem = args.out / args.name
    if not args.plot_only:
        results = sweep(args)
        rows = merged(args.out / f"{args.name}.csv", summarise(results, TARGETS))
        bench.write_csv(f"{stem}.csv", rows, command, keep_commands=True)
        curves = [{"env": e, "trainer": t, "seed": s, **p}
                  for (e, t, s), res in results.items() for p in res["points"]]  # fmt: skip
        curves = merged(args.out / f"{args.name}_curves.csv", curves)
        bench.write_csv(f"{stem}_curves.csv", curves, command, keep_commands=True)
    results = load_results(args.out / f"{args.name}_curves.csv")  # with the kept runs
    if args.plot_only:  # what the call names, among the CSV's runs
        args.env_names = [e for e in args.env_names if any(k[0] == e for k in results)]
        args.trainer_names = [t for t in args.trainer_names if any(k[1] == t for k in results)]
        args.seed_list = list(dict.fromkeys(k[2] for k in results))
    else:  # every run the CSVs keep
        args.env_names = list(dict.fromkeys(k[0] for k in results))
        args.trainer_names = [t for t in TRAINERS if any(k[1] == t for k in results)]
        args.seed_list = sorted({k[2] for k in results})
    plot(args, results, args.out / f"{args.name}.png", standing(args, command))
    print(f"wrote {stem}.png (and its CSVs)\ncommand: {command}")


if __name__ == "__main__":
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # inherited by the trainers
    main()
