"""The bandit suite's curves: success (mean reward over the bandit's optimum), policy entropy and
the fraction of zero-variance groups against samples, per bandit and arm of the declared
experiment paper_figures/bandit-suite (its runs, its arms and flags), the mean over seeds with
its band (controlrl.stats: 95% bootstrap CI from 5 seeds, the min-max range below).

    python -m paper_figures run bandit-suite       # the runs (resumable), as declared
    python paper_figures/bandit_suite.py           # the curve CSV and PNG from those runs
    python paper_figures/bandit_suite.py --replot  # the PNG from out/bandit_suite_curves.csv
    python -m paper_figures run bandit-suite --toy && python paper_figures/bandit_suite.py --toy

Success of an iteration = its rollout's mean episode return (train/episode_return of the run's
metrics.csv) over the bandit's optimal expected reward, exact from envs/bandits.py (0.935 for
bernoulli-10's instance, 1 for the sparse and sequence bandits); samples are episodes: pulls, or
answers of L tokens on a sequence bandit (env steps / L). What a bandit is (its episode length,
optimum, whether it is a sequence bandit) is asked of the env, never read off its id.

Writes <out>/bandit_suite_curves.csv (per bandit, arm and iteration: samples, seeds, and the
mean over seeds of success, entropy and zero-variance fraction with its band) and
bandit_suite.png, drawn from that CSV as written. A (bandit, arm) cell with no finished run
keeps its committed rows.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from controlrl import experiment as sweep
from controlrl.cli import ArgumentParser
from paper_figures.lab import metrics, runner, scripts, spec

ROOT = Path(__file__).resolve().parents[1]
EXPERIMENT = "bandit-suite"
LOWER_ROW = ("grpo", "tpo")  # the arms of the entropy and zero-variance panels
CURVES = {"success": "success", "entropy": "train/entropy", "zero_var": "train/zero_variance_frac"}
CURVE_FIELDS = ["bandit", "method", "samples", "seeds", "band"]
CURVE_FIELDS += [f"{k}{e}" for k in CURVES for e in ("", "_lo", "_hi")]


def success_curve(columns: dict[str, np.ndarray], length: int, optimal: float):
    """(samples, success): episodes so far and the rollout's mean return over the optimum."""
    return columns["step"] / length, columns["train/episode_return"] / optimal


def collect(exp: spec.Experiment, toy: bool, root: Path) -> list[dict]:
    """Per seed of every finished run of the declaration: its bandit, arm and curves."""
    runs = []
    for name, config in runner.configs(exp, toy).items():
        arm = config.arms[0].name
        for task in sweep.plan(config, runner.base(exp, toy, root) / name):
            run_dir = Path(task.run_dir)
            if not sweep.is_done(run_dir):
                continue
            truth = metrics.bandit_truth(task.env_id)
            for seed, rows in metrics.rows_by_seed(run_dir).items():
                names = ("step", "train/episode_return", *list(CURVES.values())[1:])
                columns = {k: np.array([metrics.as_float(r.get(k)) for r in rows]) for k in names}
                samples, success = success_curve(columns, truth["length"], truth["optimal"])
                curves = {"samples": samples, "success": success} | columns
                runs.append({"bandit": task.env_id, "method": arm, "seed": seed, "curves": curves})
    return runs


def _band(data: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, str]:
    """controlrl.stats.band of [seeds, points], a few points at a time (the bootstrap draws the
    same seed indices for every point, so the result is that of one call, in less memory)."""
    from controlrl import stats

    parts = [stats.band(data[:, i : i + 8]) for i in range(0, data.shape[1], 8)]
    mean, lo, hi = (np.concatenate([p[k] for p in parts]) for k in range(3))
    return mean, lo, hi, parts[0][3]


def curve_table(runs: list[dict]) -> list[dict]:
    """Per (bandit, arm, iteration): samples, seeds, and the mean over seeds of success,
    entropy and zero-variance fraction with its band (the band column names which)."""
    groups: dict[tuple, list[dict]] = {}
    for r in runs:
        groups.setdefault((r["bandit"], r["method"]), []).append(r["curves"])
    out = []
    for (bandit, method), curves in groups.items():
        samples = curves[0]["samples"]
        if any(not np.array_equal(c["samples"], samples) for c in curves):
            raise ValueError(f"{bandit} {method}: the seeds' runs log different sample counts")
        columns = {}
        for key, name in CURVES.items():
            data = np.stack([c[name] for c in curves])  # [seeds, iterations]
            if np.isnan(data).all():  # a column the arm does not log (PPO's zero_var)
                columns[key] = (np.full(len(samples), np.nan),) * 3
            else:
                *columns[key], kind = _band(data)
        for i, n in enumerate(samples):
            row = {"bandit": bandit, "method": method, "samples": int(n)}
            row |= {"seeds": len(curves), "band": kind}
            for key, (mean, lo, hi) in columns.items():
                row |= {key: mean[i], f"{key}_lo": lo[i], f"{key}_hi": hi[i]}
            out.append(row)
    return out


