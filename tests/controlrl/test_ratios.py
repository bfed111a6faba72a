"""controlrl/ratios.py: per-step, sequence and KPO Kalman-filtered ratios on episode-structured
rollouts [T, N]. The filter against the predict/update equations in Python floats; zero
measurement noise gives the raw ratios, huge noise a constant; causality; no leak between
episodes or envs; sequence ratio = product over the episode; envs are independent columns; the
minibatch path (EpisodeRatios) equals the full filter, values and gradients, and with v = 0 is
the raw ratio to the bit; argument errors."""

import math
import re

import numpy as np
import pytest
import torch

from controlrl import ratios as R


def _rollout(T=40, N=3, seed=0, p_end=0.15):
    gen = torch.Generator().manual_seed(seed)
    z = 0.3 * torch.randn(T, N, generator=gen, dtype=torch.float64)
    ended = torch.rand(T, N, generator=gen) < p_end
    return z, R.episode_starts(ended)


def _kalman_reference(z, starts, q, v, p0):
    """The filter of the module docstring, one env and one step at a time in Python floats."""
    T, N = z.shape
    out = np.zeros((T, N))
    for n in range(N):
        x = p = 0.0
        for t in range(T):
            if t == 0 or starts[t, n]:
                x, p = 0.0, p0
            p_pred = p + q
            k = 1.0 if v == 0 else p_pred / (p_pred + v)
            x = x + k * (float(z[t, n]) - x)
            p = (1 - k) * p_pred
            out[t, n] = x
    return out


def _episodes(starts):
    """(env, first step, last step + 1) of every segment, by a Python scan."""
    T, N = starts.shape
    spans = []
    for n in range(N):
        begin = 0
        for t in range(1, T + 1):
            if t == T or starts[t, n]:
                spans.append((n, begin, t))
                begin = t
    return spans


def test_episode_starts_from_ended():
    ended = torch.tensor([[False, True], [True, False], [False, False]])
    starts = R.episode_starts(ended)
    assert starts.tolist() == [[True, True], [False, True], [True, False]]


@pytest.mark.parametrize("q, v, p0", [(1e-6, 1.0, 1.0), (0.05, 0.3, 2.0), (0.0, 1.0, 1.0)])
def test_kalman_matches_the_predict_update_equations(q, v, p0):
    z, starts = _rollout()
    got = R.kalman_log_ratio(z, starts, q=q, v=v, p0=p0)
    np.testing.assert_allclose(got.numpy(), _kalman_reference(z, starts, q, v, p0), atol=1e-13)
    assert (got - z).abs().max() > 0.05  # it filters something


def test_gain_schedule():
    # q = 0: K_k = p0 / (v + (k + 1) p0), the weights of a running mean with a prior at 0
    gains, log_decay = R.kalman_gains(6, q=0.0, v=2.0, p0=0.5)
    np.testing.assert_allclose(gains, [0.5 / (2.0 + (k + 1) * 0.5) for k in range(6)], rtol=1e-14)
    np.testing.assert_allclose(np.exp(log_decay), np.cumprod(1 - gains), rtol=1e-14)
    # the spec's defaults: first gain ~1/2, steady state ~sqrt(q / v) = 1e-3
    gains, _ = R.kalman_gains(200_000)
    assert gains[0] == pytest.approx(0.5, abs=1e-6)
    assert gains[-1] == pytest.approx(1e-3, rel=0.01)
    # zero measurement noise: gain 1 everywhere
    assert np.all(R.kalman_gains(5, q=0.0, v=0.0)[0] == 1.0)


def test_running_mean_with_no_process_noise():
    z, starts = _rollout(T=30, N=1, p_end=0.0)
    x = R.kalman_log_ratio(z, starts, q=0.0, v=1.0, p0=1.0)[:, 0]
    want = torch.cumsum(z[:, 0], 0) / torch.arange(2, 32, dtype=torch.float64)  # prior weight 1
    torch.testing.assert_close(x, want, rtol=0, atol=1e-14)


