"""Rollouts per prompt by a knapsack over estimated success rates (Knapsack RL, Li et al. 2025,
arXiv 2509.25849; its reference's sampling_budget_by_knapsack, verl recipe knapsack_grpo).

A prompt with success rate p given N rollouts is an item of value
    v(N) = (1 - p^N - (1 - p)^N) * p (1 - p)^2
(the chance its group has both outcomes, i.e. a non-zero GRPO gradient, times the reference's
information weight p (1 - p)^2). The rule of the reference, in order:
  - a prompt with no estimate yet gets the uniform share n;
  - a prompt with 0 < p < 1 gets min_n to start; one with p = 0 or p = 1 gets min_n in all
    (it has no value: nothing tells how far it is from its first success);
  - fallback: when the rollouts the open prompts are expected to need, sum_i min(max_n,
    log(1 - alpha) / log(max(p_i, 1 - p_i))) (enough for both outcomes w.p. alpha), fall short
    of the budget left, the excess goes evenly to the p = 0 prompts (else to the p = 1 ones);
  - the rest maximises sum_i v(N_i) with N_i <= max_n over the open prompts; what no open
    prompt can take (all at max_n) is spread evenly over them.
v is concave in N (its increments p^N (1 - p) + (1 - p)^N p fall with N), so taking the budget's
largest increments over all (prompt, N) is the reference's dynamic programme's optimum.
"""

from __future__ import annotations

import numpy as np


def knapsack_value(p: np.ndarray, n: np.ndarray) -> np.ndarray:
    """v(N) = (1 - p^N - (1 - p)^N) p (1 - p)^2 (0 at p in {0, 1})."""
    p, n = np.asarray(p, float), np.asarray(n)
    return (1.0 - p**n - (1.0 - p) ** n) * p * (1.0 - p) ** 2


def _spread(alloc: np.ndarray, idx: np.ndarray, amount: int) -> None:
    """Add `amount` evenly over alloc[idx] (the remainder to the first ones), in place."""
    if amount <= 0 or idx.size == 0:
        return
    alloc[idx] += amount // idx.size
    alloc[idx[: amount % idx.size]] += 1


def knapsack_allocation(
    p: np.ndarray,
    budget: int,
    n: int,
    min_n: int = 2,
    max_n: int = 64,
    alpha: float = 0.9,
    fallback: bool = True,
) -> np.ndarray:
    """Rollouts [M] (int, summing to budget) for M prompts of estimated success rates p [M]
    (NaN: no estimate yet)."""
    p = np.asarray(p, float)
    if not min_n <= n <= max_n:
        raise ValueError(f"need min_n <= n <= max_n, got {min_n}, {n}, {max_n}")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha = {alpha} must lie in (0, 1)")
    known = ~np.isnan(p)
    open_ = known & (p > 0) & (p < 1)
    alloc = np.where(known, min_n, n).astype(np.int64)
    left = budget - int(alloc.sum())
    if left < 0:
        raise ValueError(f"budget = {budget} is below the {int(alloc.sum())} rollouts given first")
    opened = np.flatnonzero(open_)
    zero, one = np.flatnonzero(known & (p == 0)), np.flatnonzero(known & (p == 1))
    if opened.size == 0:  # nothing to optimise: the failing prompts take it all, else everyone
        _spread(alloc, zero if zero.size else np.arange(len(p)), left)
        return alloc
    q = p[opened]
    need = np.minimum(max_n, np.log(1.0 - alpha) / np.log(np.maximum(q, 1.0 - q)))
    expected = int(np.sum(need.astype(np.int64)))  # the reference truncates each to an int
    if fallback and expected < left:
        _spread(alloc, zero if zero.size else one, left - expected)
        left = expected
    # the `left` largest increments v(N + 1) - v(N), N = min_n .. max_n - 1, over open prompts
    steps = np.arange(min_n, max_n)
    gain = knapsack_value(q[:, None], steps[None, :] + 1) - knapsack_value(q[:, None], steps)
    order = np.argsort(-gain.ravel(), kind="stable")[: min(left, gain.size)]
    np.add.at(alloc, opened[order // steps.size], 1)
    _spread(alloc, opened, left - order.size)
    return alloc
