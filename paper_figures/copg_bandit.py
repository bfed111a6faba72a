"""Contrastive Policy Gradient (Flet-Berliac et al. 2024, "Contrastive Policy Gradient: Aligning
LLMs on Sequence-Level Scores in a Supervised-Friendly Fashion", arXiv 2406.19185) on an offline
bandit: learning the KL-regularised optimum pi* = pi_ref exp(r / beta) / Z from a fixed dataset of
pulls of a behaviour policy mu, without importance weights. The paper's toy bandit is not in the
material available here: this one in its spirit is the declared experiment copg-offline-bandit.

    python -m paper_figures run copg-offline-bandit     # the declared experiment: 200 seeds
    python paper_figures/copg_bandit.py --toy --out DIR

Per seed: K = 10 arms, pi_ref = softmax(N(0, 1) logits), Bernoulli rewards with means U(0, 1),
beta = 0.25, mu = half a Dirichlet(1) draw and half uniform, a dataset of --pulls pulls of mu. A
softmax table starts at pi_ref and takes --steps Adam steps (lr --lr, linear decay to 0) on
minibatches of --batch pulls, with one of:
  copg  controlrl.losses.copg_loss on the minibatch as pairs (groups of 2);
  pg    -mean(R log pi), R = r - beta log(pi / pi_ref) held fixed: the on-policy PG applied to
        the off-policy pulls as they are (no baseline, no importance weight), biased unless mu = pi;
  is    the same with the importance weight pi / mu (held fixed): unbiased, no baseline.
Seeds are a batch dimension. Metric: the suboptimality J(pi*) - J(pi_T) = beta KL(pi_T || pi*) of
the final policy (J the regularised objective under the true means); beside it the data's floor,
the same gap of pi_hat* (pi* of the dataset's empirical means), and KL(pi_T || pi_hat*). The exact
statements are tests: tests/theory/test_theory_kl_optima.py, tests/controlrl/test_losses.py.

Writes copg_bandit.csv (one row per seed and method: gap, floor, KL to pi_hat*).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from controlrl.cli import cli
from controlrl.experiment import write_rows
from controlrl.losses import copg_loss
from paper_figures.lab.script_flags import wrote

K, BETA = 10, 0.25
METHODS = ("copg", "pg", "is")
FIELDS = ("seed", "method", "pulls", "steps", "gap", "floor", "kl_to_data_optimum")


@dataclass
class Args:
    out: str = "paper_figures/out"
    """output directory for the CSVs and the PNG"""
    seeds: int = 200
    """seeds 0..seeds-1 (bandit, behaviour, dataset and minibatches)"""
    pulls: int = 2000
    """dataset size: pulls of the behaviour policy per seed"""
    steps: int = 3000
    """Adam steps per method"""
    batch: int = 64
    """pulls per minibatch (CoPG: batch / 2 pairs)"""
    lr: float = 0.05
    """Adam's learning rate at the first step (linear decay to 0)"""
    toy: bool = False
    """tiny run for tests (8 seeds, 200 pulls, 300 steps)"""


def regularised_optimum(logits_ref: np.ndarray, means: np.ndarray) -> np.ndarray:
    """pi* = softmax(logits_ref + means / beta) per row."""
    z = logits_ref + means / BETA
    z = z - z.max(-1, keepdims=True)
    return np.exp(z) / np.exp(z).sum(-1, keepdims=True)


def objective(pi: np.ndarray, logits_ref: np.ndarray, means: np.ndarray) -> np.ndarray:
    """J(pi) = E_pi[r] - beta KL(pi || pi_ref) per row."""
    log_ref = logits_ref - np.log(np.exp(logits_ref).sum(-1, keepdims=True))
    return (pi * (means - BETA * (np.log(pi) - log_ref))).sum(-1)


