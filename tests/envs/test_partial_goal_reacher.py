"""ReacherPartialGoal-v5: Reacher-v5 step for step with the target's y left out of what the
policy sees, and nothing in its observation that moves with the target's y."""

import gymnasium as gym
import numpy as np

import envs
from envs.partial_goal_reacher import ENV_ID

HIDDEN = (5, 9)  # Reacher-v5: target y, fingertip-minus-target y


def test_is_reacher_without_the_target_y():
    part, full = gym.make(ENV_ID), gym.make("Reacher-v5")
    assert part.observation_space.shape == (8,) and part.action_space == full.action_space
    obs, _ = part.reset(seed=7)
    obs_full, _ = full.reset(seed=7)
    np.testing.assert_array_equal(obs, np.delete(obs_full, HIDDEN))
    rng = np.random.default_rng(0)
    for t in range(60):  # past the 50-step limit: the truncation and the reset match too
        a = rng.uniform(-1, 1, 2)
        o, r, term, trunc, _ = part.step(a)
        o_full, r_full, term_full, trunc_full, _ = full.step(a)
        np.testing.assert_array_equal(o, np.delete(o_full, HIDDEN))
        assert (r, term, trunc) == (r_full, term_full, trunc_full)
        if term or trunc:
            assert t == 49
            obs, _ = part.reset(seed=t)
            obs_full, _ = full.reset(seed=t)
            np.testing.assert_array_equal(obs, np.delete(obs_full, HIDDEN))


def _with_target_y(env, y: float) -> tuple[np.ndarray, float]:
    """The observation and the reward of one zero action after moving the target to y."""
    base = env.unwrapped
    qpos, qvel = base.data.qpos.copy(), base.data.qvel.copy()
    qpos[-1] = y
    base.set_state(qpos, qvel)
    obs, reward, *_ = env.step(np.zeros(2))
    return obs, reward


def test_observation_does_not_move_with_the_target_y():
    for name, hidden in ((ENV_ID, True), ("Reacher-v5", False)):
        env = gym.make(name)
        env.reset(seed=3)
        goal_x = env.unwrapped.data.qpos[-2]
        low, r_low = _with_target_y(env, -0.1)
        env.reset(seed=3)
        high, r_high = _with_target_y(env, 0.1)
        assert env.unwrapped.data.qpos[-2] == goal_x
        assert r_low != r_high  # the reward reads the full goal
        assert np.array_equal(low, high) == hidden


def test_served_by_the_vector_backend():
    vec = envs.make(ENV_ID, num_envs=2, seed=0)
    obs, _ = vec.reset(seed=0)
    assert obs.shape == (2, 8)
    envs.check_supported(ENV_ID)
    vec.close()
