"""Running statistics: exact against numpy, save/restore, frozen evaluation."""

import io

import numpy as np
import pytest
import torch

from controlrl.normalize import ObsNormalizer, RewardScaler, RunningMeanStd


def test_running_mean_std_matches_numpy_on_concatenated_batches():
    rng = np.random.default_rng(0)
    batches = [rng.normal(3.0, 2.0, size=(n, 4)) for n in (1, 7, 100, 3)]
    rms = RunningMeanStd((4,), epsilon=0.0)
    rms.count = 0.0
    for b in batches:
        if rms.count == 0:
            rms.mean, rms.var, rms.count = b.mean(0), b.var(0), len(b)
        else:
            rms.update(b)
    data = np.concatenate(batches)
    np.testing.assert_allclose(rms.mean, data.mean(0), rtol=1e-12)
    np.testing.assert_allclose(rms.var, data.var(0), rtol=1e-10)


def test_obs_normalizer_save_restore_and_freeze():
    rng = np.random.default_rng(1)
    norm = ObsNormalizer((3,))
    for _ in range(50):
        norm(rng.normal(5, 3, size=(2, 3)).astype(np.float32))
    buf = io.BytesIO()
    torch.save(norm.state_dict(), buf)
    buf.seek(0)
    restored = ObsNormalizer((3,))
    restored.load_state_dict(torch.load(buf, weights_only=True))
    x = rng.normal(5, 3, size=(4, 3)).astype(np.float32)
    np.testing.assert_array_equal(norm(x, update=False), restored(x, update=False))
    restored.frozen = True
    before = restored.state_dict()
    restored(x * 100)
    after = restored.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    out = norm(np.full((1, 3), 1e6, np.float32), update=False)
    assert out.max() == 10.0  # clipped


def discounted_returns_std(rewards, ended, gamma, prior_count=1e-4):
    """Std of every per-env discounted return G = gamma * G + r (G = 0 after an episode ends)
    seen so far, pooled with the prior (count 1e-4, mean 0, var 1): the whole history at once,
    not a streaming update."""
    seen, g = [], np.zeros(rewards.shape[1])
    for r, e in zip(rewards, ended):
        g = gamma * g + r
        seen.extend(g)
        g = np.where(e, 0.0, g)
    seen = np.array(seen)
    n = len(seen)
    mean = seen.sum() / (n + prior_count)  # the prior's mean is 0
    m2 = prior_count * (1.0 + mean**2) + ((seen - mean) ** 2).sum()
    return np.sqrt(m2 / (n + prior_count))


@pytest.mark.parametrize("num_envs", [1, 3])
def test_reward_scaler_divides_by_the_std_of_the_discounted_returns(num_envs):
    """Each reward is divided by the std of all discounted returns so far, this step's
    included (the reference: gymnasium's NormalizeReward / SB3's VecNormalize), then clipped."""
    rng = np.random.default_rng(2)
    gamma, T = 0.9, 120
    rewards = rng.normal(10, 1, size=(T, num_envs))
    ended = rng.random((T, num_envs)) < 0.05
    ended[T // 2, 0] = True  # at least one end
    scaler = RewardScaler(num_envs, gamma)
    for t in range(T):
        got = scaler(rewards[t], ended[t])
        std = discounted_returns_std(rewards[: t + 1], ended[: t + 1], gamma)
        expected = np.clip(rewards[t] / np.sqrt(std**2 + 1e-8), -10, 10)
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, expected, rtol=1e-6, err_msg=f"step {t}")
    # the running returns are the recursion's, zeroed where the episode ended
    g = np.zeros(num_envs)
    for r, e in zip(rewards, ended):
        g = np.where(e, 0.0, gamma * g + r)
    np.testing.assert_allclose(scaler.returns, g, rtol=1e-12)
    assert np.abs(scaler(np.full(num_envs, 1e9), np.ones(num_envs, bool))).max() == 10.0


def test_reward_scaler_round_trips_through_a_checkpoint():
    scaler = RewardScaler(num_envs=2, gamma=0.9)
    rng = np.random.default_rng(5)
    for _ in range(50):
        scaler(rng.normal(10, 1, size=2), ended=rng.random(2) < 0.05)
    buf = io.BytesIO()
    torch.save(scaler.state_dict(), buf)
    buf.seek(0)
    other = RewardScaler(num_envs=2, gamma=0.9)
    other.load_state_dict(torch.load(buf, weights_only=True))
    assert (scaler.returns != 0).all()
    for _ in range(10):  # the same numbers afterwards, bit for bit
        r, e = rng.normal(10, 1, size=2), rng.random(2) < 0.2
        assert scaler(r, e).tobytes() == other(r, e).tobytes()
    np.testing.assert_array_equal(other.returns, scaler.returns)


def _reference_update(rms, x):
    """RunningMeanStd.update as first written (general batch formula, astype for one sample)."""
    batch_count = x.shape[0]
    if batch_count == 1:
        batch_mean, batch_var = x[0].astype(np.float64), 0.0
    else:
        batch_mean = np.add.reduce(x, axis=0, dtype=np.float64) / batch_count
        centred = x - batch_mean
        batch_var = np.add.reduce(centred * centred, axis=0) / batch_count
    delta = batch_mean - rms.mean
    total = rms.count + batch_count
    rms.mean = rms.mean + delta * batch_count / total
    m2 = rms.var * rms.count + batch_var * batch_count + delta**2 * rms.count * batch_count / total
    rms.var = m2 / total
    rms.count = total


