"""Cumulative regret of optimistic PO (algos/optimistic_po.py; Shani, Efroni, Rosenberg, Mannor,
ICML 2020, "Optimistic Policy Optimization with Bandit Feedback": regret of order sqrt(K)) vs K
on log-log axes: (a) a random 5x3x5 MDP at four bonus scales c_b, (b) stochastic vs switching
rewards, (c) combination locks with the bonus off vs on (settings()).

    python paper_figures/regret.py --seeds 5        # K = 2^16, 5 seeds
    python paper_figures/regret.py --toy --out runs/toy/regret   # seconds

Writes regret.png, regret.csv (mean regret at log-spaced K) and regret_slopes.csv (log-log slope
over the top two octaves [K/4, K], with its 95% bootstrap CI over seeds from 5 seeds on, else
the range of the per-seed slopes: the band column) to --out. The declared experiment
paper_figures/regret-optimistic-po runs it (its analysis.py) and keeps the tables and the figure.
"""

from __future__ import annotations

import shlex
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from algos.optimistic_po import Args as RunArgs
from algos.optimistic_po import run
from controlrl.cli import cli
from controlrl.experiment import write_rows
from controlrl.stats import MIN_SEEDS
from paper_figures.lab import scripts
from theory.regret import bootstrap_slope_ci, log_grid, loglog_slope


@dataclass
class Args:
    out: str = "paper_figures/out"
    """output directory for the PNG and CSVs"""
    toy: bool = False
    """tiny run (K = 2^9, 1 seed) for tests"""
    log2_k: int = 16
    """K = 2^log2_k episodes per run (ignored with --toy)"""
    seeds: int = 4
    """seeds per setting (ignored with --toy)"""


def settings() -> list[tuple[str, str, dict]]:
    """(panel, label, optimistic_po arguments) for every curve."""
    rnd = dict(mdp="random", S=5, A=3, H=5)
    deep_lock = dict(mdp="lock", S=10, A=2, H=10, lock_distractor=0.05)
    plain_lock = dict(mdp="lock", S=6, A=2, H=6)
    out = [("a", f"c_b = {cb:g}", dict(rnd, c_b=cb)) for cb in (1.0, 0.3, 0.1, 0.03)]
    out += [
        ("b", "stochastic, c_b = 0.1", dict(rnd, c_b=0.1)),
        ("b", "switching every 1000, c_b = 0.1", dict(rnd, c_b=0.1, losses="adversarial")),
        ("c", "deep lock S=H=10, bonus off", dict(deep_lock, bonus=False)),
        ("c", "deep lock S=H=10, c_b = 0.01", dict(deep_lock, c_b=0.01)),
        ("c", "plain lock S=H=6, bonus off", dict(plain_lock, bonus=False)),
    ]
    return out


def slope_band(regs: np.ndarray, ks: np.ndarray, K: int) -> tuple[float, float, float, str]:
    """(slope, lo, hi, band) of the seeds' regret curves `regs` (seeds x K) over the points ks:
    the mean curve's log-log slope with its 95% bootstrap CI over seeds (200 resamples, seed 0),
    or below 5 seeds the range of the per-seed slopes."""
    k_min = int(ks[0])
    if len(regs) >= MIN_SEEDS:
        rng = np.random.default_rng(0)
        slope, lo, hi = bootstrap_slope_ci(ks, regs[:, ks - 1], k_min, K, rng, 200)
        return slope, lo, hi, "95% CI"
    # no interval from fewer than 5 seeds: the range of the per-seed slopes
    slope = loglog_slope(ks, regs[:, ks - 1].mean(0), k_min, K)
    each = [loglog_slope(ks, r[ks - 1], k_min, K) for r in regs]
    return slope, min(each), max(each), "range"


SLOPE_FIELDS = ("panel", "setting", "k_min", "k_max", "seeds", "slope", "lo", "hi", "band")


def slope_row(panel: str, label: str, regs: np.ndarray, ks: np.ndarray, K: int) -> dict:
    """A regret_slopes.csv row of the seeds' curves `regs` (slope_band, to 4 decimals), and the
    slope unrounded under "fit" (the figure's legend)."""
    slope, lo, hi, band = slope_band(regs, ks, K)
    row = dict(panel=panel, setting=label, k_min=int(ks[0]), k_max=K, seeds=len(regs))
    row |= {k: f"{v:.4f}" for k, v in dict(slope=slope, lo=lo, hi=hi).items()}
    return row | {"band": band, "fit": slope}


def main(args: Args) -> None:
    """Run every setting, write CSVs and the figure, print the command."""
    K = 2**9 if args.toy else 2**args.log2_k
    seeds = 1 if args.toy else args.seeds
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    grid = np.unique(np.geomspace(1, K, 60).astype(int))
    ks = log_grid(max(K // 4, 2), K)  # the slope's points: log-spaced, top two octaves
    curves, slopes, cache = {}, [], {}
    t0 = time.time()
    for panel, label, kw in settings():
        key = tuple(sorted(kw.items()))  # a setting shared by two panels runs once
        if key not in cache:
            runs = [run(RunArgs(episodes=K, seed=s, progress=False, **kw)) for s in range(seeds)]
            cache[key] = np.array([r["regret"] for r in runs])
        curves[(panel, label)] = cache[key].mean(0)
        slopes.append(slope_row(panel, label, cache[key], ks, K))
        print(
            f"[{time.time() - t0:6.0f}s] {panel} {label}: slope {slopes[-1]['slope']}", flush=True
        )
    means = [dict(panel=p, setting=s, K=int(k), mean_regret=reg[k - 1], seeds=seeds)
             for (p, s), reg in curves.items() for k in grid]  # fmt: skip
    write_rows(out / "regret.csv", means)
    write_rows(out / "regret_slopes.csv", [{k: r[k] for k in SLOPE_FIELDS} for r in slopes])
    plot(curves, grid, out / "regret.png", {(r["panel"], r["setting"]): r["fit"] for r in slopes})
    print("made by: " + " ".join(shlex.quote(a) for a in ["python", *sys.argv]))


def plot(curves: dict, grid: np.ndarray, path: Path, slope: dict) -> None:
    """Three log-log panels with a sqrt(K) reference line."""
    from controlrl.plots import plt

    titles = {
        "a": "random 5x3x5: bonus scale",
        "b": "stochastic vs switching",
        "c": "combination lock: bonus off/on",
    }
    fig, axes = plt.subplots(1, 3, figsize=(13, 4))
    for ax, panel in zip(axes, "abc"):
        top = 0.0
        for (p, label), reg in curves.items():
            if p != panel:
                continue
            y = np.maximum(reg[grid - 1], 1e-3)
            ax.loglog(grid, y, label=f"{label} (slope {slope[(p, label)]:.2f})")
            top = max(top, y[-1])
        ax.loglog(grid, top * np.sqrt(grid / grid[-1]), "k--", lw=1, label=r"$\propto\sqrt{K}$")
        ax.set_title(titles[panel], fontsize=10)
        ax.set_xlabel("episodes K")
        ax.legend(fontsize=7)
    axes[0].set_ylabel("cumulative pseudo-regret (mean over seeds)")
    scripts.save_figure(fig, path, 80)


if __name__ == "__main__":
    main(cli(Args))
