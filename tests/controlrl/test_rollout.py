"""Collector: true final observations of truncated episodes, flags, episode statistics."""

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode, SyncVectorEnv

from controlrl.buffers import RolloutBuffer
from controlrl.normalize import ObsNormalizer, RewardScaler
from controlrl.rollout import Collector


class Counter(gym.Env):
    """obs = [steps so far, 10 * id]; reward 1 per step; terminates after `terminate_at` steps."""

    def __init__(self, terminate_at: int, ident: int) -> None:
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)
        self.action_space = gym.spaces.Box(-1, 1, (1,), np.float32)
        self.terminate_at, self.ident = terminate_at, ident
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.array([0, 10 * self.ident], np.float32), {}

    def step(self, action):
        assert -1 <= action[0] <= 1, "the collector must clip actions to the bounds"
        self.t += 1
        obs = np.array([self.t, 10 * self.ident], np.float32)
        return obs, 1.0, self.t >= self.terminate_at, False, {}


def make_envs():
    fns = [
        lambda: Counter(terminate_at=3, ident=0),  # terminates every 3 steps
        lambda: gym.wrappers.TimeLimit(Counter(terminate_at=100, ident=1), 4),  # truncates at 4
    ]
    return SyncVectorEnv(fns, autoreset_mode=AutoresetMode.SAME_STEP)


def test_truncated_episodes_keep_their_final_observation():
    envs = make_envs()
    collector = Collector(envs, obs_normalizer=None, reward_scaler=None)
    collector.reset(seed=0)
    buffer = RolloutBuffer(9, 2, (2,), (1,), discrete=False)
    episodes = collector.collect(buffer, lambda obs: torch.full((obs.shape[0], 1), 5.0))
    assert buffer.actions.max() == 5.0  # stored unclipped; the env saw the clipped action
    np.testing.assert_array_equal(buffer.obs[:, 0, 0], [0, 1, 2, 0, 1, 2, 0, 1, 2])
    np.testing.assert_array_equal(buffer.obs[:, 1, 0], [0, 1, 2, 3, 0, 1, 2, 3, 0])
    np.testing.assert_array_equal(np.flatnonzero(buffer.terminated[:, 0]), [2, 5, 8])
    assert not buffer.terminated[:, 1].any()
    np.testing.assert_array_equal(np.flatnonzero(buffer.ended[:, 1]), [3, 7])
    assert buffer.trunc_index == [(3, 1), (7, 1)]
    for obs in buffer.trunc_obs:  # the true final observation, not the reset one
        np.testing.assert_array_equal(obs, [4, 10])
    assert sorted((e.ret, e.length) for e in episodes) == [(3, 3)] * 3 + [(4, 4)] * 2
    assert collector.global_step == 18

    buffer.fill_values(lambda obs: obs[:, 0] * 1.0)  # V(s) = step counter
    assert buffer.next_values[3, 1] == 4.0 and buffer.next_values[7, 1] == 4.0
    assert buffer.next_values[0, 1] == 1.0  # not ended: V(s_{t+1})
    assert buffer.next_values[8, 1] == 1.0  # buffer end: V(last obs)


def test_truncation_as_terminal_reproduces_cleanrl_convention():
    collector = Collector(make_envs(), None, None, truncation_as_terminal=True)
    collector.reset(seed=0)
    buffer = RolloutBuffer(8, 2, (2,), (1,), discrete=False)
    collector.collect(buffer, lambda obs: torch.zeros(obs.shape[0], 1))
    np.testing.assert_array_equal(np.flatnonzero(buffer.terminated[:, 1]), [3, 7])
    assert buffer.trunc_index == []


def test_episode_sums_continue_across_collections():
    collector = Collector(make_envs(), None, None)
    collector.reset(seed=0)
    buffer = RolloutBuffer(2, 2, (2,), (1,), discrete=False)
    act = lambda obs: torch.zeros(obs.shape[0], 1)  # noqa: E731
    assert collector.collect(buffer, act) == []
    episodes = collector.collect(buffer, act)
    assert [(e.ret, e.length, e.step) for e in episodes] == [(3.0, 3, 6), (4.0, 4, 8)]


