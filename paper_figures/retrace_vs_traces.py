r"""Retrace vs importance sampling vs tree backup vs uncorrected Q(lambda) (Munos, Stepleton,
Harutyunyan, Bellemare 2016, "Safe and Efficient Off-Policy Reinforcement Learning").

Panel A, tabular and exact (seconds): policy-evaluation error ||Q_k - Q^pi||_inf against updates
of the sample-based rule Q(x, a) <- Q(x, a) + step (G - Q(x, a)), every (x, a) each update, G the
off-policy target of a path of --segment-length steps under the behaviour mu
(theory.retrace.sample_paths / sampled_targets; the same paths for all four traces), on an
8-state chain (action 1 right, 0 left, slip 0.1, gamma 0.9; theory.mdp.chain) with target pi
"right w.p. --p-right" and mu = (1 - alpha) pi + alpha nu, nu its mirror image. Median and
10-90% band over --tab-seeds seeds; dashed: the expected update Q <- Q + step (E[G] - Q), exact
(theory.retrace.truncated_expectation). The last panel: the exact variance of the targets at
Q = Q^pi (theory.retrace.target_moments), mean over (x, a).

Panel B, MuJoCo: learning curves of algos/retrace.py with each --trace on one task against
algos/ppo.py, through controlrl.experiment sweeps under --sweep-dir/<config>/ (--train runs what
is missing; without it the panel plots what exists), and per config its finished runs' final
evaluation beside their run-average evaluation (the mean over all evaluations of the run): one
--eval-episodes evaluation at the end is noisy, the run average is the sample efficiency.

    python paper_figures/retrace_vs_traces.py                  # panel A; B from existing runs
    python paper_figures/retrace_vs_traces.py --train          # B: 5 configs x 3 seeds x 100k
    python paper_figures/retrace_vs_traces.py --plot-only      # redraw from the CSVs in --out
    python paper_figures/retrace_vs_traces.py --toy --out runs/toy/retrace [--train]   # seconds

The committed panel B (retrace_vs_traces_mujoco.csv): --train --traces retrace,is,q_lambda
--seeds 5 --total-timesteps 100000 --eval-every 10000 --eval-episodes 10. The earlier runs of
all four traces, --train --total-timesteps 30000 (3 seeds, evaluation every 5,000 steps over 5
episodes) --mujoco-name retrace_vs_traces_mujoco_30k, are kept for the ledger's old verdicts and
tree backup, not rerun (that command also rewrites the PNG and panel A: run the first one after
it).

Writes <out>/retrace_vs_traces.png, retrace_vs_traces.csv (panel A: per alpha, kind and update
the error's median, 10% and 90% over seeds and the expected update's error),
retrace_vs_traces_summary.csv (per alpha and kind: the targets' variance at Q^pi, exact and from
--variance-paths paths; the expected update's rate (spectral radius) and updates to an error of
0.01; the sampled runs' error over the last 10% of updates and peak error (medians over seeds),
and how many seeds passed 1e6) and, when runs exist,
retrace_vs_traces_mujoco.csv (one row per finished run, with its mean trace coefficient c) and
retrace_vs_traces_mujoco_curves.csv.
"""

from __future__ import annotations

import argparse
import collections
import csv
import json
import shlex
import sys
from pathlib import Path

import numpy as np

from controlrl.cli import ArgumentParser
from controlrl.experiment import write_rows
from theory.mdp import chain
from theory.retrace import (
    q_pi,
    sample_paths,
    sampled_targets,
    target_moments,
    traces,
    truncated_expectation,
)

ROOT = Path(__file__).resolve().parents[1]
KINDS = {
    "retrace": "Retrace",
    "is": "importance sampling",
    "tree_backup": "tree backup",
    "q_lambda": r"Q($\lambda$), uncorrected",
}
TOL = 1e-2  # expected_updates_to_tol: the first update where the expected rule's error < TOL
CAP = 1e6  # an error above this counts as diverged; that run stops updating (no overflow)
MUJOCO_NAME = "retrace_vs_traces_mujoco"
TOY_TAB = {"tab_seeds": 3, "updates": 60, "variance_paths": 200}
TOY_MUJOCO = {"seeds": 1, "total_timesteps": 256, "eval_every": 128, "eval_episodes": 1}
TOY_PPO = "--num-steps 64 --num-minibatches 2 --update-epochs 1 --hidden-sizes 16 16"
TOY_RETRACE = "--learning-starts 64 --batch-size 32 --segment-length 4 --buffer-size 512"
TOY_RETRACE += " --hidden-sizes 16 16 --log-every 64"


