"""envs.state: a vector env restored from a capture steps on exactly as the original did."""

import gymnasium as gym
import numpy as np
import pytest

import envs
from envs import state


def run(vec, actions):
    """Step vec through actions; everything a learner sees, per step."""
    seen = []
    for a in actions:
        obs, reward, terminated, truncated, info = vec.step(a)
        final = info.get("final_obs")
        finals = [] if final is None else [np.asarray(f) for f in final if f is not None]
        seen.append((obs.copy(), reward.copy(), terminated.copy(), truncated.copy(), finals))
    return seen


@pytest.mark.parametrize(
    "env_id, before",
    [
        ("Hopper-v5", 40),  # episodes end under random actions: the reset noise's RNG
        ("Ant-v5", 30),  # its reward reads the torso's position before the step
        ("Reacher-v5", 45),  # reward read before the step; truncation at 50
        ("CartPole-v1", 15),
        ("Pendulum-v1", 170),  # truncation at 200 comes after the capture: the TimeLimit counter
        ("MountainCar-v0", 20),
    ],
)
def test_a_restored_env_steps_on_exactly_as_the_original(env_id, before):
    a = envs.make(env_id, 2, seed=3)
    a.reset(seed=3)
    a.action_space.seed(0)
    for _ in range(before):
        a.step(a.action_space.sample())
    saved = state.capture(a)
    assert saved is not None
    actions = [a.action_space.sample() for _ in range(60)]
    want = run(a, actions)
    b = envs.make(env_id, 2, seed=99)  # another seed: everything must come from the capture
    state.restore(b, saved)
    got = run(b, actions)
    ended = sum(bool((t | u).any()) for _, _, t, u, _ in want)
    assert ended > 0 or env_id == "MountainCar-v0"  # the restored RNG and counter were used
    for w, g in zip(want, got, strict=True):
        for x, y in zip(w[:4], g[:4], strict=True):
            np.testing.assert_array_equal(x, y)
        assert len(w[4]) == len(g[4]) and all((x == y).all() for x, y in zip(w[4], g[4]))


def test_capture_declines_what_it_cannot_save_whole():
    class Counter(gym.Wrapper):  # a wrapper with its own state
        pass

    def made(env_id, **kw):
        vec = envs.make(env_id, 1, 0, **kw)
        vec.reset(seed=0)
        return vec

    assert state.capture(made("Pendulum-v1", wrap=Counter)) is None
    assert state.capture(envs.make("bandit:bernoulli-10", 1, 0)) is None  # not reset yet
    assert state.capture(made("Pendulum-v1", vectorization="async")) is None
    assert state.capture(envs.make("Pendulum-v1", 1, 0)) is None  # not reset: no state yet
    assert state.capture(made("Pendulum-v1")) is not None


def test_restore_refuses_a_count_mismatch():
    vec = envs.make("Pendulum-v1", 2, 0)
    vec.reset(seed=0)
    saved = state.capture(vec)
    with pytest.raises(ValueError, match="2 saved env states for 1 envs"):
        state.restore(envs.make("Pendulum-v1", 1, 0), saved)


def stepped(vec, actions):
    """Step vec through actions: (obs, reward, terminated, truncated) per step."""
    return [tuple(np.copy(x) for x in vec.step(a)[:4]) for a in actions]


@pytest.mark.parametrize(
    "name, before",
    [
        ("contextual-4-5", 3),  # the contexts of the episodes in progress and the generator
        ("sequence-reverse-2-3", 2),  # mid-answer: tokens so far and the position
        ("sequence-stop-3-2", 5),  # each env at its own position
        ("gaussian-4", 1),
    ],
)
def test_a_restored_bandit_draws_on_as_the_original(name, before):
    a = envs.make(f"bandit:{name}", 64, seed=0)
    a.reset(seed=5)
    rng = np.random.default_rng(0)
    n = getattr(a.single_action_space, "n", None)

    def actions(k):
        return [rng.integers(0, n, 64) for _ in range(k)]

    stepped(a, actions(before))
    saved = state.capture(a)
    plan = actions(12)
    want = stepped(a, plan)
    b = envs.make(f"bandit:{name}", 64, seed=0)
    b.reset(seed=99)  # another stream: everything must come from the capture
    state.restore(b, saved)
    got = stepped(b, plan)
    for w, g in zip(want, got, strict=True):
        for x, y in zip(w, g, strict=True):
            np.testing.assert_array_equal(x, y)


def test_a_restored_population_bandit_draws_on_per_seed():
    from envs import bandits

    a = bandits.make_population("bernoulli-10", 3, 2)
    a.reset(seed=[1, 2, 3])
    plan = [np.arange(6) % 10 for _ in range(8)]
    stepped(a, plan[:3])
    saved = state.capture(a)
    want = stepped(a, plan)
    b = bandits.make_population("bernoulli-10", 3, 2)
    state.restore(b, saved)
    assert [x[1].tolist() for x in stepped(b, plan)] == [x[1].tolist() for x in want]
    with pytest.raises(ValueError, match="3 saved generators"):
        state.restore(bandits.make_population("bernoulli-10", 2, 3), saved)
