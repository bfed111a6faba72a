"""Final returns of an on-policy algorithm over seeds, learning curves with bootstrap CIs, next to
published reference numbers (ALGOS). Suite 'mujoco': Hopper, HalfCheetah, Walker2d (v5) vs PPO
of CleanRL (v4, 1M steps, 3 seeds) and TRPO of sb3-contrib / RL Zoo (v3, 1M). Suite 'dmc':
dm_control cheetah-run and walker-walk vs CleanRL's PPO at 8M steps.

    python paper_figures/mujoco_results.py --algo ppo --train   # sweeps what is missing, plots
    python paper_figures/mujoco_results.py --algo trpo --train
    python paper_figures/mujoco_results.py --algo ppo --suite dmc --train
    python paper_figures/mujoco_results.py --algo ppo           # plots finished runs only
    python paper_figures/mujoco_results.py --algo ppo --from-csv    # the PNG from the CSV alone

Writes <out>/<algo>_<suite>.csv (one row per run: final_train_return, the episode-weighted mean
return of the training episodes that ended in the last --final-window env steps;
final_eval_return, the deterministic evaluation at the end) and <out>/<algo>_<suite>.png (from
runs: learning curves and periodic evaluations; --from-csv: each seed's final returns).
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import numpy as np

from controlrl import plots, stats
from controlrl.cli import ArgumentParser
from controlrl.experiment import SweepConfig, env_tag, read_rows
from paper_figures.lab import run_csvs, scripts

ROOT = Path(__file__).resolve().parents[1]

SUITES = {
    "mujoco": "Hopper-v5,HalfCheetah-v5,Walker2d-v5",
    "dmc": "dmc:cheetah-run,dmc:walker-walk",
}
ALGOS = {
    "ppo": {  # CleanRL ppo_continuous_action.py, MuJoCo v4, 1M steps, 3 seeds
        "reference": {"Hopper-v5": 2383.0, "HalfCheetah-v5": 1443.0, "Walker2d-v5": 2288.0},
        "reference_label": "CleanRL PPO (v4, 1M)",
        # CleanRL's PPO on dm_control (its benchmark report, 8M steps): a different budget
        "reference_dmc": {"dmc:cheetah-run": 472.0, "dmc:walker-walk": 306.0},
        "reference_label_dmc": "CleanRL PPO (dm_control, 8M)",
        "compare": "final_train_return",  # CleanRL reports training episode returns
        "overrides": {},
    },
    "trpo": {  # sb3-contrib TRPO with RL Zoo hyperparameters, MuJoCo v3, 1M steps
        "reference": {"Hopper-v5": 3372.0, "HalfCheetah-v5": 1803.0, "Walker2d-v5": 4502.0},
        "reference_label": "sb3-contrib TRPO (v3, 1M)",
        "compare": "final_eval_return",  # RL Zoo's benchmark evaluates the deterministic policy
        "overrides": {"HalfCheetah-v5": ["--max-kl", "0.04"]},  # RL Zoo's tuned value
    },
}
EVAL_FLAGS = ["--eval-every", "200000", "--eval-episodes", "5"]


def sweep_groups(
    algo: str, env_ids: list[str], root: Path, suite: str = "mujoco"
) -> list[tuple[Path, list[str], list]]:
    """(sweep dir, envs, extra flags): envs sharing the same per-env overrides share a sweep."""
    groups: dict[tuple, list[str]] = {}
    for env_id in env_ids:
        groups.setdefault(tuple(ALGOS[algo]["overrides"].get(env_id, [])), []).append(env_id)
    out = []
    for extra, envs_ in groups.items():
        name = f"{algo}_{suite}" + ("" if not extra else "_" + "_".join(envs_))
        out.append((root / name, envs_, [*EVAL_FLAGS, *extra]))
    return out


def main(argv: list[str] | None = None) -> None:
    p = ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--algo", choices=sorted(ALGOS), default="ppo")
    p.add_argument("--sweeps-root", type=Path, default=ROOT / "runs" / "sweeps")
    p.add_argument("--out", type=Path, default=ROOT / "paper_figures" / "out")
    p.add_argument("--suite", choices=sorted(SUITES), default="mujoco")
    p.add_argument("--envs", default=None, help="comma-separated ids (default: the suite's)")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--total-timesteps", type=int, default=1_000_000)
    p.add_argument("--final-window", type=int, default=20_480)
    p.add_argument("--train", action="store_true", help="run missing runs first (a sweep)")
    p.add_argument("--workers", type=int, default=1, help="runs at once when training")
    what = "the PNG from <out>/<algo>_<suite>.csv alone"
    p.add_argument("--from-csv", action="store_true", help=what)
    p.add_argument("extra", nargs="*", help="flags passed to every run (after --)")
    args = p.parse_args(argv)
    env_ids = (args.envs or SUITES[args.suite]).split(",")
    info = ALGOS[args.algo]
    suffix = "" if args.suite == "mujoco" else f"_{args.suite}"
    ref = info.get("reference" + suffix, {})
    ref_label = info.get("reference_label" + suffix, "")
    groups_ = sweep_groups(args.algo, env_ids, args.sweeps_root, args.suite)
    stem = args.out / f"{args.algo}_{args.suite}"
    if args.from_csv:
        rows = read_rows(
            stem.with_suffix(".csv"),
            ints=("steps",),
            floats=("final_train_return", "final_eval_return"),
        )
        plot_finals(args, rows, ref, ref_label, stem.with_suffix(".png"))
        report(args, rows, env_ids, ref, ref_label)
        print(f"wrote {stem}.png from {stem}.csv")
        return
    if args.train:
        for sweep_dir, envs_, extra in groups_:
            config = SweepConfig(
                [args.algo], envs_, args.seeds, args.total_timesteps, [*extra, *args.extra]
            )
            scripts.train(config, sweep_dir, workers=args.workers)

    rows, curves = [], {}
    for sweep_dir, envs_, _ in groups_:
        for env_id in envs_:
            for seed, run_dir, final in run_csvs.finished(
                sweep_dir / "runs" / args.algo / env_tag(env_id)
            ):
                curves.setdefault(env_id, {"train": [], "eval": []})
                curves[env_id]["train"].append(plots.read_metrics(run_dir, "train/episode_return"))
                try:  # periodic evaluations (every 200k steps)
                    steps, ev = plots.read_metrics(run_dir, "eval/return")
                except KeyError:  # a run from before the column existed: final point only
                    steps, ev = np.zeros(0), np.zeros(0)
                curves[env_id]["eval"].append(
                    (np.append(steps, final["step"]), np.append(ev, final["eval_return_mean"]))
                )
                row = dict(algo=args.algo, env_id=env_id, seed=seed)
                row["steps"] = int(final["step"])
                row["final_train_return"] = plots.final_return(run_dir, args.final_window)
                row["final_eval_return"] = final["eval_return_mean"]
                rows.append(row | {"reference": ref.get(env_id, "")})
    if not rows:
        raise SystemExit(f"error: no finished {args.algo} runs under {args.sweeps_root}")
    args.out.mkdir(parents=True, exist_ok=True)
    with stem.with_suffix(".csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)

    import matplotlib.pyplot as plt

    with plt.rc_context(plots.STYLE):
        fig, axes = plt.subplots(1, len(curves), figsize=(4 * len(curves), 3), squeeze=False)
        for ax, (env_id, env_curves) in zip(axes[0], curves.items()):
            name = f"controlrl {args.algo.upper()}"
            plots.plot_curves(ax, {f"{name} train": env_curves["train"]}, smooth_window=5)
            by_step: dict[float, list[float]] = {}
            for steps, values in env_curves["eval"]:
                for st, v in zip(steps, values):
                    by_step.setdefault(float(st), []).append(float(v))
            xs = sorted(by_step)
            n = min(len(by_step[x]) for x in xs)  # the label names the fewest seeds of a point
            kind = "95% CI" if n >= stats.MIN_SEEDS else "range"
            mean, lo, hi = [], [], []
            for x in xs:
                m, low, high, _ = stats.band(np.array(by_step[x])[:, None])
                mean.append(m[0])
                lo.append(m[0] - low[0])
                hi.append(high[0] - m[0])
            label = f"{name} deterministic eval: mean, {plots.band_label(kind, n)}"
            ax.errorbar(xs, mean, yerr=[lo, hi], fmt="o", ms=3, capsize=2, label=label)
            if env_id in ref:
                ax.axhline(ref[env_id], color="k", ls="--", lw=1, label=ref_label)
            ax.set_title(env_id)
            ax.set_ylabel("episode return")
            ax.legend(loc="lower right", fontsize=7)
        counts = [len(c["train"]) for c in curves.values()]
        fig.suptitle(
            f"{args.algo.upper()}, {args.total_timesteps:,} steps per run, "
            f"{plots.band_words(counts)}",
            fontsize=9,
        )
        scripts.save_figure(fig, stem.with_suffix(".png"))
    report(args, rows, env_ids, ref, ref_label)
    cmd = " ".join(argv if argv is not None else sys.argv[1:])
    print(f"wrote {stem}.png and .csv; command: python paper_figures/mujoco_results.py {cmd}")


def report(args, rows: list[dict], env_ids: list[str], ref: dict, ref_label: str) -> None:
    """Per env: final training and evaluation return, mean (sample SD) over seeds."""
    info = ALGOS[args.algo]
    print(
        f"per env, mean (sample SD) over seeds; the reference ({ref_label}) is "
        f"compared with {info['compare']}"
    )
    for env_id in env_ids:
        mine = [r for r in rows if r["env_id"] == env_id]
        if mine:
            train = [r["final_train_return"] for r in mine]
            ev = [r["final_eval_return"] for r in mine]
            print(
                f"  {env_id}: train {np.mean(train):.0f} (sample SD {stats.sample_sd(train):.0f}), "
                f"deterministic eval {np.mean(ev):.0f} (sample SD {stats.sample_sd(ev):.0f}) over "
                f"{len(mine)} seeds; reference {ref.get(env_id, '-')}"
            )


def plot_finals(args, rows: list[dict], ref: dict, ref_label: str, path: Path) -> None:
    """Per env, each seed's final training and deterministic evaluation return (dots), their
    mean, the 95% bootstrap CI only from >= 5 seeds, and the reference as a dashed line."""
    import matplotlib.pyplot as plt

    env_ids = list(dict.fromkeys(r["env_id"] for r in rows))
    columns = (("final_train_return", "final training"), ("final_eval_return", "final eval"))
    counts = []
    with plt.rc_context(plots.STYLE):
        fig, axes = plt.subplots(1, len(env_ids), figsize=(3.4 * len(env_ids), 3.3), squeeze=False)
        for ax, env_id in zip(axes[0], env_ids):
            mine = [r for r in rows if r["env_id"] == env_id]
            counts.append(len(mine))
            for j, (key, _) in enumerate(columns):
                plots.plot_points(ax, j, [r[key] for r in mine], f"C{j}", 0.12)
            span = [-0.6, len(columns) - 0.4]
            if env_id in ref:  # a line the y limits take in, unlike axhline
                ax.plot(span, [ref[env_id]] * 2, "k--", lw=1, label=ref_label)
                ax.legend(loc="best", fontsize=7)
            ax.set_xticks(range(len(columns)), [c[1] for c in columns])
            ax.set_xlim(*span)
            ax.set_title(f"{env_id} ({len(mine)} seeds)")
            ax.set_ylabel("episode return")
        steps = max(r["steps"] for r in rows)
        fig.suptitle(
            f"{args.algo.upper()}, {steps:,} steps per run: final returns\n"
            f"{plots.points_words(counts)}",
            fontsize=9,
        )
        scripts.save_figure(fig, path)


if __name__ == "__main__":
    main()
