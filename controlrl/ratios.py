"""Importance ratios of an episode-structured rollout: per step (PPO's token-level ratio), per
sequence (the product over an episode, or its geometric mean as GSPO, Zheng et al. 2025,
arXiv 2507.18071) and KPO's causal Kalman-filtered ratio (He, Feng, Cheng, Feng, An 2026, "Online
Causal Kalman Filtering for Stable and Effective Policy Optimization", arXiv 2602.10609). The
ratio option shared by the on-policy family (ppo, spo, grpo).

Layout: log-ratios z[t, n] = log pi(a_t|s_t) - log pi_old(a_t|s_t) of T steps x N envs, and
starts[t, n], True where step t begins an episode (`episode_starts(ended)` builds it from the
buffer's ended flags). The episode is the sequence: the ratio of step t depends only on steps of
the same episode, never on another episode or env.

Episodes cut by the rollout: the rollout's first step always starts a segment and its last step
always ends one. The part of an episode collected in an earlier rollout belongs to an older
pi_old and is not in this batch, so a sequence ratio is the product over the steps of this
rollout only, and the Kalman state restarts at the rollout's first step. A time-limit end
(truncation) ends a sequence exactly as termination does.

KPO's filter, as the paper describes it (we found no public code to check it against): the
log-ratio is a latent random walk x_t = x_{t-1} + w_t, w ~ N(0, q), observed as z_t = x_t + v_t,
v ~ N(0, v). Predict P- = P + q, gain K = P- / (P- + v), update x = x + K (z - x),
P = (1 - K) P-; defaults q 1e-6, v 1 (a strong low-pass; the values reported for the paper,
unverified). At an episode start x = 0 (ratio 1: the policy equals pi_old) and P = p0 = 1, so
the first gain is 1/2 and the early gains behave like a running mean (x_0 and P_0 are not given
by the paper; these are our choice). The gains do not depend on the data, so x_t is a fixed
causal linear combination of z_1..z_t and gradients flow through all of it.

Minibatches: `minibatch_update` shuffles transitions, but sequence and filtered ratios need the
whole episode in time order. `EpisodeRatios` holds the full [T, N] layout; a loss calls it with
the minibatch's fresh log-ratios and their row indices (row = t * N + n, `RolloutBuffer.flat`'s
order). Rows outside the minibatch enter at their reference values: 0 (pi = pi_old) until
`refresh()` stores the latest values seen (pass it as `after_epoch`), or `prime(logp, old_logp)`
sets them for the whole rollout (stale data: a rollout collected some updates ago). Because
every filter here is linear in z, the minibatch's ratios and their gradients are those of the
full filter with the minibatch rows fresh and the other rows held at their reference values, at
a cost of the minibatch's same-episode pairs (at most B^2):
    ratios = EpisodeRatios("kalman", episode_starts(buffer.ended))       # once per rollout
    ratio = ratios(logp, mb["logprobs"], idx)                            # in loss_fn
    minibatch_update(..., after_epoch=lambda epoch: ratios.refresh())     # or ratios=ratios
"""

from __future__ import annotations

import math

import numpy as np
import torch

KINDS = ("step", "sequence", "sequence_mean", "kalman")


def episode_starts(ended: np.ndarray | torch.Tensor) -> torch.Tensor:
    """starts[t] = ended[t - 1], and every env starts a segment at t = 0 [T, N] bool."""
    ended = torch.as_tensor(ended, dtype=torch.bool)
    if ended.ndim != 2:
        raise ValueError(f"ended has shape {tuple(ended.shape)}, expected [T, N]")
    starts = torch.ones_like(ended)
    starts[1:] = ended[:-1]
    return starts


def _check_layout(log_ratio: torch.Tensor, starts: torch.Tensor) -> torch.Tensor:
    if log_ratio.ndim != 2:
        raise ValueError(f"log_ratio has shape {tuple(log_ratio.shape)}, expected [T, N]")
    if starts.shape != log_ratio.shape:
        raise ValueError(
            f"starts has shape {tuple(starts.shape)}, expected {tuple(log_ratio.shape)} "
            "(the shape of log_ratio)"
        )
    starts = starts.to(torch.bool).clone()
    starts[0] = True  # the rollout's first step begins a segment whatever the flags say
    return starts


def _check_noise(q: float, v: float, p0: float) -> None:
    for name, value in (("q", q), ("v", v), ("p0", p0)):
        if not (math.isfinite(value) and value >= 0):
            raise ValueError(f"{name} = {value} must be finite and >= 0")


