"""controlrl/nft.py: NFT = GRPO at theta = theta_old (seeds catalogue T-G8), exactly. On a 3-armed
bandit, for EVERY ordered group of G = 3 (arm, reward) outcomes, the gradient of NFT's loss with
the GRPO-equivalent prompt weight equals the gradient of GRPO's clipped loss (the group
objective of controlrl/objective.py, beta 0, 1/G weights) at theta = theta_old, for GRPO's std
normalisation and for Dr. GRPO's mean-only one; so the expectations agree too. Away from
theta_old the two losses differ (an on-policy identity, not the same objective), and the floor
keeps the loss finite."""

import itertools

import pytest
import torch

from controlrl.group import group_advantages
from controlrl.nft import grpo_equivalent_weight, nft_loss
from controlrl.objective import Objective, Tokens, group_objective

Z_OLD = torch.tensor([0.4, -0.3, 0.9], dtype=torch.float64)


def _grads(actions, rewards, scale, z):
    """(NFT's gradient, GRPO's gradient) w.r.t. the logits z at one group [1, G]."""
    G = actions.shape[-1]
    old = torch.log_softmax(Z_OLD, -1)[actions]
    out = []
    for which in ("nft", "grpo"):
        zz = z.clone().requires_grad_(True)
        logp = torch.log_softmax(zz, -1)[actions]
        if which == "nft":
            loss = nft_loss(logp, old, rewards, grpo_equivalent_weight(rewards, scale))
        else:
            ratio = (logp - old).exp()
            adv = group_advantages(rewards, scale)
            weight = torch.full_like(logp, 1.0 / G)
            tokens = Tokens(logp, old, ratio, adv, logp.detach(), weight)
            loss, _ = group_objective(tokens, Objective(policy_loss="clip", kl_coef=0.0))
        (g,) = torch.autograd.grad(loss, zz)
        out.append(g)
    return out


@pytest.mark.parametrize("scale", ["mean_std", "mean"])
def test_nft_gradient_equals_grpo_at_theta_old_for_every_group(scale):
    G = 3
    differs = 0
    for seq in itertools.product(range(6), repeat=G):
        actions = torch.tensor([[s // 2 for s in seq]])
        rewards = torch.tensor([[float(s % 2) for s in seq]], dtype=torch.float64)
        nft, grpo = _grads(actions, rewards, scale, Z_OLD)
        torch.testing.assert_close(nft, grpo, atol=1e-15, rtol=1e-12)
        if scale == "mean_std":
            moved = Z_OLD + torch.tensor([0.3, -0.2, 0.1])
            differs += not torch.allclose(*_grads(actions, rewards, scale, moved), atol=1e-6)
    assert differs > 100 or scale == "mean"  # off-policy the two objectives part


def test_floor_and_zero_variance_groups():
    logp = torch.log(torch.tensor([[0.9, 0.8, 0.1]], dtype=torch.float64)).requires_grad_(True)
    old = torch.log(torch.tensor([[0.1, 0.2, 0.1]], dtype=torch.float64))
    rewards = torch.tensor([[1.0, 0.0, 0.0]], dtype=torch.float64)  # r_q R = 8/3 > 1 at arm 2
    loss = nft_loss(logp, old, rewards, torch.ones(1, 1, dtype=torch.float64), floor=1e-6)
    assert torch.isfinite(loss)
    for flat in (torch.ones(1, 3, dtype=torch.float64), torch.zeros(1, 3, dtype=torch.float64)):
        w = grpo_equivalent_weight(flat)
        (g,) = torch.autograd.grad(nft_loss(logp, old, flat, w), logp)
        assert torch.equal(g, torch.zeros_like(g))
