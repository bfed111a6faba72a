"""theory/max_at_k.py: the exact max@k (the expected best of k draws) and its gradient against
brute force and finite differences; both group estimators are unbiased (exact expectation over every
group of k draws, tied rewards included); pass@k is the binary case."""

import itertools

import numpy as np
import pytest

from theory import max_at_k as mk
from theory import policy_opt as po


def _brute_max_at_k(pi, r, k):
    total = 0.0
    for draws in itertools.product(range(len(pi)), repeat=k):
        total += np.prod(pi[list(draws)]) * r[list(draws)].max()
    return total


@pytest.mark.parametrize("k", [1, 2, 3, 5])
def test_value_and_gradient(k):
    rng = np.random.default_rng(0)
    for r in (rng.normal(size=5), np.array([0.3, 1.0, 0.3, -0.5, 1.0])):  # distinct; with ties
        z = rng.normal(size=5)
        pi = po.softmax(z)
        assert mk.max_at_k(pi, r, k) == pytest.approx(_brute_max_at_k(pi, r, k), abs=1e-14)
        fd = np.array(
            [
                (
                    mk.max_at_k(po.softmax(z + 1e-6 * e), r, k)
                    - mk.max_at_k(po.softmax(z - 1e-6 * e), r, k)
                )
                / 2e-6
                for e in np.eye(5)
            ]
        )
        np.testing.assert_allclose(mk.max_at_k_gradient(pi, r, k), fd, atol=1e-8)
    # k = 1 is the mean; pass@k of binary rewards is 1 - (1 - p)^k
    assert mk.max_at_k(pi, r, 1) == pytest.approx(pi @ r, abs=1e-15)
    binary = np.array([0.0, 1.0, 0.0, 1.0, 0.0])
    p = pi @ binary
    assert mk.max_at_k(pi, binary, k) == pytest.approx(1 - (1 - p) ** k, abs=1e-14)


@pytest.mark.parametrize("k", [2, 3, 4, 6])
def test_group_estimators_are_unbiased(k):
    rng = np.random.default_rng(1)
    for r in (rng.normal(size=4), np.array([1.0, 0.0, 1.0, 0.0])):
        pi = rng.dirichlet(np.ones(4))
        exact = mk.max_at_k_gradient(pi, r, k)
        variances = {}
        for estimator in mk.ESTIMATORS:
            prob, grads = mk.group_estimates(pi, r, k, estimator)
            assert prob.sum() == pytest.approx(1.0, abs=1e-12)
            mean = prob @ grads
            np.testing.assert_allclose(mean, exact, atol=1e-13)
            variances[estimator] = prob @ np.sum((grads - mean) ** 2, axis=1)
        # on these instances the baseline helps (an observation, not a theorem)
        assert variances["leave_one_out"] < variances["reinforce"]


def test_leave_one_out_weights_written_out():
    # arms pay 0, 1, 2; groups of k = 3 draws (counts per arm): one of each -> only the arm-2
    # draw has weight 2 - 1; arm 2 twice -> no draw matters alone; arm 0 twice and arm 1 once
    # -> the arm-1 draw has weight 1 - 0. The baseline (max of the others) is pinned here: any
    # function of the other draws would leave the mean unchanged
    pi, r = np.array([0.2, 0.3, 0.5]), np.array([0.0, 1.0, 2.0])
    prob, grads = mk.group_estimates(pi, r, 3, "leave_one_out")
    counts, _ = mk.multinomial_counts(3, 3)
    score = np.eye(3) - pi
    rows = {tuple(c): g for c, g in zip(counts.tolist(), grads)}
    np.testing.assert_allclose(rows[(1, 1, 1)], 1.0 * score[2], atol=1e-15)
    np.testing.assert_allclose(rows[(1, 0, 2)], 0.0, atol=1e-15)
    np.testing.assert_allclose(rows[(2, 1, 0)], 1.0 * score[1], atol=1e-15)  # arm-0 draws: 0
    _, plain = mk.group_estimates(pi, r, 3, "reinforce")
    plain_rows = {tuple(c): g for c, g in zip(counts.tolist(), plain)}
    np.testing.assert_allclose(plain_rows[(1, 0, 2)], 2.0 * (score[0] + 2 * score[2]), atol=1e-15)


def test_argument_errors():
    pi, r = np.full(3, 1 / 3), np.arange(3.0)
    with pytest.raises(ValueError, match=r"^estimator = 'rloo', expected one of"):
        mk.group_estimates(pi, r, 3, "rloo")
    with pytest.raises(ValueError, match=r"^k = 1: the leave-one-out baseline needs k >= 2$"):
        mk.group_estimates(pi, r, 1, "leave_one_out")
