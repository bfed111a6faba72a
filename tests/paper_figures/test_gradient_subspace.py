"""The gradient-subspace measures (paper_figures/gradient_subspace.py) on an exact quadratic,
where the Hessian, its eigenspaces and the gradient's share in them are known in closed form."""

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location(
    "gradient_subspace", ROOT / "paper_figures/gradient_subspace.py"
)
fig = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = fig
spec.loader.exec_module(fig)

P, K = 12, 3


def _quadratic(rng):
    """H = Q diag(w) Q^T with the k largest |w| known (one of them negative), and parameters
    split over two tensors, as a network's are."""
    q, _ = np.linalg.qr(rng.normal(size=(P, P)))
    w = np.array([9.0, -8.0, 7.0] + list(np.linspace(0.5, -0.5, P - K)))
    return q, w, q @ np.diag(w) @ q.T


def _loss(h, b, params):
    theta = torch.cat([p.reshape(-1) for p in params])
    return 0.5 * theta @ torch.as_tensor(h) @ theta + torch.as_tensor(b) @ theta


def test_hessian_gradient_and_fraction_on_an_exact_quadratic():
    rng = np.random.default_rng(0)
    q, w, h = _quadratic(rng)
    theta = rng.normal(size=P)
    # b puts the gradient H theta + b inside the top-3 eigenspace: its fraction there is 1
    top = q[:, :K]
    g_target = top @ rng.normal(size=K)
    b = g_target - h @ theta
    params = [
        torch.tensor(theta[:5].reshape(5, 1), requires_grad=True),
        torch.tensor(theta[5:], requires_grad=True),
    ]
    g, hess = fig.flat_grad_hessian(_loss(h, b, params), params)
    np.testing.assert_allclose(hess, h, atol=1e-12)
    np.testing.assert_allclose(g, g_target, atol=1e-12)
    basis = fig.top_eigenspace(hess, K)
    assert fig.subspace_overlap(basis, top) == pytest.approx(1.0, abs=1e-10)
    assert fig.gradient_fraction(g, basis) == pytest.approx(1.0, abs=1e-10)
    # a gradient in the bottom eigenspace has none of its norm in the top one
    assert fig.gradient_fraction(q[:, -1], basis) == pytest.approx(0.0, abs=1e-12)
    # half its squared norm in the top space, half outside
    mixed = q[:, 0] + q[:, K]
    assert fig.gradient_fraction(mixed, basis) == pytest.approx(0.5, abs=1e-12)


def test_overlap_and_the_random_baseline():
    e = np.eye(6)
    a = e[:, :2]
    b = np.stack([e[:, 0], (e[:, 1] + e[:, 2]) / np.sqrt(2)], 1)
    assert fig.subspace_overlap(a, a) == pytest.approx(1.0)
    assert fig.subspace_overlap(a, e[:, 2:4]) == pytest.approx(0.0)
    assert fig.subspace_overlap(a, b) == pytest.approx(0.75)  # (1 + 1/2) / 2
    rng = np.random.default_rng(1)
    basis = fig.random_subspace(P, K, rng)
    np.testing.assert_allclose(basis.T @ basis, np.eye(K), atol=1e-12)
    # a random k-subspace holds k/P of a fixed vector's squared norm in expectation
    g = rng.normal(size=P)
    mean = np.mean([fig.gradient_fraction(g, fig.random_subspace(P, K, rng)) for _ in range(4000)])
    assert mean == pytest.approx(K / P, abs=0.01)
    assert fig.k_of("1%", 354) == 4 and fig.k_of("5%", 353) == 18 and fig.k_of(7, 100) == 7


@pytest.mark.slow
def test_toy_run_end_to_end(tmp_path):
    """--toy: 2 seeds, iterations 1 and 6 analysed, their overlap dt = 6 - 1 apart; the per-seed
    rows are kept and a second call reuses them."""
    assert fig.main(["--toy", "--seeds", "2", "--out", str(tmp_path)]) == 0
    import csv

    rows = list(csv.DictReader(open(tmp_path / "gradient_subspace.csv")))
    assert {(r["kind"], r["t1"], r["t2"]) for r in rows} == {
        ("fraction", "1", "1"), ("fraction", "6", "6"), ("overlap", "1", "6")
    }  # fmt: skip
    assert len(rows) == 2 * 2 * 2 * 3  # seeds x networks x k x (2 fractions + 1 overlap)
    assert all(0.0 <= float(r["value"]) <= 1.0 + 1e-9 for r in rows)
    before = (tmp_path / "seeds" / "seed1.csv").stat().st_mtime_ns
    assert fig.main(["--toy", "--seeds", "2", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "seeds" / "seed1.csv").stat().st_mtime_ns == before
