r"""Knapsack RL (Li et al. 2025, "Knapsack RL: Unlocking Exploration of LLMs via Optimizing
Budget Allocation", arXiv 2509.25849) transplanted to a tabular prompt pool: GRPO with each
prompt's rollouts allocated by the knapsack rule (controlrl/allocation.py, the reference's
sampling_budget_by_knapsack) against the uniform allocation at the same budget and at twice it.
The declared experiment paper_figures/knapsack-allocation/ states the setting and its sources.

    python -m paper_figures run knapsack-allocation   # this script at the declared size
    python paper_figures/knapsack_allocation.py --out DIR

The pool: --prompts prompts of --answers answers, one correct (reward 1), a logit table per
prompt, initial pi(correct) ~ Beta(0.5, 0.5) by the seed; every epoch visits each prompt once in
a fresh order, --batch-prompts per iteration. Arms (same seed: the same pool, order and Adam):
uniform (--group-size rollouts a prompt), knapsack (the same total by the rule over each prompt's
success at its previous visit; the first epoch uniform; min_n 2, alpha 0.9, --max-n, fallback
on) and uniform-2x. One Adam step (each of --lrs) per iteration on GRPO's clipped surrogate
(controlrl.objective's "clip", on-policy), advantages standardised within each prompt's rollouts
(controlrl.group.masked_group_advantages), no KL; all seeds train at once as a batch.

Per seed and arm: effective_ratio (the share of rollouts with a non-zero advantage, after the
first epoch), final_success (the exact mean over prompts of pi(correct) at the end), solved (the
share of prompts with pi(correct) > 0.5) and auc (the exact success's mean over updates). Writes
<out>/knapsack_allocation.csv (per arm and seed), knapsack_allocation_curves.csv (per arm and
update: the seed-mean success and effective ratio).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from controlrl.allocation import knapsack_allocation
from controlrl.cli import ArgumentParser
from controlrl.experiment import write_rows
from controlrl.group import masked_group_advantages
from controlrl.objective import POLICY_LOSSES, Objective, Tokens
from paper_figures.lab import scripts
from paper_figures.lab.script_flags import ROOT, wrote

ARMS = ("uniform", "knapsack", "uniform-2x")
MIN_N, ALPHA = 2, 0.9  # the reference's defaults
FIELDS = ("lr", "arm", "seed", "rollouts", "effective_ratio", "final_success", "solved", "auc")


def pool(args, seed: int) -> np.ndarray:
    """Initial logits [prompts, answers] of a seed's pool: the correct answer (index 0) at
    log(p0 (K - 1) / (1 - p0)), the others at 0, so that pi(correct) = p0 ~ Beta(0.5, 0.5)."""
    rng = np.random.default_rng([seed, 0])
    p0 = np.clip(rng.beta(0.5, 0.5, args.prompts), 1e-3, 0.999)
    logits = np.zeros((args.prompts, args.answers))
    logits[:, 0] = np.log(p0 * (args.answers - 1) / (1 - p0))
    return logits


def allocate(args, arm: str, estimate: np.ndarray) -> np.ndarray:
    """Rollouts per prompt of one iteration's batch."""
    n = args.group_size
    if arm == "uniform-2x":
        return np.full(len(estimate), 2 * n)
    if arm == "uniform":
        return np.full(len(estimate), n)
    return knapsack_allocation(estimate, n * len(estimate), n, MIN_N, args.max_n, ALPHA)


