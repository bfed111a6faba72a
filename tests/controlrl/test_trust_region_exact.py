"""controlrl.trust_region, exactly: natural_step on a linear objective under a quadratic
constraint, where the direction, the step length, the line search and every statistic have
closed forms; flat_grad with an unused parameter; the CG stopping rule; the surrogate; and what
policy_step hands to natural_step."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

from controlrl import trust_region as tr

F = torch.tensor([2.0, 0.5], dtype=torch.float64)  # the constraint's Hessian, diagonal
G = torch.tensor([1.0, 1.0], dtype=torch.float64)  # the objective's gradient


def _problem(steep=1.0, kl_value=None, obj_value=None):
    """Parameter at 0; objective G.theta + 3; constraint 0.5 theta^T F theta for its Hessian (first
    call), then `steep` times that (or the constant kl_value) when the line search evaluates it."""
    p = torch.nn.Parameter(torch.zeros(2, dtype=torch.float64))
    calls = {"constraint": 0, "objective": 0}

    def objective():
        calls["objective"] += 1
        if obj_value is not None and calls["objective"] > 1:
            return torch.tensor(obj_value, dtype=torch.float64)
        return (G * p).sum() + 3.0

    def constraint():
        calls["constraint"] += 1
        quad = 0.5 * (F * p * p).sum()
        if calls["constraint"] == 1:
            return quad
        return torch.tensor(kl_value, dtype=torch.float64) if kl_value is not None else steep * quad

    return p, objective, constraint, calls


def test_natural_step_closed_form_and_default_line_search():
    p, objective, constraint, _ = _problem(steep=2.0)  # the true KL is twice its model
    delta = 0.5
    stats = tr.natural_step([p], objective, constraint, delta=delta, cg_steps=10, damping=0.0)
    x = G / F  # F^-1 g = [0.5, 2]; x^T F x = 2.5
    step = math.sqrt(2 * delta / 2.5) * x
    frac = 0.8**2  # KL(frac) = 2 delta frac^2: 1.0, 0.64, then 0.4096 <= 0.5
    torch.testing.assert_close(p.detach(), frac * step)
    expected = float(G @ step)
    assert stats["objective_before"] == 3.0
    assert stats["cg_residual"] == pytest.approx(0.0, abs=1e-12)
    assert stats["accepted"] == 1.0 and stats["backtracks"] == 2.0
    assert stats["quad_kl"] == pytest.approx(delta, rel=1e-12)
    assert stats["kl_full_step"] == pytest.approx(2 * delta, rel=1e-12)
    assert stats["kl"] == pytest.approx(2 * delta * frac**2, rel=1e-12)
    assert stats["objective_after"] == pytest.approx(3.0 + frac * expected, rel=1e-12)
    assert stats["step_frac"] == frac
    assert stats["improvement_ratio"] == pytest.approx(1.0, rel=1e-12)  # linear objective


def test_rejected_step_statistics_and_default_backtracks():
    p, objective, constraint, calls = _problem(kl_value=1e9)
    stats = tr.natural_step([p], objective, constraint, delta=0.5, cg_steps=10, damping=0.0)
    assert calls["constraint"] == 1 + 10  # the Hessian, then max_backtracks = 10 tries
    assert torch.equal(p.detach(), torch.zeros(2, dtype=torch.float64))
    assert stats == {
        "objective_before": 3.0,
        "cg_residual": pytest.approx(0.0, abs=1e-12),
        "accepted": 0.0,
        "backtracks": 10.0,
        "quad_kl": pytest.approx(0.5, rel=1e-12),
        "kl": 0.0,
        "objective_after": 3.0,
        "step_frac": 0.0,
        "kl_full_step": 1e9,
    }


def test_boundaries_of_acceptance():
    # KL exactly delta is accepted at once
    p, objective, constraint, _ = _problem(kl_value=0.5)
    stats = tr.natural_step([p], objective, constraint, delta=0.5, cg_steps=10, damping=0.0)
    assert stats["accepted"] == 1.0 and stats["backtracks"] == 0.0
    # an objective that does not strictly improve is never accepted
    p, objective, constraint, _ = _problem(obj_value=3.0)
    stats = tr.natural_step([p], objective, constraint, delta=0.5, cg_steps=10, damping=0.0)
    assert stats["accepted"] == 0.0


def test_zero_gradient_is_a_no_op():
    p = torch.nn.Parameter(torch.ones(2, dtype=torch.float64))
    stats = tr.natural_step(
        [p],
        objective=lambda: (0.0 * p).sum() + 3.0,
        constraint=lambda: 0.5 * (F * (p - 1) ** 2).sum(),
        delta=0.1,
        cg_steps=5,
        damping=0.1,
    )
    assert stats == {
        "objective_before": 3.0,
        "cg_residual": 0.0,
        "accepted": 0.0,
        "backtracks": 10.0,
        "quad_kl": 0.0,
        "kl": 0.0,
        "objective_after": 3.0,
        "step_frac": 0.0,
    }
    assert torch.equal(p.detach(), torch.ones(2, dtype=torch.float64))


def test_flat_grad_zeros_for_unused_parameters():
    a = torch.nn.Parameter(torch.tensor([1.0, 2.0]))
    b = torch.nn.Parameter(torch.ones(2, 2))
    g = tr.flat_grad((a**2).sum(), [a, b])
    torch.testing.assert_close(g, torch.tensor([2.0, 4.0, 0.0, 0.0, 0.0, 0.0]))


def test_cg_stops_only_below_tol():
    b = torch.tensor([1.0, 0.0], dtype=torch.float64)
    x, residual = tr.conjugate_gradient(lambda v: 2 * v, b, max_steps=5, tol=1.0)  # rr == tol
    torch.testing.assert_close(x, torch.tensor([0.5, 0.0], dtype=torch.float64))
    assert residual == 0.0


def test_surrogate_exact():
    logp = torch.tensor([0.0, math.log(2.0)])
    old = torch.tensor([math.log(2.0), 0.0])
    adv = torch.tensor([4.0, 3.0])
    # ratios [0.5, 2]: mean([2, 6]) = 4
    assert float(tr.surrogate(logp, old, adv)) == pytest.approx(4.0, rel=1e-6)


class _Policy(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.tensor(0.3))

    def log_prob_entropy(self, obs, actions):
        return self.w * obs * actions, torch.full_like(obs, 7.0)

    def dist_params(self, obs):
        return torch.stack([self.w * obs, -self.w * obs], -1).log_softmax(-1)


def test_policy_step_hands_its_flags_and_closures_to_natural_step(monkeypatch):
    got = {}
    monkeypatch.setattr(tr, "natural_step", lambda params, **kw: got.update(kw) or {"ok": 1.0})
    policy, obs = _Policy(), torch.tensor([1.0, 2.0])
    actions, old_logp, adv = torch.tensor([1.0, -1.0]), torch.tensor([0.1, 0.2]), torch.ones(2)
    old_params = policy.dist_params(obs).detach() + torch.tensor([0.0, -0.1])
    args = SimpleNamespace(
        max_kl=0.02,
        cg_max_steps=7,
        cg_damping=0.3,
        line_search_shrinking_factor=0.5,
        line_search_max_iter=3,
    )
    assert tr.policy_step(policy, obs, actions, old_logp, old_params, adv, args) == {"ok": 1.0}
    assert (got["delta"], got["cg_steps"], got["damping"]) == (0.02, 7, 0.3)
    assert (got["shrink"], got["max_backtracks"]) == (0.5, 3)
    logp = 0.3 * obs * actions
    torch.testing.assert_close(got["objective"](), tr.surrogate(logp, old_logp, adv))
    torch.testing.assert_close(got["constraint"](), tr.mean_kl(old_params, policy, obs))
