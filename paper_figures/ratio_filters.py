r"""Per-step vs sequence vs KPO-filtered importance ratios under stale data on one MuJoCo task:
PPO-clip (algos/ppo.py's loss and defaults) whose every update uses the rollout collected k
iterations earlier, with the ratio of --ratio (controlrl/ratios.py): step (PPO's), sequence (the
product over the episode), sequence_mean (its geometric mean, GSPO, Zheng et al. 2025, arXiv
2507.18071) or kalman (KPO, He et al. 2026, "Online Causal Kalman Filtering for Stable and
Effective Policy Optimization", arXiv 2602.10609: the per-step log-ratio filtered causally along
the episode, q 1e-6, v 1). KPO's claim, transplanted from tokens to time steps: filtered ratios
have lower variance than per-step ratios, without the sequence ratio's bias.

    python -m paper_figures run ratio-filters   # the declared runs, through this script
    python paper_figures/ratio_filters.py --toy --out runs/toy/ratio_filters

Staleness k (the declaration's envs): the update of iteration i uses the rollout of iteration
i-k, with the log-probs, advantages (GAE with that time's critic) and normalised observations of
its collection; each rollout feeds exactly one update of update_epochs epochs, and the first k
iterations only collect. The data is min(k, i-1-k) updates old at iteration i, so a run's
statistics are means over its updates of full age k (iterations 2k + 1 on). A queue of k
rollouts, not more epochs over one, makes the data k updates old at the update's first step
whatever the kind does, at the same number of steps and samples (more epochs would change the
steps with the age, and every kind starts each epoch on-policy). The learning rate is constant
(--no-anneal-lr) so that runs of different k take equal steps. EpisodeRatios holds the
log-ratios of rows outside a minibatch at a reference that starts at 0 (exact on-policy); with
stale data they are not 0, so the reference is first set to the whole rollout's current
log-ratios (EpisodeRatios.prime), else a sequence or filtered ratio would mix a minibatch's
fresh log-ratios with zeros for the rest of the episode.

Measured at every update, on the stale rollout, before its first step (policy pi_i):
  grad_rel_var   trace of the covariance of the policy-loss gradient over the num_minibatches
                 minibatches of one shuffled pass (PPO's loss with the kind's ratio, advantages
                 normalised per minibatch) over the squared norm of their mean (grad_var: the
                 unnormalised trace)
  grad_cos       cosine between that mean gradient and the on-policy gradient at pi_i (PPO's
                 loss on the rollout pi_i just collected, ratio 1). The sequence ratio is biased
                 even at k = 0: at ratio 1 it weighs each step's advantage by the score of every
                 step of the episode, later ones included; the causal filter mixes in earlier
                 steps' scores only
  kl_behaviour   KL(pi_{i-k} || pi_i) per state, mean over the rollout: how stale it really is
and after it kl_update = KL(pi_i || pi_{i+1}), per state, mean over the rollout. A run collapsed
when it stopped on a NaN/inf, its final return (mean training return of its last 5 iterations)
is below half of its best 5-iteration mean, or its policy entropy fell by more than 1 nat from
the first iteration (the Gaussian's std shrunk e^(1/3) ~ 1.4x per action dimension on Hopper).

Trains every run not yet finished under <out>/runs (resumable) and writes <out>/ratio_filters.csv
(the declared experiment's table), one row per run: the statistics' means over its updates of
full age, final and best return, first and last entropy, collapsed. Defaults: Hopper-v5, 4 kinds
x k in {0, 2, 8} x 3 seeds of 61,440 steps (CleanRL's 2,048-step batches).
"""

from __future__ import annotations

import argparse
import collections
import json
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from controlrl.cli import ArgumentParser
from controlrl.experiment import read_rows, write_rows
from paper_figures.lab import scripts
from paper_figures.lab.script_flags import ROOT, check_episodic_env, some_of, wrote

if TYPE_CHECKING:  # torch is imported where it is used: --help and bad flags stay fast
    import torch

