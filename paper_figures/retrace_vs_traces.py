r"""Retrace vs importance sampling vs tree backup vs uncorrected Q(lambda) (Munos, Stepleton,
Harutyunyan, Bellemare 2016, "Safe and Efficient Off-Policy Reinforcement Learning"), tabular and
exact (seconds): the error ||Q_k - Q^pi||_inf of the sampled rule Q <- Q + step (G - Q), every
(x, a) each update, G the off-policy target of a --segment-length path under mu (the same paths
for all four traces), on a chain (theory.mdp.chain, slip 0.1) with target pi "right w.p.
--p-right" and mu = (1 - alpha) pi + alpha nu, nu its mirror image; median and 10-90% band over
--tab-seeds seeds, dashed the exact expected update; last panel, the exact target variance at
Q^pi. The same traces on MuJoCo: the declared experiment paper_figures/retrace-hopper-100k.

    python paper_figures/retrace_vs_traces.py                  # the committed figure
    python paper_figures/retrace_vs_traces.py --plot-only      # redraw from the CSVs in --out
    python paper_figures/retrace_vs_traces.py --toy --out runs/toy/retrace      # seconds

Writes <out>/retrace_vs_traces.png, retrace_vs_traces.csv (per alpha, kind and update: the
error's median, 10% and 90% over seeds, and the expected update's) and
retrace_vs_traces_summary.csv (per alpha and kind: target variances, exact and sampled; the
expected update's rate and updates to TOL; the sampled error over the last 10% of updates and its
peak, medians over seeds; how many seeds diverged).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from controlrl import bench
from controlrl.cli import ArgumentParser
from controlrl.experiment import write_rows
from paper_figures.lab import scripts
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
TOY = {"tab_seeds": 3, "updates": 60, "variance_paths": 200}


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
            cols = dict(err_median=med, err_p10=lo, err_p90=hi, err_expected=exact)
            curves += [dict(alpha=alpha, kind=k, update=i) | {c: v[i] for c, v in cols.items()}
                       for i in range(args.updates + 1)]  # fmt: skip
            _, var = target_moments(mdp, pi, mu, c, target, K)
            G = sampled_targets(mdp, pi, target, c, states, actions)
            sample_var = G.reshape(mdp.S, mdp.A, args.variance_paths).var(-1)
            tail = errs[:, -max(1, args.updates // 10) :]  # the last 10% of the updates
            to_tol = int(np.argmax(exact < TOL)) if exact.min() < TOL else -1
            row = dict(alpha=alpha, kind=k, target_var_mean=var.mean(), target_var_max=var.max())
            row |= dict(sample_var_mean=sample_var.mean(), sample_var_max=sample_var.max())
            row |= dict(expected_rate=expected_rate(mdp, pi, mu, c, K, args.step))
            row |= dict(
                expected_updates_to_tol=to_tol, err_final_median=float(np.median(tail.mean(1)))
            )
            row |= dict(err_peak_median=float(np.median(errs.max(1))))
            row |= dict(diverged=int(np.sum(errs[:, -1] >= CAP)))
            summary.append(row | {"seeds": args.tab_seeds})
    return curves, summary


def plot(args, curves: list[dict], summary: list[dict]) -> None:
    """Per alpha the error curves of the four kinds; last, the exact target variances."""
    from controlrl import plots
    from controlrl.plots import plt

    n = len(args.alphas)
    with plt.rc_context(plots.STYLE):
        fig, axes = plt.subplots(1, n + 1, figsize=(3.4 * (n + 1), 3.8))
        for ax, alpha in zip(axes, args.alphas):
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
        axes[0].set_ylabel(r"$\|Q_k - Q^\pi\|_\infty$")
        axes[0].legend(fontsize=7, title="dashed: expected update", title_fontsize=7)
        width = 0.8 / len(KINDS)
        for i, kind in enumerate(KINDS):
            sel = [r for r in summary if r["kind"] == kind]
            xs = np.arange(len(sel)) + (i - (len(KINDS) - 1) / 2) * width
            axes[n].bar(xs, [r["target_var_mean"] for r in sel], width, label=KINDS[kind])
        axes[n].set_xticks(range(n), [rf"$\alpha$ = {a:g}" for a in args.alphas])
        axes[n].set_yscale("log")
        axes[n].set_title(r"target variance at $Q^\pi$ (exact, mean over (x, a))", fontsize=8)
        fig.suptitle(
            f"{args.chain_states}-state chain, pi right w.p. {args.p_right}, lambda {args.lam:g}, "
            f"{args.segment_length}-step paths, step {args.step:g}, median and 10-90% over "
            f"{args.tab_seeds} seeds",
            fontsize=9,
        )
        scripts.save_figure(fig, args.out / "retrace_vs_traces.png", 80)


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=ROOT / "paper_figures" / "out")
    p.add_argument("--toy", action="store_true", help="seconds-sized run (tests, make figures)")
    p.add_argument("--alphas", default="0.1,0.5,0.9", help="mismatches, comma-separated")
    p.add_argument("--lam", type=float, default=1.0, help="lambda of every trace")
    p.add_argument("--segment-length", type=int, default=8, help="path length K per target")
    p.add_argument("--step", type=float, default=0.2, help="constant step size")
    p.add_argument("--updates", type=int, default=300)
    p.add_argument("--paths", type=int, default=1, help="paths per (x, a) per update")
    p.add_argument("--tab-seeds", type=int, default=20)
    p.add_argument("--variance-paths", type=int, default=2000, help="paths per (x, a)")
    p.add_argument("--chain-states", type=int, default=8)
    p.add_argument("--p-right", type=float, default=0.95, help="pi(right); nu(left) the same")
    p.add_argument("--gamma", type=float, default=0.9)
    p.add_argument("--plot-only", action="store_true", help="redraw the PNG from the CSVs in --out")
    args = p.parse_args(argv)
    if args.toy:  # toy sizes replace the defaults, not what was given on the command line
        from controlrl import experiment

        experiment.apply_toy(args, argv, TOY)
    args.alphas = [float(a) for a in args.alphas.split(",")]
    if not all(0 <= a <= 1 for a in args.alphas):
        p.error(f"--alphas must lie in [0, 1], got {args.alphas}")
    if not 0 < args.step <= 1:
        p.error(f"--step must lie in (0, 1], got {args.step}")
    if not 0 < args.p_right < 1:  # mu needs full support for pi / mu
        p.error(f"--p-right must lie in (0, 1), got {args.p_right}")
    if not 0 <= args.lam <= 1:
        p.error(f"--lam must lie in [0, 1], got {args.lam}")
    scripts.at_least(p, args, ("segment_length", "updates", "paths", "tab_seeds", "variance_paths"))
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.plot_only:
        curves = bench.read_csv(args.out / "retrace_vs_traces.csv")
        summary = bench.read_csv(args.out / "retrace_vs_traces_summary.csv")
        args.tab_seeds = summary[0]["seeds"]  # the title states the CSVs' settings
        plot(args, curves, summary)
        print(f"wrote {args.out / 'retrace_vs_traces.png'}")
        return
    curves, summary = tabular(args)
    write_rows(args.out / "retrace_vs_traces.csv", curves)
    write_rows(args.out / "retrace_vs_traces_summary.csv", summary)
    plot(args, curves, summary)
    print(f"wrote {args.out}/retrace_vs_traces.png, retrace_vs_traces.csv, _summary.csv")
    print("made by: " + bench.command_line("paper_figures/retrace_vs_traces.py", argv))


if __name__ == "__main__":
    main()
