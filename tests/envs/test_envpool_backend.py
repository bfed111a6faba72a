"""EnvPool backend: its next-step autoreset turned into same-step autoreset with final_obs."""

import numpy as np
import pytest

import envs

pytest.importorskip("envpool")


def test_spaces_and_same_seed_same_first_100_steps():
    def run(seed):
        vec = envs.make("envpool:HalfCheetah-v5", 3, seed=seed)
        assert vec.single_observation_space.shape == (17,)
        assert vec.single_action_space.shape == (6,)
        rng = np.random.default_rng(0)
        obs, _ = vec.reset(seed=seed)
        out = [obs]
        for _ in range(100):
            obs, *_ = vec.step(rng.uniform(-1, 1, (3, 6)))
            out.append(obs)
        vec.close()
        return np.stack(out)

    a, b = run(5), run(5)
    assert a.shape == (101, 3, 17)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, run(6))


def test_batch_spaces_are_the_batchs_as_gymnasiums_are():
    """observation_space and action_space of a VectorEnv hold the whole batch: a sample of the
    action space is one step's actions for every env."""
    vec, ref = envs.make("envpool:Hopper-v5", 2, seed=0), envs.make("Hopper-v5", 2, seed=0)
    assert vec.action_space.shape == ref.action_space.shape == (2, 3)
    assert vec.observation_space.shape == ref.observation_space.shape == (2, 11)
    vec.action_space.seed(0)
    vec.reset(seed=0)
    _, reward, *_ = vec.step(vec.action_space.sample())
    assert reward.shape == (2,)
    vec.close()
    ref.close()


def test_termination_resets_in_the_same_step():
    vec = envs.make("envpool:Hopper-v5", 4, seed=0)
    vec.reset(seed=0)
    rng = np.random.default_rng(0)
    ended_once = np.zeros(4, bool)
    for _ in range(300):  # random actions make the hopper fall within tens of steps
        obs, reward, terminated, truncated, info = vec.step(rng.uniform(-1, 1, (4, 3)))
        ended = terminated | truncated
        if ended.any():
            n = int(np.flatnonzero(ended)[0])
            final = info["final_obs"][n]
            # the returned obs starts a new episode (height ~1.25 m, velocities ~0: reset noise
            # is 5e-3); the final one is the moving, falling hopper
            assert info["_final_obs"][n]
            assert abs(obs[n, 0] - 1.25) < 0.01 and np.abs(obs[n, 5:]).max() < 0.02
            assert np.abs(final[5:]).max() > 0.1
            ended_once |= ended
            # the next step continues the new episode instead of returning a reset obs
            nxt, r, *_ = vec.step(np.zeros((4, 3)))
            assert r[n] != 0.0 and not np.array_equal(nxt[n], obs[n])
        if ended_once.all():
            break
    assert ended_once.all()
    vec.close()


def test_unknown_id_names_closest():
    with pytest.raises(envs.UnknownEnvError, match="closest: HalfCheetah-v5"):
        envs.check_env_id("envpool:HalfCheeta-v5")


def test_time_limit_is_truncation_with_final_observation():
    from envs.envpool import EnvPoolVectorEnv

    vec = EnvPoolVectorEnv("HalfCheetah-v5", 2, max_episode_steps=5)  # never terminates
    first, _ = vec.reset(seed=0)
    for t in range(5):
        obs, _, terminated, truncated, info = vec.step(np.ones((2, 6)))
        assert not terminated.any() and truncated.all() == (t == 4)
    assert info["_final_obs"].all()
    # the final obs is the moving cheetah; the returned one a fresh start (velocities ~ 0.1 noise)
    assert np.abs(info["final_obs"][:, 8:]).max() > 1.0 and np.abs(obs[:, 8:]).max() < 0.5
    obs2, *_ = vec.step(np.zeros((2, 6)))  # and the next step continues that new episode
    assert not np.array_equal(obs2, obs)
    vec.close()


@pytest.mark.parametrize("name", ["Hopper-v5", "HalfCheetah-v5", "Walker2d-v5"])
def test_envpool_v5_ids_are_gymnasiums_tasks(name):
    """The same MDP on both backends: put Gymnasium's env in the state EnvPool reset to (the
    observation holds qpos without x, which no dynamics or reward depends on, and qvel), take the
    same actions, and both give the same observations, rewards and terminations up to rounding
    (EnvPool's rewards are float32). HalfCheetah is chaotic, so the horizon is short."""
    import gymnasium as gym

    vec = envs.make(f"envpool:{name}", 1, seed=3)
    obs, _ = vec.reset(seed=3)
    ref = gym.make(name).unwrapped
    ref.reset(seed=0)
    nq = ref.model.nq
    ref.set_state(np.concatenate([[0.0], obs[0, : nq - 1]]), obs[0, nq - 1 :])
    np.testing.assert_allclose(ref._get_obs(), obs[0], atol=1e-12)
    rng = np.random.default_rng(0)
    for _ in range(20):
        a = rng.uniform(-1, 1, ref.action_space.shape).astype(np.float32)
        obs, reward, terminated, *_ = vec.step(a[None])
        want, want_reward, want_terminated, *_ = ref.step(a)
        np.testing.assert_allclose(obs[0], want, atol=1e-9)
        np.testing.assert_allclose(reward[0], want_reward, atol=1e-5)
        assert terminated[0] == want_terminated
        if want_terminated:
            break
    vec.close()
