"""returns.retrace_targets and trace_coefficients against the exact tabular operator of
theory/retrace.py, the lambda = 0 / pi = mu special cases and episode ends (Munos, Stepleton,
Harutyunyan, Bellemare 2016, "Safe and Efficient Off-Policy Reinforcement Learning", eq. 3)."""

import numpy as np
import pytest
import torch

from controlrl.returns import (
    TRACE_KINDS,
    discounted_returns,
    lambda_returns,
    retrace_targets,
    trace_coefficients,
)
from theory.mdp import random_mdp, random_policy
from theory.retrace import sample_paths, sampled_targets, traces, truncated_expectation

t64 = torch.float64


def tabular_segments(mdp, pi, mu, Q, lam, kind, K, n_per_pair, seed):
    """n_per_pair segments of K steps from every (x, a), then mu; the retrace_targets inputs
    built from the tabular model (expected rewards, exact V^pi of the fixed Q)."""
    S, A = mdp.S, mdp.A
    x = np.repeat(np.arange(S), A * n_per_pair)
    a = np.tile(np.repeat(np.arange(A), n_per_pair), S)
    states, actions = sample_paths(mdp, mu, x, a, K, np.random.default_rng(seed))
    s, act, s2 = states[:, :-1], actions[:, :-1], states[:, 1:]
    V = np.sum(pi * Q, axis=-1)
    inputs = {
        "rewards": mdp.R[s, act],
        "discounts": np.full(s.shape, mdp.gamma),
        "ended": np.zeros(s.shape),
        "q_taken": Q[s, act],
        "v_next": V[s2],
    }
    inputs = {k: torch.as_tensor(v, dtype=t64) for k, v in inputs.items()}
    logp_pi = torch.as_tensor(np.log(pi[s, act]), dtype=t64)
    logp_mu = torch.as_tensor(np.log(mu[s, act]), dtype=t64)
    inputs["c"] = trace_coefficients(logp_pi, logp_mu, lam, kind)
    return states, actions, inputs


@pytest.mark.parametrize("kind, lam", [("retrace", 1.0), ("retrace", 0.8), ("is", 0.9)])
def test_monte_carlo_mean_matches_truncated_operator(kind, lam):
    # E_mu[G_0 | x_0, a_0] over K-step segments is the K-term Neumann series of the operator
    # (theory.retrace.truncated_expectation). CI: per (x, a), sample mean +- z * sample std /
    # sqrt(n) with z = 4.5: a two-sided normal tail of 7e-6 per pair, Bonferroni over the
    # 4 x 3 pairs < 1e-4 per test (the path sums are bounded, n = 12000: the CLT holds well).
    rng = np.random.default_rng(1)
    mdp = random_mdp(4, 3, rng, gamma=0.9)
    pi = random_policy(mdp, rng)
    mu = 0.5 * pi + 0.5 * random_policy(mdp, rng)  # mismatched, full support
    Q = rng.normal(size=(mdp.S, mdp.A))
    K, n = 5, 12000
    states, actions, inputs = tabular_segments(mdp, pi, mu, Q, lam, kind, K, n, seed=5)
    G0 = retrace_targets(**inputs)[:, 0].numpy().reshape(mdp.S, mdp.A, n)
    exact = truncated_expectation(mdp, pi, mu, traces(pi, mu, lam, kind), Q, K)
    half_width = 4.5 * G0.std(axis=-1, ddof=1) / np.sqrt(n)
    err = np.abs(G0.mean(axis=-1) - exact)
    assert np.all(err <= half_width), (err, half_width)
    # the CI is informative: narrower than the gap between this operator and its neighbours
    assert (
        half_width.max()
        < 0.5
        * np.abs(
            exact - truncated_expectation(mdp, pi, mu, traces(pi, mu, lam, kind), Q, K - 1)
        ).max()
    )
    # path by path, the recursion equals theory's forward sum (eq. 3 truncated at K)
    forward = sampled_targets(mdp, pi, Q, traces(pi, mu, lam, kind), states, actions)
    np.testing.assert_allclose(G0.reshape(-1), forward, rtol=1e-12, atol=1e-12)


def random_segments(N=6, K=7, seed=0, p_term=0.1, p_trunc=0.1):
    rng = np.random.default_rng(seed)
    terminated = rng.random((N, K)) < p_term
    truncated = (rng.random((N, K)) < p_trunc) & ~terminated
    gamma = 0.9
    seg = {
        "rewards": rng.normal(size=(N, K)),
        "discounts": gamma * (1.0 - terminated),
        "ended": (terminated | truncated).astype(float),
        "q_taken": rng.normal(size=(N, K)),
        "v_next": rng.normal(size=(N, K)),
        "c": rng.uniform(0, 1.2, size=(N, K)),
    }
    seg = {k: torch.as_tensor(v, dtype=t64) for k, v in seg.items()}
    return seg, gamma, terminated, truncated


