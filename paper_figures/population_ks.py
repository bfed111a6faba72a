"""Do population runs learn like single runs? Final success of GRPO (or --algo ppo, tpo) on
bernoulli-10 at the bandit suite's settings (bench_population.settings): a population of
--population seeds (one process, --num-seeds) against --singles seeds run one process each
through the sweep runner, seeds disjoint; two-sample Kolmogorov-Smirnov test
(scipy.stats.ks_2samp). A seed's final success is its mean train/episode_return over the last
--final-window samples over the bandit's optimal expected reward. A finished sweep under
--sweep-dir is reused (e.g. bench_population.py's separate side); where a population of seeds
from 1 is there (--paired-dir), the same seeds are also compared one to one.

    python paper_figures/population_ks.py                       # the committed CSVs
    python paper_figures/population_ks.py --toy --out runs/ks_toy   # seconds

Writes <out>/population_ks.csv (one row per seed: source, seed, final_success) and
population_ks_summary.csv (seeds, mean and sample SD of each side, KS statistic, p); for an
--algo other than grpo, population_ks_<algo>.csv and population_ks_<algo>_summary.csv.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

from controlrl import bench
from controlrl.cli import ArgumentParser
from controlrl.stats import sample_sd

ROOT = Path(__file__).resolve().parents[1]
ENV = "bandit:bernoulli-10"
BENCH = ROOT / "runs" / "bench_population"  # bench_population.py's runs, reused when there


def final_success(rows: list[dict], window: int, optimal: float) -> float:
    """Mean return over the rows of the last `window` samples, over the optimum."""
    steps = np.array([float(r["step"]) for r in rows])
    ret = np.array([float(r["train/episode_return"]) for r in rows])
    return float(ret[steps > steps[-1] - window].mean() / optimal)


def per_seed(rows: list[dict]) -> dict[int, list[dict]]:
    out: dict[int, list[dict]] = {}
    for r in rows:
        out.setdefault(int(r["seed"]), []).append(r)
    return out


def main(argv: list[str] | None = None) -> None:
    p = ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--algo", default="grpo")
    p.add_argument("--samples", type=int, default=10240)
    p.add_argument("--population", type=int, default=200, help="seeds of the population")
    p.add_argument("--population-seed", type=int, default=1001, help="its first seed")
    p.add_argument("--singles", type=int, default=32, help="seeds run one process each")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--final-window", type=int, default=1280, help="samples of final success")
    what = "the singles' sweep (default: bench_population.py's separate side of --algo)"
    p.add_argument("--sweep-dir", type=Path, default=None, help=what)
    p.add_argument("--population-dir", type=Path, default=ROOT / "runs" / "population_ks")
    what = "a finished population from seed 1, skipped when absent (default: "
    what += "bench_population.py's population of 1000 of --algo)"
    p.add_argument("--paired-dir", type=Path, default=None, help=what)
    p.add_argument("--out", type=Path, default=ROOT / "paper_figures" / "out")
    p.add_argument("--toy", action="store_true")
    args = p.parse_args(argv)
    from paper_figures.bench_population import settings

    extra = settings(args.algo, ENV)
    bench_dir = BENCH / args.algo / ENV.removeprefix("bandit:")
    if args.toy:
        args.samples, args.population, args.singles, args.final_window = 512, 6, 5, 256
        extra += ["--hidden-sizes", "16"]
        toy_dir = ROOT / "runs" / "population_ks_toy"  # never the full-size runs
        bench_dir = toy_dir / args.algo
        if args.population_dir == p.get_default("population_dir"):
            args.population_dir = toy_dir
    if args.sweep_dir is None:
        args.sweep_dir = bench_dir / "separate"
    if args.paired_dir is None:
        args.paired_dir = bench_dir / ("none" if args.toy else "population1000")
    import envs
    from controlrl.experiment import SweepConfig, env_tag, run_sweep

    optimal = float(envs.make(ENV, 1, seed=0).optimal_reward)  # asked of the env
    config = SweepConfig([args.algo], [ENV], args.singles, args.samples, extra)
    runs = run_sweep(config, args.sweep_dir, workers=args.workers)
    base = args.sweep_dir / "runs" / args.algo / env_tag(ENV)
    singles = {}
    for seed in range(1, args.singles + 1):
        done = runs.get(f"{args.algo}/{ENV}/seed{seed}", {}).get("status", "done") == "done"
        if done and (base / f"seed{seed}" / "final_eval.json").exists():
            rows = bench.read_csv(base / f"seed{seed}" / "metrics.csv")
            singles[seed] = final_success(rows, args.final_window, optimal)
    pop_dir = args.population_dir / f"{args.algo}_seed{args.population_seed}_n{args.population}"
    if not (pop_dir / "final_eval.json").exists():
        import shutil

        shutil.rmtree(pop_dir, ignore_errors=True)
        cmd = [sys.executable, str(ROOT / "algos" / f"{args.algo}.py"), "--env-id", ENV]
        cmd += ["--total-timesteps", str(args.samples), *extra, "--run-dir", str(pop_dir)]
        cmd += ["--seed", str(args.population_seed), "--num-seeds", str(args.population)]
        subprocess.run(cmd, check=True)
    population = {
        seed: final_success(rows, args.final_window, optimal)
        for seed, rows in per_seed(bench.read_csv(pop_dir / "metrics.csv")).items()
    }
    from scipy import stats

    a, b = np.array(list(population.values())), np.array(list(singles.values()))
    ks = stats.ks_2samp(a, b)
    summary = dict(algo=args.algo, bandit=ENV, samples=args.samples, population_seeds=a.size)
    summary |= dict(population_first_seed=args.population_seed, single_seeds=b.size)
    for side, x in (("population", a), ("single", b)):
        summary |= {f"{side}_mean": float(x.mean()), f"{side}_sd": sample_sd(x)}
    summary |= dict(ks_statistic=float(ks.statistic), ks_p=float(ks.pvalue))
    summary |= dict(paired_seeds=0, paired_max_abs_diff="")
    if (args.paired_dir / "final_eval.json").exists():
        paired = per_seed(bench.read_csv(args.paired_dir / "metrics.csv"))
        common = [s for s in singles if s in paired]
        diffs = [
            abs(final_success(paired[s], args.final_window, optimal) - singles[s]) for s in common
        ]
        summary |= {"paired_seeds": len(common), "paired_max_abs_diff": max(diffs, default="")}
    args.out.mkdir(parents=True, exist_ok=True)
    command = bench.command_line("paper_figures/population_ks.py", argv)
    rows = [{"source": "population", "seed": s, "final_success": v} for s, v in population.items()]
    rows += [{"source": "single", "seed": s, "final_success": v} for s, v in singles.items()]
    name = "population_ks" if args.algo == "grpo" else f"population_ks_{args.algo}"
    bench.write_csv(args.out / f"{name}.csv", rows, command)
    bench.write_csv(args.out / f"{name}_summary.csv", [summary], command)
    print(
        f"final success, mean (sample SD): population {a.mean():.4f} ({sample_sd(a):.4f}, "
        f"n={a.size}), single runs {b.mean():.4f} ({sample_sd(b):.4f}, n={b.size}); "
        f"two-sample KS D = {ks.statistic:.3f}, p = {ks.pvalue:.3f}"
    )
    if summary["paired_seeds"]:
        print(
            f"same seeds, population vs alone ({summary['paired_seeds']}): largest difference "
            f"in final success {summary['paired_max_abs_diff']:.2e}"
        )
    print(f"wrote {args.out / name}.csv, _summary.csv; command: {command}")


if __name__ == "__main__":
    main()
