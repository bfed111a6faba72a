r"""The entropy law on a bandit, where runs are cheap enough for hundreds of seeds: return against
policy entropy along every seed's training curve of PG, GRPO and TPO on a softmax bandit, and the
fit R = -a exp(H) + b of Cui et al. 2025, "The Entropy Mechanism of Reinforcement Learning for
Reasoning Language Models" (arXiv 2505.22617), against a straight line R = c H + d.

    python paper_figures/entropy_law_bandit.py --train   # the committed CSVs: runs what is missing
    python paper_figures/entropy_law_bandit.py           # refits the runs under --sweep-dir
    python paper_figures/entropy_law_bandit.py --toy --train --sweep-dir runs/toy/e --out runs/toy/f

The runs are the bandit suite's (paper_figures/bandit_suite.py: same flags, same seeds; one
population run of --seeds seeds per method, controlrl/population.py), trained into --sweep-dir.
Data: every iteration of every seed gives one point (H, R): H = train/entropy (the softmax
policy's entropy, mean over the rollout), R = train/episode_return (the rollout's mean reward).
Per seed: the R^2 of the exponential law and of the straight line over all its iterations
(paper_figures/entropy_law.py's fits), and the paper's prediction test: both fitted on the first
half of the seed's iterations, each predicting the mean return of the last quarter at that
quarter's entropy; the absolute error of each prediction. The paper fits validation accuracy
against token entropy along LLM RL runs; here the truth of the bandit is known and the entropy
spans up to log K nats, so that exp(H) and H can be told apart.

Writes <out>/entropy_law_bandit.csv (one row per method and seed) and entropy_law_bandit.png
(pooled points of every seed, both fits, and the per-seed R^2 difference).
"""

from __future__ import annotations

import argparse
import csv
import shlex
import sys
from pathlib import Path

import numpy as np

from controlrl.cli import ArgumentParser
from controlrl.experiment import write_rows
from paper_figures import bandit_suite
from paper_figures.entropy_law import fit_law, law, linear_r2

ROOT = Path(__file__).resolve().parents[1]
METHODS = ("pg", "grpo", "tpo")
FIELDS = ("method", "seed", "points", "entropy_first", "entropy_last", "r2", "r2_linear")
FIELDS += ("late_return", "late_error", "late_error_linear")
TOY = {"seeds": 5, "samples": "512"}


def read_population(run_dir: Path) -> dict[str, dict[str, np.ndarray]]:
    """{seed: {"entropy", "return"}} from a population run's metrics.csv (iterations in order;
    iterations without a return dropped)."""
    by_seed: dict[str, dict[str, list[float]]] = {}
    with (run_dir / "metrics.csv").open() as f:
        for r in csv.DictReader(f):
            if r["train/episode_return"] == "":
                continue
            run = by_seed.setdefault(r["seed"], {"entropy": [], "return": []})
            run["entropy"].append(float(r["train/entropy"]))
            run["return"].append(float(r["train/episode_return"]))
    return {s: {k: np.array(v) for k, v in run.items()} for s, run in by_seed.items()}


def seed_row(method: str, seed: str, h: np.ndarray, r: np.ndarray) -> dict:
    """Fits of one seed's points: R^2 of the law and of the line, and the early fits' errors
    on the last quarter."""
    _, _, r2 = fit_law(h, r)
    half, quarter = len(h) // 2, max(1, len(h) // 4)
    ea, eb, _ = fit_law(h[:half], r[:half])
    c, d = np.polyfit(h[:half], r[:half], 1)
    late_h, late_r = h[-quarter:], float(r[-quarter:].mean())
    return {
        "method": method, "seed": seed, "points": len(h),
        "entropy_first": float(h[0]), "entropy_last": float(h[-1]),
        "r2": r2, "r2_linear": linear_r2(h, r), "late_return": late_r,
        "late_error": abs(float(law(late_h, ea, eb).mean()) - late_r),
        "late_error_linear": abs(float((c * late_h + d).mean()) - late_r),
    }  # fmt: skip


def suite_argv(args) -> list[str]:
    """bandit_suite.py's command line for these runs."""
    argv = ["--bandits", args.bandit, "--methods", ",".join(args.methods)]
    argv += ["--seeds", str(args.seeds), "--sweep-dir", str(args.sweep_dir)]
    argv += ["--out", str(args.sweep_dir / "suite"), "--train"]
    samples = args.samples
    if not samples:  # the suite's budget for this bandit
        suite = dict(zip(bandit_suite.BANDITS.split(","), bandit_suite.SAMPLES.split(",")))
        if args.bandit not in suite:
            raise SystemExit(f"error: --samples is needed for {args.bandit} (not in the suite)")
        samples = suite[args.bandit]
    argv += ["--samples", samples]
    if args.toy:
        argv += ["--toy"]
    return argv


