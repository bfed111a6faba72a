"""Our PPO against Stable-Baselines3's PPO under identical hyperparameters, many seeds each:
are the distributions of final return the same?

    python paper_figures/ppo_vs_sb3.py --train      # 10 seeds each, HalfCheetah-v5, 300k steps
    python paper_figures/ppo_vs_sb3.py              # tables and figure from finished runs
    python paper_figures/ppo_vs_sb3.py --train --sides controlrl,SB3,"controlrl vf_coef=1"

Both sides (SIDES: algos/ppo.py with MATCH; SB3 through paper_figures/peers/sb3_ppo.py, which
states its settings) go through the sweep runner and are evaluated by controlrl.evaluate. Each
side against SB3 (compare): exact permutation tests of the difference of means and of standard
deviations, the two-sample Kolmogorov-Smirnov test, a bootstrap 95% CI of the difference of
medians. Writes <out>/ppo_vs_sb3.csv (one row per run), ppo_vs_sb3_tests.csv and ppo_vs_sb3.png.
"""

from __future__ import annotations

import itertools
import json
import sys
from pathlib import Path

import numpy as np

from controlrl import bench, plots
from controlrl.cli import ArgumentParser
from controlrl.experiment import SweepConfig, env_tag
from paper_figures.lab import scripts

ROOT = Path(__file__).resolve().parents[1]
PEERS = ROOT / "paper_figures" / "peers"
MATCH = ["--no-anneal-lr", "--no-clip-vloss", "--eval-every", "0"]
SIDES = {  # label: (script, its directory, flags that make it match SB3, sweep directory name)
    "controlrl": ("ppo", ROOT / "algos", MATCH, "ppo"),
    "SB3": ("sb3_ppo", PEERS, [], "sb3_ppo"),
    # SB3's value loss is F.mse_loss (no 1/2), ours and CleanRL's 0.5 * MSE: with the same
    # vf_coef SB3 weighs the critic twice as much against the policy in the global grad-norm
    # clip; this side gives ours SB3's weight
    "controlrl vf_coef=1": ("ppo", ROOT / "algos", [*MATCH, "--vf-coef", "1.0"], "ppo_vf1"),
}


def permutation_test(a: np.ndarray, b: np.ndarray, stat) -> tuple[float, float]:
    """(observed stat(a) - stat(b), exact two-sided p-value over every split of the pooled
    samples into groups of len(a) and len(b))."""
    pooled = np.concatenate([a, b])
    observed = stat(a) - stat(b)
    n, hits, total = len(a), 0, 0
    for idx in itertools.combinations(range(len(pooled)), n):
        mask = np.zeros(len(pooled), bool)
        mask[list(idx)] = True
        d = stat(pooled[mask]) - stat(pooled[~mask])
        hits += abs(d) >= abs(observed) - 1e-12 * max(1.0, abs(observed))
        total += 1
    return float(observed), hits / total


def bootstrap_median_diff(
    a: np.ndarray, b: np.ndarray, n_boot: int = 10_000, seed: int = 0
) -> tuple[float, float, float]:
    """median(a) - median(b) and its percentile bootstrap 95% CI (each group resampled)."""
    rng = np.random.default_rng(seed)
    ra = np.median(a[rng.integers(0, len(a), (n_boot, len(a)))], axis=1)
    rb = np.median(b[rng.integers(0, len(b), (n_boot, len(b)))], axis=1)
    lo, hi = np.quantile(ra - rb, [0.025, 0.975])
    return float(np.median(a) - np.median(b)), float(lo), float(hi)


def compare(a: np.ndarray, b: np.ndarray) -> dict:
    """Every statistic of the module docstring for samples a (ours) and b (SB3)."""
    from scipy.stats import ks_2samp

    mean_diff, p_mean = permutation_test(a, b, np.mean)
    std_diff, p_std = permutation_test(a, b, lambda x: np.std(x, ddof=1))
    med, lo, hi = bootstrap_median_diff(a, b)
    ks = ks_2samp(a, b, method="exact")
    out = dict(mean_diff=mean_diff, p_mean_permutation=p_mean, std_diff=std_diff)
    out |= dict(p_std_permutation=p_std, median_diff=med, median_diff_ci_lo=lo)
    return out | dict(median_diff_ci_hi=hi, ks_stat=float(ks.statistic), p_ks=float(ks.pvalue))


