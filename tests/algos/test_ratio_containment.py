"""Many epochs on one fixed batch: SPO's ratios settle near the boundary 1 + sign(A) eps, PPO's
drift past it (the clip removes the gradient but nothing pulls a ratio back). SPO's per-sample
objective A r - |A| (r - 1)^2 / (2 eps) peaks at r* = 1 + sign(A) eps: Xie et al. 2024, "Simple
Policy Optimization" (MyRepositories-hub/Simple-Policy-Optimization mujoco/trainer.py).
"""

import pytest
import torch

from algos.ppo import ppo_loss
from algos.spo import spo_loss
from controlrl.nets import GaussianPolicy

EPS = 0.2


@pytest.fixture(autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def final_ratios(loss_fn, seed: int, n: int = 64, epochs: int = 300):
    """Adam on one fixed batch for `epochs` epochs; (ratios, advantages) over the batch after."""
    torch.manual_seed(seed)
    policy = GaussianPolicy(4, 2, (32, 32))
    obs = torch.randn(n, 4)
    with torch.no_grad():
        actions = policy.sample(obs)
        old_logp = policy.log_prob_entropy(obs, actions)[0]
    adv = torch.randn(n)
    optimizer = torch.optim.Adam(policy.parameters(), lr=1e-3)
    for _ in range(epochs):
        for idx in torch.randperm(n).split(16):
            a = (adv[idx] - adv[idx].mean()) / (adv[idx].std() + 1e-8)
            logp = policy.log_prob_entropy(obs[idx], actions[idx])[0]
            loss, _ = loss_fn(logp, old_logp[idx], a, EPS)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    with torch.no_grad():
        return (policy.log_prob_entropy(obs, actions)[0] - old_logp).exp(), adv


@pytest.mark.parametrize("seed", range(3))
def test_spo_ratios_stay_near_the_boundary_while_ppo_ratios_drift_past_it(seed):
    ratio, adv = final_ratios(spo_loss, seed)
    dev = (ratio - 1).abs()
    assert dev.max() < 2 * EPS
    assert (dev > 1.5 * EPS).float().mean() < 0.05
    toward = ((ratio - 1) * adv.sign()).median()  # moved outwards, to about the boundary
    assert 0.5 * EPS < toward < 1.25 * EPS

    ratio, adv = final_ratios(ppo_loss, seed)
    dev = (ratio - 1).abs()
    assert dev.max() > 3 * EPS
    assert (dev > 1.5 * EPS).float().mean() > 0.2
