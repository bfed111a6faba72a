"""Running statistics for observation normalisation and return-based reward scaling."""

from __future__ import annotations

import math

import numpy as np
import torch


class RunningMeanStd:
    """Streaming mean and variance (Chan et al. parallel update), float64."""

    def __init__(self, shape: tuple[int, ...] = (), epsilon: float = 1e-4) -> None:
        self.mean = np.zeros(shape, np.float64)
        self.var = np.ones(shape, np.float64)
        self.count = epsilon  # same prior count as gymnasium/SB3, so numbers match theirs

    def update(self, x: np.ndarray, axis: int = 0) -> None:
        """Fold a batch [B, *shape] into the statistics (axis 1: a batch [*shape, B] of
        contiguous rows, each reduced as a 1-D batch is, e.g. a population's seeds x envs)."""
        batch_count = x.shape[axis]
        # called on every env step: raw ufunc reductions, not np.mean/np.var (~10 us each)
        if batch_count == 1:
            # the general formulas below with batch_var = 0 and batch_count = 1, minus the ops
            # that cannot change a bit (x * 1, m2 + 0.0 where m2 >= +0): same numbers, fewer
            # numpy calls (x[0] in float32 is promoted exactly, as astype(float64) would); axis
            # 1: a population's seeds with one env each (its reward scaler on every env step)
            delta = (x[0] if axis == 0 else x[:, 0]) - self.mean
            total = self.count + 1
            self.mean = self.mean + delta / total
            self.var = (self.var * self.count + delta**2 * self.count / total) / total
            self.count = total
            return
        batch_mean = np.add.reduce(x, axis=axis, dtype=np.float64) / batch_count
        centred = x - (batch_mean if axis == 0 else np.expand_dims(batch_mean, axis))
        batch_var = np.add.reduce(centred * centred, axis=axis) / batch_count
        delta = batch_mean - self.mean
        total = self.count + batch_count
        self.mean = self.mean + delta * batch_count / total
        m2 = (
            self.var * self.count
            + batch_var * batch_count
            + delta**2 * self.count * batch_count / total
        )
        self.var = m2 / total
        self.count = total

    def update_scalar(self, x: float) -> None:
        """update(np.array([x])) for scalar statistics (shape ()), in Python floats: the same
        IEEE double operations (** is C pow in both) without numpy's per-call overhead."""
        delta = x - float(self.mean)
        total = self.count + 1
        self.mean = float(self.mean) + delta / total
        self.var = (float(self.var) * self.count + delta**2 * self.count / total) / total
        self.count = total

    def state_dict(self) -> dict[str, torch.Tensor]:
        """Tensors only, so a checkpoint loads with torch.load(weights_only=True)."""
        return {
            "mean": torch.from_numpy(np.array(self.mean)),
            "var": torch.from_numpy(np.array(self.var)),
            "count": torch.tensor(float(self.count), dtype=torch.float64),
        }

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        """Restore statistics saved by state_dict."""
        if tuple(state["mean"].shape) != self.mean.shape:
            raise ValueError(
                f"normaliser shape {tuple(state['mean'].shape)} does not match {self.mean.shape}"
            )
        self.mean = state["mean"].numpy().astype(np.float64)
        self.var = state["var"].numpy().astype(np.float64)
        self.count = float(state["count"])