# ---------------------------------------------------------------------------------------------
# panel A: tabular policy evaluation
# ---------------------------------------------------------------------------------------------


def chain_problem(n: int, p_right: float, gamma: float):
    """The chain MDP, the target pi (right w.p. p_right) and nu, pi's mirror image."""
    mdp = chain(n, slip=0.1, gamma=gamma)
    pi = np.tile([1 - p_right, p_right], (n, 1))
    return mdp, pi, pi[:, ::-1].copy()


def stochastic_errors(mdp, pi, mu, lam, length, step, updates, n_paths, rng) -> dict:
    """{kind: ||Q_k - Q^pi||_inf for k = 0..updates} of the sampled rule from Q_0 = 0, the same
    paths for every kind; a run whose error passes CAP stops there (its error stays at CAP)."""
    S, A = mdp.S, mdp.A
    target = q_pi(mdp, pi).reshape(S, A)
    x = np.repeat(np.arange(S), A * n_paths)  # every (x, a), n_paths times
    a = np.tile(np.repeat(np.arange(A), n_paths), S)
    Q = {k: np.zeros((S, A)) for k in KINDS}
    c = {k: traces(pi, mu, lam, k) for k in KINDS}
    err = {k: np.full(updates + 1, CAP) for k in KINDS}
    live = {k: True for k in KINDS}
    for i in range(updates + 1):
        for k in KINDS:
            if live[k]:
                err[k][i] = e = min(np.max(np.abs(Q[k] - target)), CAP)
                live[k] = e < CAP
        if i == updates:
            break
        states, actions = sample_paths(mdp, mu, x, a, length, rng)
        for k in KINDS:
            if live[k]:
                G = sampled_targets(mdp, pi, Q[k], c[k], states, actions)
                Q[k] += step * (G.reshape(S, A, n_paths).mean(-1) - Q[k])
    return err


def expected_errors(mdp, pi, mu, c, length, step, updates) -> np.ndarray:
    """||Q_k - Q^pi||_inf of the expected rule Q <- Q + step (E[G] - Q), exact, from Q_0 = 0."""
    target = q_pi(mdp, pi).reshape(mdp.S, mdp.A)
    Q, out = np.zeros_like(target), np.full(updates + 1, CAP)
    for i in range(updates + 1):
        out[i] = np.max(np.abs(Q - target))
        if out[i] >= CAP:
            out[i] = CAP
            break
        Q = Q + step * (truncated_expectation(mdp, pi, mu, c, Q, length) - Q)
    return out


def expected_rate(mdp, pi, mu, c, length, step) -> float:
    """Spectral radius of the expected rule's linear part: < 1 converges, > 1 diverges."""
    SA = mdp.S * mdp.A
    zero = truncated_expectation(mdp, pi, mu, c, np.zeros((mdp.S, mdp.A)), length).reshape(-1)
    cols = [
        truncated_expectation(mdp, pi, mu, c, e.reshape(mdp.S, mdp.A), length).reshape(-1) - zero
        for e in np.eye(SA)
    ]
    linear = (1 - step) * np.eye(SA) + step * np.stack(cols, axis=1)
    return float(np.max(np.abs(np.linalg.eigvals(linear))))


