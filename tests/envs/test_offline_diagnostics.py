"""SACo and TQ (Schweighofer et al. 2022) on datasets of a deterministic tabular MDP, the paper's
setting: exact counts and returns, the orderings the paper reports for random, noisy and expert
datasets, and rounding for continuous data."""

import numpy as np
import pytest

from envs.offline.dataset import Dataset
from envs.offline.diagnostics import episode_returns, saco, tq, unique_pairs
from theory.mdp import evaluate, gridworld, sample_episode, uniform_policy, value_iteration

H = 6


def _episodes(mdp, pi, n, rng) -> Dataset:
    obs, act, rew, ends = [], [], [], []
    for _ in range(n):
        s, a, r = sample_episode(mdp, pi, rng)
        obs += list(s[:-1])
        act += list(a)
        rew += list(r)
        ends += [False] * (H - 1) + [True]
    o = np.asarray(obs, np.float32)[:, None]
    return Dataset(
        observations=o,
        actions=np.asarray(act, np.float32)[:, None],
        rewards=np.asarray(rew, np.float32),
        next_observations=o,  # unused by the diagnostics
        terminals=np.zeros(len(o), bool),
        timeouts=np.asarray(ends, bool),
        env_id="tabular",
    )


def _concat(*ds: Dataset) -> Dataset:
    return Dataset(
        *(
            np.concatenate([getattr(d, k) for d in ds])
            for k in (
                "observations",
                "actions",
                "rewards",
                "next_observations",
                "terminals",
                "timeouts",
            )
        ),
        env_id="tabular",
    )


def test_saco_and_tq_on_a_deterministic_mdp():
    rng = np.random.default_rng(0)
    mdp = gridworld(n=3, slip=0.0, horizon=H)
    V_star, Q_star = value_iteration(mdp)
    expert_pi = np.eye(4)[Q_star.argmax(-1)]
    uniform = uniform_policy(mdp)
    noisy_pi = 0.5 * expert_pi + 0.5 * uniform
    v_min, v_max = evaluate(mdp, uniform)[0][0, 0], V_star[0, 0]
    random_d, noisy, expert = (_episodes(mdp, p, 40, rng) for p in (uniform, noisy_pi, expert_pi))
    replay = _concat(random_d, noisy, expert)
    # the expert is deterministic from a fixed start: exactly H distinct pairs, return V*
    assert unique_pairs(expert) == H
    assert saco(expert, replay) == pytest.approx(H / unique_pairs(replay))
    assert tq(expert, v_min, v_max) == pytest.approx(1.0, abs=1e-6)
    assert saco(replay, replay) == 1.0 and saco(_concat(noisy, noisy), noisy) == 1.0
    # returns: per-episode sums of the stored rewards
    np.testing.assert_allclose(
        episode_returns(noisy), noisy.rewards.reshape(-1, H).sum(axis=1), rtol=1e-6
    )
    # the paper's picture: random data explores most and exploits least, expert data the reverse
    assert saco(random_d, replay) > saco(noisy, replay) > saco(expert, replay)
    assert tq(random_d, v_min, v_max) < tq(noisy, v_min, v_max) < tq(expert, v_min, v_max)
    assert abs(tq(random_d, v_min, v_max)) < 0.2  # the random policy's own return maps to 0
    # the normalisation is affine: ref_min maps to 0, ref_max to 1, whatever their values
    assert tq(noisy, episode_returns(noisy).mean(), v_max) == pytest.approx(0.0, abs=1e-12)
    assert tq(expert, -v_max, v_max) == pytest.approx(1.0, abs=1e-6)


def test_rounding_merges_jitter_and_bad_references_are_refused():
    rng = np.random.default_rng(1)
    base = rng.normal(size=(50, 3)).astype(np.float32)
    jitter = base + rng.uniform(-1e-4, 1e-4, size=base.shape).astype(np.float32)
    obs = np.concatenate([base, jitter])
    d = Dataset(
        observations=obs[:, :2],
        actions=obs[:, 2:],
        rewards=np.zeros(100, np.float32),
        next_observations=obs[:, :2],
        terminals=np.zeros(100, bool),
        timeouts=np.arange(100) % 10 == 9,
        env_id="x",
    )
    assert unique_pairs(d) == 100 and unique_pairs(d, decimals=2) <= 55
    with pytest.raises(ValueError, match="distinct ref_min and ref_max"):
        tq(d)
