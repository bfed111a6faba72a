"""HAPO's gated synthetic success injection (Wu et al. 2026, arXiv 2603.11321) against pure GRPO
and against injection without a gate (static teacher forcing), on a bandit with hard contexts:
one population run (algos/grpo.py --num-seeds, seed k exactly the run --seed k) per arm, every
arm on the same seeds.

    python paper_figures/success_injection.py --train    # runs what is missing, then the CSVs
    python paper_figures/success_injection.py --toy --train --sweep-dir runs/toy/s --out runs/toy/s

Arms (controlrl/injection.py): grpo (no injection), hapo (--inject-demos: a group whose
members all fail gets the teacher's success, the context's best arm, when a Thompson draw from
the context's Beta posterior of the policy's own success is below 0.5) and forced
(--inject-threshold 1: every failed group gets it). The bandit, contextual-16-10, has 4 hard
contexts of 16 where one arm of 10 succeeds with probability 1/2 and the rest never (a group of
8 from the uniform policy there fails entirely with probability 0.95^8 = 0.66), the sparse
reward HAPO is built for; settings of the bandit suite (paper_figures/bandit_suite.py): 20,480
samples per seed, 256 per update in groups of 8, GRPO's defaults otherwise.

Per seed: final_success = mean train/episode_return (the policy's own samples, never the
injected ones) over the last --final-window samples over the optimum; auc = its mean over all
iterations; final_eval = the greedy policy's final evaluation over the optimum; inject_first,
inject_last = the mean train/inject_frac (fraction of groups injected) over the first and the
last tenth of the iterations. Writes <out>/success_injection.csv (per arm and seed),
success_injection_curves.csv (per arm and iteration: the across-seed mean and 95% t-interval of
success and of the injection rate, from each run's aggregate.csv) and success_injection.png.
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

from controlrl import plots
from controlrl.cli import ArgumentParser
from controlrl.experiment import apply_toy, write_rows

ROOT = Path(__file__).resolve().parents[1]
ARMS = {
    "grpo": [],
    "hapo": ["--inject-demos"],
    "forced": ["--inject-demos", "--inject-threshold", "1"],
}
FIELDS = ("arm", "seed", "samples", "final_success", "auc", "final_eval")
FIELDS += ("inject_first", "inject_last")
TOY = {"seeds": 3, "samples": 512, "num_envs": 64, "bandit": "bandit:contextual-4-5"}


def train(args, arm: str) -> Path:
    """The arm's population run (skipped when it finished before)."""
    out = args.sweep_dir / arm
    if (out / "final_eval.json").exists():
        return out
    cmd = [sys.executable, str(ROOT / "algos" / "grpo.py"), "--env-id", args.bandit]
    cmd += ["--total-timesteps", str(args.samples), "--num-envs", str(args.num_envs)]
    cmd += ["--seed", "1", "--num-seeds", str(args.seeds), "--eval-every", "0"]
    cmd += ["--no-tensorboard", "--no-progress", "--run-dir", str(out), *ARMS[arm]]
    cmd += ["--hidden-sizes", "16", "--eval-episodes", "2"] if args.toy else []
    if out.exists():  # unfinished: resumed from its last checkpoint
        cmd = [sys.executable, str(ROOT / "algos" / "grpo.py"), "--resume", str(out)]
    subprocess.run(cmd, check=True, cwd=ROOT)
    return out


