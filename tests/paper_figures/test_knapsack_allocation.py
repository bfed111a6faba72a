"""paper_figures/knapsack_allocation.py: every seed is its own run (its rows do not depend on
the other seeds), the arms spend the budgets they claim, the first epoch (no success record
yet) is the uniform allocation and later ones are not, and bad flags exit 2."""

from __future__ import annotations

import numpy as np
import pytest

from paper_figures import knapsack_allocation as ka

SMALL = ["--prompts", "8", "--batch-prompts", "4", "--epochs", "3", "--max-n", "16"]


def run(seeds: int, arm: str, lr: float = 0.1):
    args = ka.parse([*SMALL, "--seeds", str(seeds)])
    return ka.train(args, arm, lr)


def test_a_seed_does_not_depend_on_the_others():
    alone, _ = run(1, "knapsack")
    together, _ = run(3, "knapsack")
    assert alone[0] == together[0]
    assert together[1] != together[0]


def test_budgets_and_the_first_epoch():
    (u,), cu = run(1, "uniform")
    (k,), ck = run(1, "knapsack")
    (u2,), _ = run(1, "uniform-2x")
    assert u["rollouts"] == k["rollouts"] == 3 * 8 * 8 and u2["rollouts"] == 2 * u["rollouts"]
    # the first epoch's two updates: no record yet, so the knapsack arm allocates and (same
    # streams) samples what uniform does; afterwards the allocation differs
    assert np.array_equal(cu["success"][:2], ck["success"][:2])
    assert np.array_equal(cu["effective_ratio"][:2], ck["effective_ratio"][:2])
    assert not np.array_equal(cu["success"][2:], ck["success"][2:])


@pytest.mark.parametrize(
    "flags, word",
    [(["--seeds", "0"], "--seeds"), (["--group-size", "1"], "--group-size"),
     (["--batch-prompts", "5"], "--batch-prompts"), (["--lrs", "0.1,x"], "--lrs"),
     (["--lrs", "0"], "--lrs")],
)  # fmt: skip
def test_bad_flags_exit_2(flags, word, capsys):
    with pytest.raises(SystemExit) as exc:
        ka.parse(flags)
    assert exc.value.code == 2 and word in capsys.readouterr().err
