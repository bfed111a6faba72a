"""Generative policy pieces shared by DPPO and FPO: a denoiser / velocity MLP with a time
embedding, DDPM noise schedules, the DDPM reverse chain with per-step Gaussian log-probabilities,
DDIM sampling, and conditional flow matching with Euler integration. Torch, batched: one network
forward per denoising / integration step for the whole batch.

DDPM follows DPPO (Ren et al. 2024, arXiv 2409.00588; irom-lab/dppo model/diffusion/diffusion.py,
diffusion_vpg.py, sampling.py, mlp_diffusion.py); flow matching follows FPO (McAllister et al.
2025, arXiv 2507.21053; akanazawa/fpo playground/src/flow_policy/fpo.py, networks.py).

Public API (names are stable; DPPO and FPO import them):

    sinusoidal_embedding(t, dim) -> [B, dim]        Diffuser/DPPO sin|cos, 10000^(-i/(dim/2-1))
    fourier_embedding(t, dim) -> [B, dim]           FPO [cos(t 2^k), sin(t 2^k)], k < dim/2
    DenoiserMLP(obs_dim, act_dim, hidden_sizes, time_dim, embedding, time_mlp, activation,
                residual, output_scale)             net(x [B, A], t [B], obs [B, D]) -> [B, A]
      .conditioned(obs, times [S]) -> step(x, i)    the same net for a sampling loop, with the
                                                    first layer's obs and time terms computed once
    ddpm_denoiser(obs_dim, act_dim, ...)            DPPO's eps network (Mish, 16-dim emb + MLP)
    flow_velocity_net(obs_dim, act_dim, ...)        FPO's velocity network (SiLU, 8-dim, x0.25)

    cosine_betas(K, s, max_beta), linear_betas(K, start, end) -> [K]
    DDPMSchedule.make(K, kind) / DDPMSchedule(betas)  alphas_cumprod, alphas_cumprod_prev,
                                                    posterior_var, posterior_logvar (log clipped
                                                    at 1e-20), mu_coef1, mu_coef2 ([K] each);
                                                    .to(device); .num_steps
    q_sample(sched, x0, k, noise) -> x_k            forward process (k: [B] long, 0-based)
    predict_x0(sched, x_k, k, eps_hat) -> x0_hat
    posterior_mean(sched, x0, x_k, k) -> mean of q(x_{k-1} | x_k, x0)
    ddpm_loss(net, sched, actions, obs) -> scalar   eps-prediction MSE (behaviour cloning)
    reverse_step_params(net, sched, x_k, k, obs, denoised_clip) -> (mean, std)  std unfloored
    sample_chain(net, sched, obs, act_dim, ft_steps, ...) -> (actions [B, A], chain [B, K'+1, A])
    chain_log_probs(net, sched, chain, obs, ...) -> [B, K', A] per-element Gaussian log-probs
    ddim_steps_sequence(K, S) -> [S] long           "leading" uniform sub-sequence, descending
    sample_ddim(net, sched, obs, act_dim, ddim_steps, x_init=None, ...) -> actions [B, A]

    flow_interpolate(actions, eps, t) -> x_t        x_t = t eps + (1 - t) a  (t = 1: noise)
    flow_time_grid(S) -> [S]                        [1, 1 - 1/S, ..., 1/S], the Euler start times
    sample_cfm_pairs(B, N, A, grid_steps, discrete, generator) -> (eps [B, N, A], t [B, N])
    cfm_loss(net, obs, actions, eps, t, mode) -> [B, N]   mode "eps" (FPO default) or "u"
    euler_sample(net, obs, act_dim, steps, x_init=None, generator=None) -> actions [B, A]

Chain convention (DPPO): the K reverse steps are indexed k = K-1 (noisiest) ... 0; step k maps x
to the next x with net(x, k) and the schedule's entries at k. The last K' steps (k < K') are the
fine-tuned ones; chain[:, j], j = 0..K', is the input of step k = K'-1-j and chain[:, j+1] its
output, so chain[:, -1] is the action.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

# ----------------------------------------------------------------------------------------------
# time embeddings and networks


def sinusoidal_embedding(t: torch.Tensor, dim: int) -> torch.Tensor:
    """Diffuser/DPPO sinusoidal embedding [B, dim] of times t [B] (model/diffusion/modules.py)."""
    half = dim // 2
    freqs = torch.exp(
        torch.arange(half, device=t.device, dtype=torch.float32) * (-math.log(10000) / (half - 1))
    )
    arg = t.float()[:, None] * freqs[None, :]
    return torch.cat((arg.sin(), arg.cos()), dim=-1)


def fourier_embedding(t: torch.Tensor, dim: int) -> torch.Tensor:
    """FPO embedding [B, dim]: [cos(t 2^k), sin(t 2^k)], k < dim / 2 (fpo.py embed_timestep)."""
    freqs = 2.0 ** torch.arange(dim // 2, device=t.device, dtype=torch.float32)
    arg = t.float()[:, None] * freqs[None, :]
    return torch.cat((arg.cos(), arg.sin()), dim=-1)


class _ResidualBlock(nn.Module):
    """DPPO's TwoLayerPreActivationResNetLinear: x + l2(act(l1(act(x))))."""

    def __init__(self, width: int, activation: type[nn.Module]) -> None:
        super().__init__()
        self.l1, self.l2, self.act = nn.Linear(width, width), nn.Linear(width, width), activation()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.l2(self.act(self.l1(self.act(x))))


