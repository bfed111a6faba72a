"""Shared loss terms."""

import numpy as np
import pytest
import torch

from controlrl.losses import clipped_value_loss as value_loss
from controlrl.losses import expectile_loss

EPS = 0.2


def test_clipped_value_loss():
    v_old = torch.tensor([0.0, 1.0, 2.0])
    returns = torch.tensor([1.0, 0.0, 5.0])
    small = v_old + torch.tensor([0.1, -0.2, 0.05])
    plain = 0.5 * (small - returns).pow(2).mean()
    assert value_loss(small, v_old, returns, EPS, clip=True) == pytest.approx(plain.item())
    big = v_old + torch.tensor([1.0, 0.0, 0.0])  # moved past eps towards its target
    clipped = value_loss(big, v_old, returns, EPS, clip=True)
    # the clipped error (0.8^2) dominates the unclipped 0 for the first sample
    assert clipped.item() == pytest.approx(0.5 * (0.8**2 + 1.0 + 9.0) / 3)


def test_expectile_loss_weights_tau_above_and_one_minus_tau_below():
    u = torch.tensor([2.0, -1.0, 0.5, -3.0])
    tau = 0.7
    expected = (0.7 * 4.0 + 0.3 * 1.0 + 0.7 * 0.25 + 0.3 * 9.0) / 4
    assert expectile_loss(u, tau).item() == pytest.approx(expected)


def test_expectile_loss_at_half_is_half_the_mse():
    u = torch.randn(1000, generator=torch.Generator().manual_seed(0))
    assert expectile_loss(u, 0.5).item() == pytest.approx(0.5 * u.square().mean().item(), rel=1e-6)


def minimiser(x: torch.Tensor, tau: float) -> float:
    """argmin_m expectile_loss(x - m, tau), by Newton steps on autograd's gradient and
    Hessian of the loss (piecewise quadratic in m: exact within a few steps)."""
    m = x.mean().clone().double().requires_grad_(True)
    xd = x.double()
    for _ in range(100):
        (g,) = torch.autograd.grad(expectile_loss(xd - m, tau), m, create_graph=True)
        (h,) = torch.autograd.grad(g, m)
        with torch.no_grad():
            m -= g / h
        if abs(g.item()) < 1e-13:
            break
    return m.item()


def test_expectile_minimiser_solves_the_first_order_condition_and_rises_to_the_max():
    x = torch.tensor(np.random.default_rng(0).normal(size=50), dtype=torch.float32)
    xs = x.double().numpy()
    taus = [0.1, 0.3, 0.5, 0.7, 0.9, 0.99, 0.999]
    ms = [minimiser(x, tau) for tau in taus]
    for tau, m in zip(taus, ms):
        above = np.clip(xs - m, 0, None).mean()
        below = np.clip(m - xs, 0, None).mean()
        assert tau * above == pytest.approx((1 - tau) * below, rel=1e-8, abs=1e-12)
    assert ms[taus.index(0.5)] == pytest.approx(xs.mean(), abs=1e-10)  # tau 0.5: the mean
    assert all(a < b for a, b in zip(ms, ms[1:]))  # increasing in tau
    # -> max: the condition gives tau (max - m) / n <= tau E[(x - m)+] = (1 - tau) E[(m - x)+]
    # <= (1 - tau) (max - min), so max - m <= n (1 - tau) / tau (max - min)
    n, spread = len(xs), xs.max() - xs.min()
    for tau in (0.99, 0.999):
        m = ms[taus.index(tau)]
        assert 0 < xs.max() - m <= n * (1 - tau) / tau * spread
    assert xs.max() - ms[-1] < 0.05 * spread  # tau 0.999, 50 samples: within 5% of the range
