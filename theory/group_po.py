"""Exact theory of the LLM-era policy-optimisation ideas on bandits: KL-regularised targets
(JitRL, A*-PO), GRPO's probability-of-success dynamics, zero-variance groups, rollout allocation,
the group estimators' bias and variance, the optimal baseline, TPO's cross-entropy fit, the
first-order entropy change and classifier-free guidance. Each function names the paper it checks.

Bandits: a categorical policy pi[K] over arms; arm a pays a Bernoulli reward of mean mu[a] (or a
fixed r[a]). Expectations over groups of G pulls are exact, by enumerating the multinomial counts
of the 2K (arm, reward) outcomes, which the group estimators depend on alone.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
from scipy.optimize import brentq
from scipy.special import gammaln, logsumexp, xlogy

from theory.policy_opt import softmax

SCALES = ("mean", "mean_std")


def check_scale(scale: str) -> None:
    """ValueError unless scale is one of SCALES (mean only, or mean and std)."""
    if scale not in SCALES:
        raise ValueError(f"scale = {scale!r}, expected one of {SCALES}")


# ---------------------------------------------------------------------------------------------
# KL-regularised targets: JitRL's additive logits, A*-PO's value estimate
# ---------------------------------------------------------------------------------------------


def jitrl_policy(logits_ref: np.ndarray, adv: np.ndarray, beta: float) -> np.ndarray:
    """JitRL ("Just-In-Time Reinforcement Learning"): softmax(logits_ref + A / beta), claimed to be
    argmax_pi E_pi[A] - beta KL(pi || pi_ref) exactly."""
    return softmax(logits_ref + adv / beta)


def astarpo_value_estimate(rewards: np.ndarray, beta: float) -> np.ndarray:
    """A*-PO's stage-1 estimate of V* = beta log E_ref[exp(r / beta)] from N reference samples
    (last axis): beta log((1/N) sum exp(r_i / beta)) (Brantley et al. 2025, "Accelerating RL for
    LLM Reasoning with Optimal Advantage Regression")."""
    n = rewards.shape[-1]
    return beta * (logsumexp(rewards / beta, axis=-1) - math.log(n))


def multinomial_counts(n: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Every count vector of n draws over k categories [M, k] and its multinomial log
    coefficient log(n! / prod c!) [M]."""
    combos = np.array(list(itertools.combinations_with_replacement(range(k), n)), dtype=np.int64)
    counts = np.zeros((len(combos), k), dtype=np.int64)
    for j in range(k):  # k categories, each a vectorised count over all M combinations
        counts[:, j] = (combos == j).sum(axis=1)
    return counts, gammaln(n + 1) - gammaln(counts + 1).sum(axis=1)


def astarpo_expected_estimate(pi_ref: np.ndarray, r: np.ndarray, beta: float, n: int) -> float:
    """E over n i.i.d. arms a_i ~ pi_ref of astarpo_value_estimate(r[a]), exactly (counts)."""
    counts, log_coef = multinomial_counts(n, len(pi_ref))
    log_prob = log_coef + xlogy(counts, pi_ref).sum(axis=1)  # 0 log 0 = 0: arms of pi_ref 0
    with np.errstate(divide="ignore"):  # log 0 = -inf: arms not drawn add exp(-inf) = 0
        log_mean = logsumexp(np.log(counts) + r / beta, axis=1) - math.log(n)
    return float(np.sum(np.exp(log_prob) * beta * log_mean))


def astarpo_bias_asymptote(pi_ref: np.ndarray, r: np.ndarray, beta: float, n: int) -> float:
    """The delta-method bias of the estimate, -beta Var(X) / (2 n E[X]^2), X = exp(r / beta):
    Jensen's gap to second order, O(1/n)."""
    x = np.exp(r / beta)
    m = pi_ref @ x
    return -beta * (pi_ref @ (x - m) ** 2) / (2 * n * m**2)


# ---------------------------------------------------------------------------------------------
# GRPO's exact iterates on a binary-reward bandit (Mroueh 2025, "Reinforcement Learning with
# Verifiable Rewards: GRPO's Effective Loss, Dynamics, and Success Amplification", arXiv
# 2503.06639): pi_n = argmax E_pi[A] - beta1 KL(pi || pi_{n-1}) - beta2 KL(pi || pi_ref), its
# "mirror + reference" variant, with population statistics and the std's epsilon at 0. The
# existence threshold of the fixed point (grpo_fixed_point_threshold), the stability of the
# roots (grpo_fixed_point_multiplier) and the finite-group recurrence are our derivations.
# ---------------------------------------------------------------------------------------------


def logit(p: float | np.ndarray) -> float | np.ndarray:
    """log(p / (1 - p))."""
    return np.log(p) - np.log1p(-p)


def grpo_advantage_weight(p: float, scale: str) -> float:
    """a(p) with A = a(p) (r - p) for binary r: 1 (mean only) or 1/sqrt(p (1 - p)) =
    2 cosh(L / 2), L = logit(p) (mean and std, population std as in the paper)."""
    check_scale(scale)
    return 1.0 if scale == "mean" else 2.0 * math.cosh(logit(p) / 2.0)


def grpo_iterate(
    pi_prev: np.ndarray, pi_ref: np.ndarray, r: np.ndarray, beta1: float, beta2: float, scale: str
) -> np.ndarray:
    """The exact maximiser: pi_n proportional to pi_{n-1}^(b1/(b1+b2)) pi_ref^(b2/(b1+b2))
    exp(A / (b1 + b2)), with A the group-normalised binary reward under pi_{n-1} (population
    statistics, the G -> infinity limit of a group)."""
    if not (beta1 >= 0 and beta2 >= 0 and beta1 + beta2 > 0):
        raise ValueError(f"beta1 = {beta1}, beta2 = {beta2}: need both >= 0, not both 0")
    p = float(pi_prev @ r)
    adv = grpo_advantage_weight(p, scale) * (r - p)
    total = beta1 + beta2
    return softmax((beta1 * np.log(pi_prev) + beta2 * np.log(pi_ref) + adv) / total)


def grpo_iterate_objective(
    pi: np.ndarray,
    pi_prev: np.ndarray,
    pi_ref: np.ndarray,
    r: np.ndarray,
    beta1: float,
    beta2: float,
    scale: str,
) -> np.ndarray:
    """E_pi[A] - beta1 KL(pi || pi_{n-1}) - beta2 KL(pi || pi_ref), A as in grpo_iterate."""
    p = float(pi_prev @ r)
    adv = grpo_advantage_weight(p, scale) * (r - p)
    kl_prev = np.sum(pi * (np.log(pi) - np.log(pi_prev)), axis=-1)
    kl_ref = np.sum(pi * (np.log(pi) - np.log(pi_ref)), axis=-1)
    return pi @ adv - beta1 * kl_prev - beta2 * kl_ref


def grpo_pos_recurrence(
    p_ref: float,
    beta1: float,
    beta2: float,
    scale: str,
    steps: int,
    G: int | None = None,
    eps: float = 0.0,
) -> np.ndarray:
    """p_0 = p_ref, ..., p_steps from the closed form: pi_n = pi_ref exp(c_n r) / Z, so logit(p_n)
    = logit(p_ref) + c_n with c_n = (beta1 c_{n-1} + w(p_{n-1})) / (beta1 + beta2) [steps + 1];
    w = a(p), the population weight (G None, the paper's), or c_G(p), the expected update of a
    group of G (grpo_group_weight), the mean field of sampled GRPO."""
    l_ref, c = logit(p_ref), 0.0
    out = [p_ref]
    for _ in range(steps):  # the recurrence itself
        if G is None:
            w = grpo_advantage_weight(out[-1], scale)
        else:
            w = grpo_group_weight(float(l_ref + c), G, scale, eps)[0]
        c = (beta1 * c + w) / (beta1 + beta2)
        out.append(float(1.0 / (1.0 + np.exp(-(l_ref + c)))))
        if out[-1] == 1.0:  # PoS at 1 in floating point: a(1) is infinite
            out += [1.0] * (steps + 1 - len(out))
            break
    return np.array(out)


def grpo_pos_fixed_points(
    p_ref: float, beta2: float, scale: str, G: int | None = None, eps: float = 0.0
) -> list[float]:
    """The PoS p* of every fixed point of the recurrence (independent of beta1), increasing.

    Population (G None): mean only, logit(p*) = logit(p_ref) + 1/beta2 (always one, stable);
    mean and std, the roots of beta2 (L - L_ref) = 2 cosh(L / 2): two or none. The upper root is
    always unstable; the lower one is not always stable (grpo_fixed_point_multiplier): with
    beta1 = 0 and p_ref below grpo_lower_root_instability_p_ref() ~ 0.0100 it is unstable for
    beta2 on an interval around 1 (the recurrence then oscillates or escapes to 1).
    Group of G: mean only, logit(p*) = logit(p_ref) + (G - 1) / (G beta2); mean and std, the
    roots of beta2 (L - L_ref) = c_G(p): c_G is bounded by (G - 1) / sqrt(G), so at least one
    root exists for every beta2 > 0 (found by a sign scan: a tangent double root is missed)."""
    check_scale(scale)
    if not beta2 > 0:
        return []
    l_ref = logit(p_ref)
    if scale == "mean":
        shift = 1.0 if G is None else (G - 1) / G
        return [float(1.0 / (1.0 + np.exp(-(l_ref + shift / beta2))))]
    if G is not None:
        bound = (G - 1) / math.sqrt(G)

        def group_gap(L):
            return beta2 * (L - l_ref) - grpo_group_weight(L, G, scale, eps)[0]

        grid = np.linspace(l_ref, l_ref + bound / beta2 + 1.0, 4001)
        gaps = beta2 * (grid - l_ref) - grpo_group_weights(grid, G, scale, eps)[0]
        crossings = np.flatnonzero((gaps[:-1] < 0) != (gaps[1:] < 0))  # gaps[0] = -c_G < 0
        roots = [brentq(group_gap, grid[i], grid[i + 1], xtol=1e-14) for i in crossings]
        return [float(1.0 / (1.0 + np.exp(-L))) for L in roots]

    def gap(L):
        return 2.0 * math.cosh(L / 2.0) - beta2 * (L - l_ref)

    l_min = 2.0 * math.asinh(beta2)  # where the gap is smallest
    if gap(l_min) > 0:
        return []
    low = brentq(gap, l_ref, l_min, xtol=1e-14)
    high = brentq(gap, l_min, l_min + 2.0 * math.log(4.0 * (beta2 + 1.0)) + 50.0, xtol=1e-14)
    return [float(1.0 / (1.0 + np.exp(-L))) for L in (low, high)]


def grpo_fixed_point_multiplier(
    p_star: float, beta1: float, beta2: float, scale: str, G: int | None = None, eps: float = 0.0
) -> float:
    """d c_n / d c_{n-1} at a fixed point: (beta1 + dw/dL(L*)) / (beta1 + beta2), with w the
    weight of grpo_pos_recurrence (population: dw/dL = sinh(L/2), 0 for mean only); the fixed
    point is locally stable iff |multiplier| < 1 (a multiplier below -1: period doubling)."""
    check_scale(scale)
    L = float(logit(p_star))
    if scale == "mean":
        slope = 0.0
    elif G is None:
        slope = math.sinh(L / 2.0)
    else:
        slope = grpo_group_weight(L, G, scale, eps)[1]
    return (beta1 + slope) / (beta1 + beta2)


def grpo_lower_root_instability_p_ref() -> float:
    """The p_ref below which population mean-and-std GRPO with beta1 = 0 has, for some beta2, an
    unstable lower fixed point: at the boundary the multiplier sinh(L*/2) / beta2 is -1, i.e.
    L* = -2 asinh(beta2) and -L_ref = 2 asinh(beta2) + 2 sqrt(1 + beta2^2) / beta2, whose
    minimum over beta2 is at beta2 = 1: p_ref = sigmoid(-(2 asinh(1) + 2 sqrt(2))) ~ 0.01004."""
    return 1.0 / (1.0 + math.exp(2.0 * math.asinh(1.0) + 2.0 * math.sqrt(2.0)))


def grpo_fixed_point_threshold(p_ref: float) -> float:
    """The smallest beta2 for which mean-and-std GRPO has a fixed point: below it the PoS runs
    to 1. Solves min_L [2 cosh(L/2) - beta2 (L - L_ref)] = 0, minimum at L = 2 asinh(beta2)."""
    l_ref = logit(p_ref)

    def gap_min(b):
        return 2.0 * math.sqrt(1.0 + b * b) - b * (2.0 * math.asinh(b) - l_ref)

    return brentq(gap_min, 1e-9, 1e3, xtol=1e-14)


# ---------------------------------------------------------------------------------------------
# groups of G pulls: zero-variance groups, allocation of rollouts, estimators
# ---------------------------------------------------------------------------------------------


def group_advantages(rewards: np.ndarray, scale: str = "mean_std", eps: float = 1e-4) -> np.ndarray:
    """numpy twin of controlrl.group.group_advantages: (r - mean) / (std + eps), std unbiased
    (huggingface/trl grpo_trainer.py), or r - mean; exactly 0 in zero-variance groups."""
    check_scale(scale)
    flat = np.all(rewards == rewards[..., :1], axis=-1, keepdims=True)
    centred = rewards - rewards.mean(axis=-1, keepdims=True)
    if scale == "mean_std" and rewards.shape[-1] > 1:
        with np.errstate(divide="ignore", invalid="ignore"):  # flat groups: set to 0 below
            centred = centred / (rewards.std(axis=-1, ddof=1, keepdims=True) + eps)
    return np.where(flat, 0.0, centred)


def zero_variance_probability(p: np.ndarray | float, G: int) -> np.ndarray | float:
    """P(all G binary rewards equal) = p^G + (1 - p)^G: the groups GRPO learns nothing from
    (the RAFT / Reinforce-Rej observation, Xiong et al. 2025, "A Minimalist Approach to LLM
    Reasoning: from Rejection Sampling to Reinforce")."""
    return p**G + (1.0 - p) ** G


def informative_value(p: np.ndarray | float, G: int) -> np.ndarray | float:
    """v(G) = 1 - p^G - (1 - p)^G for G >= 1, and v(0) = 0: the chance a context's group of G
    has a signal (the value of an allocation in the knapsack view of rollout budgets)."""
    return np.where(G == 0, 0.0, 1.0 - zero_variance_probability(p, G))


def marginal_gain(p: np.ndarray | float, G: int) -> np.ndarray | float:
    """v(G + 1) - v(G) = p^G (1 - p) + (1 - p)^G p for G >= 1 (and 0 at G = 0: one pull alone
    is never informative)."""
    return informative_value(p, G + 1) - informative_value(p, G)


def greedy_allocation(
    ps: np.ndarray, weights: np.ndarray, budget: int, minimum: int = 1
) -> np.ndarray:
    """Rollouts per context: `minimum` each, then one at a time to the largest weighted
    marginal gain (ties to the lowest index)."""
    ps, weights = np.asarray(ps, float), np.asarray(weights, float)
    alloc = np.full(len(ps), minimum)
    if budget < alloc.sum():
        raise ValueError(f"budget = {budget} is below minimum x contexts = {alloc.sum()}")
    for _ in range(budget - alloc.sum()):  # one unit of budget per pass
        alloc[np.argmax(weights * marginal_gain(ps, alloc))] += 1
    return alloc


def allocation_value(ps: np.ndarray, weights: np.ndarray, alloc: np.ndarray) -> float:
    """sum_i w_i v(G_i)."""
    return float(np.sum(np.asarray(weights) * informative_value(np.asarray(ps), np.asarray(alloc))))


def best_allocation(
    ps: np.ndarray, weights: np.ndarray, budget: int, minimum: int = 0
) -> tuple[np.ndarray, float]:
    """Brute force over every allocation with G_i >= minimum summing to budget."""
    k = len(ps)
    free = budget - minimum * k
    counts, _ = multinomial_counts(free, k)
    allocs = counts + minimum
    values = np.sum(np.asarray(weights) * informative_value(np.asarray(ps), allocs), axis=1)
    best = int(np.argmax(values))
    return allocs[best], float(values[best])


def group_outcomes(
    pi: np.ndarray, mu: np.ndarray, G: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every group of G pulls up to order, as counts over the 2K outcomes (arm, reward): counts
    [M, 2K] (column 2a + r), their probabilities [M], arms [2K] and rewards [2K] of a column."""
    K = len(pi)
    cell = np.stack([pi * (1 - mu), pi * mu], axis=1).reshape(-1)  # P(arm a, reward r)
    counts, log_coef = multinomial_counts(G, 2 * K)
    # xlogy: 0 log 0 = 0, where counts @ log(cell) gave 0 * -inf = NaN for every group when an
    # arm pays with probability 0 or 1 (mu[a] in {0, 1}, as on one-hot bandits)
    log_prob = log_coef + xlogy(counts, cell).sum(axis=1)
    return counts, np.exp(log_prob), np.repeat(np.arange(K), 2), np.tile([0.0, 1.0], K)


ESTIMATORS = ("constant", "rloo", "mean", "mean_std")


def group_gradient(
    pi: np.ndarray,
    counts: np.ndarray,
    arms: np.ndarray,
    rewards: np.ndarray,
    estimator: str,
    baseline: float = 0.0,
    eps: float = 0.0,
) -> np.ndarray:
    """The per-group estimate (1/G) sum_i A_i grad log pi(a_i) w.r.t. the logits [M, K]:
    A = r - baseline ("constant", REINFORCE), r - mean of the others ("rloo", Kool et al. 2019),
    r - group mean ("mean"), (r - mean) / (unbiased std + eps) ("mean_std", GRPO)."""
    if estimator not in ESTIMATORS:
        raise ValueError(f"estimator = {estimator!r}, expected one of {ESTIMATORS}")
    G = int(counts[0].sum())
    succ = counts @ rewards  # [M] successes in the group
    mean = succ / G
    if estimator == "constant":
        adv = rewards[None, :] - baseline
    elif estimator == "rloo":
        adv = rewards[None, :] - (succ[:, None] - rewards[None, :]) / (G - 1)
    else:
        adv = rewards[None, :] - mean[:, None]
        if estimator == "mean_std":
            var = mean * (1 - mean) * G / (G - 1)  # unbiased variance of binary rewards
            flat = (succ == 0) | (succ == G)
            with np.errstate(divide="ignore", invalid="ignore"):  # flat groups: set to 0
                adv = np.where(flat[:, None], 0.0, adv / (np.sqrt(var)[:, None] + eps))
    score = np.eye(len(pi))[arms] - pi  # grad log pi(a) = e_a - pi, one row per outcome [2K, K]
    return (counts * adv) @ score / G


def grpo_gradient_scale(J: float, G: int, eps: float = 0.0) -> float:
    """c with E[group_gradient(..., "mean_std")] = c grad J exactly, for any K, pi and mu with
    success probability J = pi.mu: given its reward, a pull's score e_a - pi has mean grad J / J
    (r = 1) or -grad J / (1 - J) (r = 0), so any advantage that depends on the rewards alone
    gives a multiple of grad J. c = sum_s Binom(s; G - 1, J) [A(1 | s + 1) - A(0 | s)], with
    A(r | S) the advantage of reward r in a group with S successes; c -> 1 / sqrt(J (1 - J))."""
    s = np.arange(G)  # successes among the other G - 1 pulls
    log_binom = gammaln(G) - gammaln(s + 1) - gammaln(G - s) + s * math.log(J)
    weight = np.exp(log_binom + (G - 1 - s) * math.log1p(-J))

    def adv(r, succ):
        m = succ / G
        std = np.sqrt(m * (1 - m) * G / (G - 1))
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where((succ == 0) | (succ == G), 0.0, (r - m) / (std + eps))

    return float(weight @ (adv(1.0, s + 1) - adv(0.0, s)))


def grpo_group_weight(L: float, G: int, scale: str, eps: float = 0.0) -> tuple[float, float]:
    """(c_G, dc_G/dL) at log-odds L = logit(J): the exact expected update scale of a group of G
    (mean only: (G - 1) / G; mean and std: grpo_gradient_scale) and its derivative, computed in
    log-odds so that J near 0 or 1 stays finite: with binomial weights w_s over the other G - 1
    pulls, dw_s / dL = w_s (s - (G - 1) J)."""
    c, slope = grpo_group_weights(np.array([L], dtype=float), G, scale, eps)
    return float(c[0]), float(slope[0])


def grpo_group_weights(
    L: np.ndarray, G: int, scale: str, eps: float = 0.0
) -> tuple[np.ndarray, np.ndarray]:
    """grpo_group_weight at every log-odds of a 1-D array [n] -> ([n], [n])."""
    check_scale(scale)
    L = np.asarray(L, dtype=float)
    if scale == "mean":
        return np.full(L.shape, (G - 1) / G), np.zeros(L.shape)
    s = np.arange(G)  # successes among the other G - 1 pulls
    log_j = -np.logaddexp(0.0, -L)[:, None]  # [n, 1]
    log_1mj = -np.logaddexp(0.0, L)[:, None]
    log_comb = gammaln(G) - gammaln(s + 1) - gammaln(G - s)
    # xlogy-style: a zero count times log 0 (J exactly 0 or 1) is 0, not NaN
    with np.errstate(invalid="ignore"):  # the NaN of 0 * -inf is replaced here
        log_w = log_comb + np.where(s > 0, s * log_j, 0.0)
        log_w = log_w + np.where(G - 1 - s > 0, (G - 1 - s) * log_1mj, 0.0)
    weight = np.exp(log_w)  # [n, G]

    def adv(r, succ):
        m = succ / G
        std = np.sqrt(m * (1 - m) * G / (G - 1))
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where((succ == 0) | (succ == G), 0.0, (r - m) / (std + eps))

    gain = adv(1.0, s + 1) - adv(0.0, s)  # [G]
    J = np.exp(log_j)
    return weight @ gain, (weight * (s - (G - 1) * J)) @ gain


def exact_moments(prob: np.ndarray, grads: np.ndarray) -> tuple[np.ndarray, float]:
    """Mean [K] and total variance E||g - E g||^2 of per-group gradient estimates."""
    mean = prob @ grads
    return mean, float(prob @ np.sum((grads - mean) ** 2, axis=1))


def true_gradient(pi: np.ndarray, mu: np.ndarray) -> np.ndarray:
    """d E_pi[mu] / d logits = pi (mu - pi.mu)."""
    return pi * (mu - pi @ mu)


def single_sample_variance(pi: np.ndarray, mu: np.ndarray, baseline: float) -> float:
    """Total variance of grad log pi(a) (r - b), a ~ pi, r ~ Bernoulli(mu[a])."""
    sq_norm = np.sum((np.eye(len(pi)) - pi) ** 2, axis=1)  # ||e_a - pi||^2
    second = np.sum(pi * sq_norm * (mu * (1 - baseline) ** 2 + (1 - mu) * baseline**2))
    return float(second - np.sum(true_gradient(pi, mu) ** 2))


def optimal_baseline(pi: np.ndarray, mu: np.ndarray) -> float:
    """b* = E[||grad log pi||^2 r] / E[||grad log pi||^2], the variance-minimising constant
    (Greensmith et al. 2004; the gradient-weighted baseline of OBLR-PO, "Optimal Baseline and
    Learning-Rate Policy Optimization")."""
    sq_norm = np.sum((np.eye(len(pi)) - pi) ** 2, axis=1)
    return float(np.sum(pi * sq_norm * mu) / np.sum(pi * sq_norm))


# ---------------------------------------------------------------------------------------------
# TPO (Kaddour 2026, "Target Policy Optimization"): cross-entropy to q = p_old exp(u) / Z
# ---------------------------------------------------------------------------------------------


def tpo_cross_entropy(group_logits: np.ndarray, q: np.ndarray) -> np.ndarray:
    """-sum_i q_i log softmax(l)_i over the group (last axis)."""
    return -np.sum(q * (group_logits - logsumexp(group_logits, axis=-1, keepdims=True)), axis=-1)


def tpo_logit_gradient(group_logits: np.ndarray, q: np.ndarray) -> np.ndarray:
    """d CE / d l = softmax(l) - q: zero exactly when the group policy is the target."""
    return softmax(group_logits) - q


def tpo_fit(
    logits: np.ndarray, sampled: np.ndarray, q: np.ndarray, lr: float, steps: int
) -> np.ndarray:
    """Gradient descent on a bandit policy's logits [K] for the cross-entropy of the group of
    sampled arms (repeats allowed) to q; returns the final logits."""
    z = logits.astype(float).copy()
    for _ in range(steps):  # the optimiser's iterations
        grad = np.zeros_like(z)
        np.add.at(grad, sampled, tpo_logit_gradient(z[sampled], q))
        z -= lr * grad
    return z


def tpo_onehot_coefficient(p: float, K: int) -> float:
    """beta(p) with q - pi = beta(p) (e_y - pi) for TPO's population target on a one-hot K-armed
    bandit scored over the whole action set: lambda = exp(1 / sqrt((1/K)(1 - 1/K))),
    beta = p (lambda - 1) / (1 - p + lambda p)."""
    lam = math.exp(1.0 / math.sqrt((1.0 / K) * (1.0 - 1.0 / K)))
    return p * (lam - 1.0) / (1.0 - p + lam * p)


# ---------------------------------------------------------------------------------------------
# entropy change of a softmax policy (Cui et al. 2025, "The Entropy Mechanism of Reinforcement
# Learning for Reasoning Language Models", arXiv 2505.22617) and guidance (CFGRL)
# ---------------------------------------------------------------------------------------------


def entropy(logits: np.ndarray) -> np.ndarray:
    """Shannon entropy of softmax(logits) along the last axis."""
    log_pi = logits - logsumexp(logits, axis=-1, keepdims=True)
    return -np.sum(np.exp(log_pi) * log_pi, axis=-1)


def entropy_change_first_order(logits: np.ndarray, dz: np.ndarray) -> np.ndarray:
    """-Cov_{a~pi}(log pi(a), dz(a)): the first-order change of H when the logits move by dz."""
    log_pi = logits - logsumexp(logits, axis=-1, keepdims=True)
    pi = np.exp(log_pi)
    centred = dz - np.sum(pi * dz, axis=-1, keepdims=True)
    return -np.sum(pi * log_pi * centred, axis=-1)


def guided_policy(pi_beta: np.ndarray, f: np.ndarray, w: float) -> np.ndarray:
    """CFGRL's pi_w proportional to pi_beta f^w (Frans et al. 2025, "Diffusion Guidance Is a
    Controllable Policy Improvement Operator"), f(a) = P(optimal | a) > 0."""
    return softmax(np.log(pi_beta) + w * np.log(f))


def guidance_derivative(pi_beta: np.ndarray, f: np.ndarray, w: float) -> float:
    """d/dw E_{pi_w}[f] = Cov_{pi_w}(f, log f) (>= 0: f and log f rise together)."""
    pi_w = guided_policy(pi_beta, f, w)
    return float(pi_w @ (f * np.log(f)) - (pi_w @ f) * (pi_w @ np.log(f)))
