"""envs.offline reading and writing: HDF5 and Minari round trips, timeouts kept apart from
terminals, next observations rebuilt across episode boundaries as d4rl.qlearning_dataset does,
the generated-id lookup in $CONTROLRL_DATA, D4RL's reference scores and normalised scores."""

import numpy as np
import pytest

h5py = pytest.importorskip("h5py")

from envs.offline import (  # noqa: E402
    D4RL_REF_SCORES,
    Dataset,
    DatasetError,
    load,
    read_hdf5,
    write_hdf5,
    write_minari,
)
from envs.offline.d4rl import successors, umask_mode  # noqa: E402
from envs.offline.store import dataset_name  # noqa: E402

ARRAYS = ("observations", "actions", "rewards", "next_observations", "terminals", "timeouts")


def episodes_dataset(env_id="Hopper-v5", seed=0) -> Dataset:
    """Four episodes: ends by a terminal (row 6), a timeout (row 13), a terminal (row 16) and a
    cut with neither flag (row 21, the last); s'[i] = s[i + 1] inside each episode."""
    rng = np.random.default_rng(seed)
    bounds = [(0, 7), (7, 14), (14, 17), (17, 22)]
    obs, nxt = [], []
    for start, end in bounds:
        ep = rng.normal(size=(end - start + 1, 11)).astype(np.float32)
        obs.append(ep[:-1])
        nxt.append(ep[1:])
    m = bounds[-1][1]
    terminals = np.zeros(m, bool)
    timeouts = np.zeros(m, bool)
    terminals[[6, 16]] = True
    timeouts[13] = True
    return Dataset(
        observations=np.concatenate(obs),
        actions=rng.uniform(-1, 1, (m, 3)).astype(np.float32),
        rewards=rng.normal(size=m).astype(np.float32),
        next_observations=np.concatenate(nxt),
        terminals=terminals,
        timeouts=timeouts,
        env_id=env_id,
        ref_min_score=-5.0,
        ref_max_score=45.0,
        metadata={"kind": "test", "nested": {"a": [1, 2]}},
    )


def assert_same_arrays(a: Dataset, b: Dataset) -> None:
    for key in ARRAYS:
        x, y = getattr(a, key), getattr(b, key)
        assert x.dtype == y.dtype and x.shape == y.shape, key
        np.testing.assert_array_equal(x, y, err_msg=key)


def test_hdf5_round_trip_identical(tmp_path):
    data = episodes_dataset()
    path = write_hdf5(data, tmp_path / "d.hdf5")
    back = load(path)
    assert_same_arrays(data, back)
    assert (back.env_id, back.ref_min_score, back.ref_max_score) == ("Hopper-v5", -5.0, 45.0)
    assert back.metadata == data.metadata
    assert not list(tmp_path.glob("*.tmp"))  # the atomic write left no temp file
    assert path.stat().st_mode & 0o777 == umask_mode(0o666)  # not mkstemp's private 0600


def test_minari_round_trip_identical_and_readable_by_minari(tmp_path):
    minari = pytest.importorskip("minari")
    data = episodes_dataset()
    path = write_minari(data, tmp_path / "ds", "controlrl/test-v0")
    assert path.stat().st_mode & 0o777 == umask_mode(0o777)  # not mkdtemp's private 0700
    back = load(path)
    assert_same_arrays(data, back)
    assert (back.env_id, back.ref_min_score, back.ref_max_score) == ("Hopper-v5", -5.0, 45.0)
    # minari itself sees four episodes, each with T + 1 observations
    ds = minari.MinariDataset(path / "data")
    assert ds.total_episodes == 4 and ds.total_steps == len(data)
    assert [len(ep.observations) for ep in ds.iterate_episodes()] == [8, 8, 4, 6]


def test_minari_writer_refuses_what_it_cannot_store(tmp_path):
    pytest.importorskip("minari")
    data = episodes_dataset()
    data.next_observations[2] += 1.0  # s'[2] != s[3] inside the first episode
    with pytest.raises(ValueError, match="rows 0..6"):
        write_minari(data, tmp_path / "ds")


def test_timeouts_are_not_terminals(tmp_path):
    data = episodes_dataset()
    back = load(write_hdf5(data, tmp_path / "d.hdf5"))
    assert back.timeouts[13] and not back.terminals[13]
    assert back.terminals[6] and not back.timeouts[6]
    assert not (back.terminals & back.timeouts).any()


def write_raw(path, **arrays):
    with h5py.File(path, "w") as f:
        for key, value in arrays.items():
            f.create_dataset(key, data=value)
    return path


