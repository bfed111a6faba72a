"""controlrl/mismatch.py, exactly on a 4-armed Bernoulli bandit whose pulls come from a sampler
mu (pi_old's logits at temperature 1.3, or rounded to bfloat16) while the gradient is pi_old's.
Expected REINFORCE gradients (autograd through -w (r - b) log pi per arm, summed with mu's
weights) against theory/group_parts.py: no correction is biased by the computed amount; TIS is
unbiased when no weight reaches the cap and biased by -sum mu (rho - C)_+ ... when one does;
MIS gives a masked arm exactly zero gradient. Groups of G = 3 from mu with RLOO, every ordered
group enumerated: uncorrected = the closed form, TIS uncapped = the true gradient. The sampler
hook draws from the perturbed logits with the same noise and restores the class."""

import itertools

import numpy as np
import pytest
import torch

from controlrl import mismatch
from controlrl.advantages import rloo
from controlrl.nets import CategoricalPolicy
from controlrl.population import PopulationPolicy
from theory import group_parts as parts
from theory import group_po as gp

LOGITS = torch.tensor([1.2, 0.1, -0.6, 0.4], dtype=torch.float64)
M = np.array([0.9, 0.2, 0.6, 0.4])  # success probability of each arm


def _dists(kind="temperature"):
    mu_logits = mismatch.perturb_logits(LOGITS, kind, temperature=1.3)
    return torch.log_softmax(LOGITS, -1), torch.log_softmax(mu_logits, -1)


def _expected_gradient(kind, b=0.3, **kw):
    """(sum_a mu_a E_r[grad of -w (r - b) log pi(a)]) as an ascent direction, per-arm grads."""
    old, mu_logp = _dists()
    w = mismatch.correction_weights(kind, old, mu_logp, **kw)
    grads = []
    for a in range(4):
        z = LOGITS.clone().requires_grad_(True)
        loss = -w[a] * (float(M[a]) - b) * torch.log_softmax(z, -1)[a]
        (g,) = torch.autograd.grad(loss, z)
        grads.append(-g.numpy())
    grads = np.array(grads)
    return mu_logp.exp().numpy() @ grads, grads, w.numpy()


def test_no_correction_is_biased_by_the_closed_form():
    pi, mu = (d.exp().numpy() for d in _dists())
    got, _, w = _expected_gradient("none")
    true = gp.true_gradient(pi, M)
    np.testing.assert_allclose(got - true, parts.mismatch_bias(pi, mu, M, w, 0.3), atol=1e-14)
    assert np.abs(got - true).max() > 1e-2


def test_tis_unbiased_below_the_cap_and_biased_above():
    pi, mu = (d.exp().numpy() for d in _dists())
    rho = pi / mu
    got, _, w = _expected_gradient("tis", cap=float(rho.max()) + 1e-9)
    np.testing.assert_allclose(got, gp.true_gradient(pi, M), atol=1e-14)
    cap = float(np.sort(rho)[-2])  # the largest weight is truncated
    got, _, w = _expected_gradient("tis", cap=cap)
    want = -(mu * np.maximum(rho - cap, 0) * (M - 0.3)) @ (np.eye(4) - pi)
    np.testing.assert_allclose(got - gp.true_gradient(pi, M), want, atol=1e-14)
    assert np.abs(want).max() > 1e-3
    np.testing.assert_allclose(w, parts.correction_weight(pi, mu, "tis", cap=cap), atol=1e-14)


def test_mis_masks_out_of_band_arms_to_zero_gradient():
    pi, mu = (d.exp().numpy() for d in _dists())
    rho = pi / mu
    low, high = 0.9, 1.1
    masked = (rho < low) | (rho > high)
    assert masked.any() and (~masked).any()
    got, grads, w = _expected_gradient("mis", low=low, high=high)
    assert (grads[masked] == 0).all() and (w[masked] == 0).all()
    want = (pi * ~masked * (M - 0.3)) @ (np.eye(4) - pi)
    np.testing.assert_allclose(got, want, atol=1e-14)