def test_zero_measurement_noise_returns_the_raw_ratios():
    z, starts = _rollout()
    for q in (0.0, 1e-6, 1.0):
        assert torch.equal(R.kalman_log_ratio(z, starts, q=q, v=0.0), z)


def test_huge_measurement_noise_returns_a_constant():
    z, starts = _rollout(p_end=0.05)
    x = R.kalman_log_ratio(z * 10, starts, q=1e-3, v=1e14)
    assert x.abs().max() < 1e-9  # every step: ratio 1, the prior, whatever the data
    assert (x.exp() - 1).abs().max() < 1e-9


def test_filter_is_causal():
    z, starts = _rollout(T=50, N=2)
    for kind in ("step", "kalman"):
        base = R.filtered_log_ratio(z, starts, kind)
        for t in (0, 7, 31, 48):
            z2 = z.clone()
            z2[t + 1 :] += torch.randn_like(z2[t + 1 :])
            out = R.filtered_log_ratio(z2, starts, kind)
            assert torch.equal(out[: t + 1], base[: t + 1])
            assert not torch.equal(out[t + 1 :], base[t + 1 :])


@pytest.mark.parametrize("kind", R.KINDS)
def test_episodes_never_leak(kind):
    z, starts = _rollout(T=60, N=3, seed=4)
    base = R.filtered_log_ratio(z, starts, kind)
    spans = _episodes(starts)
    assert len(spans) > 10
    for n, a, b in spans[::3]:
        z2 = z.clone()
        z2[a:b, n] += 1.0
        changed = (R.filtered_log_ratio(z2, starts, kind) != base).nonzero().tolist()
        assert changed and all(c == n and a <= t < b for t, c in changed)


def test_sequence_ratio_is_the_product_within_an_episode():
    z, starts = _rollout(T=50, N=4, seed=5)
    seq = R.filtered_log_ratio(z, starts, "sequence").exp()
    geo = R.filtered_log_ratio(z, starts, "sequence_mean").exp()
    ratio = z.exp()
    for n, a, b in _episodes(starts):
        prod = math.prod(ratio[a:b, n].tolist())
        assert torch.allclose(seq[a:b, n], torch.tensor(prod, dtype=torch.float64), rtol=1e-12)
        assert torch.allclose(
            geo[a:b, n], torch.tensor(prod ** (1 / (b - a)), dtype=torch.float64), rtol=1e-12
        )


def test_episode_cut_by_the_rollout_is_its_own_sequence():
    z = torch.tensor([[0.1], [0.2], [0.3], [0.4]], dtype=torch.float64)
    starts = torch.tensor([[False], [False], [True], [False]])  # t = 0 starts one regardless
    seq = R.filtered_log_ratio(z, starts, "sequence")[:, 0]
    torch.testing.assert_close(seq, torch.tensor([0.3, 0.3, 0.7, 0.7], dtype=torch.float64))


@pytest.mark.parametrize("kind", R.KINDS)
def test_envs_are_independent_columns(kind):
    z, starts = _rollout(T=40, N=5, seed=6)
    full = R.filtered_log_ratio(z, starts, kind, **({"q": 0.01} if kind == "kalman" else {}))
    for n in range(5):
        one = R.filtered_log_ratio(
            z[:, n : n + 1], starts[:, n : n + 1], kind, **({"q": 0.01} if kind == "kalman" else {})
        )
        torch.testing.assert_close(full[:, n : n + 1], one, rtol=0, atol=1e-15)