def test_next_observations_rebuilt_across_episode_boundaries(tmp_path):
    """A D4RL file without next_observations: inside an episode s' is the next row; the
    timed-out row (no successor in the file) and the last row that ends no episode are dropped;
    a terminal row is kept (own observation as s', never bootstrapped)."""
    data = episodes_dataset()
    path = write_raw(
        tmp_path / "hopper-medium-v2.hdf5",
        **{k: getattr(data, k) for k in ARRAYS if k != "next_observations"},
    )
    back = load(path)
    kept = [i for i in range(22) if i not in (13, 21)]
    np.testing.assert_array_equal(back.observations, data.observations[kept])
    np.testing.assert_array_equal(back.rewards, data.rewards[kept])
    inside = [i for i in kept if i not in (6, 16)]  # rows whose successor is in the file
    rows = [kept.index(i) for i in inside]
    np.testing.assert_array_equal(
        back.next_observations[rows], data.observations[[i + 1 for i in inside]]
    )
    for i in (6, 16):
        np.testing.assert_array_equal(back.next_observations[kept.index(i)], data.observations[i])
    assert back.terminals.sum() == 2 and not back.timeouts.any()
    assert back.metadata["dropped_rows"] == 2
    # the row before the dropped timeout keeps the dropped row's observation as its s'
    np.testing.assert_array_equal(back.next_observations[kept.index(12)], data.observations[13])


def test_successors_matches_a_plain_loop():
    rng = np.random.default_rng(3)
    m = 200
    obs = rng.normal(size=(m, 4)).astype(np.float32)
    ends = rng.random(m) < 0.1
    terminals = ends & (rng.random(m) < 0.5)
    timeouts = ends & ~terminals
    nxt, keep = successors(obs, terminals, timeouts)
    for i in range(m):  # d4rl.qlearning_dataset's loop, with terminal rows' s' = s
        has_successor = i + 1 < m
        assert keep[i] == (terminals[i] or (not timeouts[i] and has_successor)), i
        if keep[i]:
            want = obs[i] if terminals[i] else obs[i + 1]
            np.testing.assert_array_equal(nxt[i], want)


def test_d4rl_reference_scores_by_file_name(tmp_path):
    data = episodes_dataset()
    raw = {k: getattr(data, k) for k in ARRAYS}
    for stem, env, gym_id in [
        ("hopper_medium-v2", "hopper", "Hopper-v5"),
        ("walker2d-medium-replay-v2", "walker2d", None),  # 11-dim obs: not Walker2d's 17
    ]:
        back = read_hdf5(write_raw(tmp_path / f"{stem}.hdf5", **raw))
        assert (back.ref_min_score, back.ref_max_score) == D4RL_REF_SCORES[env]
        assert back.env_id == (gym_id or "")
    # Farama-Foundation/D4RL d4rl/infos.py: REF_MIN_SCORE / REF_MAX_SCORE
    assert D4RL_REF_SCORES["hopper"] == (-20.272305, 3234.3)
    assert D4RL_REF_SCORES["halfcheetah"] == (-280.178953, 12135.0)
    assert D4RL_REF_SCORES["walker2d"] == (1.629008, 4592.3)
    assert D4RL_REF_SCORES["ant"] == (-325.6, 3879.7)
    plain = read_hdf5(write_raw(tmp_path / "mine.hdf5", **raw))
    assert plain.ref_min_score is None and plain.env_id == ""


def test_normalized_score_arithmetic():
    data = episodes_dataset()
    data.ref_min_score, data.ref_max_score = D4RL_REF_SCORES["hopper"]
    assert data.normalized_score(-20.272305) == pytest.approx(0.0)
    assert data.normalized_score(3234.3) == pytest.approx(100.0)
    # CORL's hopper-medium IQL return ~2176 is ~67.5 normalised
    assert data.normalized_score(2176.5) == pytest.approx(67.5, abs=0.05)
    got = data.normalized_score(np.array([1607.0, 3234.3]))
    np.testing.assert_allclose(got, [100 * (1607.0 + 20.272305) / 3254.572305, 100.0])
    data.ref_max_score = None
    with pytest.raises(ValueError, match="no reference scores"):
        data.normalized_score(1.0)


def test_generated_id_resolves_to_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CONTROLRL_DATA", str(tmp_path))
    data = episodes_dataset()
    write_hdf5(data, tmp_path / "hopper-medium-v5-s0.hdf5")
    assert_same_arrays(data, load("hopper-medium-v5-s0"))
    with pytest.raises(DatasetError, match="no generated dataset of that id") as info:
        load("halfcheetah-expert-v5-s2-n5000")
    assert str(info.value).endswith(
        "generate it: python -m envs.offline generate --env HalfCheetah-v5 --kind expert "
        "--seed 2 --steps 5000"
    )


def test_every_generator_setting_that_changes_a_file_is_in_its_id(tmp_path, monkeypatch):
    """Steps, PPO budget and scoring episodes (the reference returns, and through the expert
    return the medium snapshot) each get a suffix off their defaults; the id's hint gives them
    back as generator flags."""
    assert dataset_name("Hopper-v5", "medium-replay", 0) == "hopper-medium-replay-v5-s0"
    name = dataset_name("Hopper-v5", "medium-replay", 0, 5000, 20_000, score_episodes=10)
    assert name == "hopper-medium-replay-v5-s0-n5000-b20000-e10"
    assert dataset_name("Hopper-v5", "random", 0, score_episodes=10) == "hopper-random-v5-s0"
    monkeypatch.setenv("CONTROLRL_DATA", str(tmp_path))
    with pytest.raises(DatasetError, match="no generated dataset of that id") as info:
        load(name)
    assert str(info.value).endswith(
        "generate it: python -m envs.offline generate --env Hopper-v5 --kind medium-replay "
        "--seed 0 --steps 5000 --ppo-budget 20000 --score-episodes 10"
    )
