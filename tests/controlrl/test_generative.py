"""controlrl.generative: DDPM schedules, the reverse chain and its log-probs, DDIM, and conditional
flow matching, each against a closed form or a hand computation."""

import math

import pytest
import torch
from torch.distributions import Normal

from controlrl.generative import (
    DDPMSchedule,
    DenoiserMLP,
    cfm_loss,
    chain_log_probs,
    cosine_betas,
    ddpm_denoiser,
    ddpm_loss,
    euler_sample,
    flow_interpolate,
    flow_time_grid,
    flow_velocity_net,
    fourier_embedding,
    linear_betas,
    posterior_mean,
    q_sample,
    reverse_step_params,
    sample_cfm_pairs,
    sample_chain,
    sample_ddim,
)


def test_cosine_schedule_endpoints_and_monotone():
    K = 20
    betas = cosine_betas(K)
    sched = DDPMSchedule.from_betas(betas)
    assert betas.shape == (K,) and (betas > 0).all() and (betas <= 0.999).all()
    assert (betas[1:] > betas[:-1]).all()  # noise increases with k
    # abar_k = f((k + 1) / K) / f(0), f(u) = cos((u + s) / (1 + s) pi / 2)^2 (Nichol & Dhariwal);
    # f(1) = 0 makes the last beta 1, clipped to 0.999
    f = lambda u: math.cos((u + 0.008) / 1.008 * math.pi / 2) ** 2  # noqa: E731
    expected = torch.tensor([f((k + 1) / K) / f(0) for k in range(K - 1)])
    torch.testing.assert_close(sched.alphas_cumprod[:-1], expected, rtol=1e-5, atol=1e-7)
    assert betas[-1] == pytest.approx(0.999)
    assert (sched.alphas_cumprod[1:] < sched.alphas_cumprod[:-1]).all()
    assert sched.alphas_cumprod_prev[0] == 1.0


def test_linear_schedule_endpoints():
    betas = linear_betas(10)
    assert betas[0] == pytest.approx(1e-4) and betas[-1] == pytest.approx(0.02)
    torch.testing.assert_close(betas[1:] - betas[:-1], torch.full((9,), 0.0199 / 9))
    sched = DDPMSchedule.make(10, "linear")
    torch.testing.assert_close(sched.alphas_cumprod, torch.cumprod(1 - betas.double(), 0).float())


def test_posterior_variance_log_clipped():
    sched = DDPMSchedule.make(20)
    assert sched.posterior_var[0] == 0.0  # beta_0 (1 - 1) / (1 - abar_0)
    assert sched.posterior_logvar[0] == pytest.approx(math.log(1e-20))
    torch.testing.assert_close(sched.posterior_logvar[1:], sched.posterior_var[1:].log())


