"""The entropy mechanism (Cui et al. 2025, "The Entropy Mechanism of Reinforcement Learning for
Reasoning Language Models", arXiv 2505.22617) measured on sampled updates: the entropy change of
a softmax policy after ONE sampled policy-gradient step against the paper's covariance term. A
batch of B arms a_i ~ pi with Bernoulli rewards, advantages r_i - V (V the true value), moves the
logits by eta u (vanilla PG: u = mean A_i (e_{a_i} - pi); natural PG: u = mean A_i e_{a_i} /
pi(a_i)); the mean of H(z + eta u) - H(z) over batches is set against the first-order term
eta d1 = -eta Cov(log pi, E[u]) and the second-order eta d1 + eta^2 d2 (d2 exact: predictions),
and each batch's remainder after its own first-order term against eta^2 d2. Two bandits
(BANDITS), K = 10 arms with logits LOGITS. The claims are declared in
paper_figures/entropy-mechanism/experiment.toml.

    python paper_figures/entropy_mechanism.py              # committed: 20,000 batches per row
    python paper_figures/entropy_mechanism.py --toy --out runs/toy_fig  # a second
    python paper_figures/entropy_mechanism.py --replot  # the PNG from the committed CSV

Writes entropy_mechanism.csv (per bandit, update, B and eta: the predictions, the measured mean
with its sample SD and 95% bootstrap interval over batches, whether each prediction falls inside,
the gap to the first order; the remainder's the same against eta^2 d2) and entropy_mechanism.png
(the remainder against eta on log-log axes with the eta^2 d2 line).
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
from theory.policy_opt import softmax

K = 10
LOGITS = np.linspace(1.5, -1.5, K)
BANDITS = {
    "aligned": np.linspace(0.9, 0.1, K),  # mean reward falls with the arm's probability
    "anti-aligned": np.linspace(0.1, 0.9, K),
}
UPDATES = ("vanilla", "natural")


@dataclass
class Args:
    out: str = "paper_figures/out"
    """output directory for the PNG and CSV"""
    toy: bool = False
    """tiny run (2,000 batches, two step sizes, B = 4, the aligned bandit) for tests"""
    batches: int = 20000
    """sampled updates per row (ignored with --toy)"""
    seed: int = 0
    """seed of the one generator all rows draw from, in order"""
    replot: bool = False
    """only the PNG, from <out>/entropy_mechanism.csv (nothing sampled)"""


def entropy_hessian(z: np.ndarray) -> np.ndarray:
    """d^2 H(softmax(z)) / dz dz^T [K, K]: with g_j = -pi_j (log pi_j + H) the gradient,
    d g_j / d z_k = -pi_j (delta_jk - pi_k)(log pi_j + H + 1) - pi_j g_k."""
    pi = softmax(z)
    log_pi = np.log(pi)
    H = -pi @ log_pi
    grad = -pi * (log_pi + H)
    jac = np.diag(pi) - np.outer(pi, pi)  # d pi_j / d z_k
    return -jac * (log_pi + H + 1.0)[:, None] - np.outer(pi, grad)


def per_sample_directions(z: np.ndarray, update: str) -> np.ndarray:
    """The vector v_a with u_i = A_i v_{a_i}: e_a - pi (vanilla) or e_a / pi(a) (natural) [K, K]."""
    pi = softmax(z)
    if update == "vanilla":
        return np.eye(K) - pi
    if update == "natural":
        return np.eye(K) / pi[:, None]
    raise ValueError(f"update = {update!r}, expected one of {UPDATES}")


def predictions(z: np.ndarray, mu: np.ndarray, update: str, B: int) -> tuple[float, float]:
    """(d1, d2) with E[H(z + eta u)] - H(z) = eta d1 + eta^2 d2 + O(eta^3): d1 is the paper's
    -Cov(log pi, E[u]), d2 = (1/2) tr(Hess H E[u u^T]), E[u u^T] summed over outcomes exactly."""
    pi = softmax(z)
    value = pi @ mu
    v = per_sample_directions(z, update)  # [K, K], row a
    mean_u = (pi * (mu - value)) @ v  # E[u_i] = sum_a pi_a (mu_a - V) v_a
    d1 = float(gp.entropy_change_first_order(z, mean_u))
    # E[A^2 | a] = mu_a (1 - V)^2 + (1 - mu_a) V^2
    second = np.einsum("a,ak,al->kl", pi * (mu * (1 - value) ** 2 + (1 - mu) * value**2), v, v)
    moment = np.outer(mean_u, mean_u) + (second - np.outer(mean_u, mean_u)) / B
    d2 = 0.5 * float(np.sum(entropy_hessian(z) * moment))
    return d1, d2


def sampled_entropy_changes(
    z: np.ndarray, mu: np.ndarray, update: str, B: int, eta: float, batches: int, rng
) -> tuple[np.ndarray, np.ndarray]:
    """H(z + eta u) - H(z) for `batches` independent sampled steps, and each step's remainder
    after its own first-order term -Cov(log pi, eta u) ([batches], [batches])."""
    pi = softmax(z)
    value = pi @ mu
    arms = rng.choice(K, size=(batches, B), p=pi)
    rewards = (rng.random((batches, B)) < mu[arms]).astype(float)
    adv = rewards - value
    v = per_sample_directions(z, update)
    u = np.einsum("nb,nbk->nk", adv, v[arms]) / B  # [batches, K]
    dH = gp.entropy(z + eta * u) - gp.entropy(z)
    return dH, dH - gp.entropy_change_first_order(z[None, :], eta * u)


def run_row(bandit: str, update: str, B: int, eta: float, batches: int, rng) -> dict:
    """One CSV row."""
    mu = BANDITS[bandit]
    d1, d2 = predictions(LOGITS, mu, update, B)
    dH, rem = sampled_entropy_changes(LOGITS, mu, update, B, eta, batches, rng)
    s, sr = summarize(dH, n_boot=2000), summarize(rem, n_boot=2000)
    first, second = eta * d1, eta * d1 + eta**2 * d2
    row = {"bandit": bandit, "update": update, "B": B, "eta": eta, "batches": batches}
    row |= {"pred_first": first, "pred_second": second, "d1": d1, "d2": d2}
    row |= {"mean": s.mean, "sd": s.sd, "lo": s.lo, "hi": s.hi}
    row |= {
        "first_inside": int(s.lo <= first <= s.hi),
        "second_inside": int(s.lo <= second <= s.hi),
    }
    row |= {"gap": s.mean - first, "gap_over_eta2": (s.mean - first) / eta**2}
    # the first-order term is linear in u, its mean is exactly eta d1: the remainder has the
    # gap's mean without the first order's sampling noise (a control variate)
    rem_pred = eta**2 * d2
    row |= {"rem_pred": rem_pred, "rem_mean": sr.mean, "rem_sd": sr.sd, "rem_lo": sr.lo}
    row |= {"rem_hi": sr.hi, "rem_inside": int(sr.lo <= rem_pred <= sr.hi)}
    row |= {"rem_over_eta2": sr.mean / eta**2}
    return row


def main(args: Args) -> None:
    """Run every (bandit, update, B, eta), write the CSV and the figure, print the command."""
    if args.replot:
        from controlrl.bench import read_csv

        path = Path(args.out) / "entropy_mechanism.csv"
        if not path.exists():
            raise SystemExit(f"error: --replot needs {path} (written by a run of this script)")
        plot(read_csv(path), path.with_suffix(".png"))
        print(f"wrote {path.with_suffix('.png')} from {path.name}")
        return
    if args.toy:
        batches, bandits, sizes, etas = 2000, ("aligned",), (4,), (0.03, 0.3)
    else:
        batches, bandits, sizes = args.batches, tuple(BANDITS), (1, 16)
        etas = tuple(float(e) for e in np.geomspace(0.01, 1.0, 7))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(args.seed)
    rows = []
    for bandit in bandits:
        for update in UPDATES:
            for B in sizes:
                for eta in etas:
                    rows.append(run_row(bandit, update, B, eta, batches, rng))
                    print(f"{bandit} {update} B={B} eta={eta:.3g}: dH {rows[-1]['mean']:.3e}")
    write_rows(out / "entropy_mechanism.csv", rows)
    plot(rows, out / "entropy_mechanism.png")
    print("made by: " + " ".join(shlex.quote(a) for a in ["python", *sys.argv]))


def plot(rows: list[dict], path: Path) -> None:
    """|mean remainder after the first order| against eta (log-log), with the eta^2 |d2| line,
    per (bandit, update); B by marker."""
    from controlrl.plots import plt

    panels = sorted({(r["bandit"], r["update"]) for r in rows})
    fig, axes = plt.subplots(1, len(panels), figsize=(4 * len(panels), 3.4), squeeze=False)
    for ax, (bandit, update) in zip(axes[0], panels, strict=True):
        for B, marker in zip(sorted({r["B"] for r in rows}), "os^", strict=False):
            sel = [r for r in rows if (r["bandit"], r["update"], r["B"]) == (bandit, update, B)]
            eta = np.array([r["eta"] for r in sel])
            gap = np.abs([r["rem_mean"] for r in sel])
            half = np.array([(r["rem_hi"] - r["rem_lo"]) / 2 for r in sel])
            n = min(r["batches"] for r in sel)
            label = f"B={B} measured, 95% CI over {n:,} batches"
            ax.errorbar(eta, gap, yerr=half, fmt=marker, ms=4, label=label)
            ax.plot(eta, eta**2 * abs(sel[0]["d2"]), "-", lw=1, label=f"B={B}: eta^2 |d2|")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(f"{bandit}, {update} PG", fontsize=9)
        ax.set_xlabel("eta")
        ax.set_ylabel("|E[dH + eta Cov(log pi, u)]|")
    axes[0][0].legend(fontsize=6)
    scripts.save_figure(fig, path, 110)


if __name__ == "__main__":
    from controlrl.cli import cli

    main(cli(Args))