def main(argv: list[str] | None = None) -> None:
    p = ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--train", action="store_true", help="run missing runs first (two sweeps)")
    p.add_argument("--env-id", default="HalfCheetah-v5")
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--total-timesteps", type=int, default=300_000)
    p.add_argument("--final-window", type=int, default=20_480, help="env steps of train return")
    p.add_argument("--workers", type=int, default=2, help="runs at once when training")
    p.add_argument("--sweeps-root", type=Path, default=ROOT / "runs" / "sweeps" / "ppo_vs_sb3")
    p.add_argument("--out", type=Path, default=ROOT / "paper_figures" / "out")
    p.add_argument("--sides", default="controlrl,SB3", help=f"of: {', '.join(SIDES)}")
    p.add_argument("extra", nargs="*", help="flags for both sides (after --), e.g. --eval-episodes")
    args = p.parse_args(argv)
    if args.seeds < 2 or args.total_timesteps < 2048 or args.workers < 1:
        p.error("need --seeds >= 2, --total-timesteps >= 2048, --workers >= 1")
    sides = args.sides.split(",")
    if "SB3" not in sides or len(sides) < 2 or any(s not in SIDES for s in sides):
        p.error(f"--sides: SB3 and at least one of {', '.join(SIDES)}, got {args.sides}")

    rows, curves = [], {}
    for label in sides:
        algo, algos_dir, flags, name = SIDES[label]
        sweep_dir = args.sweeps_root / name
        config = SweepConfig(
            [algo], [args.env_id], args.seeds, args.total_timesteps, [*flags, *args.extra]
        )
        if args.train:
            scripts.train(config, sweep_dir, workers=args.workers, algos_dir=algos_dir)
        env_dir = sweep_dir / "runs" / algo / env_tag(args.env_id)
        for path in sorted(env_dir.glob("seed*/final_eval.json")):
            run_dir, final = path.parent, json.loads(path.read_text())
            curves.setdefault(label, []).append(plots.read_metrics(run_dir, "train/episode_return"))
            row = dict(side=label, env_id=args.env_id, seed=int(run_dir.name.removeprefix("seed")))
            row["steps"] = int(final["step"])
            row["final_train_return"] = plots.final_return(run_dir, args.final_window)
            rows.append(row | {"final_eval_return": final["eval_return_mean"]})
    if sorted(curves) != sorted(sides) or min(len(c) for c in curves.values()) < 2:
        raise SystemExit(f"error: need >= 2 finished runs of each side under {args.sweeps_root}")
    args.out.mkdir(parents=True, exist_ok=True)
    stem = args.out / "ppo_vs_sb3"
    bench.write_csv(stem.with_suffix(".csv"), rows, None)
    tests, metrics = [], ("final_train_return", "final_eval_return")
    for side in (s for s in sides if s != "SB3"):
        for metric in metrics:
            a, b = (np.array([r[metric] for r in rows if r["side"] == s]) for s in (side, "SB3"))
            summary = {"side": side, "metric": metric, "n": len(a), "n_sb3": len(b)}
            summary |= {"median": float(np.median(a)), "median_sb3": float(np.median(b))}
            summary |= {"max": float(a.max()), "max_sb3": float(b.max())}
            tests.append(summary | compare(a, b))
    bench.write_csv(args.out / "ppo_vs_sb3_tests.csv", tests, None)
    import matplotlib.pyplot as plt

    n = len(sides)
    with plt.rc_context(plots.STYLE):
        fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.4))
        plots.plot_curves(left, {s: curves[s] for s in sides}, smooth_window=5)
        left.set_title(f"{args.env_id}: training return (mean, 95% bootstrap CI)")
        left.set_xlabel("env steps")
        left.legend(loc="lower right", fontsize=7)
        rng = np.random.default_rng(0)
        for i, metric in enumerate(metrics):
            for j, side in enumerate(sides):
                ys = np.array([r[metric] for r in rows if r["side"] == side])
                x0 = (n + 1) * i + j
                xs, label = x0 + rng.uniform(-0.12, 0.12, len(ys)), side if i == 0 else None
                right.scatter(xs, ys, s=12, color=f"C{j}", label=label)
                right.hlines(np.median(ys), x0 - 0.3, x0 + 0.3, color=f"C{j}")
                t = next((t for t in tests if t["side"] == side and t["metric"] == metric), None)
                if t is not None:  # vs SB3: permutation p of the means / KS p
                    text = f"{t['p_mean_permutation']:.2f}\n{t['p_ks']:.2f}"
                    where = dict(transform=right.get_xaxis_transform(), ha="center", va="bottom")
                    right.text(x0, 1.01, text, fontsize=6, **where)
        right.set_xticks([(n - 1) / 2, (n + 1) + (n - 1) / 2], ["final train", "final eval"])
        right.set_ylabel("return per run (bar: median)")
        right.legend(fontsize=7)
        counts = " vs ".join(f"{len(curves[s])}" for s in sides)
        fig.suptitle(
            f"PPO, identical settings, {args.total_timesteps:,} steps, {counts} seeds; "
            "above the points: p vs SB3 (permutation test of means / KS)",
            fontsize=9,
        )
        scripts.save_figure(fig, stem.with_suffix(".png"))
    for t in tests:
        p_values = {k: round(t[k], 3) for k in ("p_mean_permutation", "p_std_permutation", "p_ks")}
        print(f"{t['side']} vs SB3, {t['metric']}: median diff {t['median_diff']:.0f}, {p_values}")
    cmd = " ".join(argv if argv is not None else sys.argv[1:])
    print(f"wrote {stem}.png, .csv, _tests.csv; command: python paper_figures/ppo_vs_sb3.py {cmd}")


if __name__ == "__main__":
    main()