@pytest.mark.parametrize("kind", R.KINDS)
@pytest.mark.parametrize("v", [1.0, 0.3, 0.0])
def test_minibatch_path_equals_the_full_filter(kind, v):
    """Rows enter at their reference values except the minibatch's; values and gradients of
    EpisodeRatios equal those of the full filter with the minibatch rows written in."""
    T, N = 30, 4
    z_now, starts = _rollout(T, N, seed=7)
    kalman = {"q": 0.02, "v": v, "p0": 1.5}
    ratios = R.EpisodeRatios(kind, starts, **kalman)
    reference = torch.zeros(T * N, dtype=torch.float64)  # pi = pi_old before the first refresh
    old_logp = torch.randn(T * N, dtype=torch.float64)
    gen = torch.Generator().manual_seed(8)
    for epoch in range(2):
        for idx in torch.randperm(T * N, generator=gen).split(16):
            logp = (old_logp[idx] + z_now.reshape(-1)[idx] * (1 + epoch)).requires_grad_()
            got = ratios(logp, old_logp[idx], idx)
            (g_got,) = torch.autograd.grad(got.sin().sum(), logp)
            logp2 = logp.detach().clone().requires_grad_()
            full = reference.index_put((idx,), logp2 - old_logp[idx])
            want = R.filtered_log_ratio(full.reshape(T, N), starts, kind, **kalman)
            want = want.reshape(-1)[idx].exp()
            (g_want,) = torch.autograd.grad(want.sin().sum(), logp2)
            torch.testing.assert_close(got, want, rtol=0, atol=1e-12)
            torch.testing.assert_close(g_got, g_want, rtol=0, atol=1e-12)
        ratios.refresh()
        reference = z_now.reshape(-1) * (1 + epoch)  # every row was seen once this epoch
    assert (got - 1).abs().max() > 0.05


def test_zero_measurement_noise_on_minibatches_is_the_raw_ratio_to_the_bit():
    """v = 0 through EpisodeRatios in float32, also after refresh() (reference rows then hold
    other log-ratios): ratios and gradients are exp(logp - old_logp)'s to the bit, the numbers
    of the per-step ratio (what lets --ratio kalman --kalman-v 0 reproduce --ratio step)."""
    T, N = 30, 4
    _, starts = _rollout(T, N, seed=12, p_end=0.2)
    ratios = R.EpisodeRatios("kalman", starts, q=0.01, v=0.0)
    gen = torch.Generator().manual_seed(13)
    old_logp = torch.randn(T * N, generator=gen)
    for _ in range(3):  # epochs
        for idx in torch.randperm(T * N, generator=gen).split(40):
            logp = (old_logp[idx] + torch.randn(40, generator=gen)).requires_grad_()
            weight = torch.randn(40, generator=gen)
            got = ratios(logp, old_logp[idx], idx)
            want = (logp - old_logp[idx]).exp()
            assert got.dtype == torch.float32 and torch.equal(got, want)
            (g_got,) = torch.autograd.grad((weight * got).sum(), logp)
            (g_want,) = torch.autograd.grad((weight * want).sum(), logp)
            assert torch.equal(g_got, g_want)
        ratios.refresh()


def test_defaults_and_dtypes():
    """Defaults: KPO's reported q 1e-6, v 1 and our p0 1; the sum (not the mean) over the
    episode; float32 log-ratios stay float32; starts may be 0/1 integers."""
    z, starts = _rollout()
    want = R.kalman_log_ratio(z, starts, q=1e-6, v=1.0, p0=1.0)
    assert torch.equal(R.kalman_log_ratio(z, starts), want)
    assert R.EpisodeRatios("kalman", starts).kalman == {"q": 1e-6, "v": 1.0, "p0": 1.0}
    assert torch.equal(R.sequence_log_ratio(z, starts), R.sequence_log_ratio(z, starts, False))
    assert R.kalman_log_ratio(z.float(), starts).dtype == torch.float32
    # 0/1 flags work as booleans; episode_starts returns booleans whatever it is given
    for kind in R.KINDS:
        want = R.filtered_log_ratio(z, starts, kind)
        assert torch.equal(R.filtered_log_ratio(z, starts.int(), kind), want)
    assert R.episode_starts(np.array([[0, 1], [1, 0]])).dtype == torch.bool


def test_one_step_episodes_and_a_one_step_rollout():
    """One-step episodes (the K-armed bandits): sequence ratios are the per-step ones and the
    filter gives its first gain K_0 z; a rollout of one step filters like one episode."""
    z, _ = _rollout(T=5, N=3)
    every = torch.ones(5, 3, dtype=torch.bool)
    for kind in ("sequence", "sequence_mean"):
        assert torch.equal(R.filtered_log_ratio(z, every, kind), z)
    k0 = (1 + 1e-6) / (2 + 1e-6)
    torch.testing.assert_close(R.kalman_log_ratio(z, every), k0 * z, rtol=0, atol=1e-15)
    torch.testing.assert_close(R.kalman_log_ratio(z[:1], every[:1]), k0 * z[:1])


