"""The behaviour policy read from algos/ppo.py's checkpoints in plain torch/numpy: envs/ know
neither controlrl/ nor the algorithms, so the generator reads the checkpoint format itself.

Layout read (controlrl/nets.py GaussianPolicy, controlrl/normalize.py ObsNormalizer):
- state["policy"]: `mean.<i>.weight` / `mean.<i>.bias` (the Linear layers of the mean MLP, the
  hidden activation between them) and `log_std` [act_dim];
- state["obs_normalizer"] (optional): `mean`, `var` (float64 [obs_dim]) and `count`, applied as
  clip((obs - mean) / sqrt(var + 1e-8), -10, 10) with a float32 mean and float32 inverse std.
The numbers are the ones controlrl computes (same torch kernels, same numpy ops), which
tests/envs/test_offline_policy.py checks bit for bit on a real PPO checkpoint.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import torch
from torch.nn import functional as F

CLIP, EPS = 10.0, 1e-8  # ObsNormalizer's defaults, which PPO uses
ACTIVATIONS = {"tanh": torch.tanh, "relu": torch.relu}
_MEAN_KEY = re.compile(r"^mean\.(\d+)\.(weight|bias)$")


class CheckpointLayoutError(ValueError):
    """A checkpoint that is not a Gaussian-policy checkpoint of algos/ppo.py's layout."""

    def __init__(self, path: str | Path, problem: str) -> None:
        super().__init__(f"{path}: not a PPO Gaussian-policy checkpoint ({problem})")


class Normalizer:
    """Observation normaliser: frozen at saved statistics, or updating (a fresh PPO run's)."""

    def __init__(self, mean: np.ndarray, var: np.ndarray, count: float) -> None:
        self.mean, self.var, self.count = mean.astype(np.float64), var.astype(np.float64), count
        self._refresh()

    @classmethod
    def fresh(cls, dim: int) -> Normalizer:
        """PPO's initial statistics (RunningMeanStd: mean 0, var 1, prior count 1e-4)."""
        return cls(np.zeros(dim), np.ones(dim), 1e-4)

    def _refresh(self) -> None:
        self._mean = self.mean.astype(np.float32)
        self._inv_std = np.reciprocal(np.sqrt(self.var + EPS)).astype(np.float32)

    def update(self, x: np.ndarray) -> None:
        """Fold a batch [B, d] in (Chan et al.'s parallel update, as RunningMeanStd)."""
        n = x.shape[0]
        batch_mean = np.add.reduce(x, axis=0, dtype=np.float64) / n
        centred = x - batch_mean
        batch_var = np.add.reduce(centred * centred, axis=0) / n
        delta = batch_mean - self.mean
        total = self.count + n
        self.mean = self.mean + delta * n / total
        m2 = self.var * self.count + batch_var * n + delta**2 * self.count * n / total
        self.var, self.count = m2 / total, total
        self._refresh()

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        """Normalised float32 [B, d] (in obs's type, then cast, as ObsNormalizer)."""
        y = (obs - self._mean) * self._inv_std
        return np.clip(y, -CLIP, CLIP).astype(np.float32, copy=False)


class GaussianMLP:
    """The mean MLP and state-independent log-std of PPO's Gaussian policy."""

    def __init__(self, layers: list[tuple[torch.Tensor, torch.Tensor]], log_std, activation):
        self.layers, self.log_std, self.activation = layers, log_std, ACTIVATIONS[activation]

    @classmethod
    def initial(cls, obs_dim: int, act_dim: int, hidden: list[int], activation: str = "tanh"):
        """A fresh policy drawn as controlrl's make_policy draws it from the current torch RNG
        (each nn.Linear's default init, then orthogonal weights, gain sqrt 2, last layer 0.01,
        zero bias): after torch.manual_seed(seed), the policy a PPO run with that seed starts
        from."""
        sizes, layers = [obs_dim, *hidden, act_dim], []
        for i in range(len(sizes) - 1):
            linear = torch.nn.Linear(sizes[i], sizes[i + 1])
            gain = 0.01 if i == len(sizes) - 2 else math.sqrt(2.0)
            torch.nn.init.orthogonal_(linear.weight, gain)
            torch.nn.init.constant_(linear.bias, 0.0)
            layers.append((linear.weight.detach(), linear.bias.detach()))
        return cls(layers, torch.zeros(act_dim), activation)

    def mode(self, obs: torch.Tensor) -> torch.Tensor:
        """The mean action [B, act_dim]."""
        x = obs
        for i, (w, b) in enumerate(self.layers):
            x = F.linear(x, w, b)
            if i < len(self.layers) - 1:
                x = self.activation(x)
        return x

    def sample(self, obs: torch.Tensor) -> torch.Tensor:
        """mean + exp(log_std) * standard normal noise."""
        mean = self.mode(obs)
        return mean + self.log_std.exp() * torch.randn_like(mean)


def read_checkpoint(path: str | Path, activation: str = "tanh"):
    """(GaussianMLP, Normalizer or None) from a PPO checkpoint; CheckpointLayoutError names the
    file and what is wrong with its layout."""
    if activation not in ACTIVATIONS:
        raise CheckpointLayoutError(path, f"unknown hidden activation {activation!r}")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises many types for missing, truncated or foreign files
        line = (str(exc).splitlines() or [""])[0][:120]
        raise CheckpointLayoutError(path, f"unreadable: {type(exc).__name__}: {line}") from None
    policy = state.get("policy") if isinstance(state, dict) else None
    if not isinstance(policy, dict):
        raise CheckpointLayoutError(path, "no 'policy' state dict")
    found: dict[int, dict[str, torch.Tensor]] = {}
    for key, value in policy.items():
        match = _MEAN_KEY.match(key)
        if match:
            found.setdefault(int(match[1]), {})[match[2]] = value
        elif key != "log_std":
            raise CheckpointLayoutError(path, f"unexpected policy key {key!r}")
    if not found or "log_std" not in policy:
        raise CheckpointLayoutError(path, "needs policy keys mean.<i>.weight/bias and log_std")
    layers, width = [], None
    for i in sorted(found):
        w, b = found[i].get("weight"), found[i].get("bias")
        if w is None or b is None or w.dim() != 2 or b.shape != (w.shape[0],):
            raise CheckpointLayoutError(path, f"layer mean.{i} is not a Linear layer")
        if width is not None and w.shape[1] != width:
            raise CheckpointLayoutError(path, f"layer mean.{i} takes {w.shape[1]}, not {width}")
        # fresh copies, as load_state_dict makes: the loaded tensors are views into one
        # storage at odd offsets, and the CPU matmul's last bits depend on the alignment
        layers.append((w.float().clone(), b.float().clone()))
        width = w.shape[0]
    log_std = policy["log_std"]
    if tuple(log_std.shape) != (width,):
        raise CheckpointLayoutError(path, f"log_std {tuple(log_std.shape)} != ({width},)")
    normalizer = None
    stats = state.get("obs_normalizer")
    if stats is not None:
        if not isinstance(stats, dict) or {"mean", "var", "count"} - set(stats):
            raise CheckpointLayoutError(path, "obs_normalizer needs mean, var and count")
        if tuple(stats["mean"].shape) != (layers[0][0].shape[1],):
            raise CheckpointLayoutError(path, "obs_normalizer does not match the policy input")
        normalizer = Normalizer(stats["mean"].numpy(), stats["var"].numpy(), float(stats["count"]))
    return GaussianMLP(layers, log_std.float(), activation), normalizer
