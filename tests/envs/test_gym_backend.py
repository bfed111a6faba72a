"""Gymnasium backend: spaces, seeding, same-step autoreset with final observations, id errors."""

import gymnasium as gym
import numpy as np
import pytest

import envs


def test_make_mujoco_and_classic_control():
    vec = envs.make("HalfCheetah-v5", 2, seed=0)
    assert isinstance(vec, gym.vector.VectorEnv) and vec.num_envs == 2
    assert vec.single_observation_space.shape == (17,) and vec.single_action_space.shape == (6,)
    vec.close()
    vec = envs.make("CartPole-v1", 3, seed=0)
    assert vec.single_action_space.n == 2
    vec.close()


def test_same_seed_same_first_100_steps():
    def run(seed):
        vec = envs.make("Hopper-v5", 2, seed=seed)
        obs, _ = vec.reset(seed=seed)
        out = [obs]
        for _ in range(100):
            obs, reward, *_ = vec.step(vec.action_space.sample())
            out.append(obs)
        vec.close()
        return np.stack(out)

    a, b = run(3), run(3)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, run(4))


def test_truncation_is_flagged_with_final_observation():
    vec = envs.make("Pendulum-v1", 1, seed=0)  # 200-step time limit, never terminates
    vec.reset(seed=0)
    for _ in range(200):
        obs, _, terminated, truncated, info = vec.step(np.zeros((1, 1), np.float32))
    assert truncated[0] and not terminated[0]
    assert info["_final_obs"][0]
    assert not np.array_equal(info["final_obs"][0], obs[0])  # obs is already the reset one
    vec.close()


def test_unknown_ids_name_the_backend_and_closest_ids():
    with pytest.raises(envs.UnknownEnvError, match="closest: Hopper-v5"):
        envs.check_env_id("Hoper-v5")
    with pytest.raises(envs.UnknownEnvError, match="backend 'gym'"):
        envs.check_env_id("NoSuchThing-v0")
    with pytest.raises(envs.UnknownEnvError, match="unknown env backend 'foo'"):
        envs.check_env_id("foo:bar")
    with pytest.raises(envs.UnknownEnvError, match="backend 'bandit'"):
        envs.check_env_id("bandit:two-arm")


# Hopper and CartPole end by termination here, Pendulum by its 200-step time limit
@pytest.mark.parametrize(
    "env_id, steps", [("Hopper-v5", 400), ("CartPole-v1", 400), ("Pendulum-v1", 450)]
)
def test_lean_sync_env_matches_gymnasium_same_step_autoreset(env_id, steps):
    """Observations, rewards, flags and final observations equal Gymnasium's SyncVectorEnv."""
    ours = envs.make(env_id, 3, seed=5)
    assert isinstance(ours, envs.gym_mujoco.LeanSyncVectorEnv)
    ref = gym.make_vec(
        env_id,
        3,
        vectorization_mode="sync",
        vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP},
    )
    ref.action_space.seed(5)
    obs, _ = ours.reset(seed=7)
    ref_obs, _ = ref.reset(seed=7)
    assert obs.dtype == ref_obs.dtype == ours.single_observation_space.dtype
    np.testing.assert_array_equal(obs, ref_obs)
    ended_steps = 0
    for _ in range(steps):
        actions = ours.action_space.sample()
        np.testing.assert_array_equal(actions, ref.action_space.sample())  # same action seeding
        out, ref_out = ours.step(actions), ref.step(actions)
        for x, y in zip(out[:4], ref_out[:4]):
            assert x.dtype == y.dtype
            np.testing.assert_array_equal(x, y)
        ended = out[2] | out[3]
        info = out[4]
        if ended.any():
            ended_steps += 1
            np.testing.assert_array_equal(info["_final_obs"], ended)
            np.testing.assert_array_equal(info["_final_obs"], ref_out[4]["_final_obs"])
            for i in np.flatnonzero(ended):
                np.testing.assert_array_equal(info["final_obs"][i], ref_out[4]["final_obs"][i])
                assert not np.array_equal(info["final_obs"][i], out[0][i])  # obs is the reset one
        else:
            assert "final_obs" not in info
    assert ended_steps >= 2  # autoreset was exercised
    ours.close()
    ref.close()


def test_copy_false_returns_the_env_own_observation_array():
    vec = envs.make("CartPole-v1", 2, seed=0, copy=False)
    vec.reset(seed=0)
    first = vec.step(np.zeros(2, np.int64))[0]
    second = vec.step(np.zeros(2, np.int64))[0]
    assert first is second  # overwritten in place
    vec = envs.make("CartPole-v1", 2, seed=0)
    vec.reset(seed=0)
    first = vec.step(np.zeros(2, np.int64))[0]
    assert first is not vec.step(np.zeros(2, np.int64))[0]