def test_step_kind_is_ppos_ratio():
    logp, old = torch.randn(8, dtype=torch.float64), torch.randn(8, dtype=torch.float64)
    ratios = R.EpisodeRatios("step", torch.ones(4, 2, dtype=torch.bool))
    assert torch.equal(ratios(logp, old, torch.arange(8)), (logp - old).exp())


def test_argument_errors():
    z, starts = torch.zeros(3, 2), torch.ones(3, 2, dtype=torch.bool)
    with pytest.raises(ValueError, match=re.escape("kind = 'token', expected one of")):
        R.filtered_log_ratio(z, starts, "token")
    with pytest.raises(ValueError, match=re.escape("kind = 'token', expected one of")):
        R.EpisodeRatios("token", starts)
    with pytest.raises(
        ValueError,
        match=r"^starts has shape \(2, 2\), expected \(3, 2\) \(the shape of log_ratio\)$",
    ):
        R.filtered_log_ratio(z, starts[:2], "sequence")
    with pytest.raises(ValueError, match=r"^log_ratio has shape \(6,\), expected \[T, N\]$"):
        R.filtered_log_ratio(z.reshape(-1), starts, "kalman")
    for name in ("q", "v", "p0"):
        with pytest.raises(ValueError, match=f"^{name} = -1.0 must be finite and >= 0$"):
            R.kalman_log_ratio(z, starts, **{name: -1.0})
    with pytest.raises(ValueError, match=r"^ended has shape \(3,\), expected \[T, N\]$"):
        R.episode_starts(np.zeros(3, bool))
    with pytest.raises(ValueError, match=r"^starts has shape \(5,\), expected"):
        R.EpisodeRatios("sequence", torch.ones(5, dtype=torch.bool))
    ratios = R.EpisodeRatios("sequence", starts)
    with pytest.raises(ValueError, match=r"^idx has shape \(2,\), expected \(3,\)$"):
        ratios(torch.zeros(3), torch.zeros(3), torch.arange(2))


def test_one_line_call_inside_minibatch_update():
    """EpisodeRatios in the shared minibatch loop: rows of RolloutBuffer.flat are t * N + n,
    the first minibatch sees ratio 1 everywhere (pi = pi_old), refresh() as after_epoch."""
    from types import SimpleNamespace

    from controlrl.buffers import RolloutBuffer
    from controlrl.update import minibatch_update

    T, N, d, A = 16, 3, 4, 3
    gen = torch.Generator().manual_seed(9)
    buffer = RolloutBuffer(T, N, (d,), (), discrete=True)
    buffer.obs[:] = torch.randn(T, N, d, generator=gen).numpy()
    buffer.actions[:] = torch.randint(0, A, (T, N), generator=gen).numpy()
    buffer.ended[:] = (torch.rand(T, N, generator=gen) < 0.2).numpy()
    weight = torch.nn.Parameter(0.1 * torch.randn(d, A, generator=gen))

    def log_prob(obs, actions):
        return torch.log_softmax(obs @ weight, -1).gather(-1, actions[:, None])[:, 0]

    with torch.no_grad():
        logp = log_prob(buffer.obs_t.reshape(-1, d), buffer.actions_t.reshape(-1))
        buffer.logprobs[:] = logp.reshape(T, N).numpy()
    adv = torch.randn(T, N, generator=gen).numpy()
    batch = buffer.flat(advantages=adv)
    assert batch["logprobs"][5 * N + 2] == buffer.logprobs[5, 2]  # row = t * N + n

    ratios = R.EpisodeRatios("kalman", R.episode_starts(buffer.ended), q=0.01)
    seen, last = [], torch.zeros(T * N, dtype=torch.float64)

    def loss_fn(mb, idx):
        logp = log_prob(mb["obs"], mb["actions"])
        ratio = ratios(logp, mb["logprobs"], idx)  # the one line
        seen.append(ratio.detach())
        last[idx] = (logp - mb["logprobs"]).detach().double()
        return -(ratio * mb["advantages"]).mean(), {"approx_kl": torch.tensor(0.0)}

    optimizer = torch.optim.SGD([weight], lr=0.5)
    args = SimpleNamespace(update_epochs=3, num_minibatches=4, max_grad_norm=10.0)
    minibatch_update(optimizer, batch, loss_fn, args, after_epoch=lambda e: ratios.refresh())
    assert torch.equal(seen[0], torch.ones_like(seen[0]))
    assert len(seen) == 12 and (seen[-1] - 1).abs().max() > 1e-3
    torch.testing.assert_close(ratios.ref.reshape(-1), last, rtol=0, atol=0)


