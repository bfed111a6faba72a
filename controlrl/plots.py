"""Learning curves with their bands over seeds (controlrl.stats), IQM, profiles, regret: one style.

python -m controlrl.plots RUN_DIR [RUN_DIR ...] --out curve.png [--column train/episode_return]
"""

from __future__ import annotations

import csv
import json
import math
from collections import defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from controlrl.stats import (  # noqa: E402  (the one statistics module; re-exported here)
    MIN_SEEDS,
    band,
    bootstrap_ci,
    iqm,
    iqm_band,
    performance_profile,
    stratified_bootstrap_ci,
)
from envs.errors import ArgumentParser  # noqa: E402  (one-line parse errors)

__all__ = ["MIN_SEEDS", "band", "iqm", "iqm_band", "performance_profile", "stratified_bootstrap_ci"]

STYLE = {
    "figure.dpi": 100,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "font.size": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
}


# metrics.csv columns as an axis names them; column_label() words any other column
COLUMN_LABELS = {
    "train/episode_return": "training episode return",
    "train/episode_length": "training episode length (steps)",
    "train/episodes": "training episodes finished",
    "train/entropy": "policy entropy (nats)",
    "train/explained_variance": "value explained variance",
    "train/learning_rate": "learning rate",
    "eval/return": "evaluation return (deterministic policy)",
    "eval/normalized_score": "evaluation score (D4RL-normalised)",
    "time/sps": "env steps per second",
}


def column_label(column: str) -> str:
    """A human-readable axis label for a metrics.csv column ("train/kl_max" -> "kl max
    (training)"), the known ones from COLUMN_LABELS."""
    if column in COLUMN_LABELS:
        return COLUMN_LABELS[column]
    group, _, name = column.rpartition("/")
    words = name.replace("_", " ")
    where = {"train": "training", "eval": "evaluation", "time": "timing"}.get(group, group)
    return f"{words} ({where})" if where else words


def read_metrics(run_dir: Path, column: str) -> tuple[np.ndarray, np.ndarray]:
    """(steps, values) of one metrics.csv column, rows where it is NaN dropped."""
    with (Path(run_dir) / "metrics.csv").open() as f:
        rows = list(csv.DictReader(f))
    if rows and column not in rows[0]:
        raise KeyError(f"{run_dir}/metrics.csv has no column '{column}'")
    steps = np.array([float(r["step"]) for r in rows])
    values = np.array([float(r[column]) if r[column] != "" else math.nan for r in rows])
    keep = np.isfinite(values)
    return steps[keep], values[keep]


def final_return(run_dir: Path, window: int) -> float:
    """Episode-weighted mean training return of the episodes that ended in the last `window`
    env steps of a run (metrics.csv's per-iteration means weighted by their episode counts)."""
    with (Path(run_dir) / "metrics.csv").open() as f:
        rows = list(csv.DictReader(f))
    end = float(rows[-1]["step"])
    tail = [r for r in rows if float(r["step"]) > end - window and int(r["train/episodes"]) > 0]
    n = np.array([int(r["train/episodes"]) for r in tail], float)
    ret = np.array([float(r["train/episode_return"]) for r in tail])
    return float((n * ret).sum() / n.sum()) if n.sum() else float("nan")


TRAIN_LAPS = ("time/rollout_s", "time/update_s", "time/train_s")
"""timing.csv's per-iteration laps of collection and updates (an off-policy loop that
interleaves the two times them together as time/train_s)."""


def train_seconds(run_dir: Path) -> float:
    """Seconds a run spent collecting and updating: the sum of timing.csv's TRAIN_LAPS columns
    over its iterations (start-up and evaluations not counted)."""
    with (Path(run_dir) / "timing.csv").open() as f:
        rows = list(csv.DictReader(f))
    laps = [c for c in TRAIN_LAPS if rows and c in rows[0]]
    if rows and not laps:
        raise ValueError(f"{run_dir}/timing.csv has none of {TRAIN_LAPS}")
    return float(sum(float(r[c]) for r in rows for c in laps))


