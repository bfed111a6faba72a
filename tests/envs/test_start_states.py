"""SparseMountainCar-v0 is MountainCar-v0 with a success reward, and envs.start_states starts
episodes from given states: every reset (first and automatic) lands on a row of the array,
the dynamics go on from it, and files or envs that cannot serve are refused."""

import gymnasium as gym
import numpy as np
import pytest

import envs
from envs import start_states
from envs.sparse_mountain_car import ENV_ID
from theory import mountain_car as mc


def test_sparse_reward_is_the_success_on_mountain_car_dynamics():
    sparse, dense = gym.make(ENV_ID), gym.make("MountainCar-v0")
    rng = np.random.default_rng(0)
    ends, successes = 0, 0
    for episode in range(6):
        a_obs, _ = sparse.reset(seed=episode)
        b_obs, _ = dense.reset(seed=episode)
        np.testing.assert_array_equal(a_obs, b_obs)
        for t in range(1, 400):
            pump = 2 if a_obs[1] >= 0 else 0  # push along the velocity: swings up, arrives
            action = pump if episode % 2 else int(rng.integers(3))  # random: never arrives
            a_obs, reward, a_term, a_trunc, _ = sparse.step(action)
            b_obs, _, b_term, b_trunc, _ = dense.step(action)
            np.testing.assert_array_equal(a_obs, b_obs)
            assert (a_term, a_trunc) == (b_term, b_trunc)
            assert reward == (1.0 if a_term else 0.0)
            if a_term or a_trunc:
                assert a_term or t == 200  # the time limit is a truncation at 200 steps
                ends, successes = ends + 1, successes + int(a_term)
                break
    assert ends == 6 and 0 < successes < 6  # both kinds of ending were seen


def test_every_reset_starts_from_a_row_and_steps_on_from_it():
    states = np.array([[0.49, 0.05], [-0.5, 0.0], [0.1, -0.02]])
    rows = {tuple(np.float32(r)): r for r in states}  # observation -> the state set
    vec = envs.make(ENV_ID, 3, seed=0, start_states=states)
    obs, _ = vec.reset(seed=5)
    assert all(tuple(o) in rows for o in obs)
    x, v = (np.array([rows[tuple(o)][k] for o in obs]) for k in (0, 1))
    seen = set()
    for _ in range(1000):
        actions = np.where(v >= 0, 2, 0)  # push along the velocity: every start arrives
        obs, reward, term, trunc, _ = vec.step(actions)
        x, v, done = mc.step(x, v, actions.astype(float))  # the reference from the set state
        np.testing.assert_array_equal(term, done)
        np.testing.assert_array_equal(reward, done.astype(float))
        ongoing = ~(term | trunc)
        np.testing.assert_array_equal(obs[ongoing], np.stack([x, v], 1)[ongoing].astype(np.float32))
        for i in np.flatnonzero(~ongoing):
            assert tuple(obs[i]) in rows  # the automatic reset lands on a row too
            seen.add(tuple(obs[i]))
            x[i], v[i] = rows[tuple(obs[i])]
    assert seen == set(rows)
    vec.close()


def test_resets_are_seeded():
    states = np.stack([np.linspace(-0.6, -0.4, 50), np.zeros(50)], 1)
    first = [envs.make(ENV_ID, 4, seed=0, start_states=states).reset(seed=s)[0] for s in (3, 3)]
    np.testing.assert_array_equal(*first)
    other = envs.make(ENV_ID, 4, seed=0, start_states=states).reset(seed=4)[0]
    assert not np.array_equal(first[0], other)


def test_bad_files_and_envs_are_refused(tmp_path):
    good = np.array([[-0.5, 0.0]])
    start_states.check(ENV_ID, good)
    start_states.check("CartPole-v1", np.zeros((1, 4)))
    with pytest.raises(ValueError, match="outside"):
        start_states.check(ENV_ID, np.array([[-0.5, 0.5]]))  # |v| > 0.07
    with pytest.raises(ValueError, match="observes 2"):
        start_states.check(ENV_ID, np.zeros((1, 3)))
    with pytest.raises(ValueError, match="not its observation"):
        start_states.check("Pendulum-v1", np.zeros((1, 3)))  # obs (cos, sin, w), state (th, w)
    np.save(tmp_path / "flat.npy", np.zeros(3))
    np.save(tmp_path / "nan.npy", np.array([[np.nan, 0.0]]))
    for name, words in [("flat.npy", "expected"), ("nan.npy", "nan"), ("none.npy", "readable")]:
        with pytest.raises(ValueError, match=words):
            start_states.load(tmp_path / name)
    with pytest.raises(ValueError, match="sync"):
        envs.make(ENV_ID, 2, seed=0, vectorization="async", start_states=good)
