"""GRPO's probability-of-success recurrence (Mroueh 2025, "Reinforcement Learning with Verifiable
Rewards: GRPO's Effective Loss, Dynamics, and Success Amplification", arXiv 2503.06639) against
sampled GRPO at finite group size G on a two-arm Bernoulli bandit (success, failure), every seed
as a batch. Each iteration samples `groups` groups of G pulls from pi_{n-1}, takes GRPO's
advantage (r - group mean) / (unbiased group std + eps) (TRL's) and the exact maximiser of the
KL-regularised importance-weighted surrogate; with two arms the step stays pi_ref exp(c_n r) / Z,
and the finite-G recurrence (theory.group_po, c_G in place of the paper's a(p)) is its mean field.
The setting and claims are declared in paper_figures/grpo-recurrence/experiment.toml.

    python paper_figures/grpo_recurrence.py             # committed: 1000 seeds, 200 iterations
    python paper_figures/grpo_recurrence.py --toy --out runs/toy_fig   # a second

Writes grpo_recurrence.csv (per setting, G and groups per iteration: the one-step logit change,
the final PoS, the second half's time-averaged PoS and log-odds, each against its prediction with
the mean over seeds, sample SD, 95% bootstrap interval and whether the prediction falls inside)
and grpo_recurrence.png (mean sampled PoS against the recurrence).
"""

from __future__ import annotations

import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from controlrl.experiment import write_rows
from controlrl.stats import summarize
from paper_figures.lab import scripts
from theory import group_po as gp

# (name, p_ref, beta1, beta2): the catalog's example (p_ref 0.361, beta2 3: p* 0.524 at G -> inf)
# with KL to the reference only (the paper's first variant) and with the mirror term; beta2 0.5,
# where the population recurrence has no fixed point; p_ref 0.005, beta2 1, where its lower
# fixed point is unstable with beta1 = 0 and stable with beta1 = 10.
SETTINGS = (
    ("ref-kl", 0.361, 0.0, 3.0),
    ("mirror+ref", 0.361, 1.0, 3.0),
    ("no-population-fixed-point", 0.361, 0.0, 0.5),
    ("unstable-population-root", 0.005, 0.0, 1.0),
    ("damped-small-p_ref", 0.005, 10.0, 1.0),
)
EPS = 1e-4  # the std's epsilon: TRL's and controlrl.group's default


@dataclass
class Args:
    out: str = "paper_figures/out"
    """output directory for the PNG and CSV"""
    toy: bool = False
    """tiny run (20 seeds, 10 iterations, G in {2, 4}, one group, the first setting) for tests"""
    seeds: int = 1000
    """independent runs per row (ignored with --toy)"""
    steps: int = 200
    """GRPO iterations per run (ignored with --toy)"""
    seed: int = 0
    """seed of the one generator all rows draw from, in order"""


def success_advantage(G: int, eps: float = EPS) -> np.ndarray:
    """A(1 | s) for s = 0..G successes in a group of G binary rewards (0 where s is 0 or G), from
    the group advantages of theory.group_po (the numpy twin of controlrl.group) [G + 1]."""
    groups = (np.arange(G)[None, :] < np.arange(G + 1)[:, None]).astype(float)  # row s: s ones
    adv = gp.group_advantages(groups, "mean_std", eps)
    return np.where(np.arange(G + 1) > 0, adv[:, 0], 0.0)


def sampled_grpo(p_ref: float, beta1: float, beta2: float, G: int, groups: int, steps: int,
                 seeds: int, rng: np.random.Generator, eps: float = EPS) -> np.ndarray:  # fmt: skip
    """Log-odds L_n of sampled GRPO's exact KL-regularised step on the two-arm bandit, every seed
    as a batch [steps + 1, seeds]."""
    l_ref = float(gp.logit(p_ref))
    adv1 = success_advantage(G, eps)
    c = np.zeros(seeds)
    out = np.empty((steps + 1, seeds))
    out[0] = l_ref
    for n in range(1, steps + 1):  # GRPO iterations
        L = l_ref + c
        p = sigmoid(L)
        var = np.exp(-np.logaddexp(0.0, -L) - np.logaddexp(0.0, L))  # p (1 - p), no cancellation
        succ = rng.binomial(G, p[:, None], size=(seeds, groups))
        s1 = succ * adv1[succ]  # the advantage summed over a group's successes
        # importance weights 1/p and 1/(1 - p): A sums to 0 in a group, so X = S_1 / (G p (1-p))
        s1_mean = s1.mean(axis=1)
        # a flat PoS (p rounds to 0 or 1) draws only flat groups: S_1 = 0 and no step
        x = np.divide(s1_mean, G * var, out=np.zeros(seeds), where=s1_mean != 0)
        c = (beta1 * c + x) / (beta1 + beta2)
        out[n] = l_ref + c
    return out


def sigmoid(L: np.ndarray) -> np.ndarray:
    """1 / (1 + exp(-L))."""
    return 1.0 / (1.0 + np.exp(-L))


def summary_columns(prefix: str, values: np.ndarray, pred: float) -> dict:
    """mean, sample SD, 95% bootstrap interval over seeds and whether pred lies inside."""
    s = summarize(values, n_boot=2000)
    return {
        f"{prefix}_mean": s.mean, f"{prefix}_sd": s.sd, f"{prefix}_lo": s.lo,
        f"{prefix}_hi": s.hi, f"{prefix}_inside": int(s.lo <= pred <= s.hi),
    }  # fmt: skip