def test_rloo_groups_from_the_sampler():
    old, mu_logp = _dists("bf16")
    pi, mu = old.exp().numpy(), mu_logp.exp().numpy()
    assert np.abs(pi - mu).max() > 1e-4  # bfloat16 logits do move the sampler
    G = 3
    seqs = np.array(list(itertools.product(range(8), repeat=G)))
    arms, r = seqs // 2, (seqs % 2).astype(float)
    prob = np.prod(mu[arms] * np.where(r == 1, M[arms], 1 - M[arms]), axis=1)
    a = rloo(torch.from_numpy(r)[:, None, :])[:, 0].numpy()
    score = np.eye(4)[arms] - pi
    for kind, want in (
        ("none", parts.rloo_mismatch_mean(pi, mu, M)),
        ("tis", gp.true_gradient(pi, M)),
    ):
        w = mismatch.correction_weights(kind, old, mu_logp, cap=1e9).numpy()[arms]
        mean = prob @ np.einsum("mg,mgk->mk", w * a, score) / G
        np.testing.assert_allclose(mean, want, atol=1e-14)


def test_perturbations_and_the_sampler_hook():
    x = torch.tensor([0.123456789, -3.3333333])
    assert torch.equal(mismatch.perturb_logits(x, "temperature", 2.0), x / 2)
    assert torch.equal(mismatch.perturb_logits(x, "bf16"), x.bfloat16().float())
    assert not torch.equal(mismatch.perturb_logits(x, "bf16"), x)
    z = torch.randn(2000, 4, generator=torch.Generator().manual_seed(0))
    noise = torch.empty_like(z).exponential_(generator=torch.Generator().manual_seed(1))
    with mismatch.perturbed_sampling(CategoricalPolicy, "temperature", 3.0):
        hooked = CategoricalPolicy.sample_with(z, noise.clone())
    assert torch.equal(hooked, CategoricalPolicy.sample_with(z / 3.0, noise.clone()))
    assert not torch.equal(hooked, CategoricalPolicy.sample_with(z, noise.clone()))
    with pytest.raises(RuntimeError), mismatch.perturbed_sampling(CategoricalPolicy, "bf16"):
        raise RuntimeError
    assert CategoricalPolicy.sample_with(z, noise.clone()).equal(
        (torch.softmax(z, -1) / noise).argmax(-1)
    )
    # the sampler of a policy: its draws and its log-probabilities are the perturbed logits'
    policy = CategoricalPolicy(3, 4, (8,))
    obs = torch.randn(500, 3, generator=torch.Generator().manual_seed(2))
    torch.manual_seed(5)
    drawn = mismatch.behaviour_sampler(policy, "temperature", 0.5)(obs)
    torch.manual_seed(5)
    with torch.no_grad():
        logits = policy.sample_inputs(obs)
        want = CategoricalPolicy.sample_with(logits / 0.5, torch.empty_like(logits).exponential_())
    assert torch.equal(drawn, want)
    got = mismatch.behaviour_log_probs(policy, obs, drawn, "temperature", 0.5)
    torch.testing.assert_close(
        got, torch.log_softmax(logits / 0.5, -1).gather(-1, want[:, None])[:, 0]
    )
    with pytest.raises(ValueError, match=r"^correction 'clip', expected one of"):
        mismatch.correction_weights("clip", x, x)
    with pytest.raises(ValueError, match=r"^perturbation 'fp8', expected one of"):
        mismatch.perturb_logits(x, "fp8")


def _by_hand(linear) -> tuple:
    """(policy, obs, its logits by hand with each Linear as linear(x, layer) and tanh between,
    as float32; its own float32 logits) on 300 spread-out observations."""
    torch.manual_seed(0)
    policy = CategoricalPolicy(3, 5, (16, 16))
    obs = torch.randn(300, 3, generator=torch.Generator().manual_seed(2)) * 3
    with torch.no_grad():
        x = obs
        for layer in policy.logits:
            x = linear(x, layer) if isinstance(layer, torch.nn.Linear) else torch.tanh(x)
        return policy, obs, x.float(), policy.sample_inputs(obs)


def _bf16_linear(x: torch.Tensor, layer: torch.nn.Linear) -> torch.Tensor:
    """Weight, bias and input in bfloat16."""
    return x.bfloat16() @ layer.weight.bfloat16().T + layer.bias.bfloat16()


