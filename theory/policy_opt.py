"""Exact tabular policy optimization: PG, NPG / mirror descent, TRPO's surrogate and bound, the
per-state analytic targets of PPO, SPO, BPO and TPO, the KL-regularised closed form and the exact
expectation of GAE advantages. Discounted MDPs, policies pi[S, A], unless stated otherwise.
"""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp

from theory.mdp import TabularMDP, evaluate, expected_return, occupancy, policy_matrices

# ---------------------------------------------------------------------------------------------
# softmax policies, divergences
# ---------------------------------------------------------------------------------------------


def softmax(logits: np.ndarray, axis: int = -1) -> np.ndarray:
    """Numerically stable softmax along `axis`."""
    return np.exp(logits - logsumexp(logits, axis=axis, keepdims=True))


def kl(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Per-row KL(p || q) of categorical distributions along the last axis."""
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(p > 0, p * (np.log(p) - np.log(q)), 0.0)
    return terms.sum(axis=-1)


def tv(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Per-row total-variation distance 0.5 * ||p - q||_1."""
    return 0.5 * np.abs(p - q).sum(axis=-1)


# ---------------------------------------------------------------------------------------------
# policy gradient, natural policy gradient, mirror descent
# ---------------------------------------------------------------------------------------------


def softmax_policy_gradient(mdp: TabularMDP, logits: np.ndarray) -> np.ndarray:
    """Exact d eta / d logits for pi = softmax(logits): d_pi(s) pi(a|s) A_pi(s, a)."""
    pi = softmax(logits)
    V, Q = evaluate(mdp, pi)
    return occupancy(mdp, pi)[..., None] * pi * (Q - V[..., None])


def mirror_descent_step(pi: np.ndarray, q: np.ndarray, eta: float) -> np.ndarray:
    """KL-proximal (exponential weights) step: pi_new proportional to pi * exp(eta * q)."""
    with np.errstate(divide="ignore"):
        return softmax(np.log(pi) + eta * q)


def npg_step(pi: np.ndarray, adv: np.ndarray, step: float, gamma: float) -> np.ndarray:
    """Exact softmax NPG: pi_new proportional to pi * exp(step * A / (1 - gamma))."""
    return mirror_descent_step(pi, adv, step / (1.0 - gamma))


# ---------------------------------------------------------------------------------------------
# TRPO: surrogate, lower bound, minorize-maximize
# ---------------------------------------------------------------------------------------------


def surrogate(mdp: TabularMDP, pi: np.ndarray, pi_new: np.ndarray) -> np.ndarray:
    """TRPO's L_pi(pi_new) = eta(pi) + sum_s rho_pi(s) sum_a pi_new(a|s) A_pi(s, a) (batched)."""
    V, Q = evaluate(mdp, pi)
    rho = occupancy(mdp, pi)
    return V @ mdp.rho0 + np.sum(rho * np.einsum("...sa,...sa->...s", pi_new, Q - V[..., None]), -1)


def trpo_penalty_coef(mdp: TabularMDP, pi: np.ndarray) -> np.ndarray:
    """C = 4 eps_A gamma / (1 - gamma)^2 with eps_A = max_{s,a} |A_pi(s, a)| (TRPO Thm. 1)."""
    V, Q = evaluate(mdp, pi)
    eps_a = np.max(np.abs(Q - V[..., None]), axis=(-2, -1))
    return 4.0 * eps_a * mdp.gamma / (1.0 - mdp.gamma) ** 2


def trpo_lower_bound(
    mdp: TabularMDP, pi: np.ndarray, pi_new: np.ndarray, divergence: str = "kl"
) -> np.ndarray:
    """M_pi(pi_new) = L_pi(pi_new) - C max_s D(pi(.|s), pi_new(.|s)), D = KL or TV^2."""
    if divergence == "kl":
        dmax = np.max(kl(pi, pi_new), axis=-1)
    elif divergence == "tv2":
        dmax = np.max(tv(pi, pi_new), axis=-1) ** 2
    else:
        raise ValueError(f"divergence = {divergence!r}, expected 'kl' or 'tv2'")
    return surrogate(mdp, pi, pi_new) - trpo_penalty_coef(mdp, pi) * dmax


def mm_step(
    mdp: TabularMDP, pi: np.ndarray, steps: np.ndarray | None = None
) -> tuple[np.ndarray, float]:
    """One minorize-maximize step: the NPG-direction policy maximising M_pi over a step grid.

    The grid contains step 0 (pi itself, where M_pi(pi) = eta(pi)), so M never decreases.
    Returns (pi_new, M_pi(pi_new)).
    """
    if steps is None:
        steps = np.concatenate([[0.0], np.geomspace(1e-4, 10.0, 60)])
    V, Q = evaluate(mdp, pi)
    adv = Q - V[:, None]
    best, best_m = pi, -np.inf
    for step in steps:  # a 1-D line search over step sizes; each candidate is exact
        cand = npg_step(pi, adv, step, mdp.gamma)
        m = trpo_lower_bound(mdp, pi, cand)
        if m > best_m:
            best, best_m = cand, m
    return best, best_m


# ---------------------------------------------------------------------------------------------
# per-sample and per-state targets: PPO, SPO, BPO, TPO, KL-regularised closed form
# ---------------------------------------------------------------------------------------------


def ppo_clip_objective(ratio: np.ndarray, adv: np.ndarray, eps: float) -> np.ndarray:
    """Per-sample PPO objective min(r A, clip(r, 1 - eps, 1 + eps) A) (to maximise)."""
    return np.minimum(ratio * adv, np.clip(ratio, 1 - eps, 1 + eps) * adv)


def ppo_clip_grad(ratio: np.ndarray, adv: np.ndarray, eps: float) -> np.ndarray:
    """d/dr of the PPO objective: 0 if (A > 0, r > 1 + eps) or (A < 0, r < 1 - eps), else A."""
    dead = ((adv > 0) & (ratio > 1 + eps)) | ((adv < 0) & (ratio < 1 - eps))
    return np.where(dead, 0.0, adv)


def ppo_target_ratio(adv: np.ndarray, eps: float) -> np.ndarray:
    """The maximiser of PPO's per-sample objective closest to r = 1: 1 + eps sign(A).

    PPO's argmax set is the whole half-line r >= 1 + eps (A > 0) or [0, 1 - eps] (A < 0); this is
    its end point, where the gradient first vanishes.
    """
    return 1.0 + eps * np.sign(adv)


def spo_objective(ratio: np.ndarray, adv: np.ndarray, eps: float) -> np.ndarray:
    """Per-sample SPO objective r A - |A| (r - 1)^2 / (2 eps) (to maximise)."""
    return ratio * adv - np.abs(adv) * (ratio - 1.0) ** 2 / (2.0 * eps)


def spo_target_ratio(adv: np.ndarray, eps: float) -> np.ndarray:
    """The unique maximiser of SPO's objective for A != 0: 1 + eps sign(A)."""
    return 1.0 + eps * np.sign(adv)


def bpo_target(pi0: np.ndarray, q: np.ndarray, eps: float) -> np.ndarray:
    """BRRL's analytic optimum: argmax_pi E_pi[Q] s.t. 1 - eps <= pi/pi0 <= 1 + eps, per state.

    Ratios are 1 + eps above the pi0-weighted median of Q and 1 - eps below it; the action at the
    median takes the ratio that makes the row sum to 1. Vectorised over leading axes.
    """
    order = np.argsort(-q, axis=-1, kind="stable")
    p_sorted = np.take_along_axis(pi0, order, axis=-1)
    mass_before = np.cumsum(p_sorted, axis=-1) - p_sorted
    # start every action at the lower bound; the missing mass eps goes to the best actions first
    extra = np.clip(eps - 2.0 * eps * mass_before, 0.0, 2.0 * eps * p_sorted)
    new_sorted = (1.0 - eps) * p_sorted + extra
    out = np.empty_like(new_sorted)
    np.put_along_axis(out, order, new_sorted, axis=-1)
    return out


def bpo_loss(pi: np.ndarray, pi0: np.ndarray, q: np.ndarray, weight: np.ndarray, eps: float):
    """Exact expected BPO loss E_{a~pi0}[|r - r_tgt| |w|] per state (r_tgt from bpo_target)."""
    ratio_tgt = bpo_target(pi0, q, eps) / pi0
    return np.sum(pi0 * np.abs(pi / pi0 - ratio_tgt) * np.abs(weight), axis=-1)


def standardize(x: np.ndarray, axis: int = -1, tiny: float = 1e-6) -> np.ndarray:
    """(x - mean) / population std along axis; zeros where the std is below `tiny`."""
    mean = x.mean(axis=axis, keepdims=True)
    std = x.std(axis=axis, keepdims=True)
    return np.where(std < tiny, 0.0, (x - mean) / np.where(std < tiny, 1.0, std))


def tpo_target(p_old: np.ndarray, u: np.ndarray, eta: float) -> np.ndarray:
    """TPO's target q = p_old exp(u / eta) / Z, the argmax of q.u - eta KL(q || p_old)."""
    return mirror_descent_step(p_old, u, 1.0 / eta)


def kl_regularized_optimum(
    pi_ref: np.ndarray, r: np.ndarray, beta: float
) -> tuple[np.ndarray, np.ndarray]:
    """argmax_pi E_pi[r] - beta KL(pi || pi_ref) and its value beta log E_ref[exp(r / beta)]."""
    with np.errstate(divide="ignore"):
        log_z = logsumexp(np.log(pi_ref) + r / beta, axis=-1)
    return mirror_descent_step(pi_ref, r, 1.0 / beta), beta * log_z


def kl_regularized_objective(pi: np.ndarray, pi_ref: np.ndarray, r: np.ndarray, beta: float):
    """E_pi[r] - beta KL(pi || pi_ref) along the last axis."""
    return np.sum(pi * r, axis=-1) - beta * kl(pi, pi_ref)


# ---------------------------------------------------------------------------------------------
# GAE in exact expectation
# ---------------------------------------------------------------------------------------------


def expected_gae_advantage(
    mdp: TabularMDP, pi: np.ndarray, V: np.ndarray, lam: float
) -> np.ndarray:
    """E[A_hat^GAE(gamma, lam) | s_0 = s, a_0 = a] for a fixed value table V (infinite horizon).

    With delta(s, a) = R + gamma P V - V(s) and its on-policy mean dbar = r_pi + gamma P_pi V - V,
    E[A_hat | s, a] = delta(s, a) + gamma lam P(.|s, a) (I - gamma lam P_pi)^-1 dbar.
    """
    P_pi, r_pi = policy_matrices(mdp, pi)
    g = mdp.gamma
    delta = mdp.R + g * mdp.P @ V - V[:, None]
    dbar = r_pi + g * P_pi @ V - V
    tail = np.linalg.solve(np.eye(mdp.S) - g * lam * P_pi, dbar)
    return delta + g * lam * mdp.P @ tail


def expected_policy_gradient(mdp: TabularMDP, pi: np.ndarray, adv: np.ndarray) -> np.ndarray:
    """E[sum_t gamma^t grad log pi(a_t|s_t) adv(s_t, a_t)] w.r.t. softmax logits, [S, A]."""
    d = occupancy(mdp, pi)
    return d[:, None] * pi * (adv - np.sum(pi * adv, axis=-1, keepdims=True))


# ---------------------------------------------------------------------------------------------
# BRRL / BPO (Ao et al. 2026, "Bounded Ratio Reinforcement Learning"): asymmetric bounds (the CEM
# connection), the PPO loss as a one-sided BPO loss, a lower bound on eta in terms of the BPO loss
# ---------------------------------------------------------------------------------------------


def bounded_ratio_target(pi0: np.ndarray, q: np.ndarray, c_low: float, c_high: float) -> np.ndarray:
    """argmax_pi E_pi[Q] s.t. c_low <= pi/pi0 <= c_high, per state (0 <= c_low <= 1 <= c_high).

    Every action starts at c_low pi0; the remaining mass 1 - c_low goes to the best actions first,
    up to c_high pi0 each. c = 1 -/+ eps is `bpo_target`; c_low = 0, c_high = 1/rho is CEM's
    elite distribution (pi0 conditioned on the top-rho mass of Q).
    """
    if not (0.0 <= c_low <= 1.0 <= c_high):
        raise ValueError(f"need 0 <= c_low <= 1 <= c_high, got c_low={c_low}, c_high={c_high}")
    order = np.argsort(-q, axis=-1, kind="stable")
    p_sorted = np.take_along_axis(pi0, order, axis=-1)
    room = (c_high - c_low) * p_sorted  # how much each action can gain above its floor
    before = np.cumsum(room, axis=-1) - room
    new_sorted = c_low * p_sorted + np.clip((1.0 - c_low) - before, 0.0, room)
    out = np.empty_like(new_sorted)
    np.put_along_axis(out, order, new_sorted, axis=-1)
    return out


def ppo_hinge_loss(ratio: np.ndarray, adv: np.ndarray, eps: float) -> np.ndarray:
    """|A| max(0, sign(A) (r* - r)), r* = 1 + eps sign(A): the one-sided L1 distance to the BRRL
    target ratio with the mean V as threshold. PPO's loss -min(r A, clip(r) A) equals it minus
    A r*, a term constant in r, so both have the same minimisers and gradient in r."""
    target = 1.0 + eps * np.sign(adv)
    return np.abs(adv) * np.maximum(0.0, np.sign(adv) * (target - ratio))


def bpo_lower_bound(
    mdp: TabularMDP, pi0: np.ndarray, pi: np.ndarray, eps: float
) -> tuple[float, dict[str, float]]:
    """A lower bound on eta(pi) in terms of the BPO loss (derived here, see below).

    With rho0 the unnormalised occupancy of pi0, A its advantage and pi* = bpo_target(pi0, Q):
      eta(pi) >= eta(pi0) + gain* - L_BPO(pi) - 2 gamma eps_pi / (1 - gamma) sum_s rho0(s) TV_s,
    gain* = sum_s rho0 sum_a pi* A (the BRRL surrogate gain), L_BPO = sum_s rho0 E_pi0[|r - r*||A|]
    (the reference loss, weight |q - V|, on the exact occupancy), TV_s = TV(pi, pi0)(s) <= eps/2 +
    TV(pi, pi*)(s), and eps_pi = max_s |E_pi A(s, .)|. It is Achiam et al. 2017's bound
    eta(pi) - eta(pi0) >= sum_s rho0 [E_pi A - 2 gamma eps_pi TV_s / (1 - gamma)] with
    E_pi A = E_pi* A + sum_a (pi - pi*) A >= E_pi* A - E_pi0[|r - r*| |A|].
    """
    V, Q = evaluate(mdp, pi0)
    adv = Q - V[:, None]
    rho = occupancy(mdp, pi0)
    target = bpo_target(pi0, Q, eps)
    gain = float(rho @ np.sum(target * adv, axis=-1))
    loss = float(rho @ bpo_loss(pi, pi0, Q, adv, eps))
    eps_pi = float(np.max(np.abs(np.sum(pi * adv, axis=-1))))
    tv_term = float(rho @ tv(pi, pi0))
    penalty = 2.0 * mdp.gamma * eps_pi / (1.0 - mdp.gamma) * tv_term
    eta0 = float(mdp.rho0 @ V)
    parts = {"eta0": eta0, "gain": gain, "loss": loss, "penalty": penalty}
    return eta0 + gain - loss - penalty, parts


def weighted_median(pi0: np.ndarray, q: np.ndarray) -> np.ndarray:
    """mu(s): the pi0-weighted median of Q(s, .), the Q of the action where the pi0 mass, summed
    from the best action down, first reaches 1/2 (BRRL's threshold), per leading index."""
    order = np.argsort(-q, axis=-1, kind="stable")
    mass = np.cumsum(np.take_along_axis(pi0, order, axis=-1), axis=-1)
    first = np.argmax(mass >= 0.5 - 1e-15, axis=-1)[..., None]
    return np.take_along_axis(np.take_along_axis(q, order, axis=-1), first, axis=-1)[..., 0]


def bpo_improvement(mdp: TabularMDP, pi0: np.ndarray, eps: float) -> tuple[float, float]:
    """(eta(pi*) - eta(pi0), eps B) for pi* = bpo_target(pi0, Q, eps), with
    B = sum_s rho_{pi*}(s) E_{a~pi0} |Q(s, a) - mu(s)| >= 0 (mu the weighted median).

    BRRL's Theorem 4.2 states eta(pi*) >= eta(pi0) + eps B, B >= 0 and positive whenever pi0 has
    a nonzero median advantage. This B follows from the performance-difference identity:
    sum_a pi* A = sum_a (pi* - pi0)(Q - mu) = eps E_pi0 |Q - mu|, since pi*/pi0 is 1 + eps above mu,
    1 - eps below, and the action at mu contributes 0; so the two numbers are equal.
    """
    V0, Q = evaluate(mdp, pi0)
    target = bpo_target(pi0, Q, eps)
    gain = float(expected_return(mdp, target) - mdp.rho0 @ V0)
    spread = np.sum(pi0 * np.abs(Q - weighted_median(pi0, Q)[:, None]), axis=-1)
    return gain, float(eps * occupancy(mdp, target) @ spread)