KINDS = ("step", "sequence", "sequence_mean", "kalman")
PROBE_KEYS = ("grad_var", "grad_rel_var", "grad_cos", "kl_behaviour", "kl_update")
# every metrics.csv column of an iteration, NaN where the first k iterations have no update
UPDATE_KEYS = PROBE_KEYS + ("approx_kl", "clip_frac", "loss", "policy_loss", "value_loss")
UPDATE_KEYS += ("entropy", "grad_steps", "kl_mean", "kl_max", "ratio_dev_frac", "ratio_dev_max")
UPDATE_KEYS += ("ratio_dev_mean",)
RUN_FIELDS = ("kind", "staleness", "seed", "iterations", "updates", "failed", "grad_var")
RUN_FIELDS += ("grad_rel_var", "grad_cos", "kl_behaviour", "kl_update", "clip_frac")
RUN_FIELDS += ("final_return", "best_return", "eval_return", "entropy_first", "entropy_last")
RUN_FIELDS += ("collapsed",)
WINDOW = 5  # iterations of the final and best returns of the collapse criterion
# the toy: k = 2 needs 2k + 1 = 5 iterations for one update on data of full age
TOY = {"env_id": "Hopper-v5", "kinds": "step,kalman", "staleness": "2", "seeds": 2}
TOY["steps"] = 640
TOY_FLAGS = ["--num-steps", "128", "--num-minibatches", "2", "--update-epochs", "1"]
TOY_FLAGS += ["--hidden-sizes", "8", "--eval-episodes", "1"]


def gradient_stats(grads: torch.Tensor, reference: torch.Tensor) -> dict[str, float]:
    """grads [M, P] (one per minibatch): trace of their covariance (1/M), that over the squared
    norm of their mean, and the cosine of the mean with reference [P]."""
    mean = grads.mean(0)
    var = float((grads - mean).pow(2).sum(1).mean())
    norm2 = float(mean.pow(2).sum())
    cos = float(mean @ reference) / max(float(mean.norm() * reference.norm()), 1e-30)
    return {"grad_var": var, "grad_rel_var": var / max(norm2, 1e-30), "grad_cos": cos}


