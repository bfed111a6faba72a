"""Brax backend: spaces, seeding, time-limit truncation and terminations with the true final
observation, fresh initial states on autoreset, the Collector's bootstrap from final_obs.
One small env (inverted_pendulum, 'spring') and one compiled shape keep compile time short."""

import numpy as np
import pytest
import torch

import envs
from controlrl.buffers import RolloutBuffer
from controlrl.rollout import Collector

pytest.importorskip("brax")
from envs import brax as brax_backend  # noqa: E402

N, LIMIT = 3, 25


@pytest.fixture(scope="module")
def make():
    def _make(copy=True):
        return brax_backend.make(
            "inverted_pendulum", N, pipeline="spring", episode_length=LIMIT, copy=copy
        )

    return _make


def rollout(vec, seed, steps, actions_seed=0):
    rng = np.random.default_rng(actions_seed)
    obs, _ = vec.reset(seed=seed)
    out = [obs.copy()]
    flags = []
    for _ in range(steps):
        obs, reward, term, trunc, info = vec.step(rng.uniform(-1, 1, (N, 1)))
        out.append(obs.copy())
        flags.append((reward.copy(), term.copy(), trunc.copy(), info))
    return np.stack(out), flags


def test_spaces_shapes_and_zero_copy(make):
    vec = make()
    assert vec.single_observation_space.shape == (4,) and vec.single_action_space.shape == (1,)
    assert vec.compile() >= 0 and make().compile() == 0.0  # compiled once per process
    obs, _ = vec.reset(seed=0)
    assert obs.shape == (N, 4) and obs.dtype == np.float32 and obs.flags.writeable
    view, _ = make(copy=False).reset(seed=0)  # what the Collector asks for
    assert not view.flags.owndata and not view.flags.writeable  # the jax buffer, not a copy
    np.testing.assert_array_equal(view, obs)
    obs, reward, term, trunc, _ = vec.step(np.zeros((N, 1), np.float32))
    assert reward.shape == term.shape == trunc.shape == (N,) and term.dtype == bool


def test_same_seed_same_first_100_steps(make):
    a, _ = rollout(make(), 7, 100)
    b, _ = rollout(make(), 7, 100)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, rollout(make(), 8, 100)[0])


def test_truncation_and_termination_keep_the_final_observation(make):
    vec = make()
    obs, flags = rollout(vec, 0, 200)
    steps_since_reset = np.zeros(N, int)
    saw = {"term": 0, "trunc": 0}
    for t, (_, term, trunc, info) in enumerate(flags):
        steps_since_reset += 1
        assert not (term & trunc).any()
        # truncation exactly at the limit, unless the pole fell at that very step
        np.testing.assert_array_equal(trunc, (steps_since_reset == LIMIT) & ~term)
        ended = term | trunc
        if ended.any():
            final = info["final_obs"]
            for n in np.flatnonzero(ended):
                assert not np.allclose(final[n], obs[t + 1, n])  # obs[t+1] is a fresh reset
                # inverted_pendulum ends an episode when |pole angle| > 0.2
                assert (abs(final[n, 1]) > 0.2) == bool(term[n])
                assert abs(obs[t + 1, n, 1]) < 0.05
            saw["term"] += int(term.sum())
            saw["trunc"] += int(trunc.sum())
        steps_since_reset[ended] = 0
    assert saw["term"] > 0 and saw["trunc"] > 0


def test_autoreset_draws_fresh_initial_states(make):
    # brax's own AutoResetWrapper restarts each env from its first initial state; ours does not
    vec = make()
    obs, flags = rollout(vec, 0, 3 * LIMIT)
    starts = [obs[0, 0]]
    for t, (_, term, trunc, _) in enumerate(flags):
        if term[0] or trunc[0]:
            starts.append(obs[t + 1, 0])
    assert len(starts) >= 3
    assert len({tuple(s) for s in starts}) == len(starts)


def test_collector_bootstraps_truncations_from_the_final_observation(make):
    vec = make()
    collector = Collector(vec, None, None)
    collector.reset(seed=0)
    buffer = RolloutBuffer(2 * LIMIT, N, (4,), (1,), discrete=False)
    collector.collect(buffer, lambda obs: torch.zeros(obs.shape[0], 1))  # zero force: no falls
    assert buffer.terminated.sum() == 0
    assert sorted(buffer.trunc_index) == sorted(
        (t, n) for t in (LIMIT - 1, 2 * LIMIT - 1) for n in range(N)
    )
    for (t, n), final in zip(buffer.trunc_index, buffer.trunc_obs):
        after = buffer.obs[t + 1, n] if t + 1 < 2 * LIMIT else buffer.last_obs[n]
        assert not np.allclose(final, after)  # the bootstrap obs is not the next episode's first


def test_unknown_ids_and_pipelines():
    with pytest.raises(envs.UnknownEnvError, match="closest: halfcheetah"):
        envs.check_env_id("brax:halfcheetahh")
    with pytest.raises(ValueError, match="pipeline"):
        brax_backend.BraxVectorEnv("inverted_pendulum", 1, pipeline="nope")
