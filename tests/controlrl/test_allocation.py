"""The knapsack allocation of rollouts (controlrl.allocation) against brute force and the
reference's rule for prompts without signal."""

import itertools

import numpy as np
import pytest

from controlrl.allocation import knapsack_allocation, knapsack_value


def brute_force(p, budget, min_n, max_n):
    """max sum_i v(N_i) over min_n <= N_i <= max_n summing to budget (every allocation)."""
    best, arg = -np.inf, None
    for alloc in itertools.product(range(min_n, max_n + 1), repeat=len(p)):
        if sum(alloc) == budget:
            value = knapsack_value(p, np.array(alloc)).sum()
            if value > best + 1e-15:
                best, arg = value, np.array(alloc)
    return best, arg


@pytest.mark.parametrize("seed", range(6))
def test_optimal_over_open_prompts(seed):
    """Without the fallback, open prompts' allocation has the brute-force optimal value."""
    rng = np.random.default_rng(seed)
    p = rng.uniform(0.02, 0.98, 4)
    p[0] = rng.choice([0.05, 0.5, 0.93])
    budget = int(rng.integers(9, 20))
    alloc = knapsack_allocation(p, budget, n=2, min_n=2, max_n=7, fallback=False)
    best, _ = brute_force(p, budget, 2, 7)
    assert alloc.sum() == budget and alloc.min() >= 2 and alloc.max() <= 7
    assert knapsack_value(p, alloc).sum() == pytest.approx(best, rel=1e-12)


def test_value_and_the_weight_of_hard_prompts():
    """v(N) at a number; p (1 - p)^2 weighs a prompt the model mostly fails above one it mostly
    solves (the chance of both outcomes is symmetric in p), even when the easy one comes first."""
    assert knapsack_value(0.25, 4) == pytest.approx((1 - 0.25**4 - 0.75**4) * 0.25 * 0.75**2)
    alloc = knapsack_allocation(np.array([0.9, 0.1, 0.5]), 30, n=10, min_n=2, max_n=64,
                                fallback=False)  # fmt: skip
    assert alloc[1] > alloc[0]


def test_prompts_without_signal_and_without_estimate():
    """p = 0 and p = 1 get min_n, no estimate gets n; the fallback gives the excess over what
    the open prompts need (log(1 - alpha) / log(max(p, 1 - p)), truncated) to p = 0."""
    p = np.array([0.0, 1.0, np.nan, 0.5, 0.5])
    alloc = knapsack_allocation(p, 40, n=8, min_n=2, max_n=64, alpha=0.9)
    need = int(np.log(0.1) / np.log(0.5))  # 3 each for the two p = 0.5 prompts
    assert alloc[1] == 2 and alloc[2] == 8
    assert alloc[0] == 2 + (40 - 2 - 2 - 8 - 2 - 2 - 2 * need)
    assert alloc[3] == alloc[4] == 2 + need
    assert alloc.sum() == 40


def test_no_open_prompt_gives_the_budget_to_failing_ones():
    alloc = knapsack_allocation(np.array([0.0, 1.0, 0.0]), 12, n=4, min_n=2, max_n=8)
    assert list(alloc) == [5, 2, 5]  # 6 left: 3 each to the two p = 0 prompts


def test_capped_prompts_share_what_is_left_evenly():
    alloc = knapsack_allocation(np.array([0.5, 0.5]), 20, n=4, min_n=2, max_n=4,
                                fallback=False)  # fmt: skip
    assert list(alloc) == [10, 10]


@pytest.mark.parametrize(
    "kwargs, match",
    [(dict(n=1), "min_n <= n"), (dict(alpha=1.0), "alpha"), (dict(n=8, budget=3), "budget")],
)
def test_bad_input(kwargs, match):
    args = dict(p=np.array([0.5, np.nan]), budget=16, n=8) | kwargs
    with pytest.raises(ValueError, match=match):
        knapsack_allocation(**args)
