"""controlrl/jax_policy.py: Brax's NormalTanhDistribution (google/brax
brax/training/distribution.py) checked against a by-hand density and against brax's own class;
the Gaussian's deterministic action."""

import math

import numpy as np
import pytest

pytest.importorskip("brax")

from controlrl import jax_policy as jp  # noqa: E402


def heads(act_dim=3, n=64, seed=0):
    """Actor outputs (loc, scale) and raw actions, some far out where tanh saturates."""
    rng = np.random.default_rng(seed)
    head = np.concatenate([rng.normal(0, 1.5, (n, act_dim)), rng.normal(0, 2, (n, act_dim))], -1)
    raw = rng.normal(0, 2, (n, act_dim))
    raw[:4] = [[9.0, -9.0, 0.0]] * 4  # tanh(9) rounds to 1 in float32: the stable form matters
    return head.astype(np.float32), raw.astype(np.float32)


def test_log_prob_is_the_squashed_density_and_brax_s():
    from brax.training.distribution import NormalTanhDistribution

    head, raw = heads()
    logp = np.asarray(jp.policy_log_prob("tanh_normal", {}, head, raw))
    # by hand, in float64: Normal(loc, softplus(scale) + 0.001) at raw, minus sum log(1 - tanh^2)
    loc, scale = np.split(head.astype(np.float64), 2, -1)
    std = np.log1p(np.exp(scale)) + 0.001
    x = raw.astype(np.float64)
    normal = -0.5 * ((x - loc) / std) ** 2 - np.log(std) - 0.5 * math.log(2 * math.pi)
    log_det = np.log(4.0) - 2 * np.abs(x) - 2 * np.log1p(np.exp(-2 * np.abs(x)))  # log sech^2
    np.testing.assert_allclose(logp, (normal - log_det).sum(-1), rtol=1e-5, atol=1e-4)
    assert np.isfinite(logp).all()
    brax = np.asarray(NormalTanhDistribution(event_size=3).log_prob(head, raw))
    np.testing.assert_allclose(logp, brax, rtol=1e-5, atol=1e-4)


def test_entropy_and_kl_are_brax_s():
    from brax.training.distribution import NormalTanhDistribution

    jax = jp._jax()
    dist = NormalTanhDistribution(event_size=3)
    head, _ = heads()
    key = jax.random.PRNGKey(4)
    # the same key draws the same sample: Brax's one-sample estimate, averaged over states
    ours = float(jp.policy_entropy("tanh_normal", {}, head, key))
    assert ours == pytest.approx(float(np.mean(dist.entropy(head, key))), rel=1e-5)
    assert ours != pytest.approx(float(jp.policy_entropy("tanh_normal", {}, head, key + 1)))
    # per-state KL(old || new) of the pre-tanh Normals (brax's adds 1e-5 inside the log)
    new_head, _ = heads(seed=1)
    kl = np.asarray(jp.policy_kl("tanh_normal", {}, head, {}, new_head))
    new, old = dist.create_dist(new_head), dist.create_dist(head)
    np.testing.assert_allclose(kl, np.asarray(new.kl_divergence(old)), rtol=1e-3, atol=1e-3)
    assert np.asarray(jp.policy_kl("tanh_normal", {}, head, {}, head)) == pytest.approx(0, abs=1e-6)


def test_deterministic_action_is_tanh_of_loc():
    head, _ = heads()
    action = np.asarray(jp.deterministic_action("tanh_normal", head))
    np.testing.assert_allclose(action, np.tanh(head[:, :3]), rtol=1e-6, atol=1e-7)
    # the Gaussian's is its clipped mean, as before
    mean = head[:, :3]
    np.testing.assert_array_equal(jp.deterministic_action("gaussian", mean), np.clip(mean, -1, 1))
