"""python -m envs.offline generate|info: make a dataset, or describe one.

    python -m envs.offline generate --env Hopper-v5 --kind medium-replay
    python -m envs.offline info hopper-medium-v5-s0      # or a .hdf5 file, or a Minari dir

A bad dataset or flag prints one line on stderr and exits 2.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from envs.errors import ArgumentParser
from envs.offline.errors import DatasetError
from envs.offline.store import (
    DEFAULT_PPO_BUDGET,
    DEFAULT_SCORE_EPISODES,
    DEFAULT_STEPS,
    KINDS,
    data_root,
    load,
)


def _parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(prog="python -m envs.offline", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    gen = sub.add_parser("generate", help="train a behaviour policy (PPO) and roll it out")
    gen.add_argument("--env", required=True, help="Gymnasium id with Box actions, e.g. Hopper-v5")
    gen.add_argument("--kind", required=True, choices=KINDS)
    gen.add_argument(
        "--steps",
        type=int,
        default=DEFAULT_STEPS,
        help="transitions per policy (D4RL: 1M; medium-expert has 2x; medium-replay's size is "
        f"the PPO run's, up to the medium point) (default {DEFAULT_STEPS})",
    )
    gen.add_argument(
        "--out", type=Path, default=None, help="directory (default $CONTROLRL_DATA or "
        "~/.cache/controlrl/datasets, where load(<id>) looks)",
    )  # fmt: skip
    gen.add_argument("--seed", type=int, default=0, help="PPO and rollout seed (default 0)")
    gen.add_argument(
        "--ppo-budget",
        type=int,
        default=DEFAULT_PPO_BUDGET,
        help="env steps of the PPO behaviour run (default 1M: Hopper ~2000-3000 return, "
        "minutes on one core)",
    )
    gen.add_argument("--ppo-args", default="", help="extra algos/ppo.py flags, one string")
    gen.add_argument(
        "--medium-fraction", type=float, default=1 / 3, help="medium = this x expert return"
    )
    gen.add_argument("--num-envs", type=int, default=8, help="envs stepped per rollout")
    gen.add_argument(
        "--score-episodes",
        type=int,
        default=DEFAULT_SCORE_EPISODES,
        help=f"episodes behind each reference return (random, expert) (default"
        f" {DEFAULT_SCORE_EPISODES}; another count is part of the id: -e<count>)",
    )
    gen.add_argument("--no-minari", action="store_true", help="skip the Minari copy")
    gen.add_argument("--no-progress", action="store_true", help="no progress bars")
    gen.add_argument("--force", action="store_true", help="overwrite an existing dataset")
    info = sub.add_parser("info", help="load a dataset and print what it holds")
    info.add_argument("dataset", help="a .hdf5 file, a Minari directory or a generated id")
    return parser


def _check(args: argparse.Namespace) -> str | None:
    """The first bad generate flag, as a message; None when all are fine."""
    import gymnasium as gym

    if args.steps < 1:
        return f"--steps must be >= 1, got {args.steps}"
    if args.ppo_budget < 1:
        return f"--ppo-budget must be >= 1, got {args.ppo_budget}"
    if args.score_episodes < 1:
        return f"--score-episodes must be >= 1, got {args.score_episodes}"
    if args.num_envs < 1:
        return f"--num-envs must be >= 1, got {args.num_envs}"
    if not 0 < args.medium_fraction < 1:
        return f"--medium-fraction must be in (0, 1), got {args.medium_fraction}"
    if not 0 <= args.seed <= 2**32 - 1:  # numpy's legacy seed range (controlrl.cli.SEED_MAX)
        return f"--seed must be in [0, {2**32 - 1}], got {args.seed}"
    from envs import UnknownEnvError, check_env_id, split_id

    try:
        check_env_id(args.env)
    except UnknownEnvError as exc:
        return f"--env: {exc}"
    if split_id(args.env)[0] != "gym" or "-v" not in args.env:
        return f"--env {args.env}: the generator takes Gymnasium ids with a version (Hopper-v5)"
    if not isinstance(gym.spec(args.env).make().action_space, gym.spaces.Box):
        return f"--env {args.env}: the generator needs Box (continuous) actions"
    return None


def _check_fits_env(data) -> None:
    """DatasetError unless the dataset's observations and actions have the dimensions of the env
    it names (one that cannot be made here, or none named, is not checked)."""
    import envs

    if not data.env_id:
        return
    try:
        obs_space, act_space = envs.spaces(data.env_id)
    except (envs.UnknownEnvError, ImportError):
        return
    shapes = (data.observations.shape[1:], data.actions.shape[1:])
    if hasattr(act_space, "n"):  # Discrete actions: stored as one index per row
        fits = shapes[0] == obs_space.shape and shapes[1] in ((), (1,))
    else:
        fits = shapes == (obs_space.shape, act_space.shape)
    if not fits:
        raise DatasetError(
            data.source,
            None,
            f"observations x actions {shapes[0]} x {shapes[1]} do not fit its env "
            f"{data.env_id} ({obs_space.shape} x {act_space.shape})",
        )


def _info(target: str) -> None:
    from envs.offline.rollout import episode_returns

    data = load(target)
    _check_fits_env(data)
    returns = episode_returns(data.rewards, data.terminals, data.timeouts)
    print(f"source            {data.source}")
    print(f"env_id            {data.env_id or '(unknown)'}")
    print(f"transitions       {len(data)}")
    print(f"obs / action dim  {data.observations.shape[1]} / {data.actions.shape[1]}")
    print(f"terminals         {int(data.terminals.sum())}")
    print(f"timeouts          {int(data.timeouts.sum())}")
    if returns:
        line = f"{np.mean(returns):.1f} over {len(returns)} episodes"
        if data.ref_min_score is not None and data.ref_max_score is not None:
            line += f" (normalised {data.normalized_score(float(np.mean(returns))):.1f})"
        print(f"episode return    {line}")
    print(f"ref min / max     {data.ref_min_score} / {data.ref_max_score}")
    for key in ("kind", "recipe", "policy_return_mean", "ref_scores_from", "dropped_rows"):
        if key in data.metadata:
            print(f"{key:<17} {data.metadata[key]}")


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status."""
    args = _parser().parse_args(argv)
    try:
        if args.command == "info":
            _info(args.dataset)
            return 0
        problem = _check(args)
        if problem:
            print(f"error: {problem}", file=sys.stderr)
            return 2
        from envs.offline.generate import GenerationError, generate

        try:
            path = generate(
                args.env,
                args.kind,
                args.out or data_root(),
                steps=args.steps,
                seed=args.seed,
                ppo_budget=args.ppo_budget,
                ppo_args=args.ppo_args,
                medium_fraction=args.medium_fraction,
                num_envs=args.num_envs,
                minari=not args.no_minari,
                progress=not args.no_progress,
                force=args.force,
                score_episodes=args.score_episodes,
            )
        except GenerationError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        except OSError as exc:  # a full or read-only disk: what is on it stays as it was
            where = f" {exc.filename}" if exc.filename else ""
            print(f"error: cannot write{where}: {exc.strerror or exc}", file=sys.stderr)
            return 1
        data = load(path)
        ret = data.metadata.get("policy_return_mean")
        print(f"wrote {path}: {len(data)} transitions, behaviour return {ret:.1f}")
        return 0
    except DatasetError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
