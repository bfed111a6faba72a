r"""Knapsack RL (Li et al. 2025, "Knapsack RL: Unlocking Exploration of LLMs via Optimizing
Budget Allocation", arXiv 2509.25849) transplanted to a tabular prompt pool: GRPO with each
prompt's rollouts allocated by the knapsack rule (controlrl/allocation.py, the reference's
sampling_budget_by_knapsack) against the uniform allocation at the same budget and at twice it.

    python -m paper_figures run knapsack-allocation   # this script at the declared size
    python paper_figures/knapsack_allocation.py --out DIR

The pool: --prompts prompts (256), each a context with --answers answers (10), one of them
correct (reward 1, else 0: a verifiable reward). The policy is a logit table per prompt (no
network: every prompt its own parameters, as the TPO paper's tabular runs); its initial success
rate p0 per prompt is drawn from Beta(0.5, 0.5) (clipped to [0.001, 0.999]) by the seed: a pool
with many nearly solved and many nearly hopeless prompts, the paper's "easy tasks consistently
succeed, difficult tasks consistently fail". Each epoch visits every prompt once in a fresh
random order, --batch-prompts (32) per iteration, --epochs (40) epochs.

Arms (same seed: the same pool, order and Adam, the rollouts differ):
- uniform:   --group-size (8) rollouts per prompt, 256 per iteration;
- knapsack:  the same 256 per iteration allocated by the knapsack rule over each prompt's
             success rate at its previous visit (the reference's per-prompt record; the first
             epoch, without a record, is uniform), min_n 2, max_n --max-n (64), alpha 0.9, the
             fallback on (the reference's defaults but max_n, which it leaves to the config);
- uniform-2x: 2 x group-size rollouts per prompt (twice the rollouts of the others).
Update, every arm: one Adam step per iteration (each of --lrs: 0.03, chosen on the uniform
arm alone before any knapsack run as the step at which uniform GRPO's pool accuracy is still
rising at the end of the budget, the paper's budget-limited regime; and 0.1, where it
saturates: a sensitivity) on GRPO's clipped surrogate
(controlrl.objective's "clip" loss, on-policy, so its ratio is 1 with the gradient of A log pi),
the mean over the iteration's rollouts; advantages (r - mean) / (std + 1e-4) over each prompt's
rollouts (controlrl.group.masked_group_advantages: groups of any size); no KL. All seeds train
at once: the tables are [seeds, prompts, answers] and Adam is per element, so every seed is its
own run (each seed draws from its own numpy generators, the same in every arm).

Per seed and arm: effective_ratio = the share of rollouts with a non-zero advantage (their
prompt's group holds both outcomes), mean over iterations after the first epoch (where the
allocations first differ); final_success = the exact mean over prompts of pi(correct) after the
last update (the pool's expected accuracy); solved = the share of prompts with pi(correct) >
0.5 at the end; auc = the mean of the exact success over updates. Writes
<out>/knapsack_allocation.csv (per arm and seed), knapsack_allocation_curves.csv (per arm and
iteration: the seed-mean success and effective ratio) and knapsack_allocation.png; the declared
experiment paper_figures/knapsack-allocation/ reads the first into its results table.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch

from controlrl import plots
from controlrl.allocation import knapsack_allocation
from controlrl.cli import ArgumentParser
from controlrl.experiment import write_rows
from controlrl.group import masked_group_advantages
from controlrl.objective import POLICY_LOSSES, Objective, Tokens
from paper_figures.lab import scripts

ROOT = Path(__file__).resolve().parents[1]
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
    rows = [
        {
            "lr": lr,
            "arm": arm,
            "seed": seed,
            "rollouts": int(rollouts[i]),
            "effective_ratio": float(effective[iters_per_epoch:, i].mean()),
            "final_success": float(final_pi[i].mean()),
            "solved": float((final_pi[i] > 0.5).mean()),
            "auc": float(success[:, i].mean()),
        }
        for i, seed in enumerate(seeds)
    ]
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
    for name in ("seeds", "prompts", "batch_prompts", "epochs"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1")
    if args.answers < 2:
        p.error("--answers must be >= 2")
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


def plot(args, curves: dict[str, dict[str, np.ndarray]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with plt.rc_context(plots.STYLE):
        fig, axes = plt.subplots(len(args.lrs), 2, figsize=(10, 3.4 * len(args.lrs)),
                                 squeeze=False)  # fmt: skip
        for (lr, arm), c in curves.items():
            row = axes[args.lrs.index(lr)]
            x = np.arange(1, len(c["success"]) + 1)
            row[0].plot(x, c["success"], label=arm)
            row[1].plot(x, c["effective_ratio"], label=arm)
        for lr, row in zip(args.lrs, axes, strict=True):
            row[0].set(
                xlabel="update",
                ylabel="mean pi(correct) over the pool",
                title=f"Adam {lr:g}: pool accuracy (mean of {args.seeds} seeds)",
            )
            row[1].set(
                xlabel="update",
                ylabel="share of rollouts with A != 0",
                title=f"Adam {lr:g}: effective ratio of non-zero gradients",
            )
            row[0].legend()
        scripts.save_figure(fig, args.out / "knapsack_allocation.png", 60)


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
    plot(args, curves)
    given = " ".join(sys.argv[1:] if argv is None else argv)
    print(f"wrote {args.out}/knapsack_allocation*.csv and .png; command: python "
          f"paper_figures/knapsack_allocation.py {given}")  # fmt: skip


if __name__ == "__main__":
    main()