def problems(seeds: int, pulls: int) -> dict:
    """Per seed: reference logits, true means, behaviour, the dataset and its empirical means."""
    ref, means, mu, arms, rewards = [], [], [], [], []
    for seed in range(seeds):
        rng = np.random.default_rng(seed)
        ref.append(rng.normal(size=K))
        means.append(rng.uniform(size=K))
        mu.append(0.5 * rng.dirichlet(np.ones(K)) + 0.5 / K)
        arms.append(rng.choice(K, size=pulls, p=mu[-1]))
        rewards.append((rng.random(pulls) < means[-1][arms[-1]]).astype(float))
    p = {k: np.array(v) for k, v in zip(("ref", "means", "mu", "arms", "rewards"),
                                         (ref, means, mu, arms, rewards), strict=True)}  # fmt: skip
    counts = np.stack([np.bincount(a, minlength=K) for a in p["arms"]])
    sums = np.stack([np.bincount(a, w, minlength=K) for a, w in zip(p["arms"], p["rewards"],
                                                                    strict=True)])  # fmt: skip
    if (counts == 0).any():
        raise SystemExit("error: an arm has no pull in a dataset; raise --pulls")
    p["empirical"] = sums / counts
    return p


def loss(method: str, logits, ref, mu, arms, rewards) -> torch.Tensor:
    """The minimised loss of one method on minibatches arms, rewards [S, B] (summed over seeds:
    each seed's gradient is its own)."""
    if method not in METHODS:
        raise ValueError(f"method {method!r}, expected one of {METHODS}")
    logp = torch.log_softmax(logits, -1).gather(1, arms)
    logp_ref = torch.log_softmax(ref, -1).gather(1, arms)
    if method == "copg":
        S, B = arms.shape
        pairs = (x.reshape(S, B // 2, 2) for x in (logp, logp_ref, rewards))
        return copg_loss(*pairs, BETA) * S
    R = (rewards - BETA * (logp - logp_ref)).detach()
    if method == "is":
        R = R * (logp.detach().exp() / mu.gather(1, arms))
    return -(R * logp).mean(1).sum()


def train(method: str, p: dict, args) -> np.ndarray:
    """Final policies [S, K] of one method."""
    S, pulls = p["arms"].shape
    gen = torch.Generator().manual_seed(0)  # the same minibatches for every method
    ref = torch.tensor(p["ref"])
    mu = torch.tensor(p["mu"])
    arms_all, rewards_all = torch.tensor(p["arms"]), torch.tensor(p["rewards"])
    logits = ref.clone().requires_grad_(True)
    opt = torch.optim.Adam([logits], lr=args.lr)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda i: 1 - i / args.steps)
    for _ in range(args.steps):
        idx = torch.randint(pulls, (S, args.batch), generator=gen)
        opt.zero_grad()
        batch = arms_all.gather(1, idx), rewards_all.gather(1, idx)
        loss(method, logits, ref, mu, *batch).backward()
        opt.step()
        sched.step()
    return torch.softmax(logits.detach(), -1).numpy()


def kl(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    return (p * (np.log(p) - np.log(q))).sum(-1)


def main(argv: list[str] | None = None) -> None:
    args = cli(Args, argv)
    if args.toy:
        args.seeds, args.pulls, args.steps = 8, 200, 300
    if args.batch % 2 or args.batch < 2:
        raise SystemExit("error: --batch must be even (CoPG takes the minibatch as pairs)")
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)  # for this figure only: restored for code after it
    try:
        run(args)
    finally:
        torch.set_default_dtype(previous)


def run(args: Args) -> None:
    p = problems(args.seeds, args.pulls)
    pi_star = regularised_optimum(p["ref"], p["means"])
    pi_hat = regularised_optimum(p["ref"], p["empirical"])
    best = objective(pi_star, p["ref"], p["means"])
    floor = best - objective(pi_hat, p["ref"], p["means"])
    rows = []
    for method in METHODS:
        pi = train(method, p, args)
        gap = best - objective(pi, p["ref"], p["means"])
        to_data = kl(pi, pi_hat)
        rows += [dict(zip(FIELDS, (s, method, args.pulls, args.steps, gap[s], floor[s],
                                   to_data[s]))) for s in range(args.seeds)]  # fmt: skip
        print(f"{method}: gap {gap.mean():.4g} (sample SD {gap.std(ddof=1):.3g}), data's "
              f"floor {floor.mean():.4g}, KL(pi_T || pi_hat*) {to_data.mean():.3g}")  # fmt: skip
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    write_rows(out / "copg_bandit.csv", rows, FIELDS)
    wrote(f"{out / 'copg_bandit.csv'}", "copg_bandit", None)


if __name__ == "__main__":
    main()