def segments(starts: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(segment id, step index within the segment, segment length), each [T, N]; ids are
    unique across envs. Vectorised (cumsum / cummax along time)."""
    T, N = starts.shape
    seg = torch.cumsum(starts.long(), dim=0) - 1  # [T, N] segment count within each env
    ids = seg * N + torch.arange(N)
    t = torch.arange(T).unsqueeze(1).expand(T, N)
    age = t - torch.cummax(torch.where(starts, t, torch.zeros_like(t)), dim=0).values
    lengths = torch.bincount(ids.reshape(-1), minlength=T * N)[ids]
    return ids, age, lengths


def kalman_gains(
    length: int, q: float = 1e-6, v: float = 1.0, p0: float = 1.0
) -> tuple[np.ndarray, np.ndarray]:
    """KPO's data-independent gains K_k and log prod_{u<=k} (1 - K_k) for k = 0..length-1
    steps into an episode, float64 [length] each. v = 0: K = 1 (the raw log-ratios)."""
    _check_noise(q, v, p0)
    gains = np.empty(length)
    log_keep = np.empty(length)  # log(1 - K), from v / (P- + v) so it stays finite for v > 0
    p = p0
    for k in range(length):  # a scalar recursion over positions, not over samples
        p_pred = p + q
        if v == 0:
            gains[k], log_keep[k], p = 1.0, -np.inf, 0.0
            continue
        gains[k] = p_pred / (p_pred + v)
        log_keep[k] = math.log(v) - math.log(p_pred + v)
        p = p_pred * v / (p_pred + v)  # (1 - K) P-, in a form without cancellation
    return gains, np.cumsum(log_keep)


def sequence_log_ratio(
    log_ratio: torch.Tensor, starts: torch.Tensor, mean: bool = False
) -> torch.Tensor:
    """Sum (or mean, GSPO's length-normalised form) of the log-ratios of each step's episode,
    broadcast to its steps [T, N]."""
    starts = _check_layout(log_ratio, starts)
    ids, _, lengths = segments(starts)
    sums = torch.zeros(log_ratio.numel(), dtype=log_ratio.dtype, device=log_ratio.device)
    sums = sums.index_add(0, ids.reshape(-1), log_ratio.reshape(-1))[ids]
    return sums / lengths.to(log_ratio.dtype) if mean else sums


def kalman_log_ratio(
    log_ratio: torch.Tensor, starts: torch.Tensor, q: float = 1e-6, v: float = 1.0, p0: float = 1.0
) -> torch.Tensor:
    """KPO's causally filtered log-ratio x_t [T, N]; the loop runs over time steps, vectorised
    over envs, and is differentiable."""
    starts = _check_layout(log_ratio, starts)
    T = log_ratio.shape[0]
    gains, _ = kalman_gains(T, q, v, p0)
    _, age, _ = segments(starts)
    K = torch.as_tensor(gains, dtype=log_ratio.dtype, device=log_ratio.device)[age]  # [T, N]
    # x_t = a_t x_{t-1} + b_t: a = 1 - K, 0 at an episode start (x restarts at 0), b = K z;
    # built for all steps at once so the loop is two ops a step (K = 1 gives z_t exactly)
    a = (1 - K) * ~starts
    b = K * log_ratio
    x = torch.zeros_like(log_ratio[0])
    out = []
    for t in range(T):
        x = a[t] * x + b[t]
        out.append(x)
    return torch.stack(out)


def filtered_log_ratio(
    log_ratio: torch.Tensor, starts: torch.Tensor, kind: str, **kalman: float
) -> torch.Tensor:
    """The log of the ratio `kind` uses at every step [T, N] (the whole rollout in time order)."""
    if kind == "step":
        _check_layout(log_ratio, starts)
        return log_ratio
    if kind in ("sequence", "sequence_mean"):
        return sequence_log_ratio(log_ratio, starts, mean=kind == "sequence_mean")
    if kind == "kalman":
        return kalman_log_ratio(log_ratio, starts, **kalman)
    raise ValueError(f"kind = {kind!r}, expected one of {KINDS}")


class EpisodeRatios:
    """The ratio of `kind` on shuffled minibatches of one rollout (see the module docstring)."""

    def __init__(
        self, kind: str, starts: torch.Tensor, q: float = 1e-6, v: float = 1.0, p0: float = 1.0
    ) -> None:
        if kind not in KINDS:
            raise ValueError(f"kind = {kind!r}, expected one of {KINDS}")
        starts = torch.as_tensor(starts, dtype=torch.bool)
        self.kind, self.kalman = kind, {"q": q, "v": v, "p0": p0}
        T, N = starts.shape if starts.ndim == 2 else (0, 0)
        self.ref = torch.zeros(T, N, dtype=torch.float64)  # reference log-ratios (pi = pi_old)
        self.starts = _check_layout(self.ref, starts)
        ids, age, lengths = segments(self.starts)
        self.ids, self.age, self.lengths = ids.reshape(-1), age.reshape(-1), lengths.reshape(-1)
        gains, log_decay = kalman_gains(T, q, v, p0) if kind == "kalman" else (None, None)
        self.gains = None if gains is None else torch.as_tensor(gains)
        self.log_decay = None if log_decay is None else torch.as_tensor(log_decay)
        self.latest = self.ref.reshape(-1).clone()  # the latest log-ratio seen of every row
        self.ref_out = self.ref.reshape(-1).clone()  # filtered reference values [T * N]

    def pairs(self, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Every (i, j) of positions in idx whose rows share an episode, as two index vectors
        [P], P = sum over episodes of (rows of idx in it)^2 (not B^2: a minibatch of a
        many-env rollout touches many short blocks). Vectorised: sort by episode, then runs."""
        seg, order = torch.sort(self.ids[idx], stable=True)
        _, counts = torch.unique_consecutive(seg, return_counts=True)
        first = torch.cumsum(counts, 0) - counts  # start of each run in sorted order
        run_of = torch.repeat_interleave(torch.arange(len(counts)), counts)  # [B]
        reps = counts[run_of]  # partners of each sorted position
        i_sorted = torch.repeat_interleave(torch.arange(len(idx)), reps)  # [P]
        offset = torch.arange(len(i_sorted)) - torch.repeat_interleave(
            torch.cumsum(reps, 0) - reps, reps
        )
        j_sorted = first[run_of][i_sorted] + offset
        return order[i_sorted], order[j_sorted]

    def weights(self, rows: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
        """d x[row] / d z[col] of the linear filter for rows and cols of the same episode
        (flat row indices, element by element) [P]."""
        if self.kind == "sequence":
            return torch.ones(len(rows), dtype=torch.float64)
        if self.kind == "sequence_mean":
            return 1.0 / self.lengths[rows].double()
        a_r, a_c = self.age[rows], self.age[cols]
        causal = a_c <= a_r
        if self.kalman["v"] == 0:  # K = 1: x_t = z_t
            return (a_c == a_r).double()
        lag = self.log_decay[a_r] - self.log_decay[a_c]  # <= 0 where causal
        w = self.gains[a_c] * torch.exp(torch.where(causal, lag, torch.zeros_like(lag)))
        return torch.where(causal, w, torch.zeros_like(w))

    def __call__(
        self, logp: torch.Tensor, old_logp: torch.Tensor, idx: torch.Tensor
    ) -> torch.Tensor:
        """Ratios [B] of the minibatch rows idx (distinct) with log-probs logp under the current
        policy (differentiable) and old_logp under the behaviour policy."""
        z = logp - old_logp
        if self.kind == "step":
            return z.exp()
        if idx.shape != z.shape:
            raise ValueError(f"idx has shape {tuple(idx.shape)}, expected {tuple(z.shape)}")
        i, j = self.pairs(idx)
        w = self.weights(idx[i], idx[j])
        # x = F(ref) - W ref + W z, summed in float64: the part without z first, so that with
        # v = 0 (W = I) it is exactly 0 and x is z to the bit (the per-step ratio's numbers)
        const = self.ref_out[idx].index_add(0, i, -w * self.ref.reshape(-1)[idx][j])
        x = const.index_add(0, i, w * z.double()[j])
        self.latest[idx] = z.detach().double()
        return x.to(z.dtype).exp()

    def prime(self, logp: torch.Tensor, old_logp: torch.Tensor) -> None:
        """Make the current log-ratios of every row (logp, old_logp [T * N]: the whole rollout,
        rows in RolloutBuffer.flat order) the reference of the next minibatches. For stale data,
        whose log-ratios are away from 0 before the first step: the reference's start at 0 is
        exact only on-policy, and a minibatch's sequence or filtered ratio would otherwise mix
        its fresh log-ratios with zeros for the rest of the episode."""
        z = (logp - old_logp).detach()
        if z.shape != self.latest.shape:
            raise ValueError(f"log-probs have shape {tuple(z.shape)}, expected {self.latest.shape}")
        self.latest = z.double()
        self.refresh()

    def refresh(self) -> None:
        """Make the latest log-ratios seen of every row the reference the next minibatches use."""
        self.ref = self.latest.reshape(self.ref.shape).clone()
        self.ref_out = filtered_log_ratio(self.ref, self.starts, self.kind, **self.kalman)
        self.ref_out = self.ref_out.reshape(-1)