def smooth(values: np.ndarray, window: int) -> np.ndarray:
    """Trailing moving average over `window` points (shorter at the start)."""
    if window <= 1 or len(values) == 0:
        return values
    c = np.cumsum(np.insert(values, 0, 0.0))
    idx = np.arange(1, len(values) + 1)
    lo = np.maximum(idx - window, 0)
    return (c[idx] - c[lo]) / (idx - lo)


def normalize_scores(scores: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """(score - low) / (high - low) per task column, e.g. random and reference returns."""
    return (np.asarray(scores, np.float64) - low) / (np.asarray(high) - np.asarray(low))


def seeds_text(counts) -> str:
    """'3 seeds', or '3-5 seeds' where groups differ."""
    ns = sorted({int(n) for n in counts})
    return f"{ns[0]} seeds" if len(ns) == 1 else f"{ns[0]}-{ns[-1]} seeds"


def band_label(kind: str, n: int) -> str:
    """How a legend names a band over n seeds: '95% CI (10 seeds)' or 'range (3 seeds)'."""
    return f"{kind} ({n} seeds)"


def band_words(counts) -> str:
    """What the bands of groups with these seed counts are, for a title: the 95% bootstrap CI
    from >= MIN_SEEDS seeds, the min-max range below (no interval)."""
    ns = [int(n) for n in counts]
    if min(ns) >= MIN_SEEDS:
        return f"mean and 95% bootstrap CI over {seeds_text(ns)}"
    if max(ns) < MIN_SEEDS:
        return f"mean and min-max range over {seeds_text(ns)} (no interval below {MIN_SEEDS})"
    below = f"min-max range below ({seeds_text(ns)})"
    return f"mean and 95% bootstrap CI over {MIN_SEEDS}+ seeds, {below}"


def points_words(counts) -> str:
    """What plot_points drew for groups with these seed counts, for a title."""
    ns = [int(n) for n in counts]
    if min(ns) >= MIN_SEEDS:
        return f"mean and 95% bootstrap CI over {seeds_text(ns)}, dots: seeds"
    return f"mean over {seeds_text(ns)}, dots: seeds (no interval below {MIN_SEEDS} seeds)"


def plot_points(
    ax, x: float, values, color=None, spread: float = 0.0, interval: bool = True
) -> str:
    """Per-seed values at x: the seeds as small dots (spread over x +- spread), the mean as a
    marker and, from >= MIN_SEEDS seeds only (and only if `interval`), its 95% bootstrap CI as
    an error bar; returns what was drawn ("95% CI" or "no interval")."""
    v = np.asarray(values, np.float64).ravel()
    v = v[np.isfinite(v)]
    if v.size == 0:
        return "no interval"
    xs = x + (np.linspace(-spread, spread, v.size) if v.size > 1 else np.zeros(1))
    ax.plot(xs, v, ".", color=color, ms=5, alpha=0.7)
    if v.size < MIN_SEEDS or not interval:
        ax.plot([x], [v.mean()], "o", color=color, ms=5)
        return "no interval"
    mean, lo, hi = (float(a[0]) for a in bootstrap_ci(v[:, None]))
    ax.errorbar([x], [mean], yerr=[[mean - lo], [hi - mean]], fmt="o", color=color, capsize=3)
    return "95% CI"


def plot_regret(ax, episodes: np.ndarray, regrets: dict[str, np.ndarray], sqrt_ref: bool = True):
    """Cumulative regret [seeds, K] per label on log-log axes, with a sqrt(K) reference."""
    for label, runs in regrets.items():
        mean, lo, hi, kind = band(np.atleast_2d(runs))
        n = np.atleast_2d(runs).shape[0]
        (line,) = ax.plot(episodes, mean, label=f"{label}: mean, {band_label(kind, n)}")
        ax.fill_between(episodes, lo, hi, color=line.get_color(), alpha=0.2, linewidth=0)
    if sqrt_ref:
        top = max(np.atleast_2d(r).mean(0)[-1] for r in regrets.values())
        ref = np.sqrt(episodes / episodes[-1]) * top
        ax.plot(episodes, ref, "k--", lw=1, label="c sqrt(K)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("episodes K")
    ax.set_ylabel("cumulative regret")


def plot_aggregates(
    axes, scores: dict[str, np.ndarray], taus: np.ndarray, normalisation: str = ""
) -> None:
    """Two panels: IQM per method with its stratified-bootstrap 95% CI (from 5 runs per task),
    and performance profiles; `normalisation` (e.g. "0 = random policy, 1 = best algorithm")
    goes into both axis labels."""
    ax_iqm, ax_prof = axes
    names = list(scores)
    for i, name in enumerate(names):
        value, lo, hi, _ = iqm_band(scores[name])
        if np.isnan(lo):  # fewer than 5 runs per task: the IQM alone
            ax_iqm.plot(value, i, "o")
        else:
            ax_iqm.errorbar(value, i, xerr=[[value - lo], [hi - value]], fmt="o", capsize=3)
        ax_prof.plot(taus, performance_profile(scores[name], taus), label=name)
    ax_iqm.set_yticks(range(len(names)), names)
    how = f"\n({normalisation})" if normalisation else ""
    ax_iqm.set_xlabel(f"IQM of normalised score{how}")
    ax_prof.set_xlabel(f"normalised score tau{how}")
    ax_prof.set_ylabel("fraction of runs > tau")
    ax_prof.legend(fontsize=7)


def aligned(curves: list[tuple[np.ndarray, np.ndarray]], points: int = 100):
    """Interpolate curves [(steps, values)] onto a common grid up to the shortest run's end."""
    end = min(s[-1] for s, _ in curves)
    start = max(s[0] for s, _ in curves)
    grid = np.linspace(start, end, points)
    return grid, np.stack([np.interp(grid, s, v) for s, v in curves])


def plot_curves(
    ax,
    groups: dict[str, list[tuple[np.ndarray, np.ndarray]]],
    smooth_window=1,
    band_in_legend: bool = True,
):
    """Mean and its band per label on one axis: the 95% bootstrap CI from >= 5 seeds, the min-max
    range below (the legend says which and over how many seeds; with band_in_legend False only
    the seeds, and the title must say what the band is: band_words)."""
    for label, curves in groups.items():
        curves = [(s, smooth(v, smooth_window)) for s, v in curves if len(s)]
        if not curves:
            continue
        grid, data = aligned(curves)
        mean, lo, hi, kind = band(data)
        what = f"mean, {band_label(kind, len(curves))}" if band_in_legend else f"n={len(curves)}"
        (line,) = ax.plot(grid, mean, label=f"{label} ({what})")
        ax.fill_between(grid, lo, hi, color=line.get_color(), alpha=0.2, linewidth=0)
    ax.set_xlabel("environment steps")


def run_label(run_dir: Path) -> tuple[str, str]:
    """(env id, algo) from a run's config.json."""
    config = json.loads((Path(run_dir) / "config.json").read_text())
    return config["args"]["env_id"], config["algo"]


def main(argv: list[str] | None = None) -> None:
    parser = ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dirs", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, required=True, help="PNG to write")
    parser.add_argument("--column", default="train/episode_return")
    parser.add_argument("--smooth", type=int, default=5, help="moving-average window (rows)")
    args = parser.parse_args(argv)
    by_env: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    for run_dir in args.run_dirs:
        env_id, algo = run_label(run_dir)
        by_env[env_id][algo].append(read_metrics(run_dir, args.column))
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(1, len(by_env), figsize=(4 * len(by_env), 3), squeeze=False)
        for ax, (env_id, groups) in zip(axes[0], sorted(by_env.items())):
            plot_curves(ax, groups, args.smooth)
            ax.set_title(env_id)
            ax.set_ylabel(column_label(args.column))
            ax.legend(loc="lower right")
        fig.tight_layout()
        args.out.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(args.out, metadata={"Software": None})
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
