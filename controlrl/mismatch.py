"""Training-inference mismatch: rollouts drawn from a perturbed copy mu of the old policy (an
inference engine's temperature, lower-precision logits, or the whole network run as an inference
engine runs it: in bfloat16, bf16-forward, or as FP8 W8A8 GEMMs, fp8-forward), and the importance
corrections of the policy loss by
w = pi_old(a) / mu(a), with no gradient:

    none   w = 1                           biased by E_mu[g] - E_pi_old[g]
    tis    w = min(pi_old / mu, C)         truncated IS (Yao et al. 2025, "Your Efficient RL
                                           Framework Secretly Brings You Off-Policy RL
                                           Training"); unbiased when no weight reaches C
    mis    w = pi_old / mu on [low, high], masked IS / IcePop (Ling Team 2025, "Every Step
           0 outside                       Evolves", arXiv 2510.18855): masked tokens carry
                                           no gradient at all

Registered in controlrl.objective.CORRECTIONS (--mismatch-correction); the weight multiplies
the per-step policy loss (Tokens.is_weight). Reference code: volcengine/verl
verl/trainer/ppo/rollout_corr_helper.py (token-level truncate and mask modes).
"""

from __future__ import annotations

import contextlib
import copy
from collections import deque

import torch

from controlrl.objective import CORRECTIONS, register

PERTURBATIONS = ("none", "temperature", "bf16", "bf16-forward", "fp8-forward")
FP8 = torch.float8_e4m3fn


def bf16_forward(net: torch.nn.Sequential, x: torch.Tensor) -> torch.Tensor:
    """net(x) with weights, biases and activations in bfloat16 (an inference engine's forward;
    the matmuls accumulate as torch's bf16 kernels do), the logits returned as float32."""
    x = x.to(torch.bfloat16)
    for layer in net:
        if isinstance(layer, torch.nn.Linear):
            bias = None if layer.bias is None else layer.bias.to(torch.bfloat16)
            x = torch.nn.functional.linear(x, layer.weight.to(torch.bfloat16), bias)
        else:  # an activation, on bf16 inputs
            x = layer(x)
    return x.to(torch.float32)


def fp8_quantized(t: torch.Tensor) -> torch.Tensor:
    """t rounded to float8 e4m3 under a per-tensor scale amax / 448 (vLLM's dynamic per-tensor
    scaled_fp8_quant, vllm/_custom_ops.py), returned dequantised in float32 (exactly)."""
    scale = t.abs().amax().clamp(min=1e-12) / torch.finfo(FP8).max
    return (t / scale).to(FP8).to(torch.float32) * scale


def fp8_forward(net: torch.nn.Sequential, x: torch.Tensor) -> torch.Tensor:
    """net(x) as an FP8 W8A8 engine runs it (vLLM's Fp8LinearMethod with per-tensor scales,
    vllm/model_executor/layers/quantization/fp8.py): each Linear's weight and input rounded to
    float8 e4m3 with per-tensor scales, their products summed in float32 (torch._scaled_mm's
    accumulation, emulated so that it batches over a population's seeds), the bias added and the
    output rounded to bfloat16; activations in bfloat16; the logits returned as float32."""
    for layer in net:
        if isinstance(layer, torch.nn.Linear):
            y = torch.nn.functional.linear(fp8_quantized(x.float()), fp8_quantized(layer.weight))
            if layer.bias is not None:
                y = y + layer.bias.to(torch.bfloat16).float()
            x = y.to(torch.bfloat16)
        else:  # an activation, on bf16 inputs
            x = layer(x)
    return x.to(torch.float32)


FORWARDS = {"bf16-forward": bf16_forward, "fp8-forward": fp8_forward}  # the network's own pass


def perturb_logits(logits: torch.Tensor, kind: str, temperature: float = 1.0) -> torch.Tensor:
    """The sampler's logits: logits / temperature, or logits rounded to bfloat16 and back
    (a FORWARDS kind perturbs the forward pass itself, perturbed_sampling: its logits pass)."""
    if kind == "none" or kind in FORWARDS:
        return logits
    if kind == "temperature":
        return logits / temperature
    if kind == "bf16":
        return logits.to(torch.bfloat16).to(logits.dtype)
    raise ValueError(f"perturbation {kind!r}, expected one of {PERTURBATIONS}")


@register(CORRECTIONS, "none")
def no_correction(old_logp: torch.Tensor, behaviour_logp: torch.Tensor, **_) -> torch.Tensor:
    """w = 1: the sampler's actions taken as the trained policy's."""
    return torch.ones_like(old_logp)


@register(CORRECTIONS, "tis")
def tis(old_logp: torch.Tensor, behaviour_logp: torch.Tensor, cap: float, **_) -> torch.Tensor:
    """w = min(pi_old / mu, cap), no gradient."""
    return (old_logp - behaviour_logp).detach().exp().clamp(max=cap)


@register(CORRECTIONS, "mis")
def mis(
    old_logp: torch.Tensor, behaviour_logp: torch.Tensor, low: float, high: float, **_
) -> torch.Tensor:
    """w = pi_old / mu where it lies in [low, high], else 0 (the token is masked), no gradient."""
    rho = (old_logp - behaviour_logp).detach().exp()
    return torch.where((rho >= low) & (rho <= high), rho, torch.zeros_like(rho))


def correction_weights(
    kind: str, old_logp: torch.Tensor, behaviour_logp: torch.Tensor, **constants: float
) -> torch.Tensor:
    """CORRECTIONS[kind] per sampled action from log pi_old and log mu at that action."""
    if kind not in CORRECTIONS:
        raise ValueError(f"correction {kind!r}, expected one of {tuple(sorted(CORRECTIONS))}")
    return CORRECTIONS[kind](old_logp, behaviour_logp, **constants)