def probe(policy, data: dict, fresh: dict, ratios, args) -> dict[str, float]:
    """The gradient statistics and kl_behaviour of the update about to use data (the stale
    rollout) at the current policy (module docstring); primes ratios."""
    import torch

    from algos.ppo import ppo_loss
    from controlrl import diagnostics
    from controlrl.trust_region import flat_grad
    from controlrl.update import normalize_advantages

    batch, eps = data["batch"], args.clip_coef
    params = list(policy.parameters())
    obs, actions, old_logp = batch["obs"], batch["actions"], batch["logprobs"]
    with torch.no_grad():
        logp_all, _ = policy.log_prob_entropy(obs, actions, False)
        current = diagnostics.dist_params(policy, obs)
    if ratios is not None:
        ratios.prime(logp_all, old_logp)
    grads = []
    size = len(old_logp)
    for idx in torch.randperm(size).split(size // args.num_minibatches):
        logp, _ = policy.log_prob_entropy(obs[idx], actions[idx], False)
        adv = normalize_advantages(batch["advantages"][idx])
        ratio = None if ratios is None else ratios(logp, old_logp[idx], idx)
        loss, _ = ppo_loss(logp, old_logp[idx], adv, eps, ratio)
        grads.append(flat_grad(loss, params))
    if ratios is not None:
        ratios.prime(logp_all, old_logp)  # the probe's calls left its references as they were
    logp, _ = policy.log_prob_entropy(fresh["obs"], fresh["actions"], False)
    loss, _ = ppo_loss(logp, fresh["logprobs"], normalize_advantages(fresh["advantages"]), eps)
    stats = gradient_stats(torch.stack(grads), flat_grad(loss, params))
    kl = diagnostics.per_state_kl(data["params"], current)
    return {**stats, "kl_behaviour": float(kl.mean())}


def stale_update(policy, value_net, optimizer, data: dict, ratios, args) -> dict:
    """algos/ppo.py's update (its loss, the shared minibatch loop) on the stale rollout, with
    ratios already primed."""
    from algos.ppo import ppo_loss
    from controlrl.update import actor_critic_loss, minibatch_update

    def policy_loss(logp, old_logp, adv, ratio=None):
        return ppo_loss(logp, old_logp, adv, args.clip_coef, ratio)

    loss_fn = actor_critic_loss(policy, value_net, policy_loss, args.clip_coef, args, ratios)
    return minibatch_update(optimizer, data["batch"], loss_fn, args, ratios=ratios)


def train_one(kind: str, staleness: int, seed: int, run_dir: Path, steps: int, env_id: str,
              extra: list[str]) -> None:  # fmt: skip
    """One run in this process: PPO with --ratio kind whose updates use the rollout of k
    iterations ago; its metrics.csv holds the module docstring's statistics as train/*."""
    from algos import ppo
    from controlrl import diagnostics
    from controlrl.cli import parse
    from controlrl.nets import ValueNet, make_policy
    from controlrl.training import Run
    from controlrl.update import adam, rollout_ratios

    argv = ["--env-id", env_id, "--seed", str(seed), "--total-timesteps", str(steps)]
    argv += ["--run-dir", str(run_dir), "--ratio", kind, "--no-anneal-lr", "--eval-every", "0"]
    argv += ["--no-tensorboard", "--no-progress", *extra]
    args = parse(ppo.Args, argv)
    run = Run(args)
    policy = make_policy(run.obs_space, run.act_space, args.hidden_sizes)
    value_net = ValueNet(run.obs_dim, args.critic_hidden_sizes or args.hidden_sizes)
    optimizer = adam(policy, value_net, lr=args.learning_rate)
    queue: collections.deque = collections.deque()
    for iteration in run.start(policy=policy, value=value_net, optimizer=optimizer):
        batch, episodes = run.collect(policy, value_net)
        mean, log_std = run.old_params
        entropy = float((log_std.detach() + 0.5 * (1 + np.log(2 * np.pi))).sum(-1).mean())
        queue.append({"batch": {k: v.clone() for k, v in batch.items()},
                      "ended": np.array(run.buffer.ended), "params": (mean, log_std)})  # fmt: skip
        stats = dict.fromkeys(UPDATE_KEYS, float("nan"))
        if len(queue) > staleness:
            data = queue.popleft()
            ratios = rollout_ratios(args, data["ended"])
            stats.update(probe(policy, data, batch, ratios, args))
            run.old_params = data["params"]  # run.update's shift: KL(pi_{i-k} || pi_{i+1})
            before = diagnostics.dist_params(policy, data["batch"]["obs"])
            with run.update(policy, data["batch"], args.clip_coef) as shift:
                shift.update(stale_update(policy, value_net, optimizer, data, ratios, args))
            after = diagnostics.dist_params(policy, data["batch"]["obs"])
            stats.update(shift, kl_update=float(diagnostics.per_state_kl(before, after).mean()))
        stats.update(policy_entropy=entropy, staleness=staleness)
        run.end_iteration(iteration, stats, episodes, act=policy.mode)
    run.finish(policy.mode)


def run_dir_of(args, kind: str, staleness: int, seed: int) -> Path:
    return args.out / "runs" / kind / f"k{staleness}" / f"seed{seed}"


def plan(args) -> list[tuple[str, int, int]]:
    """(kind, k, seed) of every run, seed-major: a sweep cut short has every kind and k of the
    first seeds."""
    return [(kind, k, seed) for seed in range(1, args.seeds + 1) for k in args.staleness
            for kind in args.kinds]  # fmt: skip


def run_task(task: tuple) -> str:
    """One run (train_one's arguments); a run that dies (NaN/inf stop, or an exception) gets
    failed.json and does not stop the others. Returns the line to print."""
    import time

    kind, k, seed, run_dir = task[:4]
    if run_dir.exists():  # an interrupted run: its queue of stale rollouts is gone
        shutil.rmtree(run_dir)
    start = time.time()
    try:
        train_one(*task)
        status = "done"
    except (SystemExit, Exception) as exc:  # noqa: BLE001 - recorded, the sweep goes on
        status = "failed"
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "failed.json").write_text(json.dumps({"error": repr(exc)}) + "\n")
    return f"[{status}] {kind} k={k} seed{seed} {time.time() - start:.1f} s"


def train(args) -> None:
    """Every planned run not yet finished (final_eval.json or failed.json): in this process,
    or --workers processes (spawned, each run in one)."""
    extra = (TOY_FLAGS if args.toy else []) + args.extra
    tasks = []
    for kind, k, seed in plan(args):
        run_dir = run_dir_of(args, kind, k, seed)
        if not ((run_dir / "final_eval.json").exists() or (run_dir / "failed.json").exists()):
            tasks.append((kind, k, seed, run_dir, args.steps, args.env_id, extra))
    if args.workers == 1:
        for task in tasks:
            print(run_task(task), flush=True)
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    context = multiprocessing.get_context("spawn")  # torch and MuJoCo do not survive a fork
    with ProcessPoolExecutor(args.workers, mp_context=context) as pool:
        for line in pool.map(run_task, tasks):
            print(line, flush=True)


def read_columns(run_dir: Path) -> dict[str, np.ndarray]:
    """metrics.csv as float columns (empty cells NaN)."""
    rows = read_rows(run_dir / "metrics.csv")
    return {k: np.array([float(r[k]) if r[k] != "" else np.nan for r in rows]) for k in rows[0]}


