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


def _table_logp(logits: torch.Tensor, arms: torch.Tensor) -> torch.Tensor:
    return torch.log_softmax(logits, -1)[arms]


def test_copg_gradient_is_rloo_on_the_regularised_reward_for_any_samples():
    """Off-policy samples (not from pi): CoPG's gradient is 2 beta G times the gradient of
    REINFORCE with the leave-one-out baseline on R = r - beta log(pi / pi_ref), per group."""
    from controlrl.advantages import rloo
    from controlrl.losses import copg_loss

    gen = torch.Generator().manual_seed(0)
    K, G, n, beta = 6, 4, 3, 0.3
    logits = torch.randn(K, generator=gen, dtype=torch.float64, requires_grad=True)
    ref = torch.randn(K, generator=gen, dtype=torch.float64)
    arms = torch.randint(K, (n, G), generator=gen)  # uniform, far from softmax(logits)
    r = torch.rand(n, G, generator=gen, dtype=torch.float64)
    logp, logp_ref = _table_logp(logits, arms), _table_logp(ref, arms)
    (g_copg,) = torch.autograd.grad(copg_loss(logp, logp_ref, r, beta), logits, retain_graph=True)
    R = (r - beta * (logp - logp_ref)).detach()
    reinforce = -(rloo(R) * logp).sum(-1).mean() / G
    (g_rloo,) = torch.autograd.grad(reinforce, logits, retain_graph=True)
    torch.testing.assert_close(g_copg, 2 * beta * G * g_rloo, rtol=1e-12, atol=1e-14)
    # the leave-one-out is what makes it so: the full-mean baseline is (G - 1) / G of it
    mean_base = -((R - R.mean(-1, keepdim=True)) * logp).sum(-1).mean() / G
    (g_mean,) = torch.autograd.grad(mean_base, logits)
    assert not torch.allclose(g_copg, 2 * beta * G * g_mean)


def test_copg_on_a_preference_pair_is_ipo_times_beta_squared():
    """IPO (Azar et al. 2023, arXiv 2310.12036): (h_w - h_l - 1 / (2 tau))^2 with h = log pi /
    pi_ref. CoPG on the pair with reward gap beta / (2 tau) is beta^2 times it."""
    from controlrl.losses import copg_loss

    gen = torch.Generator().manual_seed(1)
    logp = torch.randn(5, 2, generator=gen, dtype=torch.float64)
    logp_ref = torch.randn(5, 2, generator=gen, dtype=torch.float64)
    beta, tau = 0.4, 0.25
    r = torch.tensor([beta / (2 * tau), 0.0], dtype=torch.float64).expand(5, 2)
    h = logp - logp_ref
    ipo = (h[:, 0] - h[:, 1] - 1 / (2 * tau)).square().mean()
    torch.testing.assert_close(copg_loss(logp, logp_ref, r, beta), beta**2 * ipo)
    with pytest.raises(ValueError, match="at least 2"):
        copg_loss(logp[:, :1], logp_ref[:, :1], r[:, :1], beta)