def train(args, arm: str, lr: float) -> tuple[list[dict], dict[str, np.ndarray]]:
    """Every seed of one arm at Adam's lr: per-seed rows and the seed-mean curves."""
    seeds = list(range(1, args.seeds + 1))
    S, C, M = len(seeds), args.prompts, args.batch_prompts
    theta = torch.tensor(np.stack([pool(args, s) for s in seeds]), requires_grad=True)
    opt = torch.optim.Adam([theta], lr=lr)
    # every arm the same streams (common random numbers): the same pool, prompt order and
    # uniform draws; only what the allocation makes of them differs
    rngs = [np.random.default_rng([s, 1]) for s in seeds]
    orders = [np.random.default_rng([s, 2]) for s in seeds]
    estimate = np.full((S, C), np.nan)  # each prompt's success rate at its previous visit
    success, effective, rollouts = [], [], np.zeros(S)
    objective = Objective()
    for _ in range(args.epochs):
        perm = np.stack([o.permutation(C) for o in orders])
        for start in range(0, C, M):
            prompts = perm[:, start : start + M]  # [S, M]
            alloc = np.stack([allocate(args, arm, estimate[s, prompts[s]]) for s in range(S)])
            width = int(alloc.max())
            mask = np.arange(width)[None, None, :] < alloc[:, :, None]  # [S, M, W]
            probs = torch.softmax(theta.detach(), -1)
            p_batch = np.take_along_axis(probs.numpy(), prompts[:, :, None], 1)  # [S, M, K]
            cdf = np.cumsum(p_batch, -1)
            u = np.zeros((S, M, width))  # one draw per rollout, from the seed's own stream
            for s in range(S):
                u[s][mask[s]] = rngs[s].random(int(alloc[s].sum()))
            actions = np.minimum((u[..., None] > cdf[:, :, None, :]).sum(-1), args.answers - 1)
            reward = np.where(mask, actions == 0, 0.0)
            adv = masked_group_advantages(torch.tensor(reward), torch.tensor(mask))
            logp_all = torch.log_softmax(theta, -1)
            prompt_of = torch.tensor(prompts)[:, :, None].expand(S, M, width)
            logp = logp_all[torch.arange(S)[:, None, None], prompt_of, torch.tensor(actions)]
            m = torch.tensor(mask, dtype=theta.dtype)
            t = Tokens(logp=logp, old_logp=logp.detach(), ratio=torch.exp(logp - logp.detach()),
                       adv=adv, ref_logp=logp.detach(), weight=m)  # fmt: skip
            per_seed = (POLICY_LOSSES["clip"](t, objective) * m).sum((1, 2)) / m.sum((1, 2))
            opt.zero_grad()
            per_seed.sum().backward()  # seeds share no parameter: each gets its own gradient
            opt.step()
            n_slots = mask.sum((1, 2))
            rollouts += n_slots
            effective.append(((adv != 0).numpy() & mask).sum((1, 2)) / n_slots)
            means = reward.sum(-1) / alloc  # [S, M]
            for s in range(S):
                estimate[s, prompts[s]] = means[s]
            success.append(torch.softmax(theta.detach(), -1)[..., 0].mean(-1).numpy())
    success, effective = np.array(success), np.array(effective)  # [iterations, S]
    iters_per_epoch = -(-C // M)
    final_pi = torch.softmax(theta.detach(), -1)[..., 0].numpy()
    rows = [dict(zip(FIELDS, (lr, arm, seed, int(rollouts[i]),
                              float(effective[iters_per_epoch:, i].mean()),
                              float(final_pi[i].mean()), float((final_pi[i] > 0.5).mean()),
                              float(success[:, i].mean()))))
            for i, seed in enumerate(seeds)]  # fmt: skip
    return rows, {"success": success.mean(1), "effective_ratio": effective.mean(1)}


def parse(argv: list[str] | None):
    p = ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=200)
    p.add_argument("--prompts", type=int, default=256)
    p.add_argument("--answers", type=int, default=10)
    p.add_argument("--batch-prompts", type=int, default=32, help="prompts per iteration")
    p.add_argument("--group-size", type=int, default=8, help="the uniform rollouts per prompt")
    p.add_argument("--max-n", type=int, default=64, help="knapsack's cap per prompt")
    p.add_argument("--epochs", type=int, default=40)
    p.add_argument("--lrs", default="0.03,0.1", help="Adam's step sizes, comma-separated")
    p.add_argument("--out", type=Path, default=ROOT / "runs" / "knapsack_allocation")
    args = p.parse_args(argv)
    scripts.at_least(p, args, ("seeds", "prompts", "batch_prompts", "epochs"))
    scripts.at_least(p, args, ("answers",), 2)
    if not MIN_N <= args.group_size <= args.max_n:
        p.error(f"--group-size must lie in [{MIN_N}, --max-n], got {args.group_size}")
    if args.prompts % args.batch_prompts:
        p.error("--batch-prompts must divide --prompts")
    try:
        args.lrs = [float(v) for v in args.lrs.split(",")]
    except ValueError:
        p.error(f"--lrs must be numbers, got {args.lrs!r}")
    if not all(lr > 0 for lr in args.lrs):
        p.error("--lrs must be > 0")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(1)
    rows, curves = [], {}
    for lr in args.lrs:
        for arm in ARMS:
            arm_rows, curves[(lr, arm)] = train(args, arm, lr)
            rows += arm_rows
            f = [r["final_success"] for r in arm_rows]
            e = [r["effective_ratio"] for r in arm_rows]
            print(f"lr {lr:g} {arm}: final success {np.mean(f):.4f}, effective ratio "
                  f"{np.mean(e):.4f}")  # fmt: skip
    write_rows(args.out / "knapsack_allocation.csv", rows, FIELDS)
    curve_rows = [
        {"lr": lr, "arm": arm, "update": i + 1, "success": float(s), "effective_ratio": float(e)}
        for (lr, arm), c in curves.items()
        for i, (s, e) in enumerate(zip(c["success"], c["effective_ratio"], strict=True))
    ]
    write_rows(args.out / "knapsack_allocation_curves.csv", curve_rows)
    wrote(f"{args.out}/knapsack_allocation*.csv", "knapsack_allocation", argv)


if __name__ == "__main__":
    main()
