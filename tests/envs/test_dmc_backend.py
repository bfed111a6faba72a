"""dm_control backend: spaces, seeding, time limit as truncation with the final observation."""

import gymnasium as gym
import numpy as np
import pytest

import envs


def test_spaces_and_shapes():
    vec = envs.make("dmc:cheetah-run", 2, seed=0)
    assert isinstance(vec, gym.vector.VectorEnv) and vec.num_envs == 2
    assert vec.single_observation_space.shape == (17,)  # position 8 + velocity 9
    assert vec.single_action_space.shape == (6,)
    np.testing.assert_array_equal(vec.single_action_space.low, -1.0)
    obs, _ = vec.reset(seed=0)
    assert obs.shape == (2, 17) and np.isfinite(obs).all()
    vec.close()
    vec = envs.make("dmc:walker-walk", 1, seed=0)  # 'height' is a scalar: flattened too
    assert vec.single_observation_space.shape == (24,)
    assert vec.reset(seed=0)[0].shape == (1, 24)
    vec.close()


def test_same_seed_same_first_100_steps():
    def run(seed):
        vec = envs.make("dmc:cartpole-swingup", 2, seed=seed)
        obs, _ = vec.reset(seed=seed)
        out, rewards = [obs], []
        for _ in range(100):
            obs, reward, *_ = vec.step(vec.action_space.sample())
            out.append(obs)
            rewards.append(reward)
        vec.close()
        return np.stack(out), np.stack(rewards)

    a, b = run(3), run(3)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    assert not np.array_equal(a[0], run(4)[0])


def test_time_limit_is_truncation_with_final_observation():
    vec = envs.make("dmc:cartpole-balance", 1, seed=0)  # 1000 control steps, no termination
    vec.reset(seed=0)
    for t in range(1000):
        obs, _, terminated, truncated, info = vec.step(np.zeros((1, 1), np.float32))
        assert not terminated[0]
        assert truncated[0] == (t == 999)
    assert info["_final_obs"][0]
    assert not np.array_equal(info["final_obs"][0], obs[0])  # obs already starts a new episode
    vec.close()


def test_render_and_unknown_ids():
    vec = envs.make("dmc:cartpole-balance", 1, seed=0, render_mode="rgb_array")
    vec.reset(seed=0)
    frame = vec.render()[0]
    assert frame.shape == (240, 320, 3) and frame.dtype == np.uint8 and frame.any()
    vec.close()
    with pytest.raises(envs.UnknownEnvError, match="closest: cheetah-run"):
        envs.check_env_id("dmc:cheetah-runn")
    with pytest.raises(envs.UnknownEnvError, match="backend 'dmc'"):
        envs.check_env_id("dmc:nothing")