def test_posterior_mean_matches_forward_posterior_closed_form():
    """With x0_hat = x0, the reverse mean is the mean of q(x_{k-1} | x_k, x0), which by Bayes on
    q(x_k | x_{k-1}) = N(sqrt(a_k) x_{k-1}, b_k) and q(x_{k-1} | x0) = N(sqrt(abar_{k-1}) x0,
    1 - abar_{k-1}) is the precision-weighted mean below."""
    torch.manual_seed(0)
    sched = DDPMSchedule.make(20)
    B, A = 64, 3
    k = torch.randint(1, 20, (B,))
    x0, x_k = torch.randn(B, A), torch.randn(B, A)
    a = (1 - sched.betas[k]).double()[:, None]
    b = sched.betas[k].double()[:, None]
    ab_prev = sched.alphas_cumprod_prev[k].double()[:, None]
    prec = a / b + 1 / (1 - ab_prev)
    mean = (a.sqrt() / b * x_k.double() + ab_prev.sqrt() / (1 - ab_prev) * x0.double()) / prec
    var = 1 / prec
    got = posterior_mean(sched, x0, x_k, k)
    torch.testing.assert_close(got.double(), mean, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(sched.posterior_var[k].double(), var[:, 0], rtol=1e-4, atol=1e-7)


class _Oracle(torch.nn.Module):
    """An eps 'network' that knows x0: eps = (x_k - sqrt(abar_k) x0) / sqrt(1 - abar_k)."""

    def __init__(self, sched, x0):
        super().__init__()
        self.sched, self.x0 = sched, x0

    def forward(self, x, k, obs):
        ac = self.sched.alphas_cumprod[k][:, None]
        return (x - ac.sqrt() * self.x0) / (1 - ac).sqrt()


def test_reverse_step_with_exact_eps_is_the_forward_posterior():
    torch.manual_seed(1)
    sched = DDPMSchedule.make(10)
    B, A = 16, 2
    x0 = torch.rand(B, A) * 1.6 - 0.8  # inside the denoised clip
    k = torch.randint(0, 10, (B,))
    x_k = q_sample(sched, x0, k, torch.randn(B, A))
    mean, std = reverse_step_params(_Oracle(sched, x0), sched, x_k, k, torch.zeros(B, 1))
    torch.testing.assert_close(mean, posterior_mean(sched, x0, x_k, k), rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(std, sched.posterior_logvar[k][:, None].mul(0.5).exp().expand(B, A))


def test_chain_log_probs_equal_hand_computed_normal_log_densities():
    torch.manual_seed(2)
    K, ft, B, A, D = 6, 4, 5, 2, 3
    sched = DDPMSchedule.make(K)
    net = DenoiserMLP(D, A, (16, 16), time_dim=8)
    obs = torch.randn(B, D)
    chain = torch.randn(B, ft + 1, A)  # a fixed trajectory, not necessarily a sampled one
    got = chain_log_probs(net, sched, chain, obs, min_logprob_std=0.1)
    assert got.shape == (B, ft, A)
    total = torch.zeros(B)
    for j in range(ft):
        k = ft - 1 - j
        kb = torch.full((B,), k)
        x = chain[:, j]
        ac = sched.alphas_cumprod[k]
        x0_hat = (x - (1 - ac).sqrt() * net(x, kb, obs)) / ac.sqrt()
        x0_hat = x0_hat.clamp(-1, 1)
        mean = sched.mu_coef1[k] * x0_hat + sched.mu_coef2[k] * x
        std = max(math.exp(0.5 * sched.posterior_logvar[k].item()), 0.1)
        step = Normal(mean, std).log_prob(chain[:, j + 1])
        torch.testing.assert_close(got[:, j], step, rtol=1e-5, atol=1e-5)
        total += step.sum(-1)
    torch.testing.assert_close(got.sum((1, 2)), total, rtol=1e-5, atol=1e-5)


def test_sample_chain_shapes_bounds_and_chain_links():
    torch.manual_seed(3)
    K, ft, B, A, D = 8, 3, 256, 2, 4
    sched = DDPMSchedule.make(K)
    net = ddpm_denoiser(D, A, (32, 32, 32))
    obs = torch.randn(B, D)
    actions, chain = sample_chain(net, sched, obs, A, ft, min_sampling_std=0.1)
    assert actions.shape == (B, A) and chain.shape == (B, ft + 1, A)
    torch.testing.assert_close(chain[:, -1], actions)
    # the last step: |mean| <= mu1 + mu2 |x_1| with x0_hat in [-1, 1], noise within 3 std
    bound = sched.mu_coef1[0] + sched.mu_coef2[0] * chain[:, -2].abs() + 3 * 0.1
    assert (actions.abs() <= bound + 1e-6).all()
    # full fine-tuning: the chain starts at x_K
    x_K = torch.randn(B, A)
    _, full = sample_chain(net, sched, obs, A, K, x_init=x_K)
    assert full.shape == (B, K + 1, A)
    torch.testing.assert_close(full[:, 0], x_K)


def test_sampled_actions_respect_denoised_clip_in_deterministic_mode():
    torch.manual_seed(4)
    sched = DDPMSchedule.make(10)
    net = ddpm_denoiser(3, 2, (32, 32, 32))
    with torch.no_grad():  # a large output makes x0_hat hit the clip
        net.net[-1].bias.fill_(50.0)
    actions, _ = sample_chain(net, sched, torch.randn(128, 3), 2, 5, deterministic=True)
    # at k = 0 the posterior mean is x0_hat (mu_coef2[0] = 0) and std 0: the clipped x0_hat
    assert sched.mu_coef2[0] == 0.0
    assert (actions.abs() <= 1.0 + 1e-6).all()
    assert (actions.abs() > 0.99).float().mean() > 0.9


class _Plain(torch.nn.Module):
    """A denoiser that is not a DenoiserMLP (sample_chain's generic path), recording its steps."""

    def __init__(self, net, name, seen):
        super().__init__()
        self.net, self.name, self.seen = net, name, seen

    def forward(self, x, k, obs):
        self.seen.append((self.name, int(k[0])))
        return self.net(x, k, obs)


@pytest.mark.parametrize("deterministic", [False, True])
def test_ft_net_used_only_for_the_last_steps_and_conditioned_sampling_matches(deterministic):
    """The generic path calls net for k >= K' and ft_net below, one batched call per step; the
    DenoiserMLP path (conditioned first layer, plain calls) gives the same chain up to float
    rounding, from the same generator, for a residual denoiser."""
    torch.manual_seed(5)
    K, ft, B, A, D = 6, 2, 8, 2, 3
    sched = DDPMSchedule.make(K)
    base = DenoiserMLP(D, A, (16, 16, 16), 8, residual=True)
    ft_net = DenoiserMLP(D, A, (16, 16, 16), 8, residual=True)
    with torch.no_grad():  # the fine-tuned copy differs visibly
        ft_net.net[-1].bias.fill_(0.5)
    obs, seen = torch.randn(B, D), []
    kw = dict(deterministic=deterministic, min_sampling_std=0.1)
    a1, c1 = sample_chain(
        _Plain(base, "base", seen),
        sched,
        obs,
        A,
        ft,
        ft_net=_Plain(ft_net, "ft", seen),
        generator=torch.Generator().manual_seed(9),
        **kw,
    )
    assert seen == [("base", 5), ("base", 4), ("base", 3), ("base", 2), ("ft", 1), ("ft", 0)]
    a2, c2 = sample_chain(
        base, sched, obs, A, ft, ft_net=ft_net, generator=torch.Generator().manual_seed(9), **kw
    )
    torch.testing.assert_close(c2, c1, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(a2, a1, rtol=1e-5, atol=1e-6)
    g = torch.Generator().manual_seed(9)  # by hand: reverse_step_params, DPPO's std floors
    x = torch.randn((B, A), generator=g)
    for k in range(K - 1, -1, -1):
        net = ft_net if k < ft else base
        mean, std = reverse_step_params(net, sched, x, torch.full((B,), k), obs)
        if deterministic:
            std = torch.zeros_like(std) if k == 0 else std.clamp(min=1e-3)
        else:
            std = std.clamp(min=0.1)
        x = mean + std * torch.randn(x.shape, generator=g).clamp(-3.0, 3.0)
    torch.testing.assert_close(a1, x, rtol=0, atol=0)
    a3, _ = sample_chain(base, sched, obs, A, ft, generator=torch.Generator().manual_seed(9), **kw)
    assert (a3 - a2).abs().max() > 1e-3  # without ft_net the last steps differ


def test_ddim_all_steps_eta0_deterministic_given_x_init():
    torch.manual_seed(6)
    sched = DDPMSchedule.make(10)
    net = ddpm_denoiser(3, 2, (32, 32, 32))
    obs, x_K = torch.randn(32, 3), torch.randn(32, 2)
    a1 = sample_ddim(net, sched, obs, 2, 10, x_init=x_K)
    torch.manual_seed(123)  # another RNG state: the same actions
    a2 = sample_ddim(net, sched, obs, 2, 10, x_init=x_K)
    torch.testing.assert_close(a1, a2, rtol=0, atol=0)
    # with an oracle eps the x0 is recovered exactly at the end (abar_prev = 1 at the last step)
    x0 = torch.rand(32, 2) - 0.5
    got = sample_ddim(_Oracle(sched, x0), sched, obs, 2, 5, x_init=x_K)
    torch.testing.assert_close(got, x0, rtol=1e-4, atol=1e-4)


def test_ddpm_loss_zero_for_oracle_and_positive_otherwise():
    torch.manual_seed(7)
    sched = DDPMSchedule.make(10)
    x0 = torch.rand(64, 2) - 0.5
    assert ddpm_loss(_Oracle(sched, x0), sched, x0, torch.zeros(64, 1)).item() < 1e-8
    assert ddpm_loss(ddpm_denoiser(1, 2, (16, 16, 16)), sched, x0, torch.zeros(64, 1)) > 0.1


def test_flow_interpolation_endpoints():
    a, eps = torch.randn(4, 3), torch.randn(4, 2, 3)
    torch.testing.assert_close(flow_interpolate(a, eps, torch.ones(4, 2)), eps)
    torch.testing.assert_close(
        flow_interpolate(a, eps, torch.zeros(4, 2)), a[:, None].expand(4, 2, 3)
    )
    torch.testing.assert_close(flow_time_grid(10), torch.linspace(1.0, 0.1, 10))


def test_eps_mse_is_one_minus_t_squared_u_mse():
    torch.manual_seed(8)
    net = flow_velocity_net(3, 2)
    obs, a = torch.randn(16, 3), torch.randn(16, 2)
    eps, t = sample_cfm_pairs(16, 8, 2, discrete=False)
    l_eps = cfm_loss(net, obs, a, eps, t, "eps")
    l_u = cfm_loss(net, obs, a, eps, t, "u")
    assert l_eps.shape == (16, 8)
    torch.testing.assert_close(l_eps, (1 - t) ** 2 * l_u, rtol=1e-5, atol=1e-6)
    # on the discrete grid t = 1 carries no signal with eps-MSE
    eps, t = sample_cfm_pairs(16, 8, 2, grid_steps=10)
    assert set(t.unique().tolist()) <= set(flow_time_grid(10).tolist())
    assert (cfm_loss(net, obs, a, eps, t)[t == 1.0] == 0).all()


def test_fourier_embedding_and_flow_net_output_scale():
    t = torch.tensor([0.0, 0.5])
    emb = fourier_embedding(t, 8)
    torch.testing.assert_close(
        emb[1],
        torch.tensor(
            [math.cos(0.5 * 2**k) for k in range(4)] + [math.sin(0.5 * 2**k) for k in range(4)]
        ),
    )
    net = flow_velocity_net(3, 2)
    x, obs = torch.randn(5, 2), torch.randn(5, 3)
    torch.testing.assert_close(
        net(x, torch.full((5,), 0.3), obs),
        0.25 * net.net(torch.cat((x, net.embed(torch.full((5,), 0.3)), obs), -1)),
    )


def test_euler_integrates_a_known_velocity_field():
    """v = eps - a for the straight path from a fixed a: x_t = a + t (x_1 - a) is the ODE's
    solution, so Euler from x_1 lands exactly on a (the field is constant along the path)."""

    class Straight(torch.nn.Module):
        def forward(self, x, t, obs):
            return (x - obs) / t[:, None]  # u = (x_t - a) / t = eps - a on the path

    obs, x1 = torch.randn(6, 2), torch.randn(6, 2)
    torch.testing.assert_close(euler_sample(Straight(), obs, 2, steps=7, x_init=x1), obs)


def test_cfm_training_on_bimodal_target_recovers_both_modes():
    """Plain CFM on a 1-D target with modes at -0.5 and +0.5 (std 0.05), then 10 Euler steps:
    both modes hold ~half the samples and few samples fall between them."""
    torch.manual_seed(9)
    net = flow_velocity_net(1, 1, hidden_sizes=(64, 64), output_scale=1.0)
    opt = torch.optim.Adam(net.parameters(), lr=3e-3)
    obs = torch.zeros(128, 1)
    for _ in range(500):
        a = torch.where(torch.rand(128, 1) < 0.5, -0.5, 0.5) + 0.05 * torch.randn(128, 1)
        eps, t = sample_cfm_pairs(128, 4, 1, discrete=False)
        loss = cfm_loss(net, obs, a, eps, t).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    x = euler_sample(net, torch.zeros(4000, 1), 1, steps=10)[:, 0]
    left, right = ((x + 0.5).abs() < 0.2).float().mean(), ((x - 0.5).abs() < 0.2).float().mean()
    assert left > 0.35 and right > 0.35, (left, right)  # 0.5 each if exact
    assert (x.abs() < 0.2).float().mean() < 0.1, (x.abs() < 0.2).float().mean()


@pytest.mark.parametrize(
    "residual, act",
    [(False, torch.nn.SiLU), (True, torch.nn.SiLU), (False, torch.nn.Mish), (False, torch.nn.Tanh)],
)
def test_conditioned_step_equals_forward(residual, act):
    torch.manual_seed(10)
    hidden = (32, 32, 32) if residual else (32, 32)
    net = DenoiserMLP(5, 3, hidden, 8, "fourier", False, act, residual, 0.25)
    obs, x, times = torch.randn(7, 5), torch.randn(7, 3), flow_time_grid(10)
    step = net.conditioned(obs, times)
    for i in (0, 4, 9):
        ref = net(x, times[i].expand(7), obs)
        torch.testing.assert_close(step(x, i), ref, rtol=1e-5, atol=1e-6)
    # euler_sample takes the conditioned path for a DenoiserMLP: the plain loop's result
    x1 = torch.randn(7, 3)
    plain = x1.clone()
    for t in times.tolist():
        plain = plain - 0.1 * net(plain, torch.full((7,), t), obs)
    torch.testing.assert_close(
        euler_sample(net, obs, 3, 10, x_init=x1), plain, rtol=1e-5, atol=1e-6
    )
