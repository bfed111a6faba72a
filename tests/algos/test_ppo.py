"""PPO (Schulman et al. 2017, "Proximal Policy Optimization Algorithms"; reference vwxyzjn/cleanrl
cleanrl/ppo_continuous_action.py): the clipped objective's gradient table, and the script's
update guard."""

import pytest
import torch

from algos.ppo import Args, ppo_loss, update
from controlrl.diagnostics import NonFiniteError
from controlrl.nets import GaussianPolicy, ValueNet

EPS = 0.2


def ratio_grad(r: float, adv: float) -> float:
    """d loss / d r for one sample, through logp = log r (old logp = 0)."""
    ratio = torch.tensor([r], dtype=torch.float64, requires_grad=True)
    loss, _ = ppo_loss(
        ratio.log(),
        torch.zeros(1, dtype=torch.float64),
        torch.tensor([adv], dtype=torch.float64),
        EPS,
    )
    loss.backward()
    return ratio.grad.item()


@pytest.mark.parametrize(
    "r, adv, expected",
    [
        (1.0, 2.0, -2.0),  # inside the region: -A
        (1.1, -3.0, 3.0),
        (1.3, 2.0, 0.0),  # A > 0 beyond 1 + eps: clipped, no gradient
        (0.7, -2.0, 0.0),  # A < 0 below 1 - eps: clipped
        (0.7, 2.0, -2.0),  # A > 0 below 1 - eps: NOT clipped (min picks the unclipped term)
        (1.3, -2.0, 2.0),  # A < 0 above 1 + eps: not clipped
    ],
)
def test_gradient_table(r, adv, expected):
    assert ratio_grad(r, adv) == pytest.approx(expected, abs=1e-12)


def test_gradient_at_old_policy_is_vanilla_policy_gradient():
    torch.manual_seed(0)
    policy = GaussianPolicy(4, 2).double()
    obs, actions = torch.randn(32, 4, dtype=torch.float64), torch.randn(32, 2, dtype=torch.float64)
    adv = torch.randn(32, dtype=torch.float64)
    logp, _ = policy.log_prob_entropy(obs, actions)
    loss, _ = ppo_loss(logp, logp.detach(), adv, EPS)
    g_ppo = torch.autograd.grad(loss, list(policy.parameters()))
    logp, _ = policy.log_prob_entropy(obs, actions)
    g_pg = torch.autograd.grad(-(adv * logp).mean(), list(policy.parameters()))
    for a, b in zip(g_ppo, g_pg):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


def test_gaussian_log_prob_matches_torch_distributions():
    torch.manual_seed(1)
    policy = GaussianPolicy(3, 2)
    with torch.no_grad():
        policy.log_std.copy_(torch.tensor([0.3, -0.5]))
    obs, actions = torch.randn(10, 3), torch.randn(10, 2)
    logp, ent = policy.log_prob_entropy(obs, actions)
    dist = torch.distributions.Normal(policy.mean(obs), policy.log_std.exp())
    torch.testing.assert_close(logp, dist.log_prob(actions).sum(-1))
    torch.testing.assert_close(ent, dist.entropy().sum(-1))


def test_update_stops_on_non_finite_parameters():
    torch.manual_seed(0)
    policy, value_net = GaussianPolicy(3, 1), ValueNet(3)
    opt = torch.optim.Adam([*policy.parameters(), *value_net.parameters()], lr=1e-3)
    with torch.no_grad():
        policy.log_std.fill_(float("nan"))
    batch = {
        "obs": torch.randn(64, 3),
        "actions": torch.randn(64, 1),
        "logprobs": torch.zeros(64),
        "values": torch.zeros(64),
        "advantages": torch.randn(64),
        "returns": torch.randn(64),
    }
    args = Args(num_minibatches=4, update_epochs=1)
    with pytest.raises(NonFiniteError):
        update(policy, value_net, opt, batch, args)