@contextlib.contextmanager
def perturbed_sampling(policy_cls: type, kind: str, temperature: float = 1.0):
    """Within the block, policy_cls.sample_with (a categorical policy's draw from logits and
    noise) draws from perturb_logits(logits) instead: the same noise stream, another policy;
    for a FORWARDS kind, policy_cls.sample_inputs (the logits) runs the network that way."""
    if kind in FORWARDS:
        inputs, forward = policy_cls.__dict__["sample_inputs"], FORWARDS[kind]

        def sample_inputs(self, obs: torch.Tensor) -> torch.Tensor:
            return forward(self._modules["logits"], obs)

        policy_cls.sample_inputs = sample_inputs
        try:
            yield
        finally:
            policy_cls.sample_inputs = inputs
        return
    original = policy_cls.__dict__["sample_with"]
    draw = original.__func__

    def sample_with(logits: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        return draw(perturb_logits(logits, kind, temperature), noise)

    policy_cls.sample_with = staticmethod(sample_with)
    try:
        yield
    finally:
        policy_cls.sample_with = original


def template_class(policy) -> type:
    """The class whose sample_with a policy (or a population of them) draws with."""
    return type(getattr(policy, "template", policy))


def behaviour_sampler(policy, kind: str, temperature: float = 1.0):
    """policy.sample (seed-batched for a population, each seed from its own generator) drawing
    from the perturbed logits: what run.train(..., sample=) collects the rollout with."""
    cls = template_class(policy)

    def sample(obs: torch.Tensor) -> torch.Tensor:
        with perturbed_sampling(cls, kind, temperature):
            return policy.sample(obs)

    return sample


def behaviour_log_probs(
    policy, obs: torch.Tensor, actions: torch.Tensor, kind: str, temperature: float = 1.0
) -> torch.Tensor:
    """log mu(a|s) [..., R] of the sampler at the rollout's rows (obs [..., R, d]), no
    gradient: the log-softmax of the same perturbed logits the sampler drew from."""
    logp = torch.log_softmax(_logits(policy, obs, kind, temperature), -1)
    return logp.gather(-1, actions.long().unsqueeze(-1)).squeeze(-1)


def _logits(policy, obs: torch.Tensor, kind: str, temperature: float) -> torch.Tensor:
    """The sampler's logits [..., R, K] at obs [..., R, d] (kind none: the policy's), no
    gradient."""
    with torch.no_grad(), perturbed_sampling(template_class(policy), kind, temperature):
        if hasattr(policy, "template"):  # a population: [S, R, d] -> logits [S, R, K]
            logits = policy.per_seed("sample_inputs", obs)
        else:
            logits = policy.sample_inputs(obs)
        return perturb_logits(logits, kind, temperature)


def mismatch_kl(
    policy, obs: torch.Tensor, kind: str, temperature: float = 1.0, behaviour=None
) -> torch.Tensor:
    """KL(mu || pi) [..., R] per row, exact over the actions: the size of the mismatch between
    the sampler mu (behaviour, default the policy itself, perturbed by kind) and the policy pi
    (0 for kind none and no other behaviour policy)."""
    # in float64: a bf16 forward's KL is ~1e-7, below float32's rounding of the sum
    sampler = policy if behaviour is None else behaviour
    mu = torch.log_softmax(_logits(sampler, obs, kind, temperature).double(), -1)
    pi = torch.log_softmax(_logits(policy, obs, "none", 1.0).double(), -1)
    return (mu.exp() * (mu - pi)).sum(-1)


def rollout_weights(behaviour, rollout, old_logp: torch.Tensor, args) -> torch.Tensor:
    """The --mismatch-correction weights [..., T * N] of a rollout drawn by
    behaviour_sampler(behaviour, args.rollout_mismatch, ...) (behaviour: the trained policy, or
    a RolloutLag's), old_logp [..., T * N] the trained policy's (algos/grpo.py's batch rows);
    float32, as the batch's other rows."""
    mu_logp = behaviour_log_probs(
        behaviour,
        rollout.flat_obs(),
        rollout.flat_actions(),
        args.rollout_mismatch,
        args.rollout_temperature,
    )
    w = correction_weights(
        args.mismatch_correction,
        old_logp,
        mu_logp.reshape(old_logp.shape),
        cap=args.tis_cap,
        low=args.mis_low,
        high=args.mis_high,
    )
    return w.to(torch.float32)


class RolloutLag:
    """Asynchronous rollouts: the sampler is the policy of k updates ago (an inference engine
    that receives the trainer's weights k updates late; k = 1 is the one-step-off pipeline).
    `behaviour` is that policy; step(policy) after each update moves the window on. A
    population's behaviour draws from the policy's own per-seed generators, so the noise stream
    is the unlagged run's; the window is checkpointed (state_dict)."""

    def __init__(self, policy, k: int) -> None:
        self.k = k
        self.behaviour = copy.deepcopy(policy).requires_grad_(False)
        if hasattr(policy, "generators"):  # a population: the same streams, not copies
            self.behaviour.generators = policy.generators
            self.behaviour.seed_pool = policy.seed_pool
        self.window = deque([self._state(policy)], maxlen=k + 1)

    @staticmethod
    def _state(policy) -> dict[str, torch.Tensor]:
        return {name: t.detach().clone() for name, t in policy.state_dict().items()}

    def step(self, policy) -> None:
        """After an update: the window takes the new policy, the behaviour its oldest entry."""
        self.window.append(self._state(policy))
        self.behaviour.load_state_dict(self.window[0])

    def state_dict(self) -> dict:
        return {"window": list(self.window)}

    def load_state_dict(self, state: dict) -> None:
        self.window = deque(state["window"], maxlen=self.k + 1)
        self.behaviour.load_state_dict(self.window[0])
