"""controlrl/nft.py: NFT = GRPO at theta = theta_old (seeds catalogue T-G8), exactly. On a 3-armed
bandit, for EVERY ordered group of G = 3 (arm, reward) outcomes, the gradient of NFT's loss with
the GRPO-equivalent prompt weight equals the gradient of GRPO's clipped loss (the group
objective of controlrl/objective.py, beta 0, 1/G weights) at theta = theta_old, for GRPO's std
normalisation and for Dr. GRPO's mean-only one; so the expectations agree too. Away from
theta_old the two losses differ (an on-policy identity, not the same objective); a failure whose
probability rose takes the authors' clamped log (NVlabs/NFT dp_actor.py, clamp_negative 1.0),
finite with a finite gradient for every ratio."""

import itertools

import numpy as np
import pytest
import torch

from controlrl.group import group_advantages
from controlrl.nft import grpo_equivalent_weight, nft_loss
from controlrl.objective import POLICY_LOSSES, Objective, Tokens, group_objective

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


def test_clamp_and_zero_variance_groups():
    logp = torch.log(torch.tensor([[0.9, 0.8, 0.1]], dtype=torch.float64)).requires_grad_(True)
    old = torch.log(torch.tensor([[0.1, 0.2, 0.1]], dtype=torch.float64))
    rewards = torch.tensor([[1.0, 0.0, 0.0]], dtype=torch.float64)  # r_q R = 4/3 > 1 at arm 1
    loss = nft_loss(logp, old, rewards, torch.ones(1, 1, dtype=torch.float64))
    (g,) = torch.autograd.grad(loss, logp)
    assert torch.isfinite(loss) and bool(torch.isfinite(g).all()) and float(g[0, 1]) > 0
    for flat in (torch.ones(1, 3, dtype=torch.float64), torch.zeros(1, 3, dtype=torch.float64)):
        w = grpo_equivalent_weight(flat)
        (g,) = torch.autograd.grad(nft_loss(logp, old, flat, w), logp)
        assert torch.equal(g, torch.zeros_like(g))


def authors_token_loss(log_ratio, correct, r_q):
    """The per-token loss of the NFT authors' actor (NVlabs/NFT dp_actor.py, ratio_type token,
    normalize 1, clamp_negative 1.0, clamp_positive 0.0), transliterated."""

    def clamp_preserve_grad(x, min_val):
        return x + (torch.clamp(x, min=min_val) - x).detach()

    ratio = torch.exp(log_ratio.clamp(max=10.0))
    r_q = r_q.clamp(0.02, 0.98)
    proxy = (1.0 - r_q * ratio) / (1.0 - r_q * 1.0)
    negative_loss = -torch.log(clamp_preserve_grad(proxy, 1.0))
    positive_loss = -torch.log(clamp_preserve_grad(ratio, 0.0))
    return (negative_loss * (1.0 - correct) + correct * positive_loss) * (1.0 - r_q)


def nft_rows(log_ratio, rewards, scale="mean"):
    """(per-row losses, their gradients in log R) of --policy-loss nft on one group's rows."""
    lr = log_ratio.clone().requires_grad_(True)
    zero = torch.zeros_like(lr)
    t = Tokens(lr, zero, lr.exp(), zero, zero, torch.ones_like(lr), score=rewards)
    t.group_scores = rewards.expand(rewards.shape[-1], -1)
    loss = POLICY_LOSSES["nft"](t, Objective(policy_loss="nft", nft_scale=scale))
    (g,) = torch.autograd.grad(loss.sum(), lr)
    return loss.detach(), g


def test_a_failure_whose_probability_rose_has_the_authors_clamped_loss():
    """Off-policy, R > 1 on a failure: the authors clamp the implicit-negative ratio at 1 from
    below and pass its gradient through; at group success 1/2 (Dr. GRPO's weight 1 - r_q) the
    slope in log R is r_q R: 0.995 at R = 1.99 (the exact log: 99.5) and 1.25 at R = 2.5 (where
    a floor on the ratio gives 0). Every (R, group) of the grid matches the authors' loss."""
    rewards = torch.tensor([1.0, 0.0], dtype=torch.float64)  # r_q = 1/2
    for R, slope in ((1.99, 0.995), (2.5, 1.25)):
        lr = torch.full((2,), float(np.log(R)), dtype=torch.float64)
        _, g = nft_rows(lr, rewards)
        assert float(g[1]) == pytest.approx(slope, rel=1e-12)
    grid = torch.linspace(-1.5, 1.5, 31, dtype=torch.float64)
    for group in ([1.0, 0.0, 0.0, 0.0], [1.0, 0.0], [1.0, 1.0, 1.0, 0.0]):
        rewards = torch.tensor(group, dtype=torch.float64)
        for lr in grid:
            log_ratio = lr + torch.linspace(0.0, 0.3, len(group), dtype=torch.float64)
            loss, g = nft_rows(log_ratio, rewards)
            ref_lr = log_ratio.clone().requires_grad_(True)
            ref = authors_token_loss(ref_lr, rewards, rewards.mean())
            (ref_g,) = torch.autograd.grad(ref.sum(), ref_lr)
            torch.testing.assert_close(loss, ref.detach(), rtol=1e-12, atol=1e-15)
            torch.testing.assert_close(g, ref_g, rtol=1e-12, atol=1e-15)
