"""Exact tabular MDPs: the model, generators, exact values, occupancies and sampling.

Conventions. A discounted MDP has ``P[S, A, S']``, ``R[S, A]``, ``gamma`` in [0, 1) and policies
``pi[S, A]``. A finite-horizon MDP has ``horizon = H`` and stores ``P[H, S, A, S']`` and
``R[H, S, A]`` (a stationary ``P[S, A, S']`` or ``R[S, A]`` is broadcast over steps); its policies
are ``pi[H, S, A]`` and its values ``V[H + 1, S]`` (``V[H] = 0``), ``Q[H, S, A]``. Step indices
are 0-based in code (the papers' h = 1..H, e.g. Shani et al. 2020, is ``h - 1`` here).
Rewards are expected rewards.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

_TOL = 1e-8


def _fmt_index(idx: tuple[int, ...], trailing_colon: bool) -> str:
    parts = [str(int(i)) for i in idx]
    if trailing_colon:
        parts.append(":")
    return ", ".join(parts)


def check_distribution(name: str, arr: np.ndarray, tol: float = _TOL) -> None:
    """Raise ValueError naming the array and index if the last axis is not a distribution."""
    arr = np.asarray(arr, dtype=float)
    if not np.all(np.isfinite(arr)):
        idx = tuple(np.argwhere(~np.isfinite(arr))[0])
        raise ValueError(f"{name}[{_fmt_index(idx, False)}] is not finite")
    if np.any(arr < 0):
        idx = tuple(np.argwhere(arr < 0)[0])
        raise ValueError(f"{name}[{_fmt_index(idx, False)}] = {arr[idx]:.3g} is negative")
    sums = arr.sum(axis=-1)
    bad = np.abs(sums - 1.0) > tol
    if np.any(bad):
        idx = tuple(np.argwhere(np.atleast_1d(bad))[0]) if sums.ndim else ()
        total = sums[idx] if sums.ndim else float(sums)
        where = _fmt_index(idx, True) if idx else ":"
        raise ValueError(f"{name}[{where}] sums to {total:.6g}, expected 1")


def _check_shape(name: str, arr: np.ndarray, allowed: list[tuple[int, ...]], what: str) -> None:
    if arr.shape not in allowed:
        shapes = " or ".join(str(s) for s in allowed)
        raise ValueError(f"{name} has shape {arr.shape}, expected {shapes} ({what})")


@dataclass(frozen=True, eq=False)
class TabularMDP:
    """A tabular MDP, discounted (gamma) or finite-horizon (horizon), validated on creation."""

    P: np.ndarray  # [S, A, S'] (discounted) or [H, S, A, S'] (finite horizon)
    R: np.ndarray  # [S, A] or [H, S, A]
    rho0: np.ndarray  # [S] initial-state distribution
    gamma: float | None = None
    horizon: int | None = None

    def __post_init__(self) -> None:
        P = np.asarray(self.P, dtype=float)
        R = np.asarray(self.R, dtype=float)
        rho0 = np.asarray(self.rho0, dtype=float)
        if (self.gamma is None) == (self.horizon is None):
            raise ValueError("give exactly one of gamma (discounted) or horizon (finite horizon)")
        if P.ndim not in (3, 4) or P.shape[-1] != P.shape[-3]:
            raise ValueError(f"P has shape {P.shape}, expected [S, A, S] or [H, S, A, S]")
        S, A = P.shape[-3], P.shape[-2]
        if self.gamma is not None:
            if not (0.0 <= float(self.gamma) < 1.0):
                raise ValueError(f"gamma = {self.gamma} is outside [0, 1)")
            _check_shape("P", P, [(S, A, S)], "discounted MDP")
            _check_shape("R", R, [(S, A)], "discounted MDP, matching P")
        else:
            H = int(self.horizon)
            if H < 1 or H != self.horizon:
                raise ValueError(f"horizon = {self.horizon} must be a positive integer")
            _check_shape("P", P, [(S, A, S), (H, S, A, S)], "finite horizon")
            _check_shape("R", R, [(S, A), (H, S, A)], "finite horizon, matching P")
            P = np.broadcast_to(P, (H, S, A, S)).copy()
            R = np.broadcast_to(R, (H, S, A)).copy()
        _check_shape("rho0", rho0, [(S,)], "one entry per state of P")
        if not np.all(np.isfinite(R)):
            idx = tuple(np.argwhere(~np.isfinite(R))[0])
            raise ValueError(f"R[{_fmt_index(idx, False)}] is not finite")
        check_distribution("P", P)
        check_distribution("rho0", rho0)
        object.__setattr__(self, "P", P)
        object.__setattr__(self, "R", R)
        object.__setattr__(self, "rho0", rho0)

    @property
    def S(self) -> int:
        """Number of states."""
        return self.P.shape[-3]

    @property
    def A(self) -> int:
        """Number of actions."""
        return self.P.shape[-2]

    @property
    def episodic(self) -> bool:
        """True for a finite-horizon MDP."""
        return self.horizon is not None


def check_policy(mdp: TabularMDP, pi: np.ndarray, name: str = "pi") -> np.ndarray:
    """Return pi as a float array after checking its shape and that each row is a distribution.

    Discounted-MDP policies may be batched, [..., S, A]; the exact tools then return batches.
    """
    pi = np.asarray(pi, dtype=float)
    expected = (mdp.horizon, mdp.S, mdp.A) if mdp.episodic else (mdp.S, mdp.A)
    # discounted policies may carry leading batch axes: [..., S, A]
    got = pi.shape if mdp.episodic else pi.shape[-2:]
    if got != expected:
        raise ValueError(f"{name} has shape {pi.shape}, expected {expected}")
    check_distribution(name, pi)
    return pi


# ---------------------------------------------------------------------------------------------
# exact values
# ---------------------------------------------------------------------------------------------


def policy_matrices(mdp: TabularMDP, pi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """State-to-state transition P_pi [S, S] and reward r_pi [S] of a discounted MDP's policy."""
    P_pi = np.einsum("...sa,sat->...st", pi, mdp.P)
    r_pi = np.einsum("...sa,sa->...s", pi, mdp.R)
    return P_pi, r_pi


