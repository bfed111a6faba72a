r"""LLM-era policy optimisation on bandits whose truth is known: success (mean reward over the
optimum) against samples for PG, PPO, GRPO (Shao et al. 2024, DeepSeekMath, arXiv 2402.03300),
TPO (Kaddour 2026, Target Policy Optimization; github.com/JeanKaddour/tpo) and GRPO with
sequence (GSPO, arXiv 2507.18071) and Kalman-filtered (KPO, arXiv 2602.10609) ratios, on an easy,
a sparse, a hard-context and two verifiable-sequence bandits (token reversal and addition);
below, the policy entropy and the fraction of zero-variance groups of GRPO and TPO against
samples.

    python paper_figures/bandit_suite.py --train     # the committed figure: runs what is missing
    python paper_figures/bandit_suite.py             # tables and figure from --sweep-dir's runs
    python paper_figures/bandit_suite.py --replot    # the PNG from out/bandit_suite_curves.csv
    python paper_figures/bandit_suite.py --toy --train --sweep-dir runs/toy/s --out runs/toy/f

Methods (every one 256 envs, i.e. 256 samples per update, Adam at 1e-3; groups of G = 8):
  pg          algos/grpo.py --adv-norm mean --update-epochs 1 --kl-coef 0: one gradient step per
              rollout at ratio 1 (so the clip never acts), advantage r minus its group's mean:
              REINFORCE with a group-mean baseline, the plainest policy gradient the repo runs
  pg-filter   pg with --filter-zero-variance (Reinforce-Rej, Xiong et al. 2025, arXiv
              2504.11343: drop groups whose rewards are all equal); only on contextual bandits,
              whose hard contexts are the all-fail prompts of that paper's claim
  ppo         algos/ppo.py with a critic and GAE (CleanRL's defaults otherwise), matched to
              GRPO's batch: --num-steps = episode length (one episode per env per rollout),
              4 epochs of 1 minibatch, lr 1e-3 without annealing
  grpo        algos/grpo.py defaults: (r - mean) / std over the group, 4 epochs, clip 0.2, k3 KL
              0.04 to the initial policy, per-step (token) ratio
  grpo-seq    grpo --ratio sequence (product of an episode's per-step ratios)
  grpo-kalman grpo --ratio kalman (KPO's causal Kalman filter along the episode, q 1e-6, v 1)
  tpo         algos/tpo.py defaults: q proportional to p_old exp(u) over the group, 4 epochs
The two ratio variants run only on the sequence bandits: on a one-step bandit the sequence ratio
is the per-step ratio, and the Kalman filter of a single step is exp(z / 2), a tempered ratio,
not a filter across steps. What a bandit is (a sequence bandit or not, its episode length, its
hard contexts, its optimum, whether its rewards lie in [0, 1]) is asked of the env itself
(envs/bandits.py), never read off its id.

Success of an iteration = its rollout's mean episode return (train/episode_return of the run's
metrics.csv) divided by the bandit's optimal expected reward, exact from envs/bandits.py's truth
(optimal_reward; 0.935 for bernoulli-10's instance, 1 for sparse and sequence bandits): 1 is the
best policy. Samples are episodes: pulls, or answers of L tokens on a sequence bandit (its env
steps / L). Every GRPO-family and TPO (bandit, method) is one population run of --seeds seeds
(--num-seeds, controlrl/population.py: all seeds trained at once, seed k exactly the run
--seed k) under <sweep-dir>/<bandit>/<method>/population/; every PPO one is a sweep
(controlrl.experiment) of --ppo-seeds runs under <sweep-dir>/<bandit>/ppo/, one process a seed
(the committed cells' path; ppo.py --num-seeds gives each seed up to float rounding).
Every interval comes from controlrl.stats: the 95% percentile-bootstrap CI
of the mean over seeds, from >= 5 seeds (the min-max range below, named as a range); spreads
are sample SDs.

Default budget: 5 bandits, 4-6 methods each (25 cells), 200 seeds per cell (a population run
per GRPO-family and TPO cell, 200 runs per PPO cell), 10,240 (bernoulli-10) or 20,480 samples
per seed. A call that runs some cells (--bandits, --methods) rewrites those cells' rows of the
CSVs and keeps every other cell's rows as they were.

Writes <out>/bandit_suite.png; bandit_suite.csv (one row per finished run, the table the claims
ledger reads: final success = mean success over its last --final-window samples, mean success
over the run (the area under the success curve over its length), samples until success first
reaches 0.5, entropy first and last, fraction of iterations whose entropy rose, mean
zero-variance fraction, mean clip fraction); bandit_suite_curves.csv (per bandit, method and
iteration: samples, seeds, and the mean over seeds of success, entropy and zero-variance
fraction with its band; --replot draws the PNG from it alone); bandit_suite_summary.csv (per
bandit and method: final and mean success as mean, sample SD and band over seeds, samples to
0.5 (median over the seeds that reach it), mean entropy and fractions, the command).
"""

