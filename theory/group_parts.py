"""Exact quantities for the parts of the group objective (controlrl/advantages.py,
kl_estimators.py, mismatch.py, nft.py) on bandits, in numpy: BNPO's Beta normalisation and the
exact gradient moments of REINFORCE, RLOO, GRPO and BNPO over a batch of contexts (every joint
outcome enumerated: BNPO's Beta parameters couple the contexts); the closed-form KL gradients
of a softmax; the expected policy gradient of samples from a mismatched sampler mu under each
importance correction.

Bandit: context c has a softmax policy pi_c [K] over arms paying Bernoulli(m_c[a]); a batch is
one group of G pulls per context; the batch gradient is (1/C) sum_c (1/G) sum_i A_ci
grad_{z_c} log pi_c(a_ci), with respect to all logits [C, K].
"""

from __future__ import annotations

import itertools

import numpy as np
from scipy.special import betaln, xlogy

from theory import group_po as gp

# ---------------------------------------------------------------------------------------------
# BNPO (Xiao et al. 2025, arXiv 2506.02864) and T-G4's estimators over a batch of contexts
# ---------------------------------------------------------------------------------------------


def bnpo_parameters(p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """numpy twin of controlrl.advantages.beta_parameters over the last axis of p [..., n]."""
    if p.shape[-1] < 2:
        one = np.ones(p.shape[:-1])
        return one, one
    m, v = p.mean(-1), p.var(-1, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        k = np.where(v > 0, m * (1 - m) / v - 1, 0.0)
    return np.maximum(1 + k * m / 3, 1.0), np.maximum(1 + k * (1 - m) / 3, 1.0)


def bnpo_weight(p: np.ndarray, alpha, beta, max_weight: float = 1e6) -> np.ndarray:
    """1 / Beta_pdf(p; alpha, beta), clamped at max_weight."""
    log_pdf = xlogy(alpha - 1, p) + xlogy(beta - 1, 1 - p) - betaln(alpha, beta)
    with np.errstate(over="ignore"):
        return np.minimum(np.exp(-log_pdf), max_weight)


ESTIMATORS = ("constant", "rloo", "mean", "mean_std", "bnpo")


def batch_moments(
    pis: np.ndarray, mus: np.ndarray, G: int, estimator: str, **kw
) -> tuple[np.ndarray, float, np.ndarray]:
    """(E g [C * K], E||g - E g||^2, true gradient [C * K]) of the batch gradient over C contexts
    (pis, mus [C, K]), exactly. Per-context estimators (theory.group_po.group_gradient) combine
    as independent; BNPO enumerates every joint outcome (the product of the contexts')."""
    C, K = pis.shape
    true = np.concatenate([gp.true_gradient(pi, mu) for pi, mu in zip(pis, mus)]) / C
    outs = [gp.group_outcomes(pi, mu, G) for pi, mu in zip(pis, mus)]
    if estimator != "bnpo":
        means, var = [], 0.0
        for pi, (counts, prob, arms, rewards) in zip(pis, outs):
            grads = gp.group_gradient(pi, counts, arms, rewards, estimator, **kw)
            mean, v = gp.exact_moments(prob, grads)
            means.append(mean)
            var += v
        return np.concatenate(means) / C, var / C**2, true
    index = np.array(list(itertools.product(*[range(len(o[1])) for o in outs])))  # [J, C]
    prob = np.prod([outs[c][1][index[:, c]] for c in range(C)], axis=0)
    counts = np.stack([outs[c][0][index[:, c]] for c in range(C)], axis=1)  # [J, C, 2K]
    arms, rewards = outs[0][2], outs[0][3]
    p = (counts @ rewards) / G  # [J, C]
    alpha, beta = kw.get("alpha"), kw.get("beta")
    if alpha is None:
        alpha, beta = bnpo_parameters(p)
        alpha, beta = alpha[:, None], beta[:, None]
    weight = bnpo_weight(p, alpha, beta)  # [J, C]
    adv = (rewards[None, None, :] - p[..., None]) * weight[..., None]  # [J, C, 2K]
    score = np.eye(K)[arms][None] - pis[:, None, :]  # [C, 2K, K]
    grads = np.einsum("jco,cok->jck", counts * adv, score).reshape(len(prob), -1) / (G * C)
    mean, var = gp.exact_moments(prob, grads)
    return mean, var, true


def noise_to_signal(mean: np.ndarray, var: float) -> float:
    """E||g - E g||^2 / ||E g||^2: the variance of an estimator at the scale of its own mean
    (a rescaled estimator has the same value), the comparison that is fair across advantage
    normalisations."""
    return float(var / np.sum(mean**2))


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    """cos of the angle between two gradients."""
    return float(a @ b / np.sqrt((a @ a) * (b @ b)))


# ---------------------------------------------------------------------------------------------
# KL between softmaxes, and its gradients in the logits (for controlrl/kl_estimators.py)
# ---------------------------------------------------------------------------------------------


def kl(q: np.ndarray, p: np.ndarray) -> float:
    """KL(q || p) of two categoricals."""
    return float(np.sum(xlogy(q, q) - xlogy(q, p)))


def grad_reverse_kl(q: np.ndarray, p: np.ndarray) -> np.ndarray:
    """d KL(softmax(z) || p) / dz at q = softmax(z): q (log q - log p - KL(q || p))."""
    return q * (np.log(q) - np.log(p) - kl(q, p))


def grad_forward_kl(q: np.ndarray, p: np.ndarray) -> np.ndarray:
    """d KL(p || softmax(z)) / dz at q = softmax(z): q - p."""
    return q - p


# ---------------------------------------------------------------------------------------------
# Training-inference mismatch: samples from mu, the policy gradient of pi (single pulls)
# ---------------------------------------------------------------------------------------------


def correction_weight(
    pi: np.ndarray, mu: np.ndarray, kind: str, cap: float = 2.0, low: float = 0.5, high: float = 2.0
) -> np.ndarray:
    """numpy twin of controlrl.mismatch.correction_weights at every arm [K]."""
    rho = pi / mu
    if kind == "none":
        return np.ones_like(rho)
    if kind == "tis":
        return np.minimum(rho, cap)
    if kind == "mis":
        return np.where((rho >= low) & (rho <= high), rho, 0.0)
    raise ValueError(f"kind = {kind!r}, expected one of ('none', 'tis', 'mis')")


def mismatch_gradient(pi: np.ndarray, mu: np.ndarray, m: np.ndarray, w: np.ndarray, b: float):
    """E_{a ~ mu, r ~ Bern(m[a])}[w(a) (r - b) grad_z log pi(a)] = sum_a mu_a w_a (m_a - b)
    (e_a - pi): the expected estimate of grad_z E_pi[r] = gp.true_gradient(pi, m)."""
    return (mu * w * (m - b)) @ (np.eye(len(pi)) - pi)


def mismatch_bias(pi: np.ndarray, mu: np.ndarray, m: np.ndarray, w: np.ndarray, b: float):
    """The bias of mismatch_gradient: sum_a (mu_a w_a - pi_a) (m_a - b) (e_a - pi); for TIS
    -sum_a mu_a (pi_a / mu_a - C)_+ (m_a - b) (e_a - pi), 0 when no weight reaches C."""
    return ((mu * w - pi) * (m - b)) @ (np.eye(len(pi)) - pi)


def rloo_mismatch_mean(pi: np.ndarray, mu: np.ndarray, m: np.ndarray) -> np.ndarray:
    """E of the uncorrected RLOO estimate from groups drawn from mu: the leave-one-out baseline
    is independent of the pull, so it is sum_a mu_a (m_a - J_mu) (e_a - pi), J_mu = mu.m."""
    return (mu * (m - mu @ m)) @ (np.eye(len(pi)) - pi)