def retrace_loop(rewards, discounts, ended, q_taken, v_next, c):
    """Forward sum of eq. (3) per segment and start: G_t = Q_t + sum_j d^(j) (prod c) delta_j."""
    N, K = rewards.shape
    G = np.zeros((N, K))
    for i in range(N):
        for t in range(K):
            total, weight = float(q_taken[i, t]), 1.0
            for j in range(t, K):
                delta = rewards[i, j] + discounts[i, j] * v_next[i, j] - q_taken[i, j]
                total += weight * delta
                if ended[i, j] or j == K - 1:
                    break
                weight *= float(discounts[i, j] * c[i, j + 1])
            G[i, t] = total
    return G


def test_matches_forward_sum_with_episode_ends():
    seg, *_ = random_segments(N=8, K=9, seed=1, p_term=0.15, p_trunc=0.15)
    expected = retrace_loop(*(seg[k].numpy() for k in seg))
    np.testing.assert_allclose(retrace_targets(**seg).numpy(), expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("kind", TRACE_KINDS)
def test_lambda_zero_is_one_step_expected_sarsa(kind):
    seg, *_ = random_segments(seed=2)
    logp = torch.log(torch.rand(seg["c"].shape, dtype=t64))
    seg["c"] = trace_coefficients(logp, logp - 0.3, 0.0, kind)
    expected = seg["rewards"] + seg["discounts"] * seg["v_next"]
    torch.testing.assert_close(retrace_targets(**seg), expected, rtol=0, atol=1e-12)


def test_on_policy_lambda_one_is_mc_return_with_control_variates():
    # pi = mu, lambda = 1: c = 1, G_0 = sum_j g^j r_j + sum_{j>=1} g^j (V(x_j) - Q(x_j, a_j))
    # + g^K V(x_K) (Munos et al. 2016 sec. 3; a zero-mean control variate per step), no ends
    seg, gamma, *_ = random_segments(N=4, K=6, seed=3, p_term=0.0, p_trunc=0.0)
    logp = torch.log(torch.rand(seg["c"].shape, dtype=t64))
    seg["c"] = trace_coefficients(logp, logp, 1.0, "retrace")
    r, q, v = seg["rewards"], seg["q_taken"], seg["v_next"]  # v[:, j - 1] = V(x_j)
    K = r.shape[1]
    mc = sum(gamma**j * r[:, j] for j in range(K)) + gamma**K * v[:, K - 1]
    control = sum(gamma**j * (v[:, j - 1] - q[:, j]) for j in range(1, K))
    torch.testing.assert_close(retrace_targets(**seg)[:, 0], mc + control, rtol=0, atol=1e-12)


@pytest.mark.parametrize("lam", [1.0, 0.7])
def test_on_policy_with_v_equal_q_is_the_lambda_return(lam):
    # one action per state (V = Q): with pi = mu, c = lam, Retrace is the TD(lambda) return of
    # returns.lambda_returns (GAE + V), terminations and truncations included; lam = 1 is the
    # discounted return bootstrapped at truncations and at the window end
    seg, gamma, terminated, truncated = random_segments(N=5, K=12, seed=4)
    seg["c"] = trace_coefficients(torch.zeros_like(seg["c"]), torch.zeros_like(seg["c"]), lam)
    values = seg["q_taken"].numpy()
    # V(x_{t+1}) = Q(x_{t+1}, a_{t+1}) inside an episode; v_next stays free at its ends
    v_next = np.where(terminated | truncated, seg["v_next"].numpy(), np.roll(values, -1, 1))
    v_next[:, -1] = seg["v_next"][:, -1].numpy()
    seg["v_next"] = torch.as_tensor(v_next)
    G = retrace_targets(**seg).numpy()
    ended = terminated | truncated
    td_lam = lambda_returns(
        seg["rewards"].numpy().T, values.T, v_next.T, terminated.T, ended.T, gamma, lam
    ).T
    np.testing.assert_allclose(G, td_lam, rtol=1e-12, atol=1e-12)
    if lam == 1.0:
        mc = discounted_returns(
            seg["rewards"].numpy().T, terminated.T, ended.T, gamma, bootstrap=v_next.T
        ).T
        np.testing.assert_allclose(G, mc, rtol=1e-12, atol=1e-12)


def test_hand_computed_three_steps():
    # gamma = 0.5, no ends. r = (1, 2, 3), Q(x_t, a_t) = (10, 4, 6), V(x_{t+1}) = (5, 8, 2),
    # c = (-, 0.5, 1):
    # G_2 = 3 + 0.5 * 2                         = 4
    # G_1 = 2 + 0.5 * (8 + 1.0 * (4 - 6))       = 5
    # G_0 = 1 + 0.5 * (5 + 0.5 * (5 - 4))       = 3.75
    row = lambda *v: torch.tensor([v], dtype=t64)  # noqa: E731
    G = retrace_targets(
        rewards=row(1, 2, 3),
        discounts=row(0.5, 0.5, 0.5),
        ended=row(0, 0, 0),
        q_taken=row(10, 4, 6),
        v_next=row(5, 8, 2),
        c=row(99, 0.5, 1),  # c[:, 0] is unused
    )
    torch.testing.assert_close(G, row(3.75, 5, 4), rtol=0, atol=1e-12)


def test_terminal_never_bootstraps_truncated_does_and_trace_is_cut():
    seg, gamma, *_ = random_segments(N=1, K=6, seed=5, p_term=0.0, p_trunc=0.0)
    for cut, terminal in ((2, True), (2, False), (4, True), (4, False)):
        s = {k: v.clone() for k, v in seg.items()}
        s["ended"][0, cut] = 1.0
        s["discounts"][0, cut] = 0.0 if terminal else gamma
        G = retrace_targets(**s)
        expect_cut = s["rewards"][0, cut] + (0.0 if terminal else gamma * s["v_next"][0, cut])
        torch.testing.assert_close(G[0, cut], expect_cut, rtol=0, atol=1e-12)
        # v_next at the cut: reaches the targets only when truncated
        moved = {k: v.clone() for k, v in s.items()}
        moved["v_next"][0, cut] += 7.0
        changed = retrace_targets(**moved)[0, : cut + 1] != G[0, : cut + 1]
        assert bool(changed.all()) is (not terminal)
        # anything after the cut (rewards, Q, V, c) leaves the targets up to the cut unchanged
        after = {k: v.clone() for k, v in s.items()}
        for key in ("rewards", "q_taken", "v_next", "c"):
            after[key][0, cut + 1 :] += 3.0
        G_after = retrace_targets(**after)
        torch.testing.assert_close(G_after[0, : cut + 1], G[0, : cut + 1], rtol=0, atol=0)
        assert bool((G_after[0, cut + 1 :] != G[0, cut + 1 :]).all())
    # without the cut the same change after step 2 reaches step 0 (the check above can fail)
    after = {k: v.clone() for k, v in seg.items()}
    after["rewards"][0, 3:] += 3.0
    assert retrace_targets(**after)[0, 0] != retrace_targets(**seg)[0, 0]


def test_trace_coefficients_by_kind():
    logp_pi = torch.log(torch.tensor([0.2, 0.5, 0.9], dtype=t64))
    logp_mu = torch.log(torch.tensor([0.4, 0.5, 0.3], dtype=t64))
    lam = 0.8
    expected = {
        "retrace": lam * torch.tensor([0.5, 1.0, 1.0], dtype=t64),
        "is": lam * torch.tensor([0.5, 1.0, 3.0], dtype=t64),
        "tree_backup": lam * torch.tensor([0.2, 0.5, 0.9], dtype=t64),
        "q_lambda": torch.full((3,), lam, dtype=t64),
    }
    for kind, c in expected.items():
        torch.testing.assert_close(trace_coefficients(logp_pi, logp_mu, lam, kind), c)
    # retrace never overflows on a huge log-ratio
    big = trace_coefficients(torch.tensor([0.0]), torch.tensor([-1e4]), 1.0)
    assert big.item() == 1.0


def test_trace_coefficients_bad_input():
    logp = torch.zeros(3)
    with pytest.raises(ValueError, match="kind"):
        trace_coefficients(logp, logp, 1.0, "watkins")
    for lam in (-0.1, 1.5):
        with pytest.raises(ValueError, match="lam"):
            trace_coefficients(logp, logp, lam)


def test_replayed_segments_are_cut_at_episode_ends():
    # from ReplayBuffer.sample to the targets: with Q = V = 0 and c = 1 a target is the
    # discounted reward sum up to the segment's end or the first episode end after step t
    from controlrl.replay import ReplayBuffer

    rng = np.random.default_rng(6)
    buf, gamma, K = ReplayBuffer(30, 2, 1, 1, 6), 0.9, 6
    for _ in range(45):
        ended = rng.random(2) < 0.25
        terminated = ended & (rng.random(2) < 0.5)
        obs = rng.normal(size=(2, 1))
        buf.add(obs, obs, obs[:, 0], rng.normal(size=2), terminated, ended & ~terminated, obs)
    batch = buf.sample(200, torch.Generator().manual_seed(0))
    zeros = torch.zeros_like(batch["rewards"])
    G = retrace_targets(
        batch["rewards"],
        gamma * (1.0 - batch["terminated"]),
        batch["ended"],
        zeros,
        zeros,
        torch.ones_like(zeros),
    )
    r, ended = batch["rewards"].double(), batch["ended"].bool()
    assert bool(ended.any(dim=1).sum() > 20)  # many segments do cross an episode end
    for i in range(200):
        for t in range(K):
            expected, weight = 0.0, 1.0
            for j in range(t, K):
                expected += weight * float(r[i, j])
                weight *= gamma
                if ended[i, j]:
                    break
            assert abs(float(G[i, t]) - expected) < 1e-5
