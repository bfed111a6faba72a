"""Networks: orthogonal-init MLPs, Chebyshev-basis linear heads, Gaussian and categorical
policies, value nets, IQL's twin Q and tanh-mean Gaussian actor."""

from __future__ import annotations

import math

import torch
from torch import nn

LOG_2PI = math.log(2.0 * math.pi)


def layer_init(layer: nn.Linear, gain: float = math.sqrt(2.0), bias: float = 0.0) -> nn.Linear:
    """Orthogonal weights with the given gain, constant bias (CleanRL/SB3 init)."""
    nn.init.orthogonal_(layer.weight, gain)
    nn.init.constant_(layer.bias, bias)
    return layer


def fast_forward(net: nn.Sequential, x: torch.Tensor) -> torch.Tensor:
    """net(x) for a Sequential of Linear and Tanh/ReLU without nn.Module call overhead (~1.5 us
    a module): ~2x faster for the batch-of-N forward on every env step, ~5% of a PPO update
    with 64-sample minibatches. The same kernels, so the same numbers and gradients."""
    # _modules/_parameters directly: nn.Module.__getattr__ costs ~0.3 us per lookup; the
    # activations run in place on the fresh output of a Linear (same kernels, same bits; safe
    # under autograd: a Linear's backward needs its input, not its output)
    fresh = False
    for layer in net._modules.values():
        kind = type(layer)
        if kind is nn.Linear:
            params = layer._parameters
            x, fresh = _linear(x, params["weight"], params["bias"]), True
        elif kind is nn.Tanh:
            x = x.tanh_() if fresh else torch.tanh(x)
        elif kind is nn.ReLU:
            x = x.relu_() if fresh else torch.relu(x)
        else:
            x, fresh = layer(x), False
    return x


_linear = torch.nn.functional.linear


def mlp(
    sizes: list[int], activation: type[nn.Module] = nn.Tanh, out_gain: float = 1.0
) -> nn.Sequential:
    """Linear layers of the given sizes with `activation` between them; last layer gain out_gain."""
    layers: list[nn.Module] = []
    for i in range(len(sizes) - 1):
        last = i == len(sizes) - 2
        layers.append(
            layer_init(nn.Linear(sizes[i], sizes[i + 1]), out_gain if last else math.sqrt(2))
        )
        if not last:
            layers.append(activation())
    return nn.Sequential(*layers)


class ChebyshevFeatures(nn.Module):
    """The tensor-product Chebyshev basis of a bounded observation: each coordinate scaled to
    [-1, 1] by the space's bounds (clamped), T_0..T_degree of each, and every product of one
    polynomial per coordinate: (degree + 1)^d features, T_0 x ... x T_0 = 1 among them."""

    def __init__(self, low, high, degree: int) -> None:
        super().__init__()
        low = torch.as_tensor(low, dtype=torch.float32).reshape(-1)
        high = torch.as_tensor(high, dtype=torch.float32).reshape(-1)
        if not (torch.isfinite(low).all() and torch.isfinite(high).all() and (high > low).all()):
            raise ValueError("a Chebyshev basis needs finite observation bounds with high > low")
        if degree < 1:
            raise ValueError(f"Chebyshev degree must be >= 1, got {degree}")
        self.register_buffer("low", low)
        self.register_buffer("scale", 2.0 / (high - low))
        self.degree = degree
        self.num_features = (degree + 1) ** low.numel()

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """Features [B, (degree + 1)^d] of observations [B, d]."""
        z = ((obs - self.low) * self.scale - 1.0).clamp(-1.0, 1.0)  # [B, d]
        polys = [torch.ones_like(z), z]
        for _ in range(self.degree - 1):  # T_{k+1} = 2 z T_k - T_{k-1}
            polys.append(2 * z * polys[-1] - polys[-2])
        basis = torch.stack(polys[: self.degree + 1], -1)  # [B, d, degree + 1]
        out = basis[:, 0]
        for i in range(1, basis.shape[1]):  # outer product, coordinate by coordinate
            out = (out.unsqueeze(-1) * basis[:, i].unsqueeze(-2)).flatten(1)
        return out


def chebyshev_net(low, high, degree: int, out_dim: int, out_gain: float = 0.01) -> nn.Sequential:
    """A linear map of ChebyshevFeatures(low, high, degree) to out_dim outputs (orthogonal init,
    gain out_gain as an MLP's last layer): a Chebyshev policy's logits or mean."""
    features = ChebyshevFeatures(low, high, degree)
    return nn.Sequential(features, layer_init(nn.Linear(features.num_features, out_dim), out_gain))


