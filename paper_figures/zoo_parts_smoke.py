r"""Does each advantage estimator, KL estimator and mismatch correction of algos/grpo.py train?
One population run (--num-seeds, controlrl/population.py) per flag value on bandit:bernoulli-10,
every other flag at GRPO's defaults; success = the rollout's mean reward over the bandit's
optimal expected reward (envs/bandits.py), per seed.

    python paper_figures/zoo_parts_smoke.py --train     # runs what is missing, writes the CSV
    python paper_figures/zoo_parts_smoke.py --toy --train --sweep-dir runs/toy/z --out runs/toy/z

Writes <out>/zoo_parts_smoke.csv: per method, its flags, the seeds, the first iteration's
success and the final one's (mean, sample SD and 95% bootstrap CI over seeds, controlrl.stats),
and the mean success over the run (the area under the success curve per sample).
"""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import numpy as np

from controlrl.cli import ArgumentParser
from controlrl.experiment import write_rows
from controlrl.stats import summarize

ROOT = Path(__file__).resolve().parents[1]
ENV = "bandit:bernoulli-10"
# method -> flags of algos/grpo.py (beyond the common ones)
METHODS = {
    "grpo": [],
    "adv-dr-grpo": ["--adv-norm", "mean"],
    "adv-rloo": ["--adv-norm", "rloo"],
    "adv-reinforce++": ["--adv-norm", "reinforce++"],
    "adv-reinforce++-baseline": ["--adv-norm", "reinforce++-baseline"],
    "adv-lite-ppo": ["--adv-norm", "lite-ppo"],
    "adv-bnpo": ["--adv-norm", "bnpo"],
    "kl-k1": ["--kl-estimator", "k1"],
    "kl-k2": ["--kl-estimator", "k2"],
    "kl-k3-unbiased": ["--kl-estimator", "k3-unbiased"],
    "kl-k1-reward": ["--kl-estimator", "k1", "--kl-in", "reward"],
    "mismatch-none": ["--rollout-mismatch", "temperature", "--mismatch-correction", "none"],
    "mismatch-tis": ["--rollout-mismatch", "temperature", "--mismatch-correction", "tis"],
    "mismatch-mis": ["--rollout-mismatch", "temperature", "--mismatch-correction", "mis"],
    "mismatch-bf16-tis": ["--rollout-mismatch", "bf16", "--mismatch-correction", "tis"],
}
FIELDS = ["method", "flags", "seeds", "samples", "first_success", "final_success"]
FIELDS += ["final_sd", "final_lo", "final_hi", "interval", "mean_success", "mean_lo", "mean_hi"]


def run_one(method: str, args) -> Path:
    """The population run of one method (skipped when its final evaluation exists)."""
    run_dir = args.sweep_dir / method
    if (run_dir / "final_eval.json").exists() or not args.train:
        return run_dir
    cmd = [sys.executable, str(ROOT / "algos" / "grpo.py"), "--env-id", ENV]
    cmd += ["--num-seeds", str(args.seeds), "--seed", "0", "--run-dir", str(run_dir)]
    cmd += ["--total-timesteps", str(args.samples), "--num-envs", str(args.num_envs)]
    cmd += ["--eval-every", "0", "--no-tensorboard", "--no-progress", *METHODS[method]]
    if args.toy:
        cmd += ["--hidden-sizes", "16", "--eval-episodes", "1"]
    subprocess.run(cmd, check=True, cwd=ROOT)
    return run_dir


def success(run_dir: Path, optimal: float) -> tuple[np.ndarray, np.ndarray]:
    """Per seed and iteration: samples [I] and success [S, I] from the run's metrics.csv."""
    with open(run_dir / "metrics.csv") as f:
        rows = [r for r in csv.DictReader(f) if r["train/episode_return"]]
    seeds = sorted({int(r["seed"]) for r in rows})
    steps = sorted({int(r["step"]) for r in rows})
    table = np.full((len(seeds), len(steps)), np.nan)
    for r in rows:
        table[seeds.index(int(r["seed"])), steps.index(int(r["step"]))] = float(
            r["train/episode_return"]
        )
    return np.array(steps), table / optimal


def main(argv: list[str] | None = None) -> None:
    p = ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--train", action="store_true", help="run the missing population runs")
    p.add_argument("--toy", action="store_true", help="tiny nets (a smoke test of the script)")
    p.add_argument("--seeds", type=int, default=30, help="seeds per population run")
    p.add_argument("--samples", type=int, default=10240, help="pulls per seed")
    p.add_argument("--num-envs", type=int, default=256, help="pulls per update")
    p.add_argument("--methods", default=",".join(METHODS), help="comma-separated METHODS keys")
    p.add_argument("--sweep-dir", type=Path, default=ROOT / "runs" / "zoo_parts_smoke")
    p.add_argument("--out", type=Path, default=ROOT / "paper_figures" / "out")
    args = p.parse_args(argv)
    from envs import bandits

    env = bandits.make(ENV.removeprefix("bandit:"), 1)
    optimal = float(env.optimal_reward)
    env.close()
    rows = []
    for method in args.methods.split(","):
        if method not in METHODS:
            p.error(f"--methods: unknown method {method!r}, expected some of {tuple(METHODS)}")
        run_dir = run_one(method, args)
        if not (run_dir / "metrics.csv").exists():
            continue
        steps, s = success(run_dir, optimal)
        final, mean = summarize(s[:, -1]), summarize(s.mean(1))
        rows.append(
            {
                "method": method,
                "flags": " ".join(METHODS[method]),
                "seeds": final.n,
                "samples": int(steps[-1]),
                "first_success": float(s[:, 0].mean()),
                "final_success": final.mean,
                "final_sd": final.sd,
                "final_lo": final.lo,
                "final_hi": final.hi,
                "interval": final.kind,
                "mean_success": mean.mean,
                "mean_lo": mean.lo,
                "mean_hi": mean.hi,
            }
        )
    args.out.mkdir(parents=True, exist_ok=True)
    write_rows(args.out / "zoo_parts_smoke.csv", rows, FIELDS)
    for r in rows:
        print(
            f"{r['method']:26s} first {r['first_success']:.3f}  final {r['final_success']:.3f}"
            f" ({r['interval']} {r['final_lo']:.3f} to {r['final_hi']:.3f})"
        )


if __name__ == "__main__":
    main()
