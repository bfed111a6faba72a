"""GAE and returns against plain loops and the lambda = 0 / lambda = 1 identities (GAE: Schulman,
Moritz, Levine, Jordan, Abbeel 2015, "High-Dimensional Continuous Control Using Generalized
Advantage Estimation")."""

import numpy as np
import pytest

from controlrl.returns import discounted_returns, gae, lambda_returns


def random_rollout(T=50, N=3, seed=0):
    rng = np.random.default_rng(seed)
    rewards = rng.normal(size=(T, N))
    values = rng.normal(size=(T, N))
    next_values = np.vstack([values[1:], rng.normal(size=(1, N))])
    terminated = rng.random((T, N)) < 0.08
    truncated = (rng.random((T, N)) < 0.08) & ~terminated
    ended = terminated | truncated
    # after a truncation the next obs is a reset: V(final obs) differs from values[t + 1]
    next_values = np.where(truncated, rng.normal(size=(T, N)), next_values)
    return rewards, values, next_values, terminated, ended, truncated


def gae_loop(rewards, values, next_values, terminated, ended, gamma, lam):
    T, N = rewards.shape
    adv = np.zeros((T, N))
    for n in range(N):
        last = 0.0
        for t in reversed(range(T)):
            bootstrap = 0.0 if terminated[t, n] else next_values[t, n]
            delta = rewards[t, n] + gamma * bootstrap - values[t, n]
            last = delta + (0.0 if ended[t, n] else gamma * lam * last)
            adv[t, n] = last
    return adv


@pytest.mark.parametrize("lam", [0.0, 0.5, 0.95, 1.0])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_gae_matches_plain_loop(lam, seed):
    r, v, nv, term, ended, _ = random_rollout(seed=seed)
    np.testing.assert_allclose(
        gae(r, v, nv, term, ended, 0.99, lam),
        gae_loop(r, v, nv, term, ended, 0.99, lam),
        rtol=1e-12,
        atol=1e-12,
    )


def test_lambda_zero_is_td_error():
    r, v, nv, term, ended, _ = random_rollout(seed=3)
    delta = r + 0.97 * nv * (1 - term) - v
    np.testing.assert_allclose(gae(r, v, nv, term, ended, 0.97, 0.0), delta, atol=1e-12)


def test_lambda_one_is_monte_carlo_return_minus_value():
    r, v, nv, term, ended, truncated = random_rollout(T=80, N=2, seed=4)
    gamma = 0.9
    adv = gae(r, v, nv, term, ended, gamma, 1.0)
    T, N = r.shape
    for n in range(N):
        for t in range(T):
            # MC return to the episode's end; + gamma^k V(final obs) if truncated or buffer end
            ret, disc, k = 0.0, 1.0, t
            while True:
                ret += disc * r[k, n]
                disc *= gamma
                if term[k, n]:
                    break
                if truncated[k, n] or k == T - 1:
                    ret += disc * nv[k, n]
                    break
                k += 1
            assert adv[t, n] == pytest.approx(ret - v[t, n], abs=1e-10)


def test_truncation_bootstraps_from_final_observation_not_reset():
    # one env, episode truncated at t = 1: the bootstrap must be V(final obs) = 5, not V(reset) = 0
    r = np.array([[1.0], [1.0], [1.0]])
    v = np.array([[0.0], [0.0], [0.0]])
    nv = np.array([[0.0], [5.0], [2.0]])
    term = np.zeros((3, 1), bool)
    ended = np.array([[False], [True], [False]])
    adv = gae(r, v, nv, term, ended, 0.5, 1.0)
    assert adv[1, 0] == pytest.approx(1.0 + 0.5 * 5.0)
    assert adv[0, 0] == pytest.approx(1.0 + 0.5 * adv[1, 0])
    assert adv[2, 0] == pytest.approx(1.0 + 0.5 * 2.0)


def test_lambda_returns_and_discounted_returns():
    r, v, nv, term, ended, _ = random_rollout(seed=5)
    np.testing.assert_allclose(
        lambda_returns(r, v, nv, term, ended, 0.99, 1.0) - v, gae(r, v, nv, term, ended, 0.99, 1.0)
    )
    # with bootstrap values, discounted returns equal the lambda = 1 lambda-returns
    np.testing.assert_allclose(
        discounted_returns(r, term, ended, 0.99, bootstrap=nv),
        lambda_returns(r, v, nv, term, ended, 0.99, 1.0),
        atol=1e-10,
    )
    # without bootstrap: a constant reward of 1 over an episode of length L terminated at its end
    rewards = np.ones((4, 1))
    terminated = np.array([[False], [False], [False], [True]])
    out = discounted_returns(rewards, terminated, terminated, 0.5)
    np.testing.assert_allclose(out[:, 0], [1.875, 1.75, 1.5, 1.0])


def test_gae_few_env_column_path_matches_the_vectorised_path_bit_exactly():
    # gae takes a per-column Python-float loop for <= 16 envs and a numpy loop above: 20
    # envs go the numpy way, each half of them the column way; the bits must agree
    rng = np.random.default_rng(7)
    T, N = 257, 20
    rewards = rng.standard_normal((T, N)).astype(np.float32)
    values = rng.standard_normal((T, N)).astype(np.float32)
    next_values = rng.standard_normal((T, N)).astype(np.float32)
    terminated = rng.random((T, N)) < 0.03
    ended = terminated | (rng.random((T, N)) < 0.03)
    both = gae(rewards, values, next_values, terminated, ended, 0.99, 0.95)
    for cols in (slice(0, 10), slice(10, 20), slice(3, 4)):
        part = gae(
            rewards[:, cols],
            values[:, cols],
            next_values[:, cols],
            terminated[:, cols],
            ended[:, cols],
            0.99,
            0.95,
        )
        assert part.dtype == np.float64 and np.array_equal(part, both[:, cols])