class DenoiserMLP(nn.Module):
    """net(x [B, A], t [B], obs [B, D]) -> [B, A]: an MLP on concat(x, emb(t), obs).

    embedding "sinusoidal" (DPPO) or "fourier" (FPO); time_mlp: DPPO's Linear(dim, 2 dim) - Mish -
    Linear(2 dim, dim) on the embedding; residual: DPPO's ResidualMLP (one Linear to the width,
    (len(hidden_sizes) - 1) / 2 pre-activation residual blocks, one Linear out; hidden sizes all
    equal and of odd count); output_scale multiplies the output (FPO 0.25). What the output means
    (eps for DDPM, velocity for flow matching) is up to the caller."""

    def __init__(
        self,
        obs_dim: int,
        act_dim: int,
        hidden_sizes: tuple[int, ...] = (256, 256),
        time_dim: int = 16,
        embedding: Literal["sinusoidal", "fourier"] = "sinusoidal",
        time_mlp: bool = True,
        activation: type[nn.Module] = nn.Mish,
        residual: bool = False,
        output_scale: float = 1.0,
    ) -> None:
        super().__init__()
        if embedding not in ("sinusoidal", "fourier"):
            raise ValueError(f"embedding must be 'sinusoidal' or 'fourier', got {embedding!r}")
        if time_dim < 2 or time_dim % 2:
            raise ValueError(f"time_dim must be even and >= 2, got {time_dim}")
        if embedding == "sinusoidal" and time_dim < 4:
            raise ValueError("a sinusoidal embedding needs time_dim >= 4")
        self.obs_dim, self.act_dim, self.time_dim = obs_dim, act_dim, time_dim
        self.embedding, self.output_scale = embedding, float(output_scale)
        self.time_mlp = (
            nn.Sequential(
                nn.Linear(time_dim, 2 * time_dim), nn.Mish(), nn.Linear(2 * time_dim, time_dim)
            )
            if time_mlp
            else None
        )
        in_dim = act_dim + time_dim + obs_dim
        layers: list[nn.Module] = []
        if residual:
            width = hidden_sizes[0]
            if len(set(hidden_sizes)) != 1 or len(hidden_sizes) % 2 == 0:
                raise ValueError(
                    f"residual needs an odd number of equal hidden sizes, got {hidden_sizes}"
                )
            layers.append(nn.Linear(in_dim, width))
            layers += [_ResidualBlock(width, activation) for _ in range(len(hidden_sizes) // 2)]
            layers.append(nn.Linear(width, act_dim))
        else:
            sizes = [in_dim, *hidden_sizes, act_dim]
            for i in range(len(sizes) - 1):
                layers.append(nn.Linear(sizes[i], sizes[i + 1]))
                if i < len(sizes) - 2:
                    layers.append(activation())
        self.net = nn.Sequential(*layers)

    def embed(self, t: torch.Tensor) -> torch.Tensor:
        """Time embedding [B, time_dim] of t [B] (a step index k or a flow time)."""
        if self.embedding == "sinusoidal":
            emb = sinusoidal_embedding(t, self.time_dim)
        else:
            emb = fourier_embedding(t, self.time_dim)
        return emb if self.time_mlp is None else self.time_mlp(emb)

    def forward(self, x: torch.Tensor, t: torch.Tensor, obs: torch.Tensor) -> torch.Tensor:
        out = self.net(torch.cat((x, self.embed(t), obs), dim=-1))
        return out * self.output_scale if self.output_scale != 1.0 else out

    def conditioned(
        self, obs: torch.Tensor, times: torch.Tensor
    ) -> Callable[[torch.Tensor, int], torch.Tensor]:
        """step(x [B, A], i) = self(x, times[i] for every row, obs) for a sampling loop over the
        given times [S]: the first layer's obs and time terms are computed once (its input is
        concat(x, emb, obs), so W [x; e; o] = W_x x + W_e e + W_o o), not once per step. Equal
        to forward up to float rounding."""
        first, A, E = self.net[0], self.act_dim, self.time_dim
        w_x, w_e, w_o = first.weight[:, :A], first.weight[:, A : A + E], first.weight[:, A + E :]
        obs_term = F.linear(obs, w_o, first.bias)  # [B, H]
        time_terms = F.linear(self.embed(times), w_e)  # [S, H]
        rest, scale = _functional(list(self.net)[1:]), self.output_scale
        inplace = not torch.is_grad_enabled()  # activations in place only without a graph

        def step(x: torch.Tensor, i: int) -> torch.Tensor:
            h = F.linear(x, w_x).add_(obs_term).add_(time_terms[i])
            for kind, a, b in rest:  # plain calls: ~1.6x faster than the modules at batch 8
                if kind == "linear":
                    h = F.linear(h, a, b)
                elif kind == "act":
                    h = a(h, inplace=inplace)
                elif kind == "residual":  # h + l2(act(l1(act(h)))), h itself kept for the sum
                    w1, b1, w2, b2 = a
                    r = F.linear(b(h), w1, b1)
                    h = h + F.linear(b(r, inplace=inplace), w2, b2)
                else:
                    h = a(h)
            return h * scale if scale != 1.0 else h

        return step


_ACTIVATIONS = {nn.SiLU: F.silu, nn.Mish: F.mish, nn.ReLU: F.relu}


def _functional(layers: list[nn.Module]) -> list[tuple]:
    """(kind, a, b) per layer: ("linear", weight, bias), ("act", F.<fn>, None) for SiLU, Mish
    and ReLU, ("residual", (w1, b1, w2, b2), F.<fn>) for a _ResidualBlock with one of those,
    ("module", layer, None) for anything else (Tanh)."""
    out: list[tuple] = []
    for layer in layers:
        if type(layer) is nn.Linear:
            out.append(("linear", layer.weight, layer.bias))
        elif type(layer) in _ACTIVATIONS:
            out.append(("act", _ACTIVATIONS[type(layer)], None))
        elif type(layer) is _ResidualBlock and type(layer.act) in _ACTIVATIONS:
            l1, l2 = layer.l1, layer.l2
            out.append(
                (
                    "residual",
                    (l1.weight, l1.bias, l2.weight, l2.bias),
                    _ACTIVATIONS[type(layer.act)],
                )
            )
        else:
            out.append(("module", layer, None))
    return out


def ddpm_denoiser(
    obs_dim: int,
    act_dim: int,
    hidden_sizes: tuple[int, ...] = (512, 512, 512),
    time_dim: int = 16,
    residual: bool = True,
) -> DenoiserMLP:
    """DPPO's eps network (cfg/gym/finetune/hopper-v2: DiffusionMLP, mlp_dims [512] x 3,
    residual_style True, time_dim 16, Mish)."""
    return DenoiserMLP(
        obs_dim, act_dim, hidden_sizes, time_dim, "sinusoidal", True, nn.Mish, residual
    )


def flow_velocity_net(
    obs_dim: int,
    act_dim: int,
    hidden_sizes: tuple[int, ...] = (32, 32, 32, 32),
    time_dim: int = 8,
    output_scale: float = 0.25,
) -> DenoiserMLP:
    """FPO's velocity network (fpo.py: MLP 4 x 32 on concat(obs, x_t, emb(t)), SiLU, 8-dim
    embedding, output x 0.25; networks.py: lecun-uniform weights, zero biases)."""
    net = DenoiserMLP(
        obs_dim, act_dim, hidden_sizes, time_dim, "fourier", False, nn.SiLU, False, output_scale
    )
    for layer in net.net:
        if isinstance(layer, nn.Linear):
            bound = math.sqrt(3.0 / layer.in_features)  # lecun_uniform
            nn.init.uniform_(layer.weight, -bound, bound)
            nn.init.zeros_(layer.bias)
    return net


# ----------------------------------------------------------------------------------------------
# DDPM


def cosine_betas(num_steps: int, s: float = 0.008, max_beta: float = 0.999) -> torch.Tensor:
    """Cosine schedule betas [K] (Nichol & Dhariwal 2021; DPPO sampling.py), clipped at max_beta."""
    x = torch.linspace(0, num_steps + 1, num_steps + 1, dtype=torch.float64)
    ac = torch.cos(((x / (num_steps + 1)) + s) / (1 + s) * math.pi * 0.5) ** 2
    ac = ac / ac[0]
    return (1 - ac[1:] / ac[:-1]).clamp(0.0, max_beta).float()


def linear_betas(num_steps: int, start: float = 1e-4, end: float = 0.02) -> torch.Tensor:
    """Linear schedule betas [K] from start to end (Ho et al. 2020, 1e-4 to 0.02)."""
    return torch.linspace(start, end, num_steps, dtype=torch.float64).float()


@dataclass
class DDPMSchedule:
    """The per-step quantities of a DDPM reverse step, [K] each, indexed by k = 0..K-1."""

    betas: torch.Tensor
    alphas_cumprod: torch.Tensor
    alphas_cumprod_prev: torch.Tensor
    posterior_var: torch.Tensor
    posterior_logvar: torch.Tensor  # log of posterior_var clipped at 1e-20
    mu_coef1: torch.Tensor  # posterior mean = mu_coef1 * x0 + mu_coef2 * x_k
    mu_coef2: torch.Tensor

    @classmethod
    def from_betas(cls, betas: torch.Tensor) -> DDPMSchedule:
        """All quantities from betas [K] (computed in float64, stored float32)."""
        b = betas.double()
        alphas = 1.0 - b
        ac = torch.cumprod(alphas, 0)
        ac_prev = torch.cat((torch.ones(1, dtype=b.dtype), ac[:-1]))
        var = b * (1.0 - ac_prev) / (1.0 - ac)
        return cls(
            betas=b.float(),
            alphas_cumprod=ac.float(),
            alphas_cumprod_prev=ac_prev.float(),
            posterior_var=var.float(),
            posterior_logvar=var.clamp(min=1e-20).log().float(),
            mu_coef1=(b * ac_prev.sqrt() / (1.0 - ac)).float(),
            mu_coef2=((1.0 - ac_prev) * alphas.sqrt() / (1.0 - ac)).float(),
        )

    @classmethod
    def make(cls, num_steps: int, kind: Literal["cosine", "linear"] = "cosine") -> DDPMSchedule:
        """The schedule of K = num_steps steps, cosine (DPPO) or linear."""
        if num_steps < 1:
            raise ValueError(f"num_steps must be >= 1, got {num_steps}")
        if kind == "cosine":
            return cls.from_betas(cosine_betas(num_steps))
        if kind == "linear":
            return cls.from_betas(linear_betas(num_steps))
        raise ValueError(f"schedule kind must be 'cosine' or 'linear', got {kind!r}")

    @property
    def num_steps(self) -> int:
        return self.betas.shape[0]

    def to(self, device: torch.device | str) -> DDPMSchedule:
        return DDPMSchedule(**{f.name: getattr(self, f.name).to(device) for f in fields(self)})


def _at(values: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """values[k] as a column [B, 1] to broadcast over action dims."""
    return values[k].unsqueeze(-1)


def q_sample(
    sched: DDPMSchedule, x0: torch.Tensor, k: torch.Tensor, noise: torch.Tensor
) -> torch.Tensor:
    """x_k = sqrt(abar_k) x0 + sqrt(1 - abar_k) noise (forward process, k [B] long)."""
    ac = _at(sched.alphas_cumprod, k)
    return ac.sqrt() * x0 + (1.0 - ac).sqrt() * noise


def predict_x0(
    sched: DDPMSchedule, x_k: torch.Tensor, k: torch.Tensor, eps_hat: torch.Tensor
) -> torch.Tensor:
    """x0_hat = sqrt(1/abar_k) x_k - sqrt(1/abar_k - 1) eps_hat."""
    ac = _at(sched.alphas_cumprod, k)
    return (1.0 / ac).sqrt() * x_k - (1.0 / ac - 1.0).sqrt() * eps_hat


def posterior_mean(
    sched: DDPMSchedule, x0: torch.Tensor, x_k: torch.Tensor, k: torch.Tensor
) -> torch.Tensor:
    """Mean of the forward-process posterior q(x_prev | x_k, x0)."""
    return _at(sched.mu_coef1, k) * x0 + _at(sched.mu_coef2, k) * x_k


def ddpm_loss(
    net: nn.Module,
    sched: DDPMSchedule,
    actions: torch.Tensor,
    obs: torch.Tensor,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Behaviour-cloning loss: MSE(net(x_k, k, obs), noise), k uniform in 0..K-1 per sample
    (DPPO diffusion.py p_losses)."""
    B = actions.shape[0]
    k = torch.randint(0, sched.num_steps, (B,), device=actions.device, generator=generator)
    noise = torch.randn(actions.shape, device=actions.device, generator=generator)
    eps_hat = net(q_sample(sched, actions, k, noise), k, obs)
    return (eps_hat - noise).pow(2).mean()


def reverse_step_params(
    net: nn.Module,
    sched: DDPMSchedule,
    x_k: torch.Tensor,
    k: torch.Tensor,
    obs: torch.Tensor,
    denoised_clip: float | None = 1.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean and (unfloored) std [B, A] of the reverse step k: the posterior mean from x0_hat
    (clipped to +-denoised_clip) and x_k; std = exp(0.5 posterior_logvar[k])."""
    mean = _reverse_mean(sched, x_k, k, net(x_k, k, obs), denoised_clip)
    return mean, _at(sched.posterior_logvar, k).mul(0.5).exp().expand_as(mean)


def _reverse_mean(
    sched: DDPMSchedule,
    x_k: torch.Tensor,
    k: torch.Tensor | int,
    eps_hat: torch.Tensor,
    denoised_clip: float | None,
) -> torch.Tensor:
    """The posterior mean from x0_hat (clipped to +-denoised_clip) and x_k; k [B] or one int."""
    x0_hat = predict_x0(sched, x_k, k, eps_hat)
    if denoised_clip is not None:
        x0_hat = x0_hat.clamp(-denoised_clip, denoised_clip)
    return posterior_mean(sched, x0_hat, x_k, k)


def _eps_steps(
    net: nn.Module, obs: torch.Tensor, K: int
) -> Callable[[torch.Tensor, int], torch.Tensor]:
    """eps(x, k) = net(x, k for every row, obs) for a sampling loop over k < K: a DenoiserMLP's
    conditioned() (obs and time terms of the first layer once per chain, plain calls; equal to
    forward up to float rounding), else the net itself."""
    if isinstance(net, DenoiserMLP):
        return net.conditioned(obs, torch.arange(K, device=obs.device))
    B = obs.shape[0]
    return lambda x, k: net(x, torch.full((B,), k, dtype=torch.long, device=obs.device), obs)


@torch.no_grad()
def sample_chain(
    net: nn.Module,
    sched: DDPMSchedule,
    obs: torch.Tensor,
    act_dim: int,
    ft_steps: int,
    ft_net: nn.Module | None = None,
    min_sampling_std: float = 0.1,
    denoised_clip: float | None = 1.0,
    randn_clip: float = 3.0,
    deterministic: bool = False,
    x_init: torch.Tensor | None = None,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """DDPM sampling x_K ~ N(0, I) -> x_0 (DPPO diffusion_vpg.py forward): returns the actions
    [B, A] and the chain of the last ft_steps = K' steps [B, K'+1, A]. Steps k < K' use ft_net
    (the fine-tuned copy) when given, the others net. Stochastic: std floored at
    min_sampling_std, noise clipped to +-randn_clip. Deterministic (evaluation): std 0 at the last
    step, floored at 1e-3 before it (DPPO's choice; the noise is still drawn)."""
    K = sched.num_steps
    if not 0 <= ft_steps <= K:
        raise ValueError(f"ft_steps must be in [0, {K}], got {ft_steps}")
    B = obs.shape[0]
    x = (
        torch.randn((B, act_dim), device=obs.device, generator=generator)
        if x_init is None
        else x_init
    )
    chain = [x] if ft_steps == K else []
    eps, ft_eps = (
        _eps_steps(net, obs, K),
        _eps_steps(ft_net, obs, K) if ft_net is not None else None,
    )
    for k in range(K - 1, -1, -1):  # k an int: the schedule's entries broadcast as scalars
        step = ft_eps if (ft_eps is not None and k < ft_steps) else eps
        mean = _reverse_mean(sched, x, k, step(x, k), denoised_clip)
        std = sched.posterior_logvar[k].mul(0.5).exp()
        if deterministic:
            std = torch.zeros_like(std) if k == 0 else std.clamp(min=1e-3)
        else:
            std = std.clamp(min=min_sampling_std)
        noise = torch.randn(x.shape, device=x.device, generator=generator)
        x = mean + std * noise.clamp_(-randn_clip, randn_clip)
        if k <= ft_steps:  # the output of step K' (the first fine-tuned input) and later ones
            chain.append(x)
    return x, torch.stack(chain, dim=1)


def chain_log_probs(
    net: nn.Module,
    sched: DDPMSchedule,
    chain: torch.Tensor,
    obs: torch.Tensor,
    min_logprob_std: float = 0.1,
    denoised_clip: float | None = 1.0,
) -> torch.Tensor:
    """Per-element Gaussian log-probs [B, K', A] of the chain [B, K'+1, A]'s transitions under
    net: log N(chain[:, j+1]; mean(chain[:, j], k = K'-1-j), max(std, min_logprob_std)^2), one
    batched forward over B x K' (DPPO diffusion_vpg.py get_logprobs, before its clamp/mean)."""
    B, n_states, A = chain.shape
    ft = n_states - 1
    k = torch.arange(ft - 1, -1, -1, device=chain.device).repeat(B)  # [B * K']
    x_prev = chain[:, :-1].reshape(B * ft, A)
    x_next = chain[:, 1:].reshape(B * ft, A)
    obs_rep = obs.repeat_interleave(ft, dim=0)
    mean, std = reverse_step_params(net, sched, x_prev, k, obs_rep, denoised_clip)
    std = std.clamp(min=min_logprob_std)
    z = (x_next - mean) / std
    logp = -0.5 * z.pow(2) - std.log() - 0.5 * math.log(2.0 * math.pi)
    return logp.reshape(B, ft, A)


def ddim_steps_sequence(num_steps: int, ddim_steps: int) -> torch.Tensor:
    """DDIM's sub-sequence [S] of the K steps, descending: (0, r, 2r, ..) with r = K // S
    flipped (DPPO diffusion.py, the Hugging Face "leading" spacing)."""
    if not 1 <= ddim_steps <= num_steps:
        raise ValueError(f"ddim_steps must be in [1, {num_steps}], got {ddim_steps}")
    return torch.flip(torch.arange(ddim_steps) * (num_steps // ddim_steps), [0])


@torch.no_grad()
def sample_ddim(
    net: nn.Module,
    sched: DDPMSchedule,
    obs: torch.Tensor,
    act_dim: int,
    ddim_steps: int,
    x_init: torch.Tensor | None = None,
    denoised_clip: float | None = 1.0,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """DDIM sampling with eta = 0 over ddim_steps_sequence (deterministic given x_init):
    x_prev = sqrt(abar_prev) x0_hat + sqrt(1 - abar_prev) eps_hat, eps_hat recomputed from the
    clipped x0_hat (DPPO diffusion.py p_mean_var, use_ddim)."""
    steps = ddim_steps_sequence(sched.num_steps, ddim_steps).tolist()
    B = obs.shape[0]
    x = (
        torch.randn((B, act_dim), device=obs.device, generator=generator)
        if x_init is None
        else x_init
    )
    ac = sched.alphas_cumprod
    for i, k in enumerate(steps):
        kb = torch.full((B,), k, dtype=torch.long, device=obs.device)
        a, a_prev = ac[k], (ac[steps[i + 1]] if i + 1 < len(steps) else ac.new_tensor(1.0))
        eps_hat = net(x, kb, obs)
        x0_hat = (x - (1 - a).sqrt() * eps_hat) / a.sqrt()
        if denoised_clip is not None:
            x0_hat = x0_hat.clamp(-denoised_clip, denoised_clip)
            eps_hat = (x - a.sqrt() * x0_hat) / (1 - a).sqrt()
        x = a_prev.sqrt() * x0_hat + (1 - a_prev).sqrt() * eps_hat
    return x


# ----------------------------------------------------------------------------------------------
# conditional flow matching (FPO's convention: t = 1 noise, t = 0 action)


def flow_interpolate(actions: torch.Tensor, eps: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """x_t = t eps + (1 - t) a: actions [B, A], eps [B, N, A], t [B, N] -> [B, N, A]."""
    t = t.unsqueeze(-1)
    return t * eps + (1.0 - t) * actions.unsqueeze(1)


def flow_time_grid(steps: int) -> torch.Tensor:
    """The Euler start times [S]: 1, 1 - 1/S, ..., 1/S (fpo.py get_schedule t_current)."""
    return torch.linspace(1.0, 0.0, steps + 1)[:-1]


def sample_cfm_pairs(
    batch: int,
    num_pairs: int,
    act_dim: int,
    grid_steps: int = 10,
    discrete: bool = True,
    generator: torch.Generator | None = None,
    device: torch.device | str = "cpu",
) -> tuple[torch.Tensor, torch.Tensor]:
    """N (eps, t) pairs per sample: eps [B, N, A] ~ N(0, I); t [B, N] uniform on
    flow_time_grid(grid_steps) (discrete, FPO's discretize_t_for_training) or on [0, 1]."""
    eps = torch.randn((batch, num_pairs, act_dim), generator=generator, device=device)
    if discrete:
        idx = torch.randint(0, grid_steps, (batch, num_pairs), generator=generator, device=device)
        t = flow_time_grid(grid_steps).to(device)[idx]
    else:
        t = torch.rand((batch, num_pairs), generator=generator, device=device)
    return eps, t


def cfm_loss(
    net: nn.Module,
    obs: torch.Tensor,
    actions: torch.Tensor,
    eps: torch.Tensor,
    t: torch.Tensor,
    mode: Literal["eps", "u"] = "eps",
) -> torch.Tensor:
    """Per-pair CFM losses [B, N] (mean over action dims), one forward over B x N (fpo.py
    _compute_cfm_loss). "eps" (FPO default, "u_but_supervise_as_eps"): eps_hat = x_t + (1 - t) v,
    l = mean (eps - eps_hat)^2; "u": l = mean (v - (eps - a))^2."""
    B, N, A = eps.shape
    x_t = flow_interpolate(actions, eps, t)
    v = net(x_t.reshape(B * N, A), t.reshape(B * N), obs.repeat_interleave(N, dim=0)).reshape(
        B, N, A
    )
    if mode == "eps":
        eps_hat = x_t + (1.0 - t).unsqueeze(-1) * v
        return (eps - eps_hat).pow(2).mean(-1)
    if mode == "u":
        return (v - (eps - actions.unsqueeze(1))).pow(2).mean(-1)
    raise ValueError(f"cfm mode must be 'eps' or 'u', got {mode!r}")


@torch.no_grad()
def euler_sample(
    net: nn.Module,
    obs: torch.Tensor,
    act_dim: int,
    steps: int = 10,
    x_init: torch.Tensor | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Euler integration of dx/dt = v from t = 1 (x ~ N(0, I)) to t = 0 in `steps` uniform steps:
    x <- x - v(x, t, obs) / steps (fpo.py sample_action, sde_sigma 0)."""
    B = obs.shape[0]
    x = (
        torch.randn((B, act_dim), device=obs.device, generator=generator)
        if x_init is None
        else x_init
    )
    dt = 1.0 / steps
    grid = flow_time_grid(steps).to(obs.device)
    if isinstance(net, DenoiserMLP):  # obs and time terms of the first layer once
        step = net.conditioned(obs, grid)
        for i in range(steps):
            x = x - dt * step(x, i)
        return x
    for t in grid.tolist():
        x = x - dt * net(x, torch.full((B,), t, device=obs.device), obs)
    return x