def test_normalised_observations_are_the_ones_the_policy_saw_in_order():
    """Each step's normalised observation is written straight into the next buffer row (and
    last_obs after the final step); the policy reads exactly those, across collections."""
    collector = Collector(make_envs(), ObsNormalizer((2,)), None)
    collector.reset(seed=0)
    seen = []

    def act(obs):
        seen.append(obs.numpy().copy())
        return torch.zeros(obs.shape[0], 1)

    ref_envs, ref_norm = make_envs(), ObsNormalizer((2,))
    obs, _ = ref_envs.reset(seed=0)
    expected = [ref_norm(obs.astype(np.float32))]
    for _ in range(14):
        obs, *_ = ref_envs.step(np.zeros((2, 1), np.float32))
        expected.append(ref_norm(obs.astype(np.float32)))
    buffer = RolloutBuffer(7, 2, (2,), (1,), discrete=False)
    collector.collect(buffer, act)
    np.testing.assert_array_equal(buffer.obs, np.stack(expected[:7]))
    np.testing.assert_array_equal(buffer.last_obs, expected[7])
    collector.collect(buffer, act)  # continues from the last observation
    np.testing.assert_array_equal(buffer.obs, np.stack(expected[7:14]))
    np.testing.assert_array_equal(buffer.last_obs, expected[14])
    np.testing.assert_array_equal(np.stack(seen), np.stack(expected[:14]))


def test_reset_mid_episode_starts_fresh_episodes_everywhere():
    """What a resume relies on: reset() mid-episode folds each reset observation into the
    statistics once, and the reward scaler's running returns and the episode sums restart at
    zero (reward 1 per step, so a return after k steps of a fresh episode is sum gamma^i)."""
    gamma = 0.5
    collector = Collector(make_envs(), ObsNormalizer((2,)), RewardScaler(2, gamma))
    act = lambda obs: torch.zeros(obs.shape[0], 1)  # noqa: E731
    collector.reset(seed=0)
    assert collector.obs_normalizer.rms.count == 1e-4 + 2
    collector.collect(RolloutBuffer(2, 2, (2,), (1,), discrete=False), act)  # mid-episode
    np.testing.assert_array_equal(collector.reward_scaler.returns, [1 + gamma] * 2)
    count = collector.obs_normalizer.rms.count
    collector.reset(seed=1)
    assert collector.obs_normalizer.rms.count == count + 2  # once per env
    np.testing.assert_array_equal(collector.reward_scaler.returns, [0.0, 0.0])
    episodes = collector.collect(RolloutBuffer(3, 2, (2,), (1,), discrete=False), act)
    assert [(e.ret, e.length) for e in episodes] == [(3.0, 3)]  # env 0: 3 steps since reset
    ret = 1 + gamma * (1 + gamma)  # env 1: three steps of a fresh episode
    np.testing.assert_array_equal(collector.reward_scaler.returns, [0.0, ret])


class Both(Counter):
    """Counter that also hits a time limit of its own at 5 steps: terminated and truncated both
    True at step 5 when terminate_at is 5 (a terminal wins: no bootstrap)."""

    def step(self, action):
        obs, r, terminated, _, info = super().step(action)
        return obs, r * (1 + float(action[0])), terminated, self.t >= 5, info


def _one_env(kind: str):
    if kind == "truncates":
        fn = lambda: gym.wrappers.TimeLimit(Counter(terminate_at=100, ident=1), 4)  # noqa: E731
    elif kind == "terminates":
        fn = lambda: Counter(terminate_at=3, ident=2)  # noqa: E731
    else:
        fn = lambda: Both(terminate_at=5, ident=3)  # noqa: E731
    return SyncVectorEnv([fn], autoreset_mode=AutoresetMode.SAME_STEP)


