"""The entropy-mechanism figure (paper_figures/entropy_mechanism.py): the entropy Hessian, the
exact second moment of the sampled step, the expansion eta d1 + eta^2 d2 against exact
enumeration of a small batch, and the toy run end to end."""

import csv
import importlib.util
import itertools
import sys
from pathlib import Path

import numpy as np
import pytest

from theory import group_po as gp
from theory.policy_opt import softmax

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location(
    "entropy_mechanism", ROOT / "paper_figures/entropy_mechanism.py"
)
fig = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = fig  # dataclasses look their module up
spec.loader.exec_module(fig)


def test_entropy_hessian_against_finite_differences():
    z = np.random.default_rng(0).normal(size=fig.K)
    h, eye = 1e-4, np.eye(fig.K)
    fd = np.array(
        [
            [
                (gp.entropy(z + h * (eye[j] + eye[k])) - gp.entropy(z + h * (eye[j] - eye[k]))
                 - gp.entropy(z - h * (eye[j] - eye[k])) + gp.entropy(z - h * (eye[j] + eye[k])))
                / (4 * h * h)
                for k in range(fig.K)
            ]
            for j in range(fig.K)
        ]
    )  # fmt: skip
    hess = fig.entropy_hessian(z)
    np.testing.assert_allclose(hess, fd, atol=1e-6)
    np.testing.assert_allclose(hess, hess.T, atol=1e-15)


def _enumerated_expansion(z, mu, update, B, eta):
    """E[H(z + eta u)] - H(z) over every batch of B (arm, reward) outcomes, ordered."""
    pi, value = softmax(z), softmax(z) @ mu
    v = fig.per_sample_directions(z, update)
    total = 0.0
    for batch in itertools.product(range(2 * fig.K), repeat=B):
        arms, rewards = np.array(batch) // 2, (np.array(batch) % 2).astype(float)
        prob = np.prod(pi[arms] * np.where(rewards == 1, mu[arms], 1 - mu[arms]))
        u = ((rewards - value)[:, None] * v[arms]).mean(axis=0)
        total += prob * (gp.entropy(z + eta * u) - gp.entropy(z))
    return total


@pytest.mark.parametrize("update", fig.UPDATES)
def test_expansion_matches_exact_enumeration(update):
    """On every batch of B = 2 the exact mean entropy change minus eta d1 + eta^2 d2 is O(eta^3)
    (halving eta divides it by ~8), and d1 is the paper's -Cov(log pi, pi A) / -Cov(log pi, A)."""
    z, mu = fig.LOGITS, fig.BANDITS["aligned"]
    d1, d2 = fig.predictions(z, mu, update, 2)
    pi = softmax(z)
    adv = mu - pi @ mu
    direction = pi * adv if update == "vanilla" else adv
    assert d1 == pytest.approx(-np.sum(pi * np.log(pi) * (direction - pi @ direction)), rel=1e-12)
    errors = []
    for eta in (0.02, 0.01):
        exact = _enumerated_expansion(z, mu, update, 2, eta)
        errors.append(abs(exact - eta * d1 - eta**2 * d2))
        assert abs(exact - eta * d1) > 5 * errors[-1]  # the second order is most of the gap
    assert 6.0 < errors[0] / errors[1] < 10.0


@pytest.mark.parametrize("update, eta", [("vanilla", 0.05), ("natural", 0.005)])
def test_sampled_remainder_has_mean_eta2_d2(update, eta):
    """The per-batch remainder after its own first order averages eta^2 d2 (4 standard errors,
    50k batches of B = 4; natural PG's importance-weighted steps are ~1/pi_min larger, so its
    eta is 10x smaller), and the raw mean change is eta d1 + eta^2 d2 within its noise."""
    rng = np.random.default_rng(1)
    z, mu = fig.LOGITS, fig.BANDITS["anti-aligned"]
    d1, d2 = fig.predictions(z, mu, update, 4)
    dH, rem = fig.sampled_entropy_changes(z, mu, update, 4, eta, 50_000, rng)
    se = rem.std(ddof=1) / np.sqrt(rem.size)
    assert abs(rem.mean() - eta**2 * d2) < 4 * se
    assert abs(rem.mean()) > 10 * se  # the remainder is resolved, not noise around 0
    assert d1 > 0  # the likely arms pay less: entropy rises
    se_raw = dH.std(ddof=1) / np.sqrt(dH.size)
    assert abs(dH.mean() - eta * d1 - eta**2 * d2) < 4 * se_raw


FIELDS = (
    "bandit", "update", "B", "eta", "batches", "pred_first", "pred_second", "d1", "d2",
    "mean", "sd", "lo", "hi", "first_inside", "second_inside", "gap", "gap_over_eta2",
    "rem_pred", "rem_mean", "rem_sd", "rem_lo", "rem_hi", "rem_inside", "rem_over_eta2",
)  # fmt: skip


def test_toy_run_writes_the_table_and_the_figure(tmp_path):
    fig.main(fig.Args(toy=True, out=str(tmp_path)))
    assert (tmp_path / "entropy_mechanism.png").stat().st_size > 0
    with (tmp_path / "entropy_mechanism.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == list(FIELDS)  # the columns, in order
    assert [(r["update"], r["B"], r["eta"], r["batches"]) for r in rows] == [
        ("vanilla", "4", "0.03", "2000"), ("vanilla", "4", "0.3", "2000"),
        ("natural", "4", "0.03", "2000"), ("natural", "4", "0.3", "2000")]  # fmt: skip
    for r in rows:
        eta, d1, d2 = float(r["eta"]), float(r["d1"]), float(r["d2"])
        assert float(r["pred_first"]) == pytest.approx(eta * d1, rel=1e-5)
        assert float(r["rem_pred"]) == pytest.approx(eta**2 * d2, rel=1e-5)
        assert float(r["lo"]) < float(r["mean"]) < float(r["hi"])
        assert float(r["rem_lo"]) < float(r["rem_mean"]) < float(r["rem_hi"])
        mean = float(r["mean"])  # 6 significant digits in the CSV
        assert float(r["gap"]) == pytest.approx(mean - eta * d1, abs=1e-5 * abs(mean))
