"""The GAE paper's algorithm: the trust-region value step and the order of the two steps."""

import copy

import numpy as np
import pytest
import torch

from algos.gae import Args, gauss_newton_product, update, value_trust_region_step
from controlrl.nets import GaussianPolicy, ValueNet
from controlrl.returns import gae
from controlrl.trust_region import get_flat


def linear_problem(n=200, d=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=g, dtype=torch.float64)
    w = torch.randn(d, generator=g, dtype=torch.float64)
    targets = x @ w + 0.1 * torch.randn(n, generator=g, dtype=torch.float64)
    net = ValueNet(d, hidden=()).double()  # V = w^T x + b: a linear value function
    return net, x, targets


def test_gauss_newton_of_linear_value_function_is_x_t_x():
    net, x, targets = linear_problem()
    with torch.no_grad():
        v_old = net(x)
    sigma2 = 2.5
    hvp = gauss_newton_product(net, x, v_old, sigma2)
    features = torch.cat([x, torch.ones(x.shape[0], 1, dtype=x.dtype)], 1)  # [w, b] order
    exact = features.T @ features / (x.shape[0] * sigma2)
    for seed in range(3):
        v = torch.randn(5, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
        torch.testing.assert_close(hvp(v), exact @ v, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("eps_v", [1e-3, 1e-2])
def test_value_step_meets_its_constraint(eps_v):
    net, x, targets = linear_problem()
    stats = value_trust_region_step(net, x, targets, eps_v, cg_steps=10)
    assert stats["vf_alpha"] < 1  # the Gauss-Newton step left the region and was rescaled
    assert stats["vf_quad"] == pytest.approx(eps_v, rel=1e-9)
    # for a linear V the constraint is exactly quadratic: the measured value equals the model
    assert stats["vf_constraint"] == pytest.approx(eps_v, rel=1e-6)
    assert stats["vf_loss_after"] < stats["vf_loss_before"]
    # a nonlinear value net: the measured constraint stays close to the model's eps_V
    torch.manual_seed(0)
    mlp = ValueNet(4, (16,)).double()
    stats = value_trust_region_step(mlp, x, targets, eps_v, cg_steps=20)
    assert stats["vf_constraint"] == pytest.approx(eps_v, rel=0.2)


def test_large_region_gives_least_squares():
    net, x, targets = linear_problem()
    value_trust_region_step(net, x, targets, eps_v=1e6, cg_steps=10)
    features = torch.cat([x, torch.ones(x.shape[0], 1, dtype=x.dtype)], 1)
    lstsq = torch.linalg.lstsq(features, targets.unsqueeze(1)).solution.squeeze(1)
    torch.testing.assert_close(get_flat(list(net.parameters())), lstsq, rtol=1e-6, atol=1e-8)


def test_policy_step_uses_advantages_from_the_value_function_before_its_update():
    torch.manual_seed(0)
    T, obs_dim = 64, 3
    policy, value_net = GaussianPolicy(obs_dim, 1), ValueNet(obs_dim)
    obs = torch.randn(T, obs_dim)
    with torch.no_grad():
        actions = policy.sample(obs)
        logp = policy.log_prob_entropy(obs, actions)[0]
    rewards = np.random.default_rng(0).normal(size=(T, 1))
    ended = np.zeros((T, 1), bool)

    def advantages(net):
        with torch.no_grad():
            v = net(obs).numpy()[:, None].astype(np.float64)
        nv = np.vstack([v[1:], v[-1:]])
        return torch.as_tensor(gae(rewards, v, nv, ended, ended, 0.99, 0.95), dtype=torch.float32)

    snapshot = copy.deepcopy(value_net)
    adv = advantages(value_net)
    batch = {
        "obs": obs,
        "actions": actions,
        "logprobs": logp,
        "advantages": adv.reshape(-1),
        "values": value_net(obs).detach(),
        "returns": adv.reshape(-1),
    }
    before = batch["advantages"].clone()
    stats = update(policy, value_net, batch, targets=torch.randn(T), args=Args())
    assert torch.equal(batch["advantages"], before)  # not recomputed inside the update
    torch.testing.assert_close(before, advantages(snapshot).reshape(-1))
    assert stats["vf_constraint"] > 0  # the value function did move ...
    assert not torch.allclose(before, advantages(value_net).reshape(-1))  # ... after its use