from __future__ import annotations

import argparse
import csv
import shlex
import sys
from pathlib import Path

import numpy as np

from controlrl.cli import ArgumentParser
from controlrl.experiment import kept_rows, write_rows

ROOT = Path(__file__).resolve().parents[1]
BANDITS = "bandit:bernoulli-10,bandit:sparse-1000,bandit:contextual-16-10,"
BANDITS += "bandit:sequence-reverse-2-6,bandit:sequence-add-2-3"
SAMPLES = "10240,20480,20480,20480,20480"
PG = ["--adv-norm", "mean", "--update-epochs", "1", "--kl-coef", "0"]
# method -> (label, algo, flags); ppo's --num-steps is added per bandit (its episode length)
METHODS = {
    "pg": ("PG", "grpo", PG),
    "pg-filter": ("PG + filter", "grpo", [*PG, "--filter-zero-variance"]),
    "ppo": ("PPO", "ppo", ["--num-minibatches", "1", "--update-epochs", "4"]),
    "grpo": ("GRPO", "grpo", []),
    "grpo-seq": ("GRPO seq. ratio", "grpo", ["--ratio", "sequence"]),
    "grpo-kalman": ("GRPO Kalman ratio", "grpo", ["--ratio", "kalman"]),
    "tpo": ("TPO", "tpo", []),
}
PPO_MATCHED = ["--learning-rate", "1e-3", "--no-anneal-lr"]
SEQUENCE_ONLY = ("grpo-seq", "grpo-kalman")
CONTEXTUAL_ONLY = ("pg-filter",)  # bandits with hard contexts
LOWER_ROW = ("grpo", "tpo")  # entropy and zero-variance panels
RUN_FIELDS = ("bandit", "method", "algo", "seed", "samples", "optimal_reward", "final_success")
RUN_FIELDS += ("mean_success", "samples_to_half", "entropy_first", "entropy_last")
RUN_FIELDS += ("entropy_rise_frac", "zero_variance_frac", "clip_frac")
TOY = {"bandits": "bandit:bernoulli-10", "samples": "512", "methods": "pg,grpo,tpo", "seeds": 1}
TOY["ppo_seeds"] = 1
TOY["num_envs"] = 64
TOY_FLAGS = ["--hidden-sizes", "16", "--eval-episodes", "1"]


POPULATION_ALGOS = ("grpo", "tpo")  # the algorithms with --num-seeds


def bandit_truth(env_id: str) -> dict:
    """What the bandit is, asked of the env (envs/bandits.py), never read off its id: episode
    length, optimal expected reward, whether it is a sequence bandit (and its rule), its
    number of hard contexts, whether its rewards lie in [0, 1]."""
    import envs

    env = envs.make(env_id, 1, seed=0)
    truth = {
        "length": int(env.length),
        "optimal": float(env.optimal_reward),
        "sequence": bool(env.sequence),
        "rule": env.rule,
        "hard_contexts": int(env.hard_contexts),
        "unit_rewards": bool(env.unit_rewards),
    }
    env.close()
    return truth


def applies(method: str, truth: dict) -> bool:
    """Whether a method runs on a bandit: the ratio variants only where an episode has more
    than one step, the zero-variance filter only where there are hard contexts."""
    if method in SEQUENCE_ONLY:
        return truth["sequence"]
    if method in CONTEXTUAL_ONLY:
        return truth["hard_contexts"] > 0
    return True


