r"""The entropy law on continuous control: return against policy entropy along the training
curves of Gaussian PPO (algos/ppo.py, CleanRL's defaults) and GRPO (algos/grpo.py, groups of
episodes from one start state) on one MuJoCo task, and the fit R = -a exp(H) + b of Cui et al.
2025, "The Entropy Mechanism of Reinforcement Learning for Reasoning Language Models" (arXiv
2505.22617; their fit is of validation accuracy against token entropy along LLM RL runs; the
ceiling at H = 0 is b - a). The declared experiment entropy-law-hopper judges its outputs; the
Makefile's figures target makes the committed runs (7 seeds x 300,000 steps).

    python paper_figures/entropy_law.py --train    # runs what is missing (3 seeds), then fits
    python paper_figures/entropy_law.py            # refits and replots the runs under --sweep-dir
    python paper_figures/entropy_law.py --toy --train --sweep-dir runs/toy/s --out runs/toy/f

Points: every iteration of a run's metrics.csv where an episode ended gives (H, R), H =
train/entropy (the Gaussian's entropy per step) and R = train/episode_return. The fit is
scipy.optimize.curve_fit over the pooled points of a method's seeds (and per run); its R^2 is
printed beside that of a straight line R = c H + d (over a narrow entropy range exp(H) is nearly
linear). Prediction test: the fit on the first half of each run's iterations, at the entropy of
the last quarter, against the return measured there.

The covariance law (the same paper's mechanism: an update changes the entropy by -eta Cov(log
pi(a|s), A(s, a)) to first order): every PPO update logs entropy_change and logp_adv_cov
(controlrl.diagnostics.shift_stats); per run, the correlation of the change with -Cov and the
share of updates moving in -Cov's direction beside that share by chance (covariance_law). GRPO's
group path logs no per-sample advantage batch.

Writes <out>/entropy_law.png, entropy_law.csv (per run and iteration: method, seed, step,
entropy, return), entropy_law_fits.csv (per method pooled, seed "all", and per run: a, b, R^2,
the line's R^2, points, entropy range, ceiling b - a, the early fit's predicted and the measured
late return, train_s the seconds collecting and updating) and entropy_law_covariance.csv (per
update of the runs that log it: step, entropy_change, logp_adv_cov, train_s of its iteration).
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

import numpy as np

from controlrl.cli import ArgumentParser
from controlrl.experiment import read_rows, write_rows
from paper_figures.lab import run_csvs, scripts
from paper_figures.lab.script_flags import add_sweep_flags, check_episodic_env, some_of, wrote

METHODS = {"ppo": "PPO", "grpo": "GRPO"}  # method: label; the method is its algos/ file
FIT_FIELDS = tuple(
    "method seed points a b r2 r2_linear entropy_min entropy_max ceiling early_points"
    " late_entropy late_return late_predicted train_s".split()
)
COV_FIELDS = ("method", "seed", "step", "entropy_change", "logp_adv_cov", "train_s")
TOY = {"steps": 4096, "seeds": 1, "env_id": "Hopper-v5"}
TOY_FLAGS = ["--hidden-sizes", "8", "--eval-episodes", "1"]
TOY_METHOD_FLAGS = {"ppo": ["--num-steps", "512", "--num-minibatches", "4"],
                    "grpo": ["--num-envs", "16", "--max-episode-steps", "64"]}  # fmt: skip


def law(h: np.ndarray, a: float, b: float) -> np.ndarray:
    """R = -a exp(H) + b."""
    return -a * np.exp(h) + b


def r_squared(y: np.ndarray, fitted: np.ndarray) -> float:
    """1 - SS_res / SS_tot (nan when y is constant)."""
    total = float(np.sum((y - y.mean()) ** 2))
    return float("nan") if total == 0 else 1.0 - float(np.sum((y - fitted) ** 2)) / total


def fit_law(h: np.ndarray, r: np.ndarray) -> tuple[float, float, float]:
    """(a, b, R^2) of the least-squares fit of R = -a exp(H) + b. The model is linear in (a, b),
    so curve_fit starts from the exact linear least-squares solution (and stays there)."""
    from scipy.optimize import curve_fit

    design = np.stack([-np.exp(h), np.ones_like(h)], axis=1)
    start, *_ = np.linalg.lstsq(design, r, rcond=None)
    (a, b), _ = curve_fit(law, h, r, p0=start)
    return float(a), float(b), r_squared(r, law(h, a, b))


def linear_r2(h: np.ndarray, r: np.ndarray) -> float:
    """R^2 of the straight line R = c H + d."""
    c, d = np.polyfit(h, r, 1)
    return r_squared(r, c * h + d)


def fit_row(method: str, seed, runs: list[dict]) -> dict:
    """The fits of the pooled points of runs: all iterations, and the first half of each run's
    iterations predicting the mean return of its last quarter at that quarter's entropy."""
    h = np.concatenate([run["entropy"] for run in runs])
    r = np.concatenate([run["return"] for run in runs])
    a, b, r2 = fit_law(h, r)
    early = [(run["entropy"][: len(run["entropy"]) // 2], run["return"][: len(run["return"]) // 2])
             for run in runs]  # fmt: skip
    ea, eb, _ = fit_law(*(np.concatenate(part) for part in zip(*early)))
    late_h = np.concatenate([run["entropy"][-max(1, len(run["entropy"]) // 4) :] for run in runs])
    late_r = np.concatenate([run["return"][-max(1, len(run["return"]) // 4) :] for run in runs])
    return {
        "method": method, "seed": seed, "points": len(h), "a": a, "b": b, "r2": r2,
        "r2_linear": linear_r2(h, r), "entropy_min": float(h.min()),
        "entropy_max": float(h.max()), "ceiling": b - a,
        "early_points": sum(len(e[0]) for e in early), "late_entropy": float(late_h.mean()),
        "late_return": float(late_r.mean()),
        "late_predicted": float(law(late_h, ea, eb).mean()),
        "train_s": float(sum(run.get("train_s", np.nan) for run in runs)),
    }  # fmt: skip


def configs(args) -> list[dict]:
    """One sweep per method."""
    out = []
    for method in args.methods:
        extra = ["--eval-every", "0", "--no-tensorboard"]
        if args.toy:
            extra += TOY_FLAGS + TOY_METHOD_FLAGS[method]
        out.append(dict(method=method, algo=method, extra=extra + args.extra))
    return out


def sweep_dir(args, c: dict) -> Path:
    return args.sweep_dir / args.env_id.replace(":", "_") / c["method"]


def train(args, cfgs: list[dict]) -> None:
    from controlrl.experiment import SweepConfig

    for c in cfgs:
        config = SweepConfig([c["algo"]], [args.env_id], args.seeds, args.steps, c["extra"])
        scripts.train(config, sweep_dir(args, c), c["method"], args.workers)


def read_run(run_dir: Path) -> dict[str, np.ndarray]:
    """step, entropy, return of the iterations of metrics.csv where an episode ended."""
    with (run_dir / "metrics.csv").open() as f:
        rows = [r for r in csv.DictReader(f) if r["train/episode_return"] not in ("", "nan")]
    return {
        "step": np.array([int(float(r["step"])) for r in rows]),
        "entropy": np.array([float(r["train/entropy"]) for r in rows]),
        "return": np.array([float(r["train/episode_return"]) for r in rows]),
    }


def read_covariance(run_dir: Path) -> dict[str, np.ndarray] | None:
    """step, entropy_change, logp_adv_cov of every update in metrics.csv (the covariance law's
    columns, controlrl.diagnostics.shift_stats) and train_s, the iteration's seconds collecting
    and updating from timing.csv (nan without it); None for a run that did not log the law's
    columns."""
    with (run_dir / "metrics.csv").open() as f:
        rows = list(csv.DictReader(f))
    keys = ("train/entropy_change", "train/logp_adv_cov")
    if not rows or any(k not in rows[0] for k in keys):
        return None
    rows = [r for r in rows if all(r[k] not in ("", "nan") for k in keys)]
    seconds = {}
    for t in read_rows(run_dir / "timing.csv") if (run_dir / "timing.csv").exists() else []:
        seconds[int(float(t["step"]))] = float(t["time/rollout_s"]) + float(t["time/update_s"])
    steps = [int(float(r["step"])) for r in rows]
    return {
        "step": np.array(steps),
        "entropy_change": np.array([float(r[keys[0]]) for r in rows]),
        "logp_adv_cov": np.array([float(r[keys[1]]) for r in rows]),
        "train_s": np.array([seconds.get(s, float("nan")) for s in steps]),
    }


def covariance_law(run: dict) -> dict:
    """How one run's updates follow the covariance law (the entropy falls when Cov(log pi, A)
    is positive): the Pearson correlation of the entropy change with -Cov over its updates, the
    share of updates whose entropy moved in the direction -Cov gives, and that share by chance
    (the entropy's and the covariance's signs drawn independently with the run's own
    frequencies: a run whose entropy mostly falls while Cov is mostly positive scores high
    without following the law update by update). Updates where either is 0 are not counted."""
    dh, cov = run["entropy_change"], run["logp_adv_cov"]
    moved = (dh != 0) & (cov != 0)
    falls, positive = np.mean(dh[moved] < 0), np.mean(cov[moved] > 0)
    return {"method": run["method"], "seed": run["seed"], "updates": int(dh.size),
            "corr": float(np.corrcoef(dh, -cov)[0, 1]),
            "sign_share": float(np.mean(np.sign(dh[moved]) == -np.sign(cov[moved]))),
            "sign_chance": float(falls * positive + (1 - falls) * (1 - positive))}  # fmt: skip


def group_runs(rows: list[dict], methods: list[str], keys) -> list[dict]:
    """The runs of `methods` in the rows of one of this script's CSVs (method, seed, and the
    columns `keys` per row, as text or numbers): method, seed and an array per key."""
    runs: dict[tuple, dict] = {}
    for r in rows:
        if r["method"] in methods:
            run = runs.setdefault((r["method"], int(r["seed"])), {k: [] for k in keys})
            for k in keys:
                run[k].append(int(float(r[k])) if k == "step" else float(r[k]))
    return [{"method": m, "seed": seed, **{k: np.array(v) for k, v in run.items()}}
            for (m, seed), run in runs.items()]  # fmt: skip


def covariance_laws(rows: list[dict], method: str) -> list[dict]:
    """covariance_law of each of `method`'s runs in the rows of entropy_law_covariance.csv, in
    seed order."""
    runs = sorted(group_runs(rows, [method], COV_FIELDS[2:]), key=lambda r: r["seed"])
    return [covariance_law(r) for r in runs]


def committed_covariance(path: Path, methods: list[str]) -> list[dict]:
    """The updates of `methods` as write_covariance stored them (none without the file)."""
    return group_runs(read_rows(path), methods, COV_FIELDS[2:]) if path.exists() else []


def write_covariance(path: Path, runs: list[dict]) -> None:
    """Every update of the runs that logged the covariance law's columns (train_s to 4 digits)."""
    write_rows(path, [dict(zip(COV_FIELDS, (r["method"], r["seed"], *u[:3], f"{u[3]:.4g}")))
                      for r in runs for u in zip(*(r[k] for k in COV_FIELDS[2:]))])  # fmt: skip


def collect(args, cfgs: list[dict]) -> list[dict]:
    """Every finished run: method, seed and its columns."""
    from controlrl import plots

    runs = []
    for c in cfgs:
        base = sweep_dir(args, c) / "runs" / c["algo"] / args.env_id.replace(":", "_")
        for seed, run_dir, _ in run_csvs.finished(base):
            columns = read_run(run_dir)
            if len(columns["step"]) >= 4:  # a fit of two parameters needs a few points
                runs.append({"method": c["method"], "seed": seed, **columns,
                             "cov": read_covariance(run_dir),
                             "train_s": plots.train_seconds(run_dir)})  # fmt: skip
    return runs


def committed_points(path: Path, methods: list[str]) -> list[dict]:
    """The runs of `methods` as write_points stored them (method, seed and its columns), each
    with its train_s from the entropy_law_fits.csv beside it (NaN where that has none)."""
    fits_path = path.with_name("entropy_law_fits.csv")
    secs = {(r["method"], int(r["seed"])): float(r["train_s"])
            for r in (read_rows(fits_path) if fits_path.exists() else [])
            if r["seed"] != "all" and r.get("train_s")}  # fmt: skip
    rows = read_rows(path, flag="--keep-committed")
    runs = group_runs(rows, methods, ("step", "entropy", "return"))
    return [r | {"train_s": secs.get((r["method"], r["seed"]), np.nan)} for r in runs]


def fits(runs: list[dict], methods: list[str]) -> list[dict]:
    """Pooled fit per method (seed 'all'), then one per run."""
    out = []
    for method in methods:
        mine = [r for r in runs if r["method"] == method]
        if mine:
            out.append(fit_row(method, "all", mine))
            out += [fit_row(method, r["seed"], [r]) for r in mine]
    return out


def write_points(path: Path, runs: list[dict]) -> None:
    keys = ("step", "entropy", "return")
    write_rows(path, [{"method": r["method"], "seed": r["seed"], **dict(zip(keys, point))}
                      for r in runs for point in zip(*(r[k] for k in keys))])  # fmt: skip


def plot(args, runs: list[dict], fit_rows: list[dict], cov_runs: list[dict]) -> None:
    from controlrl import plots
    from controlrl.plots import plt

    methods = [m for m in args.methods if any(r["method"] == m for r in runs)]
    with plt.rc_context(plots.STYLE):
        n_rows = 3 if cov_runs else 2
        fig, axes = plt.subplots(n_rows, len(methods), figsize=(4.2 * len(methods), 3.5 * n_rows),
                                 squeeze=False)  # fmt: skip
        for j, method in enumerate(methods):
            mine = [r for r in runs if r["method"] == method]
            pooled = next(f for f in fit_rows if f["method"] == method and f["seed"] == "all")
            ax = axes[0, j]
            for i, r in enumerate(mine):
                ax.scatter(r["entropy"], r["return"], s=6, color=f"C{i}", label=f"seed {r['seed']}")
            h = np.linspace(pooled["entropy_min"], pooled["entropy_max"], 100)
            ax.plot(h, law(h, pooled["a"], pooled["b"]), "k-", lw=1.5,
                    label=f"-{pooled['a']:.3g} e^H + {pooled['b']:.4g}\n"
                          f"R² {pooled['r2']:.2f} (line {pooled['r2_linear']:.2f})")  # fmt: skip
            ax.set_xlabel("policy entropy H (nats per step)")
            ax.set_title(f"{METHODS[method]} on {args.env_id}, {len(mine)} seeds", fontsize=9)
            ax.legend(fontsize=6)
            ax = axes[1, j]
            for i, r in enumerate(mine):
                ax.plot(r["step"] / 1000, r["entropy"], color=f"C{i}", lw=1)
            ax.set_xlabel("env steps (thousands)")
            if cov_runs:
                plot_covariance(axes[2, j], [r for r in cov_runs if r["method"] == method])
        axes[0, 0].set_ylabel("training episode return R")
        axes[1, 0].set_ylabel("policy entropy H")
        if cov_runs:
            axes[2, 0].set_ylabel("entropy change of the update")
        fig.suptitle("R = -a e^H + b, pooled over each method's seeds", fontsize=10)
        scripts.save_figure(fig, args.out / "entropy_law.png", 60)


def plot_covariance(ax, runs: list[dict]) -> None:
    """Each update's entropy change against Cov(log pi_old, A) over its batch, per seed: the
    covariance law puts the points in the upper-left and lower-right quadrants."""
    if not runs:
        ax.text(0.5, 0.5, "covariance not logged", ha="center", va="center", fontsize=8)
        ax.set_axis_off()
        return
    for i, r in enumerate(runs):
        ax.scatter(r["logp_adv_cov"], r["entropy_change"], s=5, color=f"C{i}")
    ax.axhline(0, color="k", lw=0.5)
    ax.axvline(0, color="k", lw=0.5)
    corr = np.mean([covariance_law(r)["corr"] for r in runs])
    ax.set_title(f"corr(dH, -Cov) per seed, mean {corr:.2f}", fontsize=9)
    ax.set_xlabel("Cov(log pi_old(a|s), A) over the update's batch")


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--env-id", default="Hopper-v5", help="a Gymnasium MuJoCo id (Box actions)")
    p.add_argument("--methods", default=",".join(METHODS), help=f"some of {', '.join(METHODS)}")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--steps", type=int, default=300_000, help="env steps per run")
    p.add_argument("--keep-committed", action="store_true",
                   help="a method without finished runs: its points from the existing "
                   "<out>/entropy_law.csv (the fits are refitted from them)")  # fmt: skip
    add_sweep_flags(p, "entropy_law", replot=False)
    p.add_argument("extra", nargs="*", help="flags passed to every algorithm (after --)")
    args = p.parse_args(argv)
    if args.toy:  # toy sizes replace the defaults, not what was given on the command line
        from controlrl import experiment

        experiment.apply_toy(args, argv, TOY)
    check_episodic_env(p, args.env_id, "the law is fitted on MuJoCo training runs")
    args.methods = some_of(p, "methods", args.methods, METHODS)
    scripts.at_least(p, args, ("seeds", "steps", "workers"))
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    cfgs = configs(args)
    if args.train:
        train(args, cfgs)
    runs = collect(args, cfgs)
    if args.keep_committed:
        missing = [m for m in args.methods if not any(r["method"] == m for r in runs)]
        runs += committed_points(args.out / "entropy_law.csv", missing)
        runs.sort(key=lambda r: (args.methods.index(r["method"]), r["seed"]))
        print(f"kept from {args.out / 'entropy_law.csv'}: {', '.join(missing) or 'nothing'}")
    if not runs:
        raise SystemExit(f"error: no finished runs under {args.sweep_dir} (use --train)")
    args.out.mkdir(parents=True, exist_ok=True)
    rows = fits(runs, args.methods)
    cov_runs = [{"method": r["method"], "seed": r["seed"], **r["cov"]} for r in runs
                if r.get("cov") is not None]  # fmt: skip
    if args.keep_committed:
        logged = {r["method"] for r in cov_runs}
        cov_path = args.out / "entropy_law_covariance.csv"
        cov_runs += committed_covariance(cov_path, [m for m in args.methods if m not in logged])
        cov_runs.sort(key=lambda r: (args.methods.index(r["method"]), r["seed"]))
    write_points(args.out / "entropy_law.csv", runs)
    write_rows(args.out / "entropy_law_fits.csv", rows, FIT_FIELDS)
    if cov_runs:
        write_covariance(args.out / "entropy_law_covariance.csv", cov_runs)
    plot(args, runs, rows, cov_runs)
    print("R = -a exp(H) + b, pooled over seeds (per run in entropy_law_fits.csv)")
    for f in rows:
        if f["seed"] == "all":
            print(
                f"  {f['method']}: a {f['a']:.4g}, b {f['b']:.4g}, R^2 {f['r2']:.3f} (straight "
                f"line {f['r2_linear']:.3f}), H in [{f['entropy_min']:.3f}, "
                f"{f['entropy_max']:.3f}], ceiling b - a = {f['ceiling']:.4g}; first-half fit "
                f"predicts {f['late_predicted']:.4g} for the last quarter, measured "
                f"{f['late_return']:.4g} ({f['points']} points)"
            )
    for r in cov_runs:
        c = covariance_law(r)
        print(
            f"  covariance law, {c['method']} seed {c['seed']}: corr(entropy change, -Cov) "
            f"{c['corr']:.3f}, direction right in {c['sign_share']:.1%} of {c['updates']} updates "
            f"(by chance {c['sign_chance']:.1%})"
        )
    wrote(f"{args.out / 'entropy_law'}.png, .csv, _fits.csv and _covariance.csv", "entropy_law",
          argv)  # fmt: skip


if __name__ == "__main__":
    main()