def evaluate(mdp: TabularMDP, pi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Exact (V, Q) of pi: linear solve (discounted) or backward induction (finite horizon)."""
    pi = check_policy(mdp, pi)
    if not mdp.episodic:
        P_pi, r_pi = policy_matrices(mdp, pi)
        V = np.linalg.solve(np.eye(mdp.S) - mdp.gamma * P_pi, r_pi[..., None])[..., 0]
        return V, mdp.R + mdp.gamma * np.einsum("sat,...t->...sa", mdp.P, V)
    return evaluate_finite(mdp.P, mdp.R, pi)


def evaluate_finite(P: np.ndarray, R: np.ndarray, pi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Backward induction for P[H,S,A,S], R[H,S,A], pi[H,S,A] -> V[H+1,S], Q[H,S,A] (no checks)."""
    H, S, A = R.shape
    V = np.zeros((H + 1, S))
    Q = np.empty((H, S, A))
    for h in range(H - 1, -1, -1):  # loop over steps only; each step is vectorised over (s, a)
        Q[h] = R[h] + P[h] @ V[h + 1]
        V[h] = np.einsum("sa,sa->s", pi[h], Q[h])
    return V, Q


def advantage(mdp: TabularMDP, pi: np.ndarray) -> np.ndarray:
    """Exact advantage A = Q - V, shaped like pi."""
    V, Q = evaluate(mdp, pi)
    return Q - (V[..., None] if not mdp.episodic else V[:-1, :, None])


def expected_return(mdp: TabularMDP, pi: np.ndarray) -> float | np.ndarray:
    """eta(pi) = rho0 . V^pi (discounted) or rho0 . V_0^pi (finite horizon)."""
    V, _ = evaluate(mdp, pi)
    return float(mdp.rho0 @ V[0]) if mdp.episodic else V @ mdp.rho0


def occupancy(mdp: TabularMDP, pi: np.ndarray) -> np.ndarray:
    """Unnormalised discounted state visitation rho0^T (I - gamma P_pi)^-1 [S], or d_h(s) [H, S]."""
    pi = check_policy(mdp, pi)
    if not mdp.episodic:
        P_pi, _ = policy_matrices(mdp, pi)
        lhs = np.swapaxes(np.eye(mdp.S) - mdp.gamma * P_pi, -1, -2)
        rhs = np.broadcast_to(mdp.rho0[:, None], lhs.shape[:-1] + (1,))
        return np.linalg.solve(lhs, rhs)[..., 0]
    d = np.empty((mdp.horizon, mdp.S))
    d[0] = mdp.rho0
    for h in range(mdp.horizon - 1):
        d[h + 1] = np.einsum("s,sa,sat->t", d[h], pi[h], mdp.P[h])
    return d


def greedy(Q: np.ndarray) -> np.ndarray:
    """Deterministic greedy policy (one-hot, first maximiser) for Q[..., A]."""
    pi = np.zeros_like(Q, dtype=float)
    np.put_along_axis(pi, Q.argmax(axis=-1)[..., None], 1.0, axis=-1)
    return pi


def value_iteration(
    mdp: TabularMDP, tol: float = 1e-12, max_iter: int = 100_000
) -> tuple[np.ndarray, np.ndarray]:
    """Optimal (V*, Q*): value iteration to sup-norm tol (discounted) or backward induction."""
    if mdp.episodic:
        H, S = mdp.horizon, mdp.S
        V = np.zeros((H + 1, S))
        Q = np.empty((H, S, mdp.A))
        for h in range(H - 1, -1, -1):
            Q[h] = mdp.R[h] + mdp.P[h] @ V[h + 1]
            V[h] = Q[h].max(axis=-1)
        return V, Q
    V = np.zeros(mdp.S)
    for _ in range(max_iter):
        Q = mdp.R + mdp.gamma * mdp.P @ V
        V_new = Q.max(axis=-1)
        done = np.max(np.abs(V_new - V)) <= tol * (1 - mdp.gamma)
        V = V_new
        if done:
            break
    # finish with one exact policy evaluation of the greedy policy (exact when it is optimal)
    pi = greedy(mdp.R + mdp.gamma * mdp.P @ V)
    V, Q = evaluate(mdp, pi)
    return V, Q


def sample_episode(
    mdp: TabularMDP, pi: np.ndarray, rng: np.random.Generator, length: int | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sample (states [T+1], actions [T], expected rewards [T]) of one episode of pi."""
    T = mdp.horizon if mdp.episodic else length
    if T is None:
        raise ValueError("length is required for a discounted MDP")
    states = np.empty(T + 1, dtype=np.int64)
    actions = np.empty(T, dtype=np.int64)
    rewards = np.empty(T)
    u = rng.random((T + 1, 2))
    states[0] = min(np.searchsorted(np.cumsum(mdp.rho0), u[0, 0], side="right"), mdp.S - 1)
    for t in range(T):
        s = states[t]
        p_a = pi[t, s] if mdp.episodic else pi[s]
        a = min(np.searchsorted(np.cumsum(p_a), u[t, 1], side="right"), mdp.A - 1)
        P_sa = mdp.P[t, s, a] if mdp.episodic else mdp.P[s, a]
        actions[t] = a
        rewards[t] = mdp.R[t, s, a] if mdp.episodic else mdp.R[s, a]
        states[t + 1] = min(np.searchsorted(np.cumsum(P_sa), u[t + 1, 0], side="right"), mdp.S - 1)
    return states, actions, rewards


def uniform_policy(mdp: TabularMDP) -> np.ndarray:
    """The uniform random policy, shaped [S, A] or [H, S, A]."""
    shape = (mdp.horizon, mdp.S, mdp.A) if mdp.episodic else (mdp.S, mdp.A)
    return np.full(shape, 1.0 / mdp.A)


def random_policy(
    mdp: TabularMDP, rng: np.random.Generator, concentration: float = 1.0
) -> np.ndarray:
    """A full-support random policy with Dirichlet(concentration) rows."""
    shape = (mdp.horizon, mdp.S) if mdp.episodic else (mdp.S,)
    return rng.dirichlet(np.full(mdp.A, concentration), size=shape)


# ---------------------------------------------------------------------------------------------
# generators
# ---------------------------------------------------------------------------------------------


def _make(P, R, rho0, gamma, horizon) -> TabularMDP:
    return TabularMDP(P=P, R=R, rho0=rho0, gamma=gamma, horizon=horizon)


def random_mdp(
    S: int,
    A: int,
    rng: np.random.Generator,
    gamma: float | None = 0.9,
    horizon: int | None = None,
    alpha: float = 1.0,
    reward_power: float = 1.0,
) -> TabularMDP:
    """Random MDP: Dirichlet(alpha) transitions, rewards U^reward_power; step-dependent if episodic.

    Discounted MDPs start uniformly; finite-horizon ones start in state 0 (the fixed s_1 of Shani,
    Efroni, Rosenberg, Mannor 2020, "Optimistic Policy Optimization with Bandit Feedback").
    """
    if horizon is not None:
        gamma = None
        P = rng.dirichlet(np.full(S, alpha), size=(horizon, S, A))
        R = rng.random((horizon, S, A)) ** reward_power
        rho0 = np.eye(S)[0]
    else:
        P = rng.dirichlet(np.full(S, alpha), size=(S, A))
        R = rng.random((S, A)) ** reward_power
        rho0 = np.full(S, 1.0 / S)
    return _make(P, R, rho0, gamma, horizon)


def chain(
    n: int = 5,
    slip: float = 0.1,
    gamma: float | None = 0.9,
    horizon: int | None = None,
    small: float = 0.1,
) -> TabularMDP:
    """n-state chain: action 1 moves right (slips left w.p. slip), action 0 moves left.

    Reward 1 for action 1 at the right end, `small` for action 0 at the left end; start left.
    """
    P = np.zeros((n, 2, n))
    idx = np.arange(n)
    left, right = np.maximum(idx - 1, 0), np.minimum(idx + 1, n - 1)
    P[idx, 0, left] = 1.0
    P[idx, 1, right] += 1.0 - slip
    P[idx, 1, left] += slip
    R = np.zeros((n, 2))
    R[0, 0], R[n - 1, 1] = small, 1.0
    return _make(P, R, np.eye(n)[0], None if horizon else gamma, horizon)


def river_swim(n: int = 6, gamma: float | None = 0.95, horizon: int | None = None) -> TabularMDP:
    """RiverSwim (Strehl & Littman 2008): swimming right against the current is slow but pays 1.

    Action 0 (left) is deterministic; action 1 (right) moves right w.p. 0.35, stays w.p. 0.6 and
    drifts left w.p. 0.05 (at the ends the missing mass stays). Rewards: 0.005 for action 0 in the
    leftmost state, 1 for action 1 in the rightmost state. Start in state 0.
    """
    P = np.zeros((n, 2, n))
    idx = np.arange(n)
    P[idx, 0, np.maximum(idx - 1, 0)] = 1.0
    P[idx, 1, np.minimum(idx + 1, n - 1)] += 0.35
    P[idx, 1, idx] += 0.6
    P[idx, 1, np.maximum(idx - 1, 0)] += 0.05
    R = np.zeros((n, 2))
    R[0, 0], R[n - 1, 1] = 0.005, 1.0
    return _make(P, R, np.eye(n)[0], None if horizon else gamma, horizon)


def gridworld(
    n: int = 4, slip: float = 0.1, gamma: float | None = 0.9, horizon: int | None = None
) -> TabularMDP:
    """n x n grid; actions up/right/down/left; with prob. slip a uniformly random move happens.

    Reward 1 for any action in the goal (bottom-right corner); start at the top-left corner.
    """
    S = n * n
    rows, cols = np.divmod(np.arange(S), n)
    moves = np.array([(-1, 0), (0, 1), (1, 0), (0, -1)])
    nxt = np.empty((S, 4), dtype=np.int64)
    for a, (dr, dc) in enumerate(moves):  # 4 actions, vectorised over states
        nxt[:, a] = np.clip(rows + dr, 0, n - 1) * n + np.clip(cols + dc, 0, n - 1)
    det = np.zeros((S, 4, S))
    det[np.arange(S)[:, None], np.arange(4)[None, :], nxt] = 1.0
    P = (1 - slip) * det + slip * det.mean(axis=1, keepdims=True)
    R = np.zeros((S, 4))
    R[S - 1, :] = 1.0
    return _make(P, R, np.eye(S)[0], None if horizon else gamma, horizon)


def combination_lock(
    S: int = 6, horizon: int = 6, A: int = 2, distractor: float = 0.0, seed: int = 0
) -> TabularMDP:
    """Finite-horizon combination lock: only one action sequence earns the reward 1 at step H.

    States 0..S-2 form the lock, S-1 is an absorbing dead state. In lock state i the correct
    action (drawn once from `seed`) moves to min(i + 1, S - 2); any other action falls into the
    dead state. Reward 1 for the correct action in state S-2 at the last step only; the dead
    state pays `distractor` per step (a tempting local optimum when > 0). Start in state 0.
    """
    if S < 2:
        raise ValueError(f"S = {S} must be at least 2 (one lock state and the dead state)")
    correct = np.random.default_rng(seed).integers(A, size=S - 1)
    lock = np.arange(S - 1)
    P = np.zeros((S, A, S))
    P[:, :, S - 1] = 1.0
    P[lock, correct, S - 1] = 0.0
    P[lock, correct, np.minimum(lock + 1, S - 2)] = 1.0
    R = np.zeros((horizon, S, A))
    R[:, S - 1, :] = distractor
    R[horizon - 1, S - 2, correct[S - 2]] = 1.0
    return _make(P, R, np.eye(S)[0], None, horizon)