def plot(args, runs: dict[str, dict], rows: list[dict]) -> None:
    import matplotlib.pyplot as plt

    from controlrl import plots

    with plt.rc_context(plots.STYLE):
        fig, axes = plt.subplots(
            1, len(args.methods) + 1, figsize=(3.3 * (len(args.methods) + 1), 3)
        )
        for ax, method in zip(axes, args.methods):
            h = np.concatenate([run["entropy"] for run in runs[method].values()])
            r = np.concatenate([run["return"] for run in runs[method].values()])
            ax.scatter(h, r, s=2, alpha=0.15, color="0.4", rasterized=True)
            grid = np.linspace(h.min(), h.max(), 100)
            a, b, r2 = fit_law(h, r)
            ax.plot(grid, law(grid, a, b), label=f"-a exp(H) + b, pooled R^2 {r2:.3f}")
            c, d = np.polyfit(h, r, 1)
            ax.plot(grid, c * grid + d, "--", label=f"c H + d, pooled R^2 {linear_r2(h, r):.3f}")
            ax.set_title(f"{method}, {len(runs[method])} seeds", fontsize=9)
            ax.set_xlabel("policy entropy H (nats)")
            ax.set_ylabel("rollout mean reward")
            ax.legend(fontsize=6)
        ax = axes[-1]
        diffs = [[x["r2"] - x["r2_linear"] for x in rows if x["method"] == m] for m in args.methods]
        for i, d in enumerate(diffs):
            plots.plot_points(ax, i, d, spread=0.25)
        ax.set_xticks(range(len(args.methods)), args.methods)
        ax.axhline(0, color="0.5", lw=0.8)
        ax.set_ylabel("R^2 of the law minus R^2 of the line")
        ax.set_title(plots.points_words([len(d) for d in diffs]).replace(", ", ",\n"), fontsize=7)
        fig.suptitle(f"entropy law on {args.bandit}: every iteration of every seed", fontsize=9)
        fig.tight_layout()
        fig.savefig(args.out / "entropy_law_bandit.png", dpi=80, metadata={"Software": None})
        plt.close(fig)


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bandit", default="bandit:bernoulli-10", help="a bandit: id of the suite")
    p.add_argument("--methods", default=",".join(METHODS), help=f"some of {', '.join(METHODS)}")
    p.add_argument("--seeds", type=int, default=200, help="seeds per method (one population)")
    p.add_argument("--samples", default="", help="samples per seed (default: the suite's)")
    p.add_argument(
        "--sweep-dir", type=Path, default=ROOT / "runs" / "sweeps" / "entropy_law_bandit"
    )
    p.add_argument("--out", type=Path, default=ROOT / "paper_figures" / "out")
    p.add_argument("--train", action="store_true", help="run what is missing first")
    p.add_argument("--toy", action="store_true", help="seconds-sized end-to-end run (tests)")
    args = p.parse_args(argv)
    if args.toy:
        from controlrl import experiment

        experiment.apply_toy(args, argv, TOY)
    args.methods = args.methods.split(",")
    bad = [m for m in args.methods if m not in METHODS]
    if bad:
        p.error(f"--methods: unknown {bad}, expected some of {list(METHODS)}")
    if args.seeds < 1:
        p.error(f"--seeds must be >= 1, got {args.seeds}")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    if args.train:
        bandit_suite.main(suite_argv(args))
    runs, rows = {}, []
    for method in args.methods:
        run_dir = args.sweep_dir / args.bandit.removeprefix("bandit:") / method / "population"
        if not (run_dir / "final_eval.json").exists():
            raise SystemExit(f"error: no finished population run {run_dir} (use --train)")
        runs[method] = read_population(run_dir)
        rows += [seed_row(method, s, v["entropy"], v["return"]) for s, v in runs[method].items()]
    args.out.mkdir(parents=True, exist_ok=True)
    write_rows(args.out / "entropy_law_bandit.csv", rows, FIELDS)
    plot(args, runs, rows)
    shown = " ".join(shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]))
    for method in args.methods:
        mine = [x for x in rows if x["method"] == method]
        d = np.array([x["r2"] - x["r2_linear"] for x in mine])
        e = np.array([x["late_error"] - x["late_error_linear"] for x in mine])
        print(f"  {method}: R^2 law - line mean {d.mean():.4f} (law ahead in {np.mean(d > 0):.0%} "
              f"of {d.size} seeds); late error law - line mean {e.mean():.4f}")  # fmt: skip
    print(
        f"wrote {args.out / 'entropy_law_bandit'}.csv and .png; command: python "
        f"paper_figures/entropy_law_bandit.py {shown}".strip()
    )


if __name__ == "__main__":
    main()
