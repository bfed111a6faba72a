"""Generate D4RL-style datasets: a behaviour policy trained by algos/ppo.py, rolled out.

The recipe (D4RL, Fu et al. 2020, with our PPO in place of SAC):
- behaviour run: `python algos/ppo.py --env-id E --seed S --total-timesteps B` run as its own
  process (envs/ never import an algorithm), with a checkpoint after every iteration, each
  kept by PPO itself as ppo/checkpoints/step_<step>.pt (--keep-checkpoints): the snapshots,
  read with envs/offline/behaviour_policy.py. Cached per (env, seed, budget, extra PPO flags)
  under <out>/behaviour/, reused by every kind; an interrupted run is resumed (--resume), its
  step files kept. (Runs cached by the earlier generator keep theirs in snapshots/: read too.)
- expert: the final policy. Its return (mean of `score_episodes`, default 100, stochastic
  episodes, as minari's num_episodes_average_score) is the datasets' ref_max_score; a
  uniform-random policy's is ref_min_score. (10 episodes were too few: Hopper's expert falls in
  ~40% of its episodes, and 10 of them gave 2290 where 1195 gave 3027.)
- medium: the first snapshot at or after the step where PPO's training return (mean of the
  last 5 logged iterations) reaches medium_fraction (1/3, as D4RL) of the expert return.
- medium-replay: PPO's training rollouts up to the medium snapshot, re-rolled: iteration k's
  rollout (num_steps x num_envs steps, PPO's own envs and reset seed) is collected again with
  the snapshot PPO collected it with (the latest one before k; iteration 1: a fresh policy
  initialised from the run's seed, as PPO's is), the envs running on across iterations as in
  training. Its size is set by the PPO run (--steps does not apply).
- random: uniform random actions (D4RL used a randomly initialised policy).
- medium-expert: the medium and the expert datasets (each --steps rows) concatenated.
Rollouts sample the stochastic policy (as D4RL), observation normaliser frozen at the
snapshot's statistics; stored actions are the clipped ones the env executed.
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from envs.offline.behaviour_policy import (
    CheckpointLayoutError,
    GaussianMLP,
    Normalizer,
    read_checkpoint,
)
from envs.offline.d4rl import read_hdf5, write_hdf5
from envs.offline.dataset import Dataset
from envs.offline.rollout import Roller
from envs.offline.store import (
    DEFAULT_PPO_BUDGET,
    DEFAULT_SCORE_EPISODES,
    DEFAULT_STEPS,
    MINARI_NAMESPACE,
    dataset_name,
    hdf5_path,
    minari_path,
)

REPO = Path(__file__).resolve().parents[2]
PPO_SCRIPT = REPO / "algos" / "ppo.py"
SEED_OFFSETS = {"random": 101, "medium": 202, "expert": 303, "ref_random": 404, "ref_expert": 505}


class GenerationError(RuntimeError):
    """The behaviour run failed, or a flag cannot be served."""


def recipe_command(
    env_id: str,
    kind: str,
    steps: int,
    seed: int,
    budget: int,
    ppo_args: str,
    score_episodes: int = DEFAULT_SCORE_EPISODES,
) -> str:
    """The command that rebuilds a dataset."""
    cmd = (
        f"python -m envs.offline generate --env {env_id} --kind {kind} --steps {steps} "
        f"--seed {seed} --ppo-budget {budget}"
    )
    cmd += f" --ppo-args {shlex.quote(ppo_args)}" if ppo_args else ""
    if score_episodes != DEFAULT_SCORE_EPISODES:
        cmd += f" --score-episodes {score_episodes}"
    return cmd


def behaviour_dir(root: Path, env_id: str, seed: int, budget: int, ppo_args: str) -> Path:
    """The cache directory of one PPO behaviour run."""
    tag = "-x" + hashlib.sha1(ppo_args.encode()).hexdigest()[:8] if ppo_args else ""
    return root / "behaviour" / f"{env_id}-s{seed}-b{budget}{tag}"


def ppo_command(run_dir: Path, env_id: str, seed: int, budget: int, ppo_args: str) -> list:
    """The behaviour run's command: a new run, or --resume of the interrupted one in run_dir
    (its saved config, --keep-checkpoints included, and its step files carry on)."""
    if (run_dir / "config.json").exists():
        return [sys.executable, str(PPO_SCRIPT), "--resume", str(run_dir), "--no-progress"]
    return [
        sys.executable,
        str(PPO_SCRIPT),
        "--env-id",
        env_id,
        "--seed",
        str(seed),
        "--total-timesteps",
        str(budget),
        "--run-dir",
        str(run_dir),
        "--checkpoint-every",
        "1",
        "--keep-checkpoints",
        "--eval-every",
        "0",
        "--no-tensorboard",
        "--no-progress",
        *shlex.split(ppo_args),
    ]


def train_behaviour(
    run: Path,
    env_id: str,
    seed: int,
    budget: int,
    ppo_args: str,
    progress: bool,
    score_episodes: int = DEFAULT_SCORE_EPISODES,
):
    """Run (or resume, or reuse) the PPO behaviour run in `run`; returns its behaviour.json
    (scored again, without training, when it was scored over another number of episodes)."""
    info_path = run / "behaviour.json"
    if info_path.exists():
        info = json.loads(info_path.read_text())
        if info.get("score_episodes") != score_episodes:
            info.update(_scores(run, env_id, seed, _activation(info), score_episodes))
            info_path.write_text(json.dumps(info, indent=1) + "\n")
        return info
    run_dir = run / "ppo"
    run.mkdir(parents=True, exist_ok=True)
    cmd = ppo_command(run_dir, env_id, seed, budget, ppo_args)
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    bar = tqdm(total=budget, unit="step", desc=f"PPO {env_id} s{seed}", disable=not progress)
    with open(run / "ppo.log", "ab") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=REPO)
        try:  # polling only moves the bar: PPO keeps every checkpoint itself, none is missed
            while True:
                finished = proc.poll() is not None
                snaps = _snapshots(run)
                if snaps:
                    bar.update(max(0, min(snaps[-1][0], budget) - bar.n))
                if finished:
                    break
                time.sleep(0.2)
        except BaseException:
            proc.kill()
            raise
        finally:
            bar.close()
    if proc.returncode != 0:
        tail = (run / "ppo.log").read_text(errors="replace").strip().splitlines()[-5:]
        raise GenerationError(
            f"the behaviour run failed (exit {proc.returncode}); {run / 'ppo.log'}:\n"
            + "\n".join(tail)
        )
    config = json.loads((run_dir / "config.json").read_text())["args"]
    info = {
        "env_id": env_id,
        "seed": seed,
        "ppo_budget": budget,
        "ppo_args": ppo_args,
        "ppo_command": " ".join(shlex.quote(c) for c in cmd[1:]).replace(str(REPO) + "/", ""),
        "num_steps": int(config["num_steps"]),
        "num_envs": int(config["num_envs"]),
        "hidden_sizes": list(config["hidden_sizes"]),
        "activation": config.get("activation", "tanh"),  # PPO's policy: tanh, no flag
        "curve": _train_curve(run_dir / "metrics.csv"),
    }
    if not _snapshots(run):
        raise GenerationError(f"the behaviour run in {run_dir} kept no checkpoints/step_*.pt")
    info.update(_scores(run, env_id, seed, info["activation"], score_episodes))
    info_path.write_text(json.dumps(info, indent=1) + "\n")
    return info


def _activation(info: dict) -> str:
    return info.get("activation", "tanh")  # behaviour.json of the earlier generator: tanh


def _scores(run: Path, env_id: str, seed: int, activation: str, episodes: int) -> dict:
    """The reference returns: uniform-random and final (expert) policy, `episodes` each."""
    expert_step, expert_path = _snapshots(run)[-1]
    policy = load_policy(expert_path, activation)
    return {
        "score_episodes": episodes,
        "random_return": _mean_return(
            env_id, None, None, seed + SEED_OFFSETS["ref_random"], episodes
        ),
        "expert_step": expert_step,
        "expert_return": _mean_return(
            env_id, policy, seed, seed + SEED_OFFSETS["ref_expert"], episodes
        ),
    }


def _train_curve(metrics: Path) -> list[tuple[int, float]]:
    with open(metrics, newline="") as f:
        rows = list(csv.DictReader(f))
    return [(int(float(r["step"])), float(r["train/episode_return"])) for r in rows]


def _snapshots(run: Path) -> list[tuple[int, Path]]:
    """(step, path) of the behaviour run's kept checkpoints, by step: ppo/checkpoints/step_*.pt
    (and snapshots/step_*.pt of a run cached by the earlier generator, which linked them)."""
    found = {}
    for folder in (run / "snapshots", run / "ppo" / "checkpoints"):
        for p in folder.glob("step_*.pt"):
            found[int(p.stem.split("_")[1])] = p
    return sorted(found.items())


def load_policy(path: Path, activation: str = "tanh"):
    """act(obs float32 [n, d]) -> sampled actions, from a PPO checkpoint (policy and frozen
    observation normaliser), read by envs/offline/behaviour_policy.py."""
    try:
        policy, normalizer = read_checkpoint(path, activation)
    except CheckpointLayoutError as exc:
        raise GenerationError(str(exc)) from None

    def act(obs: np.ndarray) -> np.ndarray:
        x = normalizer(obs) if normalizer is not None else obs
        with torch.inference_mode():
            return policy.sample(torch.from_numpy(np.ascontiguousarray(x))).numpy()

    return act


def uniform_policy(env_id: str, seed: int):
    """act(obs) -> uniform random actions in the action space."""
    import envs

    probe = envs.make(env_id, 1, 0)
    space = probe.single_action_space
    probe.close()
    rng = np.random.default_rng(seed)
    return lambda obs: rng.uniform(space.low, space.high, (len(obs), *space.shape))


def _mean_return(env_id: str, act, torch_seed: int | None, seed: int, episodes: int) -> float:
    """Mean return of `episodes` episodes of act (None: uniform random) in up to 8 envs, each
    env contributing its first ceil(episodes / n) (so short episodes are not favoured)."""
    if act is None:
        act = uniform_policy(env_id, seed)
    if torch_seed is not None:
        torch.manual_seed(torch_seed)
    n = min(8, episodes)
    quota = -(-episodes // n)
    roller = Roller(env_id, n, seed)
    while min(len(r) for r in roller.env_returns) < quota:
        roller.collect(act, 200)
        roller.chunks.clear()
    roller.close()
    returns = [r for env in roller.env_returns for r in env[:quota]][:episodes]
    return float(np.mean(returns))


def pick_medium(info: dict, snapshots: list[tuple[int, Path]], fraction: float):
    """(step, path) of the medium snapshot (module doc) and the target return."""
    target = fraction * info["expert_return"]
    steps = [s for s, _ in info["curve"]]
    returns = np.array([r for _, r in info["curve"]], np.float64)
    reached = None
    for i in range(len(returns)):
        window = returns[max(0, i - 4) : i + 1]
        window = window[np.isfinite(window)]
        if len(window) and window.mean() >= target:
            reached = steps[i]
            break
    if reached is None:  # never reached: the last snapshot below the expert
        reached = steps[-1]
    for step, path in snapshots:
        if step >= reached:
            return step, path, target
    return snapshots[-1][0], snapshots[-1][1], target


def _rollout(env_id: str, act, steps: int, seed: int, num_envs: int, progress: bool, desc: str):
    torch.manual_seed(seed)
    bar = tqdm(total=steps, unit="step", desc=desc, disable=not progress)
    roller = Roller(env_id, num_envs, seed, bar)
    roller.collect(act, math.ceil(steps / num_envs))
    bar.close()
    roller.close()
    return roller.arrays(limit=steps), roller.returns


def _medium_replay(env_id, info, snapshots, medium_step, seed, progress):
    import envs

    batch = info["num_steps"] * info["num_envs"]
    iterations = max(1, medium_step // batch)
    bar = tqdm(total=iterations * batch, unit="step", desc="medium-replay", disable=not progress)
    torch.manual_seed(seed)  # PPO seeds torch with the run's seed before building its policy
    probe = envs.make(env_id, 1, 0)
    obs_dim = int(np.prod(probe.single_observation_space.shape))
    act_dim = int(np.prod(probe.single_action_space.shape))
    probe.close()
    initial = GaussianMLP.initial(obs_dim, act_dim, info["hidden_sizes"], _activation(info))
    normalizer = Normalizer.fresh(obs_dim)

    def first(obs: np.ndarray) -> np.ndarray:  # the untrained policy, normaliser updating
        normalizer.update(obs)
        with torch.inference_mode():
            return initial.sample(torch.from_numpy(normalizer(obs))).numpy()

    roller = Roller(env_id, info["num_envs"], seed, bar)
    by_step = dict(snapshots)
    for k in range(1, iterations + 1):
        before = [s for s in by_step if s <= (k - 1) * batch]
        act = first if not before else load_policy(by_step[max(before)], _activation(info))
        roller.collect(act, info["num_steps"])
    bar.close()
    roller.close()
    return roller.arrays(), roller.returns, iterations


def generate(
    env_id: str,
    kind: str,
    out: Path,
    steps: int = DEFAULT_STEPS,
    seed: int = 0,
    ppo_budget: int = DEFAULT_PPO_BUDGET,
    ppo_args: str = "",
    medium_fraction: float = 1 / 3,
    num_envs: int = 8,
    minari: bool = True,
    progress: bool = True,
    force: bool = False,
    score_episodes: int = DEFAULT_SCORE_EPISODES,
) -> Path:
    """Write <out>/<id>.hdf5 (and the Minari copy) for one kind; returns the HDF5 path. An
    existing file is kept unless force."""
    out = Path(out).expanduser()
    name = dataset_name(env_id, kind, seed, steps, ppo_budget, score_episodes)
    if ppo_args:
        name += "-x" + hashlib.sha1(ppo_args.encode()).hexdigest()[:8]
    path = hdf5_path(out, name)
    if path.exists() and not force:
        return path
    meta = {
        "env_id": env_id,
        "kind": kind,
        "seed": seed,
        "recipe": recipe_command(env_id, kind, steps, seed, ppo_budget, ppo_args, score_episodes),
        "generator": "controlrl envs/offline/generate.py",
        "versions": _versions(),
    }
    ref_min = ref_max = None
    if kind == "random":
        act = uniform_policy(env_id, seed + SEED_OFFSETS["random"])
        arrays, returns = _rollout(
            env_id, act, steps, seed + SEED_OFFSETS["random"], num_envs, progress, "random"
        )
        meta["algorithm"] = "uniform random actions"
        # ref scores only as a pair: the expert's return needs the behaviour run (if cached);
        # without it, loading falls back to D4RL's for the env
        run = behaviour_dir(out, env_id, seed, ppo_budget, ppo_args)
        if (run / "behaviour.json").exists():
            info = json.loads((run / "behaviour.json").read_text())
            ref_min, ref_max = info["random_return"], info["expert_return"]
    elif kind == "medium-expert":
        parts = [
            read_hdf5(
                generate(env_id, k, out, steps, seed, ppo_budget, ppo_args, medium_fraction,
                         num_envs, minari, progress, force, score_episodes)
            )
            for k in ("medium", "expert")
        ]  # fmt: skip
        fields = ("observations", "actions", "rewards", "next_observations", "terminals")
        arrays = {k: np.concatenate([getattr(p, k) for p in parts]) for k in (*fields, "timeouts")}
        returns = None
        meta.update({k: parts[1].metadata[k] for k in ("algorithm", "behaviour")})
        meta["parts"] = {
            k: p.metadata["policy_return_mean"] for k, p in zip(("medium", "expert"), parts)
        }
        counts = [p.metadata["episodes"] for p in parts]
        means = [p.metadata["policy_return_mean"] if c else 0.0 for p, c in zip(parts, counts)]
        mean = np.dot(means, counts) / sum(counts) if sum(counts) else float("nan")
        meta["policy_return_mean"] = float(mean)
        meta["episodes"] = sum(p.metadata["episodes"] for p in parts)
        ref_min, ref_max = parts[1].ref_min_score, parts[1].ref_max_score
    else:
        run = behaviour_dir(out, env_id, seed, ppo_budget, ppo_args)
        info = train_behaviour(run, env_id, seed, ppo_budget, ppo_args, progress, score_episodes)
        snapshots = _snapshots(run)
        medium_step, medium_path, target = pick_medium(info, snapshots, medium_fraction)
        ref_min, ref_max = info["random_return"], info["expert_return"]
        meta["algorithm"] = "PPO (algos/ppo.py)"
        meta["behaviour"] = {
            k: info[k] for k in ("ppo_command", "ppo_budget", "expert_return", "random_return")
        }
        meta["behaviour"]["medium_target_return"] = target
        if kind == "expert":
            step, policy_path = snapshots[-1]
        else:
            step, policy_path = medium_step, medium_path
        meta["policy_step"] = step
        if kind == "medium-replay":
            arrays, returns, iters = _medium_replay(env_id, info, snapshots, step, seed, progress)
            meta["ppo_iterations"] = iters
        else:
            act = load_policy(policy_path, _activation(info))
            s = seed + SEED_OFFSETS[kind]
            arrays, returns = _rollout(env_id, act, steps, s, num_envs, progress, kind)
    if returns is not None:
        meta["policy_return_mean"] = float(np.mean(returns)) if returns else float("nan")
        meta["episodes"] = len(returns)
    data = Dataset(
        **arrays,
        env_id=env_id,
        ref_min_score=ref_min,
        ref_max_score=ref_max,
        metadata=meta,
        source=str(path),
    )
    write_hdf5(data, path)
    if minari and _has_minari():
        import shutil

        from envs.offline.minari_io import write_minari

        target_dir = minari_path(out, name)
        shutil.rmtree(target_dir, ignore_errors=True)
        write_minari(data, target_dir, f"{MINARI_NAMESPACE}/{name}-v0")
    return path


def _has_minari() -> bool:
    try:
        import minari  # noqa: F401
    except ImportError:
        return False
    return True


def _versions() -> dict:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for pkg in ("gymnasium", "mujoco", "torch", "numpy"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            pass
    return out