def test_bf16_forward_runs_weights_and_activations_in_bf16_and_its_kl_is_exact():
    policy, obs, want, exact = _by_hand(_bf16_linear)
    got = mismatch._logits(policy, obs, "bf16-forward", 1.0)
    torch.testing.assert_close(got, want, atol=0.02, rtol=0)  # bf16's matmul accumulates wider
    assert (got - exact).abs().max() > 1e-4  # not the float32 forward
    rounded = mismatch._logits(policy, obs, "bf16", 1.0)  # rounding the logits alone is less
    assert (got - exact).abs().mean() > 2 * (rounded - exact).abs().mean()
    with torch.no_grad():  # the hook is gone after the block
        assert torch.equal(policy.sample_inputs(obs), exact)
    torch.manual_seed(5)
    drawn = mismatch.behaviour_sampler(policy, "bf16-forward")(obs)
    torch.manual_seed(5)
    noise = torch.empty_like(got).exponential_()
    assert torch.equal(drawn, CategoricalPolicy.sample_with(got, noise))
    logp = mismatch.behaviour_log_probs(policy, obs, drawn, "bf16-forward")
    torch.testing.assert_close(logp, torch.log_softmax(got, -1).gather(-1, drawn[:, None])[:, 0])
    mu, pi = torch.softmax(got.double(), -1), torch.softmax(exact.double(), -1)
    kl = mismatch.mismatch_kl(policy, obs, "bf16-forward")
    torch.testing.assert_close(kl, (mu * (mu / pi).log()).sum(-1))
    assert (kl > 0).all()
    none = mismatch.mismatch_kl(policy, obs, "none")
    assert torch.equal(none, torch.zeros(300, dtype=torch.float64))


def test_rollout_lag_samples_with_the_policy_of_k_updates_ago_and_checkpoints_its_window():
    torch.manual_seed(0)
    policy = CategoricalPolicy(3, 4, (8,))
    lag = mismatch.RolloutLag(policy, 2)
    params = []
    for i in range(4):  # "updates": every parameter set to i + 1
        params.append({n: t.clone() for n, t in policy.state_dict().items()})
        with torch.no_grad():
            for p in policy.parameters():
                p.fill_(i + 1.0)
        lag.step(policy)
        want = params[max(0, i - 1)]  # after update i the sampler is theta_{i + 1 - 2}
        got = lag.behaviour.state_dict()
        assert all(torch.equal(got[n], want[n]) for n in want), i
    assert not any(p.requires_grad for p in lag.behaviour.parameters())
    other = mismatch.RolloutLag(CategoricalPolicy(3, 4, (8,)), 2)
    other.load_state_dict(lag.state_dict())  # a resumed run: the same window and sampler
    assert all(torch.equal(other.behaviour.state_dict()[n], params[2][n]) for n in params[2])
    policy_logits = policy.sample_inputs(torch.ones(1, 3))
    kl = mismatch.mismatch_kl(policy, torch.ones(1, 3), "none", behaviour=lag.behaviour)
    mu = torch.softmax(lag.behaviour.sample_inputs(torch.ones(1, 3)).double(), -1)
    pi = torch.softmax(policy_logits.double(), -1)
    torch.testing.assert_close(kl, (mu * (mu / pi).log()).sum(-1))


def _fp8_gemm(x: torch.Tensor, layer: torch.nn.Linear) -> torch.Tensor:
    """torch._scaled_mm: weight and input in float8 e4m3 with per-tensor scales amax / 448,
    bfloat16 bias and output."""
    sx, sw = x.float().abs().max() / 448, layer.weight.abs().max() / 448
    xq = (x.float() / sx).to(torch.float8_e4m3fn)
    wq = (layer.weight / sw).to(torch.float8_e4m3fn)
    return torch._scaled_mm(xq, wq.T, sx, sw, bias=layer.bias.bfloat16(), out_dtype=torch.bfloat16)


def test_fp8_forward_is_the_scaled_fp8_gemm_batches_over_seeds_and_perturbs_more_than_bf16():
    policy, obs, want, exact = _by_hand(_fp8_gemm)
    got = mismatch._logits(policy, obs, "fp8-forward", 1.0)
    torch.testing.assert_close(got, want, atol=0.02, rtol=0)  # summation order only
    assert (got - want).abs().max() <= (want.abs().max() * 2**-7).item()  # within bf16's ulp
    with torch.no_grad():  # the hook is gone after the block
        assert torch.equal(policy.sample_inputs(obs), exact)
    kl = {k: mismatch.mismatch_kl(policy, obs, k).mean() for k in ("bf16-forward", "fp8-forward")}
    assert kl["fp8-forward"] > 10 * kl["bf16-forward"] > 0
    # a population's seeds (vmapped): each seed's own per-tensor scales
    nets = [CategoricalPolicy(3, 5, (16, 16)) for _ in range(3)]
    population = PopulationPolicy.build(nets)
    obs3 = torch.stack([obs, obs * 0.5, obs * 4])
    batched = mismatch._logits(population, obs3, "fp8-forward", 1.0)
    for k, net in enumerate(nets):
        assert torch.equal(batched[k], mismatch._logits(net, obs3[k], "fp8-forward", 1.0))
