"""controlrl.normalize, exactly: the Chan et al. update against numpy on [B, d] batches, the
float64 path of the observation normaliser with its clip on both sides, the scalar reward path
with a large eps, and checkpoint round trips that keep every bit."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from controlrl.normalize import ObsNormalizer, RewardScaler, RunningMeanStd


def _reference(batches, eps=1e-4):
    """mean/var of all rows with the prior (mean 0, var 1, count eps), as one pooled update."""
    x = np.concatenate(batches)
    n = x.shape[0]
    total = eps + n
    mean = x.mean(0) * n / total
    m2 = 1.0 * eps + x.var(0) * n + x.mean(0) ** 2 * eps * n / total
    return mean, m2 / total, total


@pytest.mark.parametrize("sizes", [[2], [5, 2, 1], [1, 1, 3]])
def test_running_stats_match_pooled_numpy(sizes):
    rng = np.random.default_rng(0)
    batches = [rng.normal(3.0, 2.0, size=(b, 3)) for b in sizes]
    rms = RunningMeanStd((3,))
    assert rms.count == 1e-4  # gymnasium/SB3's prior count
    for b in batches:
        rms.update(b)
    mean, var, count = _reference(batches)
    np.testing.assert_allclose(rms.mean, mean, rtol=1e-12)
    np.testing.assert_allclose(rms.var, var, rtol=1e-12)
    assert rms.count == pytest.approx(count, rel=1e-15)


def _obs_norm(obs_dtype, out):
    norm = ObsNormalizer((2,), clip=1.5)
    norm.rms.mean = np.array([1.0, -2.0])
    norm.rms.var = np.array([4.0, 0.25])
    norm.eps = 0.0
    norm._refresh()
    obs = np.array([[1.0, -2.0], [2.0, -1.5], [-9.0, 9.0], [9.0, -9.0]], obs_dtype)
    expected = np.array([[0.0, 0.0], [0.5, 1.0], [-1.5, 1.5], [1.5, -1.5]], np.float32)
    buf = np.full((4, 2), np.nan, np.float32) if out else None
    y = norm(obs, update=False, out=buf)
    return y, buf, expected


@pytest.mark.parametrize("obs_dtype", [np.float64, np.float32])
@pytest.mark.parametrize("out", [False, True])
def test_obs_normalizer_both_paths_clip_both_sides(obs_dtype, out):
    y, buf, expected = _obs_norm(obs_dtype, out)
    assert y.dtype == np.float32
    np.testing.assert_array_equal(y, expected)
    if out:
        assert y is buf
        np.testing.assert_array_equal(buf, expected)


def test_obs_normalizer_updates_unless_frozen():
    norm = ObsNormalizer((1,))
    assert norm.frozen is False
    norm(np.array([[2.0], [4.0]]))
    assert norm.rms.count == pytest.approx(2.0001)
    norm.frozen = True
    norm(np.array([[100.0]]))
    assert norm.rms.count == pytest.approx(2.0001)


def test_reward_scaler_one_env_equals_formula_with_large_eps():
    gamma, eps = 0.9, 0.5
    scaler = RewardScaler(1, gamma, clip=100.0, eps=eps)
    assert scaler.returns.dtype == np.float64
    rms, ret = RunningMeanStd(()), 0.0
    for r, done in [(1.0, False), (-2.0, False), (0.5, True), (3.0, False)]:
        out = scaler(np.array([r], np.float32), np.array([done]))
        ret = ret * gamma + r
        rms.update(np.array([ret]))
        assert out[0] == np.float32(r / math.sqrt(rms.var + eps))
        ret = 0.0 if done else ret


def test_reward_scaler_many_envs_clips_both_sides():
    scaler = RewardScaler(3, 0.99, clip=2.0, eps=1e-8)
    scaler.rms.var = np.float64(1e-4)  # std 0.01: rewards +-1 scale to about +-100
    scaler.rms.count = 1e12  # so that this batch barely moves the statistics
    out = scaler(np.array([1.0, -1.0, 0.0], np.float32), np.array([False, False, False]))
    np.testing.assert_array_equal(out[[0, 1]], [2.0, -2.0])
    assert out.dtype == np.float32


def test_checkpoint_round_trip_is_bit_exact():
    rms = RunningMeanStd((2,))
    for _ in range(3):
        rms.update(np.array([[0.1, 0.2], [0.3, 0.7]]))
    state = rms.state_dict()
    assert state["count"].dtype == torch.float64
    fresh = RunningMeanStd((2,))
    fresh.load_state_dict(state)
    assert fresh.count == rms.count == 6.0001  # not a float32 count
    np.testing.assert_array_equal(fresh.mean, rms.mean)
    assert fresh.mean.dtype == fresh.var.dtype == np.float64
    with pytest.raises(ValueError, match=r"^normaliser shape \(2,\) does not match \(3,\)$"):
        RunningMeanStd((3,)).load_state_dict(state)
    scaler = RewardScaler(2, 0.9)
    scaler(np.array([1.0, 2.0]), np.array([False, False]))
    again = RewardScaler(2, 0.9)
    again.load_state_dict(scaler.state_dict())
    np.testing.assert_array_equal(again.returns, scaler.returns)
    assert again.returns.dtype == np.float64