def write_curves(path: Path, table: list[dict]) -> None:
    """The curve table, 5 significant digits."""
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, CURVE_FIELDS)
        writer.writeheader()
        for row in table:
            writer.writerow({k: f"{v:.5g}" if isinstance(v, float) else v for k, v in row.items()})


def read_curves(path: Path, missing_ok: bool = False) -> list[dict]:
    """The curve table back from its CSV (numbers as floats); missing_ok: none, no error."""
    if missing_ok and not path.exists():
        return []
    if not path.exists():
        raise SystemExit(f"error: --replot needs {path} (written by a run of this script)")
    with path.open() as f:
        rows = list(csv.DictReader(f))
    numeric = [k for k in CURVE_FIELDS if k not in ("bandit", "method", "band")]
    return [r | {k: float(r[k]) for k in numeric} for r in rows]


def cell_order(exp: spec.Experiment, row: dict) -> tuple[int, int]:
    """Where a (bandit, arm) cell goes: the declaration's env order, then its arm order."""
    return list(exp.envs).index(row["bandit"]), list(exp.arms).index(row["method"])


def plot(exp: spec.Experiment, out: Path, table: list[dict]) -> None:
    """Success, entropy and zero-variance fraction against samples, one column per bandit."""
    from controlrl import plots
    from controlrl.plots import plt

    bandits = list(dict.fromkeys(r["bandit"] for r in table))
    colors = {m: f"C{i}" for i, m in enumerate(exp.arms)}
    with plt.rc_context(plots.STYLE):
        fig, axes = plt.subplots(3, len(bandits), figsize=(3.6 * len(bandits), 8.4), squeeze=False)
        for j, env_id in enumerate(bandits):
            truth = metrics.bandit_truth(env_id)
            mine = [r for r in table if r["bandit"] == env_id]
            for row, key in enumerate(CURVES):
                ax = axes[row, j]
                for arm in exp.arms.values():
                    curve = [r for r in mine if r["method"] == arm.name]
                    if not curve or (row and arm.name not in LOWER_ROW):
                        continue
                    x = [r["samples"] for r in curve]
                    label = f"{arm.label} (n={int(curve[0]['seeds'])}, {curve[0]['band']})"
                    ax.plot(x, [r[key] for r in curve], color=colors[arm.name], label=label)
                    lo, hi = [r[f"{key}_lo"] for r in curve], [r[f"{key}_hi"] for r in curve]
                    ax.fill_between(x, lo, hi, color=colors[arm.name], alpha=0.2, linewidth=0)
                ax.set_xlabel(f"samples ({'answers' if truth['sequence'] else 'pulls'})")
                if row == 0:
                    title = f"{env_id.removeprefix('bandit:')} (optimum {truth['optimal']:.3g})"
                    ax.set_title(title, fontsize=9)
                if row != 1:
                    ax.set_ylim(-0.02, 1.05 if row == 0 else 1.02)
                if ax.get_legend_handles_labels()[0]:
                    ax.legend(fontsize=6)
        axes[0, 0].set_ylabel("success (return / optimum)")
        axes[1, 0].set_ylabel("policy entropy per step (nats)")
        axes[2, 0].set_ylabel("fraction of zero-variance groups")
        fig.suptitle(
            "Bandit suite: success, entropy and zero-variance groups against samples; mean over"
            " seeds and its band (legend: seeds, and 95% bootstrap CI or min-max range)",
            fontsize=10,
        )
        scripts.save_figure(fig, out / "bandit_suite.png", 60)


def main(argv: list[str] | None = None) -> None:
    p = ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--toy", action="store_true", help="the runs of the declaration's toy size")
    p.add_argument("--root", type=Path, default=runner.SWEEPS, help="the lab's runs")
    p.add_argument("--out", type=Path, default=ROOT / "paper_figures" / "out")
    p.add_argument("--replot", action="store_true", help="only the PNG, from the curve CSV")
    args = p.parse_args(argv)
    exp = spec.load(ROOT / "paper_figures" / EXPERIMENT)
    path = args.out / "bandit_suite_curves.csv"
    if not args.replot:
        runs = collect(exp, args.toy, args.root)
        if not runs:
            where = runner.base(exp, args.toy, args.root)
            raise SystemExit(f"error: no finished runs under {where} (python -m paper_figures run)")
        fresh = {(r["bandit"], r["method"]) for r in runs}
        kept = [r for r in read_curves(path, missing_ok=True)
                if (r["bandit"], r["method"]) not in fresh]  # fmt: skip
        args.out.mkdir(parents=True, exist_ok=True)
        write_curves(path, sorted(curve_table(runs) + kept, key=lambda r: cell_order(exp, r)))
    plot(exp, args.out, read_curves(path))  # from the CSV as written: --replot draws the same
    print(f"wrote {args.out / 'bandit_suite.png'} from {path.name}")


if __name__ == "__main__":
    main()
