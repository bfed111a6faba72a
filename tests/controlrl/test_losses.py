"""Shared loss terms."""

import pytest
import torch

from controlrl.losses import clipped_value_loss as value_loss

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