def configs(args) -> list[dict]:
    """Every (bandit, method) sweep of the figure."""
    out = []
    for env_id, samples in zip(args.bandits, args.samples, strict=True):
        truth = bandit_truth(env_id)
        for method in args.methods:
            if not applies(method, truth):
                continue
            label, algo, flags = METHODS[method]
            extra = ["--num-envs", str(args.num_envs), *flags]
            if algo == "ppo":
                extra += ["--num-steps", str(truth["length"]), *PPO_MATCHED]
            extra += ["--eval-every", "0", "--no-tensorboard"]
            extra += (TOY_FLAGS if args.toy else []) + args.extra
            out.append(
                dict(
                    bandit=env_id,
                    method=method,
                    label=label,
                    algo=algo,
                    extra=extra,
                    samples=samples,
                    steps=samples * truth["length"],
                    population=algo in POPULATION_ALGOS,
                    length=truth["length"],
                    optimal=truth["optimal"],
                    sequence=truth["sequence"],
                )  # fmt: skip
            )
    return out


def sweep_dir(args, c: dict) -> Path:
    return args.sweep_dir / c["bandit"].removeprefix("bandit:") / c["method"]


def train_population(args, c: dict) -> None:
    """One population run of args.seeds seeds (1..seeds) for the cell, unless finished."""
    import shutil
    import subprocess
    import time

    run_dir = sweep_dir(args, c) / "population"
    if (run_dir / "final_eval.json").exists():
        return
    shutil.rmtree(run_dir, ignore_errors=True)  # unfinished: started again
    cmd = [sys.executable, str(ROOT / "algos" / f"{c['algo']}.py"), "--env-id", c["bandit"]]
    cmd += ["--total-timesteps", str(c["steps"]), *c["extra"], "--no-progress"]
    cmd += ["--seed", "1", "--num-seeds", str(args.seeds), "--run-dir", str(run_dir)]
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True)
    status = "done" if done.returncode == 0 else f"failed (exit {done.returncode})"
    print(f"[{status}] {c['bandit']} {c['method']} {args.seeds} seeds in one run "
          f"{time.perf_counter() - t0:.1f} s", flush=True)  # fmt: skip
    if done.returncode:
        print(done.stderr[-2000:], file=sys.stderr)


def train(args, cfgs: list[dict]) -> None:
    from controlrl.experiment import SweepConfig, run_sweep

    for c in cfgs:
        if c["population"]:
            train_population(args, c)
            continue
        config = SweepConfig([c["algo"]], [c["bandit"]], args.ppo_seeds, c["steps"], c["extra"])
        runs = run_sweep(
            config,
            sweep_dir(args, c),
            workers=args.workers,
            on_update=lambda r, c=c: print(
                f"[{r['status']}] {c['bandit']} {c['method']} {r['run_id']} {r['seconds']:.1f} s",
                flush=True,
            ),
        )
        failed = [k for k, v in runs.items() if v["status"] == "failed"]
        if failed:
            print(f"warning: failed runs {failed}; see {sweep_dir(args, c)}/sweep.json")


def read_columns(run_dir: Path) -> dict[str, np.ndarray]:
    """metrics.csv as float columns (empty cells NaN)."""
    with (run_dir / "metrics.csv").open() as f:
        rows = list(csv.DictReader(f))
    return _columns(rows)


def _columns(rows: list[dict]) -> dict[str, np.ndarray]:
    return {k: np.array([float(r[k]) if r[k] != "" else np.nan for r in rows]) for k in rows[0]}


def seed_columns(c: dict, args) -> list[tuple[int, dict[str, np.ndarray]]]:
    """(seed, metrics columns) of every finished run of a cell: a population's seeds, or the
    sweep's runs."""
    if c["population"]:
        run_dir = sweep_dir(args, c) / "population"
        if not (run_dir / "final_eval.json").exists():
            return []
        with (run_dir / "metrics.csv").open() as f:
            by_seed: dict[int, list[dict]] = {}
            for r in csv.DictReader(f):
                by_seed.setdefault(int(r.pop("seed")), []).append(r)
        return [(seed, _columns(rows)) for seed, rows in sorted(by_seed.items())]
    base = sweep_dir(args, c) / "runs" / c["algo"] / c["bandit"].replace(":", "_")
    done = sorted(base.glob("seed*/final_eval.json"), key=lambda p: p.parent.name)
    return [(int(d.parent.name.removeprefix("seed")), read_columns(d.parent)) for d in done]


def success_curve(columns: dict[str, np.ndarray], length: int, optimal: float):
    """(samples, success): episodes so far and the rollout's mean return over the optimum."""
    return columns["step"] / length, columns["train/episode_return"] / optimal