class GaussianPolicy(nn.Module):
    """Diagonal Gaussian with a state-independent log-std parameter (initialised to
    log_std_init, 0 as CleanRL)."""

    def __init__(
        self,
        obs_dim: int,
        act_dim: int,
        hidden: tuple[int, ...] = (64, 64),
        activation: type[nn.Module] = nn.Tanh,
        log_std_init: float = 0.0,
        net: nn.Sequential | None = None,
    ) -> None:
        super().__init__()
        # net: the mean network in place of the MLP (a Chebyshev head, chebyshev_net)
        self.mean = (
            net if net is not None else mlp([obs_dim, *hidden, act_dim], activation, out_gain=0.01)
        )
        self.log_std = nn.Parameter(torch.full((act_dim,), float(log_std_init)))

    def sample(self, obs: torch.Tensor) -> torch.Tensor:
        """Sampled actions [B, act_dim]."""
        inputs = self.sample_inputs(obs)
        return self.sample_with(inputs, self.draw_noise(torch.empty_like(inputs[0])))

    def sample_inputs(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """What a sample is made of besides its noise: (mean [B, act_dim], log_std [act_dim])."""
        return fast_forward(self._modules["mean"], obs), self._parameters["log_std"]

    @staticmethod
    def draw_noise(out: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        """Fill out (the mean's shape) with N(0, 1) noise from generator (None: torch's)."""
        return out.normal_(generator=generator)

    @staticmethod
    def sample_with(inputs: tuple[torch.Tensor, torch.Tensor], noise: torch.Tensor):
        """mean + std * noise (in place on the noise: the products and sums, same bits)."""
        mean, log_std = inputs
        return noise.mul_(log_std.exp()).add_(mean)

    def mode(self, obs: torch.Tensor) -> torch.Tensor:
        """Deterministic action (the mean)."""
        return fast_forward(self._modules["mean"], obs)

    def log_prob_entropy(
        self, obs: torch.Tensor, actions: torch.Tensor, entropy_grad: bool = True
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """log pi(a|s) [B] and entropy [B], written out (torch.distributions costs ~2x here).
        entropy_grad=False: the entropy without a graph (same numbers), for losses that do not
        use it (an entropy coefficient of 0): ~5% of a PPO update at 8 envs."""
        params = self.dist_params(obs)
        logp = self.log_prob_at(params, actions)  # before the entropy: the gradient's sum order
        with torch.set_grad_enabled(entropy_grad and torch.is_grad_enabled()):
            entropy = (params[1] + 0.5 * (1.0 + LOG_2PI)).sum(-1)
        return logp, entropy

    def dist_params(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(mean, log_std) [B, act_dim] each, for per-state KL."""
        mean = fast_forward(self._modules["mean"], obs)
        return mean, self._parameters["log_std"].expand_as(mean)

    @staticmethod
    def log_prob_at(params: tuple[torch.Tensor, torch.Tensor], actions: torch.Tensor):
        """log pi(a|s) [B] from dist_params(obs): one forward gives the KL and the log-probs."""
        mean, log_std = params
        z = (actions - mean) * torch.exp(-log_std)
        return (-0.5 * z.pow(2) - log_std).sum(-1) - 0.5 * LOG_2PI * mean.shape[-1]


class CategoricalPolicy(nn.Module):
    """Softmax policy over a discrete action set."""

    def __init__(
        self,
        obs_dim: int,
        num_actions: int,
        hidden: tuple[int, ...] = (64, 64),
        activation: type[nn.Module] = nn.Tanh,
        net: nn.Sequential | None = None,
    ) -> None:
        super().__init__()
        # net: the logits network in place of the MLP (a Chebyshev head, chebyshev_net)
        self.logits = (
            net
            if net is not None
            else mlp([obs_dim, *hidden, num_actions], activation, out_gain=0.01)
        )

    def sample(self, obs: torch.Tensor) -> torch.Tensor:
        """Sampled action indices [B]."""
        logits = self.sample_inputs(obs)
        return self.sample_with(logits, self.draw_noise(torch.empty_like(logits)))

    def sample_inputs(self, obs: torch.Tensor) -> torch.Tensor:
        """What a sample is made of besides its noise: the logits [B, K]."""
        return fast_forward(self._modules["logits"], obs)

    @staticmethod
    def draw_noise(out: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        """Fill out (the logits' shape) with Exp(1) noise from generator (None: torch's)."""
        return out.exponential_(1, generator=generator)

    @staticmethod
    def sample_with(logits: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        """argmax of softmax(logits) / noise: a draw from softmax(logits) given Exp(1) noise,
        torch.multinomial(probs, 1)'s own method (the same draws from the same stream)."""
        return (torch.softmax(logits, -1) / noise).argmax(-1)

    def mode(self, obs: torch.Tensor) -> torch.Tensor:
        """Most likely action [B]."""
        return fast_forward(self._modules["logits"], obs).argmax(-1)

    def log_prob_entropy(
        self, obs: torch.Tensor, actions: torch.Tensor, entropy_grad: bool = True
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """log pi(a|s) [B] and entropy [B] (without a graph when not entropy_grad)."""
        logp_all = self.dist_params(obs)
        logp = self.log_prob_at(logp_all, actions)
        with torch.set_grad_enabled(entropy_grad and torch.is_grad_enabled()):
            entropy = -(logp_all.exp() * logp_all).sum(-1)
        return logp, entropy

    def dist_params(self, obs: torch.Tensor) -> torch.Tensor:
        """Log-probabilities [B, K], for per-state KL."""
        return torch.log_softmax(fast_forward(self._modules["logits"], obs), -1)

    @staticmethod
    def log_prob_at(logp_all: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """log pi(a|s) [B] from dist_params(obs)."""
        return logp_all.gather(-1, actions.long().unsqueeze(-1)).squeeze(-1)


class ValueNet(nn.Module):
    """State-value MLP V(s) -> [B]."""

    def __init__(
        self,
        obs_dim: int,
        hidden: tuple[int, ...] = (64, 64),
        activation: type[nn.Module] = nn.Tanh,
        out_gain: float = 1.0,
    ) -> None:
        super().__init__()
        self.net = mlp([obs_dim, *hidden, 1], activation, out_gain=out_gain)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """Values [B]."""
        return fast_forward(self._modules["net"], obs).squeeze(-1)


def flatten_parameters(*modules: nn.Module) -> nn.Parameter:
    """Move every parameter of `modules` into one flat Parameter (theirs become views of it,
    their .grad views of its .grad) and return it. Optimise the flat one: gradient clipping and
    Adam are then one op each instead of one per tensor (~25% of a small-MLP update on CPU).
    Zero its gradient in place (zero_grad(set_to_none=False)): set to None, the views detach."""
    params = [p for m in modules for p in m.parameters()]
    flat = nn.Parameter(torch.cat([p.detach().reshape(-1) for p in params]))
    flat.grad = torch.zeros_like(flat)
    offset = 0
    for p in params:
        n = p.numel()
        p.data = flat.data[offset : offset + n].view_as(p)
        p.grad = flat.grad[offset : offset + n].view_as(p)
        offset += n
    return flat


ACTIVATIONS: dict[str, type[nn.Module]] = {"tanh": nn.Tanh, "relu": nn.ReLU}


def make_policy(
    observation_space,
    action_space,
    hidden: tuple[int, ...] = (64, 64),
    activation: str = "tanh",
    log_std_init: float = 0.0,
    chebyshev_degree: int = 0,
    chebyshev_bounds: tuple | None = None,
) -> nn.Module:
    """Gaussian policy for Box actions, categorical for Discrete ones (which have no log-std),
    with hidden activation 'tanh' or 'relu'; chebyshev_degree > 0: logits or mean linear in the
    tensor-product Chebyshev basis of that degree instead, spanning chebyshev_bounds (low, high)
    (default: the observation space's bounds)."""
    obs_dim = int(math.prod(observation_space.shape))
    act = ACTIVATIONS[activation]
    discrete = hasattr(action_space, "n")
    out_dim = int(action_space.n) if discrete else int(math.prod(action_space.shape))
    net = None
    if chebyshev_degree:
        low, high = chebyshev_bounds or (observation_space.low, observation_space.high)
        net = chebyshev_net(low, high, chebyshev_degree, out_dim)
    if discrete:
        return CategoricalPolicy(obs_dim, out_dim, hidden, act, net)
    return GaussianPolicy(obs_dim, out_dim, hidden, act, log_std_init, net)


class TwinQ(nn.Module):
    """Two Q(s, a) MLPs run as one batched network: forward(obs, actions) -> [2, B].

    Layer l holds both heads' weights as weight_l [2, in, out] and bias_l [2, 1, out], so a
    forward is one batched matmul per layer and the parameters are a few tensors (one Polyak
    lerp, one fused Adam). Each head is initialised as mlp() would (orthogonal, gain sqrt(2),
    last layer out_gain, zero bias) from its own draws."""

    def __init__(
        self,
        obs_dim: int,
        act_dim: int,
        hidden: tuple[int, ...] = (256, 256),
        activation: type[nn.Module] = nn.ReLU,
        out_gain: float = math.sqrt(2.0),
    ) -> None:
        super().__init__()
        heads = [mlp([obs_dim + act_dim, *hidden, 1], activation, out_gain) for _ in range(2)]
        linears = [[m for m in head if isinstance(m, nn.Linear)] for head in heads]
        self.weights = nn.ParameterList(
            nn.Parameter(torch.stack([lin[i].weight.detach().T for lin in linears]).contiguous())
            for i in range(len(linears[0]))
        )
        self.biases = nn.ParameterList(
            nn.Parameter(torch.stack([lin[i].bias.detach()[None] for lin in linears]))
            for i in range(len(linears[0]))
        )
        # in place on each layer's fresh output: autograd keeps the activation's result, which
        # is all the backward of ReLU and tanh needs (baddbmm's backward needs no output)
        self.act_ = {nn.ReLU: torch.relu_, nn.Tanh: torch.tanh_}[activation]
        self.activation = activation

    def head(self, k: int) -> nn.Sequential:
        """Head k (0 or 1) as a plain Sequential of Linear layers and activations, its weights
        copied: the same function of [s, a] rows (for reading, exporting and tests)."""
        layers: list[nn.Module] = []
        for w, b in zip(self.weights, self.biases):
            lin = nn.Linear(w.shape[1], w.shape[2])
            with torch.no_grad():
                lin.weight.copy_(w[k].T)
                lin.bias.copy_(b[k, 0])
            layers += [lin, self.activation()]
        return nn.Sequential(*layers[:-1])

    def forward(self, obs: torch.Tensor, actions: torch.Tensor | None = None) -> torch.Tensor:
        """Q1 and Q2 [2, B] of (obs, actions); actions None: obs already holds [s, a] rows."""
        x = obs if actions is None else torch.cat([obs, actions], -1)
        x = x.unsqueeze(0).expand(2, *x.shape)  # [2, B, in], no copy
        params = self._modules
        weights, biases = params["weights"]._parameters, params["biases"]._parameters
        last = len(weights) - 1
        for i in range(last):
            x = self.act_(torch.baddbmm(biases[str(i)], x, weights[str(i)]))
        # the one-output layer as a matrix-vector product per head: a batched matmul with one
        # output column takes a slow path on CPU (forward and backward ~6x an addmv's), ~7% of
        # an IQL step at 256-256 (paper_figures/bench_iql.py)
        # (unbind, not indexing: its backward is one stack, not a zero-filled copy per head)
        x, w = x.unbind(0), weights[str(last)].squeeze(-1).unbind(0)  # [B, H], [H] each
        b = biases[str(last)].view(2, 1).unbind(0)  # [1] each
        return torch.stack([torch.addmv(b[k], x[k], w[k]) for k in range(2)])


class TanhGaussianActor(nn.Module):
    """IQL's actor: N(max_action * tanh(mlp(s)), exp(log_std)^2), log_std a state-independent
    parameter (init 0) clamped to [log_std_min, log_std_max]; the mean is tanh-bounded but the
    distribution is not tanh-squashed, so log pi(a|s) of dataset actions needs no Jacobian
    (ikostrikov/implicit_q_learning policy.py with state_dependent_std=False,
    tanh_squash_distribution=False, log_std_min=-5 as learner.py; CORL's GaussianPolicy)."""

    def __init__(
        self,
        obs_dim: int,
        act_dim: int,
        hidden: tuple[int, ...] = (256, 256),
        max_action: float | torch.Tensor = 1.0,
        log_std_min: float = -5.0,
        log_std_max: float = 2.0,
        activation: type[nn.Module] = nn.ReLU,
        out_gain: float = math.sqrt(2.0),
    ) -> None:
        super().__init__()
        self.net = mlp([obs_dim, *hidden, act_dim], activation, out_gain)
        self.log_std = nn.Parameter(torch.zeros(act_dim))
        self.register_buffer("max_action", torch.as_tensor(max_action, dtype=torch.float32))
        self.log_std_min, self.log_std_max = log_std_min, log_std_max

    def mode(self, obs: torch.Tensor) -> torch.Tensor:
        """The mean action [B, act_dim] (deterministic evaluation)."""
        return torch.tanh(fast_forward(self._modules["net"], obs)) * self._buffers["max_action"]

    def log_prob(self, obs: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """log pi(a|s) [B] of the unsquashed Gaussian, written out (no torch.distributions)."""
        mean = self.mode(obs)
        log_std = self.log_std.clamp(self.log_std_min, self.log_std_max)
        z = (actions - mean) * torch.exp(-log_std)
        return (-0.5 * z.square()).sum(-1) - log_std.sum() - 0.5 * LOG_2PI * mean.shape[-1]

    def sample(self, obs: torch.Tensor) -> torch.Tensor:
        """mean + std * noise [B, act_dim] (exploration in online fine-tuning; unclipped)."""
        mean = self.mode(obs)
        std = self.log_std.clamp(self.log_std_min, self.log_std_max).exp()
        return mean + std * torch.randn_like(mean)