def tabular(args) -> tuple[list[dict], list[dict]]:
    """Panel A: (curve rows per alpha, kind and update; summary rows per alpha and kind)."""
    mdp, pi, nu = chain_problem(args.chain_states, args.p_right, args.gamma)
    target = q_pi(mdp, pi).reshape(mdp.S, mdp.A)
    K = args.segment_length
    curves, summary = [], []
    for j, alpha in enumerate(args.alphas):
        mu = (1 - alpha) * pi + alpha * nu
        runs = {k: [] for k in KINDS}
        for seed in range(args.tab_seeds):
            rng = np.random.default_rng([seed, j])
            errs = stochastic_errors(
                mdp, pi, mu, args.lam, K, args.step, args.updates, args.paths, rng
            )
            for k in KINDS:
                runs[k].append(errs[k])
        rng = np.random.default_rng([10_000, j])
        x = np.repeat(np.arange(mdp.S), mdp.A * args.variance_paths)
        a = np.tile(np.repeat(np.arange(mdp.A), args.variance_paths), mdp.S)
        states, actions = sample_paths(mdp, mu, x, a, K, rng)
        for k in KINDS:
            c = traces(pi, mu, args.lam, k)
            errs = np.array(runs[k])  # [seeds, updates + 1]
            med, lo, hi = np.quantile(errs, [0.5, 0.1, 0.9], axis=0)
            exact = expected_errors(mdp, pi, mu, c, K, args.step, args.updates)
            curves += [
                dict(
                    alpha=alpha,
                    kind=k,
                    update=i,
                    err_median=med[i],
                    err_p10=lo[i],
                    err_p90=hi[i],
                    err_expected=exact[i],
                )
                for i in range(args.updates + 1)
            ]
            _, var = target_moments(mdp, pi, mu, c, target, K)
            G = sampled_targets(mdp, pi, target, c, states, actions)
            sample_var = G.reshape(mdp.S, mdp.A, args.variance_paths).var(-1)
            tail = errs[:, -max(1, args.updates // 10) :]  # the last 10% of the updates
            to_tol = int(np.argmax(exact < TOL)) if exact.min() < TOL else -1
            summary.append(
                {
                    "alpha": alpha,
                    "kind": k,
                    "target_var_mean": var.mean(),
                    "target_var_max": var.max(),
                    "sample_var_mean": sample_var.mean(),
                    "sample_var_max": sample_var.max(),
                    "expected_rate": expected_rate(mdp, pi, mu, c, K, args.step),
                    "expected_updates_to_tol": to_tol,
                    "err_final_median": float(np.median(tail.mean(1))),
                    "err_peak_median": float(np.median(errs.max(1))),
                    "diverged": int(np.sum(errs[:, -1] >= CAP)),
                    "seeds": args.tab_seeds,
                }
            )
    return curves, summary


def shown(path: Path) -> str:
    """A path as printed: relative to the repository where it lies inside it."""
    path = Path(path).resolve()
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


# ---------------------------------------------------------------------------------------------
# panel B: MuJoCo learning curves, algos/retrace.py per trace kind against algos/ppo.py
# ---------------------------------------------------------------------------------------------


def mujoco_configs(args) -> list[dict]:
    """One sweep per trace kind of algos/retrace.py (skipped while the file is missing), + PPO."""
    out = []
    if (ROOT / "algos" / "retrace.py").exists():
        for trace in args.traces:
            extra = ["--trace", trace, *shlex.split(args.retrace_args)]
            out.append(dict(label=f"retrace-{trace}", algo="retrace", trace=trace, extra=extra))
    else:
        print("algos/retrace.py not found: panel B has PPO only")
    if args.ppo:
        out.append(dict(label="ppo", algo="ppo", trace="", extra=shlex.split(args.ppo_args)))
    return out


def train(args, cfgs: list[dict]) -> None:
    from controlrl.experiment import SweepConfig, run_sweep

    shared = ["--eval-every", str(args.eval_every), "--eval-episodes", str(args.eval_episodes)]
    for c in cfgs:
        config = SweepConfig(
            [c["algo"]], [args.env_id], args.seeds, args.total_timesteps, shared + c["extra"]
        )
        runs = run_sweep(
            config,
            args.sweep_dir / c["label"],
            workers=args.workers,
            on_update=lambda r, label=c["label"]: print(f"[{r['status']}] {label} {r['run_id']}"),
        )
        failed = [k for k, v in runs.items() if v["status"] == "failed"]
        if failed:
            print(f"warning: failed runs {failed}; see {args.sweep_dir / c['label']}/sweep.json")


def curve(run_dir: Path, column: str) -> tuple[np.ndarray, np.ndarray]:
    from controlrl import plots

    try:
        return plots.read_metrics(run_dir, column)
    except KeyError:
        return np.array([]), np.array([])


def collect(args, cfgs: list[dict]) -> list[dict]:
    """Per finished or diverged run: its CSV row (status "finished" or "diverged", the latter
    with no final evaluation and steps = its last logged step) and its eval and training-return
    curves. A diverged run is one that stopped on non-finite losses (its log says so; its last
    good checkpoint stays); a run still going or killed is left out."""
    from controlrl import plots

    runs = []
    for c in cfgs:
        base = args.sweep_dir / c["label"] / "runs" / c["algo"] / args.env_id.replace(":", "_")
        for run_dir in sorted(base.glob("seed*/"), key=lambda p: p.name):
            done, log = run_dir / "final_eval.json", base / f"{run_dir.name}.log"
            diverged = not done.exists() and log.exists() and "non-finite" in log.read_text()
            if not (done.exists() or diverged):
                continue
            evals = curve(run_dir, "eval/return")
            trains = curve(run_dir, "train/episode_return")
            row = dict(config=c["label"], algo=c["algo"], trace=c["trace"], env_id=args.env_id)
            row["seed"] = int(run_dir.name.removeprefix("seed"))
            row["status"] = "diverged" if diverged else "finished"
            if diverged:
                row["steps"] = int(max(np.max(trains[0], initial=0), np.max(evals[0], initial=0)))
                row["final_eval_return"] = float("nan")
            else:
                final = json.loads(done.read_text())
                row["steps"] = int(final["step"])
                row["final_eval_return"] = float(final["eval_return_mean"])
            # sample efficiency: the mean of the eval curve (area under it / steps)
            row["mean_eval_return"] = float(np.mean(evals[1])) if len(evals[1]) else float("nan")
            row["last_train_return"] = float(trains[1][-1]) if len(trains[1]) else float("nan")
            config = run_dir / "config.json"
            if config.exists():  # the evaluation protocol, for the ledger's rows
                run_args = json.loads(config.read_text())["args"]
                row["eval_every"] = run_args["eval_every"]
                row["eval_episodes"] = run_args["eval_episodes"]
            timed = (run_dir / "timing.csv").exists()  # the experiment's compute, stated once
            row["train_s"] = plots.train_seconds(run_dir) if timed else float("nan")
            # how far the targets look ahead: the trace coefficient c averaged over the run's
            # logged updates (1 = lambda, uncut; PPO has none)
            traces = curve(run_dir, "train/trace_mean")[1]
            row["mean_trace"] = float(np.mean(traces)) if len(traces) else float("nan")
            runs.append({"row": row, "eval": evals, "train": trains})
    return runs


def diverged_note(runs: list[dict], label: str) -> str:
    """ "" or ", seed 1 diverged at 15,000 steps" for the runs of one config."""
    bad = [
        r["row"] for r in runs if r["row"]["config"] == label and r["row"]["status"] != "finished"
    ]
    if not bad:
        return ""
    where = ", ".join(f"seed {r['seed']} at {r['steps']:,}" for r in bad)
    return f", diverged (non-finite losses): {where} steps"


def write_mujoco(out: Path, runs: list[dict], name: str = MUJOCO_NAME) -> None:
    """Panel B's runs: <name>.csv (one row per run) and <name>_curves.csv (eval and train)."""
    write_rows(out / f"{name}.csv", [r["row"] for r in runs])
    with (out / f"{name}_curves.csv").open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["config", "seed", "column", "step", "value"])
        for r in runs:
            for column in ("eval", "train"):
                for step, value in zip(*r[column]):
                    writer.writerow(
                        [r["row"]["config"], r["row"]["seed"], column, int(step), value]
                    )


def read_rows(path: Path) -> list[dict]:
    """Rows of a CSV written by write_rows, numbers parsed back (names kept as text)."""
    from controlrl.bench import read_csv

    return read_csv(path)


def load_mujoco(out: Path, name: str = MUJOCO_NAME) -> list[dict]:
    """Panel B's runs as write_mujoco left them in `out`: rows and eval / train curves."""
    path = out / f"{name}.csv"
    if not path.exists():
        return []
    points: dict[tuple, list] = {}
    for r in read_rows(out / f"{name}_curves.csv"):
        points.setdefault((r["config"], r["seed"], r["column"]), []).append((r["step"], r["value"]))
    runs = []
    for row in read_rows(path):
        run = {"row": row}
        for column in ("eval", "train"):
            pts = points.get((row["config"], row["seed"], column), [])
            run[column] = tuple(np.array([p[i] for p in pts], float) for i in (0, 1))
        runs.append(run)
    return runs


# ---------------------------------------------------------------------------------------------
# figure
# ---------------------------------------------------------------------------------------------


def plot_final_vs_average(ax, runs: list[dict], episodes: int) -> None:
    """Per config, the finished runs' final evaluation and their run-average evaluation (the
    mean over all evaluations of the run) side by side: dots per seed, a bar at their mean."""
    finished = [r["row"] for r in runs if r["row"]["status"] == "finished"]
    labels = list(dict.fromkeys(r["row"]["config"] for r in runs))
    width = 0.38
    keys = (
        ("final_eval_return", f"final evaluation (the last, {episodes} episodes)", -width / 2),
        ("mean_eval_return", "run average (mean over all evaluations)", width / 2),
    )
    for key, name, dx in keys:
        per = [[r[key] for r in finished if r["config"] == c] for c in labels]
        means = [float(np.mean(v)) if v else np.nan for v in per]
        bars = ax.bar(np.arange(len(labels)) + dx, means, width * 0.9, alpha=0.5, label=name)
        for i, v in enumerate(per):
            ax.plot([i + dx] * len(v), v, "o", ms=3, color=bars.patches[0].get_facecolor()[:3])
    ticks = []
    for c in labels:
        n_bad = sum(r["row"]["config"] == c and r["row"]["status"] != "finished" for r in runs)
        ticks.append(f"{c.removeprefix('retrace-')}" + f"\n({n_bad} diverged)" * bool(n_bad))
    ax.set_xticks(range(len(labels)), ticks, fontsize=7)
    ax.set_ylabel("evaluation return (finished runs)")
    ax.set_title("final vs run-average evaluation, bar: mean, dots: seeds", fontsize=8)
    if labels:
        ax.legend(fontsize=7)


def plot(args, curves: list[dict], summary: list[dict], runs: list[dict]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from controlrl import plots

    n = len(args.alphas)
    with plt.rc_context(plots.STYLE):
        fig = plt.figure(figsize=(3.4 * (n + 1), 7.2))
        grid = fig.add_gridspec(2, n + 1)
        for j, alpha in enumerate(args.alphas):
            ax = fig.add_subplot(grid[0, j])
            for kind in KINDS:
                sel = [r for r in curves if r["alpha"] == alpha and r["kind"] == kind]
                steps = [r["update"] for r in sel]
                (line,) = ax.plot(steps, [r["err_median"] for r in sel], label=KINDS[kind])
                lo, hi = [r["err_p10"] for r in sel], [r["err_p90"] for r in sel]
                ax.fill_between(steps, lo, hi, color=line.get_color(), alpha=0.2, linewidth=0)
                ax.plot(steps, [r["err_expected"] for r in sel], "--", color=line.get_color())
            ax.set_yscale("log")
            ax.set_ylim(1e-3, CAP * 3)  # the expected updates go on below, to rounding error
            ax.set_title(rf"$\alpha$ = {alpha:g}: $\mu = {1 - alpha:g}\,\pi + {alpha:g}\,\nu$")
            ax.set_xlabel("updates (every (x, a) once)")
        fig.axes[0].set_ylabel(r"$\|Q_k - Q^\pi\|_\infty$")
        fig.axes[0].legend(fontsize=7, title="dashed: expected update", title_fontsize=7)
        ax = fig.add_subplot(grid[0, n])
        width = 0.8 / len(KINDS)
        for i, kind in enumerate(KINDS):
            sel = [r for r in summary if r["kind"] == kind]
            xs = np.arange(len(sel)) + (i - (len(KINDS) - 1) / 2) * width
            ax.bar(xs, [r["target_var_mean"] for r in sel], width, label=KINDS[kind])
        ax.set_xticks(range(n), [rf"$\alpha$ = {a:g}" for a in args.alphas])
        ax.set_yscale("log")
        ax.set_title(r"target variance at $Q^\pi$ (exact, mean over (x, a))", fontsize=8)
        ax_eval = fig.add_subplot(grid[1, 0])
        ax_train = fig.add_subplot(grid[1, 1])
        plot_final_vs_average(fig.add_subplot(grid[1, 2:]), runs, args.eval_episodes)
        labels = list(dict.fromkeys(r["row"]["config"] for r in runs))
        for ax, key, ylabel in (
            (ax_eval, "eval", "evaluation return (deterministic policy)"),
            (ax_train, "train", "training episode return"),
        ):
            finished = [r for r in runs if r["row"]["status"] == "finished"]
            groups = {}
            for c in labels:
                n_bad = sum(r["row"]["config"] == c for r in runs) - sum(
                    r["row"]["config"] == c for r in finished
                )
                name = f"{c}, {n_bad} diverged" if n_bad else c  # drawn: the finished runs
                groups[name] = [r[key] for r in finished if r["row"]["config"] == c]
            plots.plot_curves(ax, groups, band_in_legend=False)
            ax.set_ylabel(ylabel)
            ax.set_title(args.env_id, fontsize=9)
            if runs:
                ax.legend(fontsize=6)
        if not runs:
            ax_eval.text(
                0.5,
                0.5,
                f"no finished runs under {shown(args.sweep_dir)}\n(run with --train)",
                ha="center",
                va="center",
                transform=ax_eval.transAxes,
                fontsize=8,
            )
        counts = collections.Counter(
            r["row"]["config"] for r in runs if r["row"]["status"] == "finished"
        )
        band_b = plots.band_words(counts.values()) if counts else "no runs"
        fig.suptitle(
            f"A: {args.chain_states}-state chain, pi right w.p. {args.p_right}, "
            f"lambda {args.lam:g}, "
            f"{args.segment_length}-step paths, step {args.step:g}, median and 10-90% over "
            f"{args.tab_seeds} seeds.  B: {args.total_timesteps:,} steps, {band_b}",
            fontsize=9,
        )
        fig.tight_layout()
        fig.savefig(args.out / "retrace_vs_traces.png", dpi=80, metadata={"Software": None})
        plt.close(fig)


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=ROOT / "paper_figures" / "out")
    p.add_argument("--toy", action="store_true", help="seconds-sized run (tests, make figures)")
    g = p.add_argument_group("panel A (tabular)")
    g.add_argument("--alphas", default="0.1,0.5,0.9", help="mismatches, comma-separated")
    g.add_argument("--lam", type=float, default=1.0, help="lambda of every trace")
    g.add_argument("--segment-length", type=int, default=8, help="path length K per target")
    g.add_argument("--step", type=float, default=0.2, help="constant step size")
    g.add_argument("--updates", type=int, default=300)
    g.add_argument("--paths", type=int, default=1, help="paths per (x, a) per update")
    g.add_argument("--tab-seeds", type=int, default=20)
    g.add_argument("--variance-paths", type=int, default=2000, help="paths per (x, a)")
    g.add_argument("--chain-states", type=int, default=8)
    g.add_argument("--p-right", type=float, default=0.95, help="pi(right); nu(left) the same")
    g.add_argument("--gamma", type=float, default=0.9)
    g = p.add_argument_group("panel B (MuJoCo sweeps)")
    g.add_argument("--env-id", default="Hopper-v5")
    g.add_argument("--traces", default="retrace,is,tree_backup,q_lambda")
    g.add_argument("--no-ppo", dest="ppo", action="store_false", help="no PPO baseline")
    g.add_argument("--seeds", type=int, default=3)
    g.add_argument("--total-timesteps", type=int, default=100_000)
    g.add_argument("--eval-every", type=int, default=5000)
    g.add_argument("--eval-episodes", type=int, default=5)
    g.add_argument("--retrace-args", default="", help="further algos/retrace.py flags")
    g.add_argument("--ppo-args", default="", help="further algos/ppo.py flags")
    g.add_argument("--sweep-dir", type=Path, default=ROOT / "runs" / "sweeps" / "retrace")
    g.add_argument("--train", action="store_true", help="run the missing MuJoCo runs first")
    g.add_argument(
        "--mujoco-name",
        default=MUJOCO_NAME,
        help="panel B's CSVs are <out>/<name>.csv and <name>_curves.csv",
    )
    g.add_argument("--workers", type=int, default=1, help="runs at once when training")
    p.add_argument(
        "--plot-only",
        action="store_true",
        help="redraw the PNG from the CSVs in --out (panel A's and panel B's), computing nothing",
    )
    args = p.parse_args(argv)
    if args.toy:  # toy sizes replace the defaults, not what was given on the command line
        from controlrl import experiment

        experiment.apply_toy(args, argv, (TOY_TAB | TOY_MUJOCO))
        args.retrace_args = f"{TOY_RETRACE} {args.retrace_args}"
        args.ppo_args = f"{TOY_PPO} {args.ppo_args}"
    args.alphas = [float(a) for a in args.alphas.split(",")]
    args.traces = args.traces.split(",")
    bad = [t for t in args.traces if t not in KINDS]
    if bad:
        p.error(f"--traces: unknown {bad}, expected some of {list(KINDS)}")
    if not all(0 <= a <= 1 for a in args.alphas):
        p.error(f"--alphas must lie in [0, 1], got {args.alphas}")
    if not 0 < args.step <= 1:
        p.error(f"--step must lie in (0, 1], got {args.step}")
    if not 0 < args.p_right < 1:  # mu needs full support for pi / mu
        p.error(f"--p-right must lie in (0, 1), got {args.p_right}")
    if not 0 <= args.lam <= 1:
        p.error(f"--lam must lie in [0, 1], got {args.lam}")
    for name in ("segment_length", "updates", "paths", "tab_seeds", "variance_paths"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.plot_only:
        curves = read_rows(args.out / "retrace_vs_traces.csv")
        summary = read_rows(args.out / "retrace_vs_traces_summary.csv")
        runs = load_mujoco(args.out, args.mujoco_name)
        # the title states the settings the CSVs were made with
        args.tab_seeds = summary[0]["seeds"]
        args.total_timesteps = max((r["row"]["steps"] for r in runs), default=0)
        plot(args, curves, summary, runs)
        print(f"wrote {args.out / 'retrace_vs_traces.png'}")
        return
    curves, summary = tabular(args)
    write_rows(args.out / "retrace_vs_traces.csv", curves)
    write_rows(args.out / "retrace_vs_traces_summary.csv", summary)
    cfgs = mujoco_configs(args)
    if args.train:
        train(args, cfgs)
    runs = collect(args, cfgs)
    if runs:
        write_mujoco(args.out, runs, args.mujoco_name)
    plot(args, curves, summary, runs)
    print("panel A per alpha and kind: sampled error over the last 10% of updates (median over")
    print("  seeds); expected update's rate and updates to TOL; exact target variance at Q^pi")
    for r in summary:
        to_tol = r["expected_updates_to_tol"]
        print(
            f"  alpha {r['alpha']:g} {r['kind']:>11}: err {r['err_final_median']:.3g} "
            f"(peak {r['err_peak_median']:.3g}, diverged {r['diverged']}/{r['seeds']}); rate "
            f"{r['expected_rate']:.4f}, {to_tol if to_tol >= 0 else 'never'} to {TOL:g}; var "
            f"{r['target_var_mean']:.3g} mean, {r['target_var_max']:.3g} max"
        )
    if runs:
        from controlrl import plots

        print(
            f"panel B ({args.env_id}): final eval return, mean eval return, mean [95% bootstrap"
            " CI from >= 5 seeds, range below]"
        )
        for label in dict.fromkeys(r["row"]["config"] for r in runs):
            rows = [
                r["row"]
                for r in runs
                if r["row"]["config"] == label and r["row"]["status"] == "finished"
            ]
            cells = []
            for key in ("final_eval_return", "mean_eval_return"):
                if not rows:
                    cells.append("-")
                    continue
                m, lo, hi = plots.band(np.array([[r[key]] for r in rows]))[:3]
                cells.append(f"{m[0]:.0f} [{lo[0]:.0f}, {hi[0]:.0f}]")
            print(f"  {label}: {', '.join(cells)} (n={len(rows)}{diverged_note(runs, label)})")
    else:
        print(f"panel B: no finished runs under {shown(args.sweep_dir)} (use --train)")
    print("made by: " + " ".join(shlex.quote(a) for a in ["python", *sys.argv]))


if __name__ == "__main__":
    main()