class ObsNormalizer:
    """(obs - mean) / sqrt(var + eps), clipped; statistics update only while not frozen."""

    def __init__(self, shape: tuple[int, ...], clip: float = 10.0, eps: float = 1e-8) -> None:
        self.rms = RunningMeanStd(shape)
        self.clip = clip
        self.eps = eps
        self.frozen = False
        # the clip bounds as float32 arrays of one observation's shape: same-shape ops (below)
        self._low = np.full(shape, -clip, np.float32)
        self._high = np.full(shape, clip, np.float32)
        self._refresh()

    def _refresh(self) -> None:
        # cache float32 mean and inverse std: normalising is then two numpy ops per step;
        # reciprocal is 1.0 / x (the same IEEE division) without the scalar's conversion
        self._mean = self.rms.mean.astype(np.float32)
        self._inv_std = np.reciprocal(np.sqrt(self.rms.var + self.eps)).astype(np.float32)

    def __call__(
        self, obs: np.ndarray, update: bool = True, out: np.ndarray | None = None
    ) -> np.ndarray:
        """Normalise a batch [B, d]; fold it into the statistics first unless frozen. With `out`
        (float32 [B, d]) the result is written there (e.g. straight into a rollout buffer)."""
        if update and not self.frozen:
            self.rms.update(obs)
            self._refresh()
        if obs.dtype != np.float32:  # computed in the wider type, then cast
            y = (obs - self._mean) * self._inv_std
            y = np.clip(y, -self.clip, self.clip, out=y).astype(np.float32, copy=False)
            if out is None:
                return y
            out[...] = y
            return out
        if obs.shape[0] == 1:
            # one env: ops on the row itself, the shape of the statistics, skip numpy's
            # broadcasting path ([1, d] with [d] costs ~2x [d] with [d]); the same numbers
            out = np.empty_like(obs) if out is None else out
            row = out[0]
            np.subtract(obs[0], self._mean, out=row)
            np.multiply(row, self._inv_std, out=row)
            np.maximum(row, self._low, out=row)
            np.minimum(row, self._high, out=row)
            return out
        out = np.subtract(obs, self._mean, out=out)
        np.multiply(out, self._inv_std, out=out)
        # maximum then minimum is np.clip's definition (NaN stays NaN) at half its call overhead
        np.maximum(out, -self.clip, out=out)
        return np.minimum(out, self.clip, out=out)

    def state_dict(self) -> dict[str, torch.Tensor]:
        """Statistics as tensors."""
        return self.rms.state_dict()

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        """Restore statistics."""
        self.rms.load_state_dict(state)
        self._refresh()


class RewardScaler:
    """Divide rewards by the std of a running discounted return (CleanRL/SB3 NormalizeReward)."""

    def __init__(self, num_envs: int, gamma: float, clip: float = 10.0, eps: float = 1e-8) -> None:
        self.rms = RunningMeanStd(())
        self.returns = np.zeros(num_envs, np.float64)
        self.gamma = gamma
        self.clip = clip
        self.eps = eps

    def __call__(
        self, reward: np.ndarray, ended: np.ndarray, out: np.ndarray | None = None
    ) -> np.ndarray:
        """Scale a reward batch [N] to float32; `ended` resets each finished env's running
        return. With `out` (float32 [N]) the result is written there (e.g. a buffer row)."""
        if self.returns.shape[0] == 1:  # one env: scalar arithmetic, the same float64 numbers
            scaled = self.scale_one(float(reward[0]), bool(ended[0]))
            if out is None:
                return np.array([scaled], np.float32)
            out[0] = scaled  # the same float64 -> float32 rounding as np.array(..., float32)
            return out
        returns = self.returns * self.gamma
        returns += reward
        self.rms.update(returns)
        returns[ended] = 0.0
        self.returns = returns
        # math.sqrt and np.sqrt are both IEEE-exact: same bits, less call overhead; a float64
        # divisor, as np.sqrt gave, so float32 rewards are still scaled in float64
        scaled = reward / np.float64(math.sqrt(self.rms.var + self.eps))
        # maximum then minimum is np.clip's definition, at half its call overhead
        np.maximum(scaled, -self.clip, out=scaled)
        if out is None:
            return np.minimum(scaled, self.clip, out=scaled).astype(np.float32)
        return np.minimum(scaled, self.clip, out=out)  # float64 results cast as astype does

    def scale_one(self, reward: float, ended: bool) -> float:
        """__call__ for a single env in Python floats (float64, unrounded to float32)."""
        ret = float(self.returns[0]) * self.gamma + reward
        self.rms.update_scalar(ret)
        self.returns[0] = 0.0 if ended else ret
        scaled = reward / math.sqrt(self.rms.var + self.eps)
        return min(max(scaled, -self.clip), self.clip)

    def state_dict(self) -> dict[str, torch.Tensor]:
        """Statistics and the per-env running returns."""
        state = self.rms.state_dict()
        state["returns"] = torch.from_numpy(self.returns.copy())
        return state

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        """Restore statistics and running returns."""
        self.rms.load_state_dict({k: state[k] for k in ("mean", "var", "count")})
        self.returns = state["returns"].numpy().astype(np.float64)
