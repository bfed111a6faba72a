"""OfflineBuffer: rows kept together, terminals (not timeouts) as dones, seeded reproducible
sampling that covers the data, frozen normalisation, online rows, exact state round trip."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from controlrl.buffers import OfflineBuffer
from envs.offline import Dataset

O, A = 3, 2


def dataset(m: int = 40, seed: int = 0) -> Dataset:
    """m transitions whose columns are functions of the row index i, so a sampled row can be
    checked for coming from one transition: obs = (i, 2i, 3i) + noise, action = (i, -i) / m,
    next_obs = obs + 1, reward = i, terminal every 7th row, timeout every 10th."""
    rng = np.random.default_rng(seed)
    i = np.arange(m, dtype=np.float32)
    obs = np.stack([i, 2 * i, 3 * i], 1) + rng.normal(size=(m, O)).astype(np.float32) * 0.01
    return Dataset(
        observations=obs.astype(np.float32),
        actions=(np.stack([i, -i], 1) / m).astype(np.float32),
        rewards=i.copy(),
        next_observations=(obs + 1).astype(np.float32),
        terminals=(np.arange(m) % 7 == 6),
        timeouts=(np.arange(m) % 10 == 9),
        env_id="Pendulum-v1",
    )


def test_rows_stay_whole_and_dones_are_terminals_only():
    ds = dataset()
    buf = OfflineBuffer.from_dataset(ds, seed=1)
    b = buf.sample(500)
    i = b["rewards"].round().long()  # the row index each sample came from
    assert torch.allclose(b["obs"], torch.from_numpy(ds.observations)[i])
    assert torch.equal(b["actions"], torch.from_numpy(ds.actions)[i])
    assert torch.equal(b["obs_actions"], torch.cat([b["obs"], b["actions"]], 1))
    assert torch.equal(b["next_obs"], torch.from_numpy(ds.next_observations)[i])
    assert torch.equal(b["dones"], torch.from_numpy(ds.terminals).float()[i])
    timeout_only = ds.timeouts & ~ds.terminals
    assert timeout_only.any() and buf.data[torch.from_numpy(timeout_only), -1].eq(0).all()


def test_sampling_is_reproducible_from_the_seed_and_covers_the_data():
    ds = dataset()
    a = OfflineBuffer.from_dataset(ds, seed=3)
    b = OfflineBuffer.from_dataset(ds, seed=3)
    c = OfflineBuffer.from_dataset(ds, seed=4)
    torch.manual_seed(0)  # the global stream plays no part
    ra = [a.sample(64)["rewards"] for _ in range(10)]
    torch.manual_seed(1)
    rb = [b.sample(64)["rewards"] for _ in range(10)]
    rc = [c.sample(64)["rewards"] for _ in range(10)]
    assert all(torch.equal(x, y) for x, y in zip(ra, rb))
    assert not all(torch.equal(x, y) for x, y in zip(ra, rc))
    seen = torch.cat(ra).long()
    assert set(seen.tolist()) == set(range(len(ds)))  # 640 draws of 40 rows: all come up
    counts = torch.bincount(seen, minlength=len(ds)).float()
    assert counts.std() / counts.mean() < 0.5  # roughly uniform (16 expected per row)


def test_normalisation_uses_frozen_dataset_statistics():
    ds = dataset()
    buf = OfflineBuffer.from_dataset(ds, normalize_obs=True)
    stored = buf.data[:, :O]
    assert torch.allclose(stored.mean(0), torch.zeros(O), atol=1e-5)
    # std of the stored obs is std / (std + 1e-3): just below 1
    mean, std = ds.observations.mean(0), ds.observations.std(0) + 1e-3
    assert np.allclose(stored.numpy(), (ds.observations - mean) / std, atol=1e-5)
    next_stored = buf.data[:, O + A : 2 * O + A].numpy()
    assert np.allclose(next_stored, (ds.next_observations - mean) / std, atol=1e-5)
    x = np.ones((2, O), np.float32)
    assert np.allclose(buf.normalize(x, update=False), (x - mean) / std, atol=1e-6)
    assert torch.equal(buf.obs_mean, buf.state_dict()["obs_mean"])
    plain = OfflineBuffer.from_dataset(ds)
    assert np.array_equal(plain.normalize(ds.observations), ds.observations)


def test_online_rows_are_added_scaled_and_sampled_until_full():
    ds = dataset(m=10)
    buf = OfflineBuffer.from_dataset(ds, capacity=12, reward_scale=0.5)
    assert buf.data[:10, 2 * O + A].tolist() == [0.5 * i for i in range(10)]
    obs = np.full(O, 7.0, np.float32)
    buf.add(obs, np.array([0.1, 0.2]), 100.0, obs + 1, True)
    assert buf.size == 11
    assert buf.data[10].tolist() == pytest.approx([7, 7, 7, 0.1, 0.2, 8, 8, 8, 50.0, 1.0])
    assert (buf.sample(2000)["rewards"] == 50.0).any()  # the new row is drawn
    buf.add(obs, np.zeros(A), 0.0, obs, False)
    with pytest.raises(RuntimeError, match="full"):
        buf.add(obs, np.zeros(A), 0.0, obs, False)


def test_state_dict_restores_online_rows_and_the_sample_stream():
    ds = dataset()
    a = OfflineBuffer.from_dataset(ds, capacity=50, normalize_obs=True, seed=5)
    obs = np.arange(O, dtype=np.float32)
    for k in range(4):
        a.add(obs + k, np.zeros(A), float(k), obs, k == 3)
        a.sample(16)
    state = a.state_dict()
    b = OfflineBuffer.from_dataset(ds, capacity=50, normalize_obs=True, seed=99)
    b.load_state_dict(state)
    assert b.size == a.size == 44
    assert torch.equal(a.data, b.data)
    for _ in range(5):
        assert torch.equal(a.sample(32)["obs"], b.sample(32)["obs"])
    other = dataset(seed=1)  # same shapes, other numbers
    with pytest.raises(ValueError, match="differs"):
        OfflineBuffer.from_dataset(other, capacity=50, normalize_obs=True).load_state_dict(state)