def test_pairs_are_exactly_the_same_episode_pairs():
    z, starts = _rollout(T=20, N=50, seed=10, p_end=0.3)
    ratios = R.EpisodeRatios("sequence", starts)
    idx = torch.randperm(1000, generator=torch.Generator().manual_seed(11))[:300]
    i, j = ratios.pairs(idx)
    got = sorted(zip(i.tolist(), j.tolist()))
    ids = ratios.ids[idx].tolist()
    want = [(a, b) for a in range(300) for b in range(300) if ids[a] == ids[b]]
    assert got == want and len(want) < 300**2 / 10  # far fewer than B^2


@pytest.mark.parametrize("kind", ["sequence", "sequence_mean", "kalman"])
def test_primed_minibatch_ratios_are_the_full_filter_of_stale_log_ratios(kind):
    """Stale data: every log-ratio is away from 0 before the first step. After prime, a
    minibatch's ratios are the full filter's on the current log-ratios (rows t * N + n);
    without it (references at 0, right on-policy only) they are not."""
    T, N = 12, 2
    ended = np.zeros((T, N), bool)
    ended[[3, 8], 0] = True
    ended[5, 1] = True
    gen = torch.Generator().manual_seed(0)
    old_logp = torch.randn(T * N, generator=gen, dtype=torch.float64)
    logp = old_logp + 0.3 * torch.randn(T * N, generator=gen, dtype=torch.float64)
    starts = R.episode_starts(ended)
    full = R.filtered_log_ratio((logp - old_logp).reshape(T, N), starts, kind).reshape(-1)
    idx = torch.tensor([0, 5, 6, 7, 13, 20, 23])
    ratios = R.EpisodeRatios(kind, starts)
    ratios.prime(logp, old_logp)
    primed = ratios(logp[idx], old_logp[idx], idx)
    torch.testing.assert_close(primed, full[idx].exp(), rtol=1e-12, atol=0)
    unprimed = R.EpisodeRatios(kind, starts)(logp[idx], old_logp[idx], idx)
    assert not torch.allclose(unprimed, full[idx].exp(), rtol=1e-3)


def test_prime_is_a_call_on_every_row_then_refresh_to_the_bit():
    # float32 log-probs with a graph, as a policy gives them; the references are the ones a
    # call on the whole rollout and refresh() leave, bit for bit
    T, N = 9, 3
    ended = np.zeros((T, N), bool)
    ended[4, 1] = True
    gen = torch.Generator().manual_seed(1)
    old_logp = torch.randn(T * N, generator=gen)
    logp = (old_logp + 0.2 * torch.randn(T * N, generator=gen)).requires_grad_()
    primed, called = (R.EpisodeRatios("kalman", R.episode_starts(ended)) for _ in range(2))
    primed.prime(logp, old_logp)
    with torch.no_grad():
        called(logp, old_logp, torch.arange(T * N))
    called.refresh()
    assert torch.equal(primed.ref, called.ref) and torch.equal(primed.ref_out, called.ref_out)
    assert primed.ref.abs().min() > 0  # not the on-policy zeros
    with pytest.raises(ValueError, match="expected"):
        primed.prime(logp[:-1], old_logp[:-1])