def run_row(c: dict, seed: int, columns: dict, final_window: int) -> dict:
    samples, success = success_curve(columns, c["length"], c["optimal"])
    final = success[samples > samples[-1] - final_window]
    half = np.flatnonzero(success >= 0.5)
    entropy = columns["train/entropy"]
    nan = float("nan")
    zero_var = columns.get("train/zero_variance_frac")
    clip = columns.get("train/clip_frac")
    return {
        "bandit": c["bandit"], "method": c["method"], "algo": c["algo"], "seed": seed,
        "samples": int(samples[-1]), "optimal_reward": c["optimal"],
        "final_success": float(final.mean()), "mean_success": float(success.mean()),
        "samples_to_half": int(samples[half[0]]) if len(half) else -1,
        "entropy_first": float(entropy[0]), "entropy_last": float(entropy[-1]),
        "entropy_rise_frac": float(np.mean(np.diff(entropy) > 0)) if len(entropy) > 1 else nan,
        "zero_variance_frac": float(np.nanmean(zero_var)) if zero_var is not None else nan,
        "clip_frac": float(np.nanmean(clip)) if clip is not None else nan,
    }  # fmt: skip


def collect(args, cfgs: list[dict]) -> list[dict]:
    """Per finished run: its CSV row and its curves."""
    runs = []
    for c in cfgs:
        for seed, columns in seed_columns(c, args):
            samples, success = success_curve(columns, c["length"], c["optimal"])
            nan = np.full(len(samples), np.nan)
            curves = {
                "samples": samples,
                "success": success,
                "entropy": columns["train/entropy"],
                "zero_variance_frac": columns.get("train/zero_variance_frac", nan),
            }
            runs.append({"config": c, "row": run_row(c, seed, columns, args.final_window)})
            runs[-1]["curves"] = curves
    return runs


CURVES = {"success": "success", "entropy": "entropy", "zero_var": "zero_variance_frac"}
CURVE_FIELDS = ["bandit", "method", "samples", "seeds", "band"]
CURVE_FIELDS += [f"{k}{e}" for k in CURVES for e in ("", "_lo", "_hi")]


def _band(data: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, str]:
    """controlrl.stats.band of [seeds, points], a few points at a time (the bootstrap draws the
    same seed indices for every point, so the result is that of one call, in less memory)."""
    from controlrl import stats

    parts = [stats.band(data[:, i : i + 8]) for i in range(0, data.shape[1], 8)]
    mean, lo, hi = (np.concatenate([p[k] for p in parts]) for k in range(3))
    return mean, lo, hi, parts[0][3]


def curve_table(runs: list[dict]) -> list[dict]:
    """Per (bandit, method, iteration): samples, seeds, and the mean over seeds of success,
    entropy and zero-variance fraction with its band (95% bootstrap CI from >= 5 seeds, the
    min-max range below; the band column names which)."""
    groups: dict[tuple, list[dict]] = {}
    for r in runs:
        groups.setdefault((r["row"]["bandit"], r["row"]["method"]), []).append(r["curves"])
    out = []
    for (bandit, method), curves in groups.items():
        samples = curves[0]["samples"]
        if any(not np.array_equal(c["samples"], samples) for c in curves):
            raise ValueError(f"{bandit} {method}: the seeds' runs log different sample counts")
        columns = {}
        for key, name in CURVES.items():
            data = np.stack([c[name] for c in curves])  # [seeds, iterations]
            if np.isnan(data).all():  # a column the method does not log (PPO's zero_var)
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


def cell_order(row: dict) -> tuple[int, int]:
    """Where a (bandit, method) cell goes in the tables: BANDITS' order, then METHODS'."""
    bandits = BANDITS.split(",")
    b = bandits.index(row["bandit"]) if row["bandit"] in bandits else len(bandits)
    return b, list(METHODS).index(row["method"])


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


SUMMARY_FLOATS = [
    f"{k}{e}" for k in ("final_success", "mean_success") for e in ("", "_sd", "_lo", "_hi")
]
SUMMARY_FLOATS += ["samples_to_half_median", "entropy_last", "entropy_rise_frac"]
SUMMARY_FLOATS += ["zero_variance_frac", "clip_frac"]


