"""Chebyshev policies: the tensor-product basis is cos(k arccos z) products of the scaled
observation, the head is linear in it, and algos/ppo.py builds and trains one."""

import math

import gymnasium as gym
import numpy as np
import pytest
import torch

from controlrl.nets import CategoricalPolicy, ChebyshevFeatures, GaussianPolicy, make_policy


def test_features_are_products_of_cos_k_arccos():
    low, high = torch.tensor([-1.2, -0.07]), torch.tensor([0.6, 0.07])
    feats = ChebyshevFeatures(low, high, degree=4)
    obs = low + (high - low) * torch.rand(50, 2, generator=torch.Generator().manual_seed(0))
    z = (2 * (obs - low) / (high - low) - 1).double()
    theta = torch.arccos(z)
    pairs = [(i, j) for i in range(5) for j in range(5)]  # feature (i, j) at index i * 5 + j
    expected = torch.stack(
        [torch.cos(i * theta[:, 0]) * torch.cos(j * theta[:, 1]) for i, j in pairs], -1
    )
    assert feats.num_features == 25
    torch.testing.assert_close(feats(obs).double(), expected, rtol=0, atol=1e-5)


def test_features_clamp_outside_the_bounds_and_count_in_three_dimensions():
    feats = ChebyshevFeatures([-1.0, 0.0, 0.0], [1.0, 2.0, 1.0], degree=2)
    assert feats.num_features == 27
    far = feats(torch.tensor([[5.0, -3.0, 0.5]]))
    edge = feats(torch.tensor([[1.0, 0.0, 0.5]]))
    torch.testing.assert_close(far, edge, rtol=0, atol=0)
    with pytest.raises(ValueError, match="finite observation bounds"):
        ChebyshevFeatures([-math.inf], [1.0], 2)


def test_make_policy_chebyshev_is_linear_in_the_basis():
    env = gym.make("MountainCar-v0")
    torch.manual_seed(0)
    policy = make_policy(env.observation_space, env.action_space, chebyshev_degree=3)
    assert isinstance(policy, CategoricalPolicy)
    assert sum(p.numel() for p in policy.parameters()) == 16 * 3 + 3
    mlp = make_policy(env.observation_space, env.action_space)
    assert sum(p.numel() for p in mlp.parameters()) == 2 * 64 + 64 + 64 * 64 + 64 + 64 * 3 + 3
    obs = torch.as_tensor(np.stack([env.observation_space.sample() for _ in range(8)]))
    features, linear = policy.logits[0], policy.logits[1]
    logits = features(obs) @ linear.weight.T + linear.bias
    torch.testing.assert_close(policy.dist_params(obs), torch.log_softmax(logits, -1))
    box = make_policy(
        gym.spaces.Box(-1.0, 1.0, (2,)), gym.spaces.Box(-1.0, 1.0, (1,)), chebyshev_degree=2
    )
    assert isinstance(box, GaussianPolicy) and box.mean[1].in_features == 9
