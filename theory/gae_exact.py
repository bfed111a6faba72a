"""The GAE policy-gradient estimator in exact distribution, by enumerating every trajectory of a
small finite-horizon MDP (Schulman et al. 2016, "High-Dimensional Continuous Control Using
Generalized Advantage Estimation"). Undiscounted return, GAE discount gamma = 1 by default, and the
terminal value V[H] = 0, so lambda = 1 gives A_hat_h = G_h - V_h(s_h) whatever V is.
"""

from __future__ import annotations

import numpy as np

from theory.mdp import TabularMDP, check_policy


def enumerate_trajectories(
    mdp: TabularMDP, pi: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every trajectory of a finite-horizon MDP: (prob [N], states [N, H+1], actions [N, H]).

    N = S (A S)^H, so keep S, A and H tiny.
    """
    if not mdp.episodic:
        raise ValueError("enumerate_trajectories needs a finite-horizon MDP")
    pi = check_policy(mdp, pi)
    H, S, A = mdp.horizon, mdp.S, mdp.A
    grid = np.indices((S,) + (A, S) * H).reshape(1 + 2 * H, -1).T  # [N, 1 + 2H]
    states, actions = grid[:, 0::2], grid[:, 1::2]
    prob = mdp.rho0[states[:, 0]]
    for h in range(H):  # H is tiny; each step is vectorised over all trajectories
        s, a, s2 = states[:, h], actions[:, h], states[:, h + 1]
        prob = prob * pi[h, s, a] * mdp.P[h, s, a, s2]
    return prob, states, actions


def gae_from_values(
    rewards: np.ndarray, values: np.ndarray, gamma: float, lam: float
) -> np.ndarray:
    """A_hat [N, H] from rewards [N, H] and values along the path [N, H+1] (values[:, H] = 0)."""
    deltas = rewards + gamma * values[:, 1:] - values[:, :-1]
    adv = np.zeros_like(deltas)
    running = np.zeros(len(deltas))
    for h in range(deltas.shape[1] - 1, -1, -1):  # backward recursion over the short horizon
        running = deltas[:, h] + gamma * lam * running
        adv[:, h] = running
    return adv


def gae_gradient_distribution(
    mdp: TabularMDP, pi: np.ndarray, V: np.ndarray, lam: float, gamma: float = 1.0
) -> tuple[np.ndarray, np.ndarray]:
    """(prob [N], g [N, H*S*A]): the per-trajectory estimate sum_h grad log pi(a_h|s_h) A_hat_h
    w.r.t. softmax logits theta[h, s, a], with A_hat from the value table V [H+1, S] (V[H] = 0)."""
    if np.any(V[-1] != 0):
        raise ValueError("V[H] must be 0: the episode ends at the horizon")
    prob, states, actions = enumerate_trajectories(mdp, pi)
    H, S, A = mdp.horizon, mdp.S, mdp.A
    steps = np.arange(H)
    rewards = mdp.R[steps, states[:, :-1], actions]  # [N, H]
    adv = gae_from_values(rewards, V[np.arange(H + 1), states], gamma, lam)
    n_idx = np.arange(len(prob))[:, None]
    score = -pi[steps, states[:, :-1]]  # [N, H, A]: grad of log softmax, e_a - pi(.|s) ...
    score[n_idx, steps[None, :], actions] += 1.0
    g = np.zeros((len(prob), H, S, A))
    g[n_idx, steps[None, :], states[:, :-1]] = score * adv[..., None]  # ... at [h, s_h, :]
    return prob, g.reshape(len(prob), -1)


def moments(prob: np.ndarray, g: np.ndarray) -> tuple[np.ndarray, float]:
    """Exact mean [D] and total variance E||g - E g||^2 of a discrete distribution."""
    mean = prob @ g
    return mean, float(prob @ np.sum((g - mean) ** 2, axis=1))