def seed_rows(args, arm: str, run: Path, optimal: float) -> list[dict]:
    final_eval = json.loads((run / "final_eval.json").read_text())
    evals = dict(zip(final_eval["seeds"], final_eval["eval_return_per_seed"], strict=True))
    by_seed: dict[int, list] = {}
    with (run / "metrics.csv").open() as f:
        for r in csv.DictReader(f):
            inject = float(r["train/inject_frac"]) if r.get("train/inject_frac") else np.nan
            point = (float(r["train/episodes"]), float(r["train/episode_return"]), inject)
            by_seed.setdefault(int(r["seed"]), []).append(point)
    rows = []
    for seed, points in sorted(by_seed.items()):
        episodes, returns, inject = np.array(points).T
        samples = np.cumsum(episodes)
        success = returns / optimal
        tenth = max(1, len(points) // 10)
        rows.append(
            {
                "arm": arm,
                "seed": seed,
                "samples": int(samples[-1]),
                "final_success": float(success[samples > samples[-1] - args.final_window].mean()),
                "auc": float(success.mean()),
                "final_eval": float(evals[seed]) / optimal,
                "inject_first": float(inject[:tenth].mean()),
                "inject_last": float(inject[-tenth:].mean()),
            }
        )
    return rows


def curves(arm: str, run: Path, optimal: float) -> list[dict]:
    """Per iteration: the across-seed mean and 95% t-interval of success and injection rate."""
    out = []
    with (run / "aggregate.csv").open() as f:
        for r in csv.DictReader(f):
            row = {"arm": arm, "step": int(r["step"])}
            for name, col, scale in (("success", "train/episode_return", optimal),
                                     ("inject", "train/inject_frac", 1.0)):  # fmt: skip
                for suffix in ("", "_lo", "_hi"):
                    value = r.get(col + suffix, "")
                    row[name + suffix] = float(value) / scale if value else float("nan")
            out.append(row)
    return out


def plot(out: Path, lines: list[dict], args) -> None:
    import matplotlib.pyplot as plt

    with plt.rc_context(plots.STYLE):
        fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
        colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
        for arm, colour in zip(ARMS, colours):
            mine = [r for r in lines if r["arm"] == arm]
            steps = np.array([r["step"] for r in mine])
            for ax, name in zip(axes, ("success", "inject")):
                mean = np.array([r[name] for r in mine])
                if np.isnan(mean).all():
                    continue
                ax.plot(steps, mean, label=arm, color=colour)
                lo = np.array([r[name + "_lo"] for r in mine])
                hi = np.array([r[name + "_hi"] for r in mine])
                ax.fill_between(steps, lo, hi, alpha=0.25, color=colour)
        axes[0].set_ylabel("success (own samples) / optimum")
        axes[1].set_ylabel("fraction of groups injected")
        for ax in axes:
            ax.set_xlabel("samples per seed")
            ax.legend(fontsize=7)
        fig.suptitle(
            f"{args.bandit.removeprefix('bandit:')}, {args.seeds} seeds per arm: mean and 95% "
            "t-interval over seeds",
            fontsize=9,
        )
        fig.tight_layout()
        fig.savefig(out / "success_injection.png", dpi=80, metadata={"Software": None})
        plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    p = ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bandit", default="bandit:contextual-16-10")
    p.add_argument("--seeds", type=int, default=200)
    p.add_argument("--samples", type=int, default=20480, help="samples per seed")
    p.add_argument("--num-envs", type=int, default=256, help="samples per update")
    p.add_argument("--final-window", type=int, default=1280, help="samples of final_success")
    p.add_argument("--sweep-dir", type=Path, default=ROOT / "runs" / "sweeps" / "success_injection")
    p.add_argument("--out", type=Path, default=ROOT / "paper_figures" / "out")
    p.add_argument("--train", action="store_true", help="run the missing arms first")
    p.add_argument("--toy", action="store_true", help="seconds-sized end-to-end run (tests)")
    args = p.parse_args(argv)
    if args.toy:
        apply_toy(args, argv, TOY)
    if args.seeds < 2:
        p.error(f"--seeds must be >= 2, got {args.seeds}")
    from envs import bandits

    env = bandits.make(args.bandit.removeprefix("bandit:"), 1)
    optimal = float(env.optimal_reward)
    rows, lines = [], []
    for arm in ARMS:
        run = train(args, arm) if args.train else args.sweep_dir / arm
        if not (run / "final_eval.json").exists():
            raise SystemExit(f"error: {arm}: no finished run at {run} (use --train)")
        rows += seed_rows(args, arm, run, optimal)
        lines += curves(arm, run, optimal)
    args.out.mkdir(parents=True, exist_ok=True)
    write_rows(args.out / "success_injection.csv", rows, FIELDS)
    write_rows(args.out / "success_injection_curves.csv", lines)
    plot(args.out, lines, args)
    for arm in ARMS:
        mine = [r for r in rows if r["arm"] == arm]
        print(
            f"  {arm}: final success {np.mean([r['final_success'] for r in mine]):.3f}, auc "
            f"{np.mean([r['auc'] for r in mine]):.3f}, injected first/last tenth "
            f"{np.mean([r['inject_first'] for r in mine]):.3f} / "
            f"{np.mean([r['inject_last'] for r in mine]):.4f} (n={len(mine)})"
        )
    print(f"wrote {args.out / 'success_injection.csv'}, success_injection_curves.csv and .png")


if __name__ == "__main__":
    main()
