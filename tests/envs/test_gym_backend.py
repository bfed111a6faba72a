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
    with pytest.raises(envs.UnknownEnvError, match="not installed"):
        envs.check_env_id("bandit:two-arm")