def collapsed(returns: np.ndarray, entropy: np.ndarray, failed: bool) -> bool:
    """The module docstring's criterion: failed, final WINDOW-mean return below half of the best
    WINDOW-mean, or entropy down by more than 1 nat."""
    if failed:
        return True
    r = returns[~np.isnan(returns)]
    if len(r) >= WINDOW:
        means = np.convolve(r, np.ones(WINDOW) / WINDOW, mode="valid")
        if means.max() > 0 and means[-1] < 0.5 * means.max():
            return True
    return bool(entropy[-1] < entropy[0] - 1.0)


def data_age(iterations: int, k: int) -> np.ndarray:
    """Updates between the collection of the data an iteration updates on and that update
    (-1: no update), iterations 1..n."""
    i = np.arange(1, iterations + 1)
    return np.where(i > k, np.minimum(k, i - 1 - k), -1)


def run_row(kind: str, k: int, seed: int, run_dir: Path) -> dict:
    """A run's CSV row."""
    failed = (run_dir / "failed.json").exists()
    cols = read_columns(run_dir) if (run_dir / "metrics.csv").exists() else {}
    nan = float("nan")
    if not cols:
        row = dict.fromkeys(RUN_FIELDS, nan) | {"kind": kind, "staleness": k, "seed": seed}
        return row | {"iterations": 0, "updates": 0, "failed": 1, "collapsed": 1}
    ret, ent = cols["train/episode_return"], cols["train/policy_entropy"]
    updated = ~np.isnan(cols["train/grad_var"])
    full_age = updated & (data_age(len(ret), k) == k)  # the statistics' updates
    finite = ret[~np.isnan(ret)]
    smooth = np.ones(WINDOW) / WINDOW
    window = np.convolve(finite, smooth, "valid") if len(finite) >= WINDOW else finite
    final = json.loads((run_dir / "final_eval.json").read_text()) if not failed else {}
    return {
        "kind": kind, "staleness": k, "seed": seed, "iterations": len(ret),
        "updates": int(updated.sum()), "failed": int(failed),
        **{key: float(np.nanmean(cols[f"train/{key}"][full_age])) if full_age.any() else nan
           for key in RUN_FIELDS[6:12]},  # grad_var ... clip_frac
        "final_return": float(finite[-WINDOW:].mean()) if len(finite) else nan,
        "best_return": float(window.max()) if len(window) else nan,
        "eval_return": float(final.get("eval_return_mean", nan)),
        "entropy_first": float(ent[0]), "entropy_last": float(ent[-1]),
        "collapsed": int(collapsed(ret, ent, failed)),
    }  # fmt: skip


def collect(args) -> list[dict]:
    """The row of every finished run, in plan order."""
    runs = []
    for kind, k, seed in plan(args):
        run_dir = run_dir_of(args, kind, k, seed)
        if (run_dir / "final_eval.json").exists() or (run_dir / "failed.json").exists():
            runs.append(run_row(kind, k, seed, run_dir))
    return runs


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--env-id", default="Hopper-v5", help="a Gymnasium MuJoCo id (Box actions)")
    p.add_argument("--kinds", default=",".join(KINDS), help=f"some of {', '.join(KINDS)}")
    p.add_argument("--staleness", default="0,2,8", help="k values, iterations (>= 0)")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--steps", type=int, default=61_440, help="env steps per run")
    p.add_argument("--out", type=Path, default=ROOT / "runs" / "ratio_filters",
                   help="the runs (<out>/runs) and ratio_filters.csv")  # fmt: skip
    p.add_argument("--workers", type=int, default=1, help="runs at once")
    p.add_argument("--toy", action="store_true", help="seconds-sized end-to-end run (tests)")
    p.add_argument("extra", nargs="*", help="flags passed to algos/ppo.py's Args (after --)")
    args = p.parse_args(argv)
    if args.toy:  # toy sizes replace the defaults, not what was given on the command line
        from controlrl import experiment

        experiment.apply_toy(args, argv, TOY)
    check_episodic_env(p, args.env_id, "this figure needs episodes of many steps")
    args.kinds = some_of(p, "kinds", args.kinds, KINDS)
    try:
        args.staleness = sorted({int(k) for k in args.staleness.split(",")})
    except ValueError:
        p.error(f"--staleness must be integers, got {args.staleness!r}")
    if args.staleness[0] < 0:
        p.error(f"--staleness must be >= 0, got {args.staleness}")
    scripts.at_least(p, args, ("seeds", "steps", "workers"))
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    train(args)
    runs = collect(args)
    if not runs:
        raise SystemExit(f"error: no finished runs under {args.out / 'runs'}")
    write_rows(args.out / "ratio_filters.csv", runs, RUN_FIELDS)
    wrote(f"{args.out / 'ratio_filters.csv'} ({len(runs)} runs)", "ratio_filters", argv)


if __name__ == "__main__":
    main()