def lower_stable_root(points: list[float], mults: list[float]) -> tuple[float, float]:
    """The lowest fixed point and its multiplier (nan, nan when there is none)."""
    return (points[0], mults[0]) if points else (float("nan"), float("nan"))


def run_row(name, p_ref, beta1, beta2, G, groups, seeds, steps, rng) -> tuple[dict, np.ndarray]:
    """One CSV row and the seeds' mean PoS curve [steps + 1]."""
    logits = sampled_grpo(p_ref, beta1, beta2, G, groups, steps, seeds, rng)
    pos = sigmoid(logits)
    rec = gp.grpo_pos_recurrence(p_ref, beta1, beta2, "mean_std", steps, G, EPS)
    c_g = gp.grpo_group_weight(float(gp.logit(p_ref)), G, "mean_std", EPS)[0]
    fp_g = gp.grpo_pos_fixed_points(p_ref, beta2, "mean_std", G, EPS)
    fp_pop = gp.grpo_pos_fixed_points(p_ref, beta2, "mean_std")
    m_g = [gp.grpo_fixed_point_multiplier(f, beta1, beta2, "mean_std", G, EPS) for f in fp_g]
    m_pop = [gp.grpo_fixed_point_multiplier(f, beta1, beta2, "mean_std") for f in fp_pop]
    fixed_g, mult_g = lower_stable_root(fp_g, m_g)
    fixed_pop, mult_pop = lower_stable_root(fp_pop, m_pop)
    one_step_pred = c_g / (beta1 + beta2)
    row = {"setting": name, "p_ref": p_ref, "beta1": beta1, "beta2": beta2, "G": G}
    row |= {"groups": groups, "seeds": seeds, "steps": steps, "one_step_pred": one_step_pred}
    row |= summary_columns("one_step", logits[1] - logits[0], one_step_pred)
    row |= {"final_pred": float(rec[-1])}
    row |= summary_columns("final", pos[-1], float(rec[-1]))
    row |= {"fixed_point_G": fixed_g, "multiplier_G": mult_g}
    row |= {"fixed_point_population": fixed_pop, "multiplier_population": mult_pop}
    late = slice(steps // 2 + 1, None)  # the second half of the iterations
    row |= summary_columns("stationary", pos[late].mean(axis=0), fixed_g)
    # the mean field is linear in c: at G = 2 (c_G constant) E[L_n] follows it exactly, so the
    # time-averaged log-odds separates the sigmoid's curvature from the drift's
    row |= {"logit_pred": float(gp.logit(fixed_g))}
    row |= summary_columns("logit", logits[late].mean(axis=0), row["logit_pred"])
    return row, pos.mean(axis=1)


def main(args: Args) -> None:
    """Run every (setting, G, groups), write the CSV and the figure, print the command."""
    seeds, steps = (20, 10) if args.toy else (args.seeds, args.steps)
    sizes, group_counts = ((2, 4), (1,)) if args.toy else ((2, 4, 8, 16), (1, 16))
    settings = SETTINGS[:1] if args.toy else SETTINGS
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(args.seed)
    rows, curves = [], {}
    for name, p_ref, beta1, beta2 in settings:
        for groups in group_counts:
            for G in sizes:
                row, curve = run_row(name, p_ref, beta1, beta2, G, groups, seeds, steps, rng)
                rows.append(row)
                curves[(name, G, groups)] = curve
                print(f"{name} G={G} groups={groups}: final {row['final_mean']:.4f}", flush=True)
    write_rows(out / "grpo_recurrence.csv", rows)
    plot(curves, settings, sizes, group_counts, steps, out / "grpo_recurrence.png")
    print("made by: " + " ".join(shlex.quote(a) for a in ["python", *sys.argv]))


def plot(curves, settings, sizes, group_counts, steps, path: Path) -> None:
    """One panel per setting: mean sampled PoS (solid: most groups, dotted: one group) and the
    finite-G recurrence (dashed), per G."""
    from controlrl.plots import plt

    fig, axes = plt.subplots(1, len(settings), figsize=(4 * len(settings), 3.4), squeeze=False)
    colors = plt.get_cmap("viridis")(np.linspace(0, 0.85, len(sizes)))
    n = np.arange(steps + 1)
    for ax, (name, p_ref, beta1, beta2) in zip(axes[0], settings, strict=True):
        for color, G in zip(colors, sizes, strict=True):
            rec = gp.grpo_pos_recurrence(p_ref, beta1, beta2, "mean_std", steps, G, EPS)
            ax.plot(n, rec, "--", color=color, lw=1)
            ax.plot(n, curves[(name, G, group_counts[-1])], "-", color=color, label=f"G={G}")
            if len(group_counts) > 1:
                ax.plot(n, curves[(name, G, group_counts[0])], ":", color=color, lw=1)
        ax.set_title(f"{name}\np_ref={p_ref:g}, b1={beta1:g}, b2={beta2:g}", fontsize=8)
        ax.set_xlabel("iteration n")
        ax.set_ylabel("PoS p_n")
    axes[0][0].legend(fontsize=7, title="sampled (solid), recurrence (dashed)", title_fontsize=6)
    scripts.save_figure(fig, path, 110)


if __name__ == "__main__":
    from controlrl.cli import cli

    main(cli(Args))