def summary(runs: list[dict], command: str) -> list[dict]:
    """Per (bandit, method): final and mean success, mean over seeds with its sample SD and
    95% bootstrap CI (the range below 5 seeds; the band column names which), and the means of
    the other per-run numbers."""
    from controlrl import stats

    groups: dict[tuple, list[dict]] = {}
    for r in runs:
        groups.setdefault((r["row"]["bandit"], r["row"]["method"]), []).append(r["row"])
    out = []
    for (bandit, method), rows in groups.items():
        row = {"bandit": bandit, "method": method, "seeds": len(rows)}
        for key in ("final_success", "mean_success"):
            s = stats.summarize([r[key] for r in rows])
            row |= {key: s.mean, f"{key}_sd": s.sd, f"{key}_lo": s.lo, f"{key}_hi": s.hi}
            row["band"] = s.kind
        reached = [r["samples_to_half"] for r in rows if r["samples_to_half"] >= 0]
        row["reached_half"] = len(reached)
        row["samples_to_half_median"] = float(np.median(reached)) if reached else float("nan")
        for key in ("entropy_last", "entropy_rise_frac", "zero_variance_frac", "clip_frac"):
            row[key] = float(np.mean([r[key] for r in rows]))
        row["command"] = command
        out.append(row)
    return out