def test_fast_paths_give_the_general_formula_bit_for_bit():
    """The one-sample update, the one-env reward scaler (Python floats) and normalising into
    `out` are shortcuts: each must give the same float32/float64 bits as the general code."""
    rng = np.random.default_rng(3)
    for num_envs in (1, 3):
        norm, ref = ObsNormalizer((5,)), RunningMeanStd((5,))
        scaler, ref_r = RewardScaler(num_envs, gamma=0.99), RunningMeanStd(())
        returns = np.zeros(num_envs)
        out = np.empty((num_envs, 5), np.float32)
        for t in range(500):
            obs = (rng.normal(3, 7, size=(num_envs, 5)) * rng.choice([1e-3, 1, 1e3])).astype(
                np.float32
            )
            got = norm(obs, out=out)
            _reference_update(ref, obs)
            mean32 = ref.mean.astype(np.float32)
            inv_std32 = (1.0 / np.sqrt(ref.var + 1e-8)).astype(np.float32)
            expected = np.clip((obs - mean32) * inv_std32, -10.0, 10.0)
            assert got is out and got.tobytes() == expected.tobytes(), t
            reward = rng.normal(0, rng.choice([1e-2, 1, 1e4]), size=num_envs)
            ended = rng.random(num_envs) < 0.02
            got_r = scaler(reward, ended)
            returns = returns * 0.99 + reward
            _reference_update(ref_r, returns)
            returns[ended] = 0.0
            expected_r = np.clip(reward / np.sqrt(ref_r.var + 1e-8), -10, 10).astype(np.float32)
            assert got_r.dtype == np.float32 and got_r.tobytes() == expected_r.tobytes(), t
            stats = [norm.rms.mean, norm.rms.var, scaler.rms.mean, scaler.rms.var]
            ref_stats = [ref.mean, ref.var, ref_r.mean, ref_r.var]
            assert all(
                np.float64(a).tobytes() == np.float64(b).tobytes() for a, b in zip(stats, ref_stats)
            ), t


def test_one_sample_per_row_update_on_axis_1_is_the_general_formula_bit_for_bit():
    """A population's seeds with one env each ([S, 1], axis 1: its reward scaler on every
    step) take the one-sample shortcut: each seed's statistics as the general formula's."""
    rng = np.random.default_rng(5)
    rms, ref = RunningMeanStd((4,)), RunningMeanStd((4,))
    returns = np.zeros((4, 1))
    for t in range(300):
        returns = returns * 0.99 + rng.normal(0, rng.choice([1e-2, 1, 1e4]), size=(4, 1))
        rms.update(returns, axis=1)
        _reference_update(ref, returns.T)
        assert rms.mean.tobytes() == ref.mean.tobytes(), t
        assert rms.var.tobytes() == ref.var.tobytes() and rms.count == ref.count, t


def test_scalar_update_squares_with_pow_like_numpy_scalars():
    """x**2 of a numpy float64 scalar is C pow, which differs from x * x for ~0.1% of values:
    the Python-float update must use pow too to keep the general path's bits."""
    for x in np.random.default_rng(4).normal(0, 1e3, size=20_000):
        fast, ref = RunningMeanStd(()), RunningMeanStd(())
        fast.update_scalar(float(x))
        _reference_update(ref, np.array([x]))
        assert np.float64(fast.var).tobytes() == np.float64(ref.var).tobytes(), x


@pytest.mark.parametrize("num_envs", [1, 3])
def test_reward_scaler_writes_into_out_the_bits_it_returns(num_envs):
    # the collector has the scaled rewards written straight into its buffer row
    rng = np.random.default_rng(9)
    rewards = rng.normal(0, 30, size=(200, num_envs))
    rewards[0], rewards[50::37] = 1e3, rewards[50::37] * 1e4  # clipped at +10 and -10
    ended = rng.random((200, num_envs)) < 0.05
    returned, written = RewardScaler(num_envs, 0.99), RewardScaler(num_envs, 0.99)
    row = np.full(num_envs, np.nan, np.float32)
    for r, e in zip(rewards, ended):
        expected = returned(r, e)
        assert written(r, e, out=row) is row
        assert row.dtype == np.float32 and np.array_equal(row, expected)
    assert np.abs(row).max() <= 10.0


def test_one_env_row_path_normalises_like_the_batch_path():
    # one env takes same-shape row ops (and the clip bounds as arrays); the numbers must be
    # those of the broadcasting batch path, clipping and NaN included
    rng = np.random.default_rng(4)
    one, many = ObsNormalizer((5,)), ObsNormalizer((5,))
    obs = (rng.standard_normal((300, 1, 5)) * [1, 10, 100, 1e3, 1e4]).astype(np.float32)
    obs[0, 0, 3] = 1e6  # clipped at +10 (few samples so far)
    obs[1, 0, 4] = -1e7  # and at -10
    for x in obs:
        got = one(x)
        many.rms.update(x)
        many._refresh()
        wide = many(np.repeat(x, 2, axis=0), update=False)  # the [B, d] path, B = 2
        assert got.shape == (1, 5) and np.array_equal(got[0], wide[0])
    assert np.abs(one(obs[0], update=False)).max() == 10.0
    nan = one(np.full((1, 5), np.nan, np.float32), update=False)
    assert np.isnan(nan).all()