def _collect_twice(kind: str, general: bool, as_terminal: bool, normalise: bool):
    envs = _one_env(kind)
    norm = (ObsNormalizer((2,)), RewardScaler(1, 0.9)) if normalise else (None, None)
    collector = Collector(envs, *norm, truncation_as_terminal=as_terminal)
    if general:  # the N-env loop, which one env otherwise skips
        collector._collect_one = collector._collect
    collector.reset(seed=0)
    torch.manual_seed(0)
    out = []
    for _ in range(2):  # state carried across collections
        buffer = RolloutBuffer(11, 1, (2,), (1,), False)
        episodes = collector.collect(buffer, lambda obs: torch.randn(len(obs), 1) * 2)
        arrays = [buffer.obs, buffer.actions, buffer.rewards, buffer.terminated, buffer.ended]
        out.append(
            (
                [a.copy() for a in (*arrays, buffer.last_obs)],
                list(buffer.trunc_index),
                [o.copy() for o in buffer.trunc_obs],
                [(e.ret, e.length, e.step) for e in episodes],
                (collector.ep_return.copy(), collector._ep_start.copy(), collector.global_step),
            )
        )
    return out


def test_one_env_loop_equals_the_general_loop_bit_for_bit():
    # one env takes a scalar bookkeeping loop (_collect_one); it must leave exactly what the
    # general loop leaves: buffers, truncation bootstraps, episodes and the carried state
    for kind in ("truncates", "terminates", "both"):
        for as_terminal in (False, True):
            for normalise in (False, True):
                fast = _collect_twice(kind, False, as_terminal, normalise)
                ref = _collect_twice(kind, True, as_terminal, normalise)
                for (a1, i1, o1, e1, s1), (a2, i2, o2, e2, s2) in zip(fast, ref):
                    assert all(np.array_equal(x, y) for x, y in zip(a1, a2)), kind
                    assert i1 == i2 and e1 == e2, (kind, as_terminal, normalise)
                    assert all(np.array_equal(x, y) for x, y in zip(o1, o2))
                    assert all(np.array_equal(x, y) for x, y in zip(s1[:2], s2[:2]))
                    assert s1[2] == s2[2]
    # the cases happened: bootstraps, terminals, both at once
    (arrays, trunc, _, episodes, _), _ = _collect_twice("both", False, False, True)
    assert episodes and not trunc and arrays[3].any()
    assert _collect_twice("truncates", False, False, False)[0][1]


def _chain_act(obs):
    """An act with extras: actions from the observation, and a 'chain' [N, 2, 1] whose last
    entry is the action (as a diffusion policy's denoising chain)."""
    actions = obs[:, :1] * 0.1 + obs[:, 1:] * 0.01
    return actions, {"chain": torch.stack([-actions, actions], 1)}


def test_extras_are_stored_in_the_row_of_their_step():
    # DPPO stores the denoising chain with every transition: each step's extra must sit in the
    # row of its own action, in both collection loops, and flat() must keep rows t-major
    for envs, n in ((make_envs(), 2), (SyncVectorEnv([lambda: Counter(3, 4)]), 1)):
        collector = Collector(envs, obs_normalizer=None, reward_scaler=None)
        collector.reset(seed=0)
        buffer = RolloutBuffer(7, n, (2,), (1,), discrete=False)
        buffer.add_extra("chain", (2, 1))
        collector.collect(buffer, _chain_act)
        assert buffer.extras["chain"].shape == (7, n, 2, 1)
        np.testing.assert_array_equal(buffer.extras["chain"][:, :, 1], buffer.actions)
        np.testing.assert_array_equal(buffer.extras["chain"][:, :, 0], -buffer.actions)
        assert buffer.actions.std() > 0  # the rows differ: a shifted row would be seen
        batch = buffer.flat()
        assert batch["chain"].shape == (7 * n, 2, 1)
        np.testing.assert_array_equal(batch["chain"][:, 1].numpy(), batch["actions"].numpy())


def test_extras_need_a_tuple_from_act_and_a_free_name():
    collector = Collector(make_envs(), obs_normalizer=None, reward_scaler=None)
    collector.reset(seed=0)
    buffer = RolloutBuffer(3, 2, (2,), (1,), discrete=False)
    buffer.add_extra("chain", (2, 1))
    with pytest.raises(TypeError, match="act must return"):
        collector.collect(buffer, lambda obs: obs[:, :1])
    for name in ("chain", "logprobs", "advantages"):
        with pytest.raises(ValueError, match="clashes"):
            buffer.add_extra(name, (1,))
    plain = RolloutBuffer(3, 2, (2,), (1,), discrete=False)
    assert set(plain.flat()) == {"obs", "actions", "logprobs", "values"}  # unchanged
