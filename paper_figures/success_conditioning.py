"""Success conditioning (filtered behaviour cloning) against PPO on Bernoulli bandits: policy
change chi2(pi_new || pi) against relative improvement eta(pi_new) / eta(pi) - 1, both exact
("Success conditioning as a trust-region method": relative improvement = policy change = action
influence, and exact success conditioning never degrades).

    python -m paper_figures run success-conditioning       # the declared experiment: 200 bandits
    python paper_figures/success_conditioning.py --toy --out DIR   # seconds

Each seed is a K-armed bandit with success probabilities Q ~ U(0, 1)^K and a uniform first policy
(tabular: one probability per arm); every method runs --iterations iterations from it:

- sc_exact: pi+(a) = pi(a) Q(a) / V (theory/success.py), no sampling;
- sc_sampled: --samples actions from pi, the successful ones kept, pi_new their empirical
  distribution (the maximum-likelihood fit of filtered behaviour cloning; no success: pi kept);
- ppo: the same samples, algos/ppo.py's clipped loss on softmax logits, advantages the batch's
  standardised successes, --ppo-epochs full-batch Adam steps at --ppo-lr.

eta(pi) = sum_a pi(a) Q(a) is the success probability, so both columns are exact functions of the
two policies whatever produced them. Seeds run as a batch (numpy and torch over a seed axis).
Writes <out>/success_conditioning.csv (per seed, method, iteration).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from algos.ppo import ppo_loss
from controlrl.cli import ArgumentParser
from controlrl.experiment import apply_toy, write_rows
from paper_figures.lab.script_flags import OUT, wrote
from theory import success as sc

TOY = {"seeds": 8, "iterations": 3}
METHODS = ("sc_exact", "sc_sampled", "ppo")


def filtered_bc(pi: np.ndarray, actions: np.ndarray, success: np.ndarray) -> np.ndarray:
    """Per seed [S, K]: the empirical distribution of the successful actions [S, N] (success
    [S, N] in {0, 1}); pi's row where no sample succeeded."""
    counts = np.zeros_like(pi)
    np.add.at(counts, (np.repeat(np.arange(pi.shape[0]), actions.shape[1]), actions.ravel()),
              success.ravel())  # fmt: skip
    total = counts.sum(1, keepdims=True)
    return np.where(total > 0, counts / np.maximum(total, 1), pi)


def ppo_step(logits: torch.Tensor, actions, success, eps: float, epochs: int, lr: float):
    """New logits [S, K] after `epochs` full-batch Adam steps on the PPO-clip loss (summed over
    seeds: each seed's parameters get their own loss's gradient)."""
    actions = torch.as_tensor(actions)
    r = torch.as_tensor(success, dtype=torch.float64)
    adv = (r - r.mean(1, keepdim=True)) / (r.std(1, keepdim=True) + 1e-8)  # [S, N]
    old_logp = torch.log_softmax(logits, -1).gather(1, actions).detach()
    theta = logits.clone().requires_grad_(True)
    opt = torch.optim.Adam([theta], lr=lr)
    for _ in range(epochs):
        logp = torch.log_softmax(theta, -1).gather(1, actions)
        # the mean over all S x N samples times S: the sum of the seeds' own PPO losses
        loss = ppo_loss(logp.ravel(), old_logp.ravel(), adv.ravel(), eps)[0] * len(theta)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return theta.detach()


def run(args) -> list[dict]:
    """Every (seed, method, iteration) row."""
    rng = np.random.default_rng(args.rng_seed)
    torch.manual_seed(args.rng_seed)
    S, K, N = args.seeds, args.arms, args.samples
    Q = rng.random((S, K))
    pis = {m: np.full((S, K), 1.0 / K) for m in METHODS}
    logits = torch.zeros(S, K, dtype=torch.float64)
    rows = []
    for it in range(args.iterations):
        new = {"sc_exact": sc.success_conditioned(pis["sc_exact"], Q)}
        for m in ("sc_sampled", "ppo"):  # each method samples from its own current policy
            pi = pis[m]
            u = rng.random((S, N, 1))
            actions = np.minimum((u > np.cumsum(pi, 1)[:, None, :]).sum(-1), K - 1)  # [S, N]
            success = (rng.random((S, N)) < np.take_along_axis(Q, actions, 1)).astype(float)
            if m == "sc_sampled":
                new[m] = filtered_bc(pi, actions, success)
            else:
                logits = ppo_step(logits, actions, success, 0.2, args.ppo_epochs, args.ppo_lr)
                new[m] = torch.softmax(logits, -1).numpy()
        for m in METHODS:
            pi, pi_new = pis[m], new[m]
            V, V_new = (pi * Q).sum(1), (pi_new * Q).sum(1)
            influence = ((pi * Q**2).sum(1) - V**2) / V**2  # Var_{a~pi}[Q] / V^2
            change = sc.chi2(pi_new, pi)
            rows += [{"method": m, "seed": s + 1, "iteration": it + 1,
                      "samples": 0 if m == "sc_exact" else N, "eta_before": float(V[s]),
                      "eta_after": float(V_new[s]), "rel_improvement": float(V_new[s] / V[s] - 1),
                      "chi2": float(change[s]), "action_influence": float(influence[s])}
                     for s in range(S)]  # fmt: skip
            pis[m] = pi_new
    return rows


def main(argv: list[str] | None = None) -> None:
    p = ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=200, help="bandits (one seed each)")
    p.add_argument("--arms", type=int, default=10)
    p.add_argument("--samples", type=int, default=64, help="actions sampled per iteration")
    p.add_argument("--iterations", type=int, default=10)
    p.add_argument("--ppo-epochs", type=int, default=10)
    p.add_argument("--ppo-lr", type=float, default=0.1)
    p.add_argument("--rng-seed", type=int, default=0)
    p.add_argument("--toy", action="store_true", help="tiny sizes (a test of the pipeline)")
    p.add_argument("--out", type=Path, default=OUT)
    args = p.parse_args(argv)
    if args.toy:
        apply_toy(args, argv, TOY)
    rows = run(args)
    args.out.mkdir(parents=True, exist_ok=True)
    write_rows(args.out / "success_conditioning.csv", rows)
    wrote(f"{args.out}/success_conditioning.csv", "success_conditioning", argv)


if __name__ == "__main__":
    main()