def plot(out: Path, table: list[dict]) -> None:
    """The figure from the curve table: success, entropy and zero-variance fraction against
    samples, one column per bandit, the mean over seeds and its band."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from controlrl import plots

    bandits = list(dict.fromkeys(r["bandit"] for r in table))
    n = len(bandits)
    colors = {m: f"C{i}" for i, m in enumerate(METHODS)}
    with plt.rc_context(plots.STYLE):
        fig, axes = plt.subplots(3, n, figsize=(3.6 * n, 8.4), squeeze=False)
        for j, env_id in enumerate(bandits):
            truth = bandit_truth(env_id)
            mine = [r for r in table if r["bandit"] == env_id]
            unit = "answers" if truth["sequence"] else "pulls"
            for row, key in enumerate(CURVES):
                ax = axes[row, j]
                for method in METHODS:
                    curve = [r for r in mine if r["method"] == method]
                    if not curve or (row and method not in LOWER_ROW):
                        continue
                    x = [r["samples"] for r in curve]
                    label = f"{METHODS[method][0]} (n={int(curve[0]['seeds'])}, {curve[0]['band']})"
                    ax.plot(x, [r[key] for r in curve], color=colors[method], label=label)
                    lo, hi = [r[f"{key}_lo"] for r in curve], [r[f"{key}_hi"] for r in curve]
                    ax.fill_between(x, lo, hi, color=colors[method], alpha=0.2, linewidth=0)
                ax.set_xlabel(f"samples ({unit})")
                if row == 0:
                    title = f"{env_id.removeprefix('bandit:')} (optimum {truth['optimal']:.3g})"
                    ax.set_title(title, fontsize=9)
                    ax.set_ylim(-0.02, 1.05)
                if row == 2:
                    ax.set_ylim(-0.02, 1.02)
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
        fig.tight_layout()
        fig.savefig(out / "bandit_suite.png", dpi=60, metadata={"Software": None})
        plt.close(fig)


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bandits", default=BANDITS, help="bandit: ids, comma-separated")
    p.add_argument(
        "--samples", default=SAMPLES, help="samples per run, one per bandit or one for all"
    )
    p.add_argument("--methods", default=",".join(METHODS), help=f"some of {', '.join(METHODS)}")
    p.add_argument("--seeds", type=int, default=200, help="seeds per GRPO-family or TPO cell")
    p.add_argument("--ppo-seeds", type=int, default=200, help="seeds per PPO cell (one run each)")
    p.add_argument("--num-envs", type=int, default=256, help="samples per update (all methods)")
    p.add_argument("--final-window", type=int, default=1280, help="samples of final_success")
    p.add_argument("--sweep-dir", type=Path, default=ROOT / "runs" / "sweeps" / "bandit_suite")
    p.add_argument("--out", type=Path, default=ROOT / "paper_figures" / "out")
    p.add_argument("--train", action="store_true", help="run what is missing first")
    p.add_argument("--workers", type=int, default=1, help="runs at once when training")
    p.add_argument("--toy", action="store_true", help="seconds-sized end-to-end run (tests)")
    p.add_argument(
        "--replot", action="store_true", help="only the PNG, from <out>/bandit_suite_curves.csv"
    )
    p.add_argument("extra", nargs="*", help="flags passed to every algorithm (after --)")
    args = p.parse_args(argv)
    if args.toy:  # toy sizes replace the defaults, not what was given on the command line
        from controlrl import experiment

        experiment.apply_toy(args, argv, TOY)
    from envs import UnknownEnvError, check_env_id, split_id

    args.bandits = args.bandits.split(",")
    for env_id in args.bandits:
        if split_id(env_id)[0] != "bandit":
            p.error(f"--bandits: {env_id!r} is not a bandit: id")
        try:
            check_env_id(env_id)
        except UnknownEnvError as exc:
            p.error(f"--bandits: {exc}")
        if not bandit_truth(env_id)["unit_rewards"]:
            p.error(f"--bandits: {env_id} has rewards outside [0, 1]: no success to plot")
    try:
        args.samples = [int(s) for s in args.samples.split(",")]
    except ValueError:
        p.error(f"--samples must be integers, got {args.samples!r}")
    if len(args.samples) == 1:
        args.samples *= len(args.bandits)
    if len(args.samples) != len(args.bandits) or min(args.samples) < args.num_envs:
        p.error(
            f"--samples: one count >= --num-envs per bandit ({len(args.bandits)}) or one for "
            f"all, got {args.samples}"
        )
    args.methods = args.methods.split(",")
    bad = [m for m in args.methods if m not in METHODS]
    if bad:
        p.error(f"--methods: unknown {bad}, expected some of {list(METHODS)}")
    if args.num_envs % 8:
        p.error(f"--num-envs must be a multiple of the group size 8, got {args.num_envs}")
    for name in ("seeds", "ppo_seeds", "num_envs", "workers", "final_window"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    shown = " ".join(shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]))
    command = f"python paper_figures/bandit_suite.py {shown}".strip()
    if args.replot:  # the figure again from the committed curve table, nothing else read
        plot(args.out, read_curves(args.out / "bandit_suite_curves.csv"))
        print(f"wrote {args.out / 'bandit_suite.png'}; command: {command}")
        return
    cfgs = configs(args)
    if args.train:
        train(args, cfgs)
    runs = collect(args, cfgs)
    if not runs:
        raise SystemExit(f"error: no finished runs under {args.sweep_dir} (use --train)")
    # cells with no run under --sweep-dir (run before, by another call) keep their committed rows
    fresh = {(r["row"]["bandit"], r["row"]["method"]) for r in runs}
    key = ("bandit", "method")
    ints = ("seed", "samples", "samples_to_half")
    floats = [f for f in RUN_FIELDS[4:] if f not in ints]
    old = kept_rows(args.out / "bandit_suite.csv", key, fresh, ints=ints, floats=floats)
    old_curves = [r for r in read_curves(args.out / "bandit_suite_curves.csv", missing_ok=True)
                  if (r["bandit"], r["method"]) not in fresh]  # fmt: skip
    old_table = kept_rows(args.out / "bandit_suite_summary.csv", key, fresh,
                          ints=("seeds", "reached_half"), floats=SUMMARY_FLOATS)  # fmt: skip
    rows = sorted([r["row"] for r in runs] + old, key=cell_order)  # a cell's order kept
    curves = sorted(curve_table(runs) + old_curves, key=cell_order)
    table = sorted(summary(runs, command) + old_table, key=cell_order)
    args.out.mkdir(parents=True, exist_ok=True)
    write_rows(args.out / "bandit_suite.csv", rows, RUN_FIELDS)
    write_curves(args.out / "bandit_suite_curves.csv", curves)
    write_rows(args.out / "bandit_suite_summary.csv", table, table[0])
    # drawn from the CSV as written, so that --replot gives the same PNG byte for byte
    plot(args.out, read_curves(args.out / "bandit_suite_curves.csv"))
    print("final success / mean success over the run: mean [band] over seeds (sample SD)")
    for t in table:
        print(
            f"  {t['bandit']} {t['method']}: {t['final_success']:.3f} "
            f"[{t['final_success_lo']:.3f}, {t['final_success_hi']:.3f}] "
            f"(sample SD {t['final_success_sd']:.3f}) / {t['mean_success']:.3f} "
            f"[{t['mean_success_lo']:.3f}, {t['mean_success_hi']:.3f}] ({t['band']}, "
            f"n={t['seeds']}), to 0.5 in {t['samples_to_half_median']:.0f} "
            f"({t['reached_half']}/{t['seeds']}), entropy rose in "
            f"{t['entropy_rise_frac']:.0%} of iterations"
        )
    print(
        f"wrote {args.out / 'bandit_suite'}.png, .csv, _curves.csv and _summary.csv; "
        f"command: {command}"
    )


if __name__ == "__main__":
    main()
