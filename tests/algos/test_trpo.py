"""TRPO (Schulman et al. 2015, "Trust Region Policy Optimization"; reference sb3-contrib
sb3_contrib/trpo/trpo.py): Fisher-vector products, conjugate gradient, step scaling, line search.
"""

import pytest
import torch
from torch.func import functional_call

from algos.trpo import Args, fit_critic
from controlrl import diagnostics
from controlrl.nets import CategoricalPolicy, GaussianPolicy, ValueNet
from controlrl.trust_region import (
    conjugate_gradient,
    get_flat,
    kl_hessian_vector_product,
    mean_kl,
    natural_step,
    surrogate,
)


@pytest.fixture(autouse=True)
def float64():
    """Exactness checks in float64, restored after each test (a module-level default would leak
    into every test collected after this file)."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(previous)


def setup(kind="gaussian", seed=0, n=32):
    torch.manual_seed(seed)
    policy = GaussianPolicy(3, 2, (5,)) if kind == "gaussian" else CategoricalPolicy(3, 4, (5,))
    with torch.no_grad():
        for p in policy.parameters():  # away from the near-zero output init: a generic point
            p.add_(0.3 * torch.randn_like(p))
    obs = torch.randn(n, 3)
    with torch.no_grad():
        actions = policy.sample(obs)
    old_logp = policy.log_prob_entropy(obs, actions)[0].detach()
    return policy, obs, actions, old_logp


def unflatten(policy, flat):
    out, offset = {}, 0
    for name, p in policy.named_parameters():
        out[name] = flat[offset : offset + p.numel()].view_as(p)
        offset += p.numel()
    return out


@pytest.mark.parametrize("kind", ["gaussian", "categorical"])
def test_fisher_vector_product_equals_explicit_fisher_and_kl_hessian(kind):
    policy, obs, _, _ = setup(kind)
    params = list(policy.parameters())
    old = diagnostics.dist_params(policy, obs)
    fvp = kl_hessian_vector_product(mean_kl(old, policy, obs), params, damping=0.0)
    theta = get_flat(params)

    def kl_at(flat):
        new = functional_call(policy, unflatten(policy, flat), (obs,), {}, strict=False)
        return diagnostics.per_state_kl(old, new).mean()

    # dist_params through functional_call
    policy.forward = policy.dist_params
    hessian = torch.autograd.functional.hessian(kl_at, theta)

    # explicit Fisher: mean over states of J^T M J, M the Fisher of the output distribution
    def outputs(flat):
        return functional_call(policy, unflatten(policy, flat), (obs,), {}, strict=False)

    if kind == "gaussian":
        j_mean, j_log_std = torch.autograd.functional.jacobian(outputs, theta)  # [B, a, P] each
        inv_var = torch.exp(-2 * old[1])  # [B, a]
        fisher = torch.einsum("bap,ba,baq->pq", j_mean, inv_var, j_mean) + 2 * torch.einsum(
            "bap,baq->pq", j_log_std, j_log_std
        )
    else:
        j = torch.autograd.functional.jacobian(outputs, theta)  # d log p / d theta [B, K, P]
        p = old.exp()
        # Fisher of a softmax in terms of log-probabilities: sum_k p_k g_k g_k^T
        fisher = torch.einsum("bk,bkp,bkq->pq", p, j, j)
    fisher /= obs.shape[0]
    for seed in range(3):
        v = torch.randn(theta.shape, generator=torch.Generator().manual_seed(seed))
        torch.testing.assert_close(fvp(v), hessian @ v, rtol=1e-6, atol=1e-9)
        torch.testing.assert_close(fvp(v), fisher @ v, rtol=1e-6, atol=1e-9)


def test_conjugate_gradient_solves_spd_system():
    g = torch.Generator().manual_seed(0)
    m = torch.randn(30, 30, generator=g)
    a = m @ m.T + 30 * torch.eye(30)
    b = torch.randn(30, generator=g)
    x, residual = conjugate_gradient(lambda v: a @ v, b, max_steps=30)  # default tol (SB3's)
    assert residual < 1e-6
    assert torch.linalg.norm(a @ x - b) / torch.linalg.norm(b) < 1e-6
    x, residual = conjugate_gradient(lambda v: a @ v, b, max_steps=60, tol=1e-28)
    assert residual < 1e-12
    torch.testing.assert_close(x, torch.linalg.solve(a, b), rtol=1e-9, atol=1e-12)


def step(policy, obs, actions, old_logp, adv, delta, damping=0.1, backtracks=10):
    old = diagnostics.dist_params(policy, obs)
    stats = natural_step(
        list(policy.parameters()),
        objective=lambda: surrogate(policy.log_prob_entropy(obs, actions)[0], old_logp, adv),
        constraint=lambda: mean_kl(old, policy, obs),
        delta=delta,
        cg_steps=25,
        damping=damping,
        max_backtracks=backtracks,
    )
    return stats, old


@pytest.mark.parametrize("kind", ["gaussian", "categorical"])
def test_quadratic_model_hits_delta_and_accepted_step_respects_it(kind):
    policy, obs, actions, old_logp = setup(kind, seed=1)
    adv = torch.randn(obs.shape[0])
    before = surrogate(policy.log_prob_entropy(obs, actions)[0], old_logp, adv).item()
    stats, old = step(policy, obs, actions, old_logp, adv, delta=0.01)
    assert stats["quad_kl"] == pytest.approx(0.01, rel=1e-8)  # 0.5 s^T F s == delta
    assert stats["accepted"] == 1.0
    with torch.no_grad():
        measured_kl = mean_kl(old, policy, obs).item()
        after = surrogate(policy.log_prob_entropy(obs, actions)[0], old_logp, adv).item()
    assert measured_kl <= 0.01 and measured_kl == pytest.approx(stats["kl"])
    assert after > before


def test_rejected_step_restores_parameters_bit_for_bit():
    policy, obs, actions, old_logp = setup(seed=0, n=64)
    adv = torch.randn(obs.shape[0])
    before = [p.detach().clone() for p in policy.parameters()]
    # a radius far outside the quadratic regime and a single trial: the step overshoots
    stats, _ = step(policy, obs, actions, old_logp, adv, delta=1.0, damping=0.0, backtracks=1)
    assert stats["accepted"] == 0.0
    for b, p in zip(before, policy.parameters()):
        assert torch.equal(b, p)


def test_measured_kl_approaches_delta_as_delta_shrinks():
    ratios = []
    for delta in (1e-2, 1e-4, 1e-6, 1e-8):
        policy, obs, actions, old_logp = setup(seed=2)
        adv = torch.randn(obs.shape[0])
        stats, _ = step(policy, obs, actions, old_logp, adv, delta=delta, damping=0.0)
        ratios.append(stats["kl_full_step"] / delta)
    errors = [abs(r - 1) for r in ratios]
    assert errors[-1] < 0.01
    assert errors == sorted(errors, reverse=True)
    # the cubic term of KL makes the error shrink like sqrt(delta): x100 over four decades
    assert 30 < errors[1] / errors[3] < 300


def test_critic_fit_leaves_the_policy_untouched():
    policy, obs, actions, _ = setup(seed=3)
    value_net = ValueNet(3, (8,))
    before = [p.detach().clone() for p in policy.parameters()]
    opt = torch.optim.Adam(value_net.parameters(), lr=1e-2)
    returns = torch.randn(obs.shape[0])
    args = Args(n_critic_updates=30, critic_batch_size=8)
    first = (value_net(obs) - returns).pow(2).mean().item()
    fit_critic(value_net, opt, obs, returns, args)
    assert (value_net(obs) - returns).pow(2).mean().item() < first
    assert all(torch.equal(b, p) for b, p in zip(before, policy.parameters()))
