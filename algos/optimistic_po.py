"""Optimistic policy optimization (POMD) for tabular episodic MDPs with unknown transitions.

Paper: Shani, Efroni, Rosenberg, Mannor (ICML 2020), "Optimistic Policy Optimization with Bandit
Feedback" -- optimistic evaluation with exploration bonuses + exponential-weights (mirror-descent)
policy updates; regret O~(sqrt(S^2 A H^4 K)). Written in the reward-maximisation form (the paper
uses costs c = 1 - r); no reference code was published.

Bonus scale and optimism. The paper's bonus (c_b = 1 here) is at least H at n = 0 (it divides by
max(n, 1)), so every unvisited pair sits at the truncation H - h: optimism where there is no data.
`--c-b` scales the count-based bonus of VISITED pairs only; unvisited pairs keep the cap for every
c_b (without that rule their empty P_hat row would drop the future value, i.e. pessimism). So
`--c-b 0` still explores, R-max style with one visit as "known"; `--no-bonus` removes both and is
the greedy ablation.

Delayed feedback (`--delay d`): the trajectory and rewards of episode k reach the learner at the
end of episode k + d (the model of Lancewicki, Rosenberg, Mansour, AAAI 2022, "Learning
Adversarial MDPs with Delayed Feedback", with a constant delay). Naive PO runs the undelayed
algorithm on whatever has arrived. `--delay-adapted` follows their Delayed OPPO as far as it
applies here: delayed mirror descent is tuned to K + D, D = d K the total delay, i.e.
eta = sqrt(2 log A / (H^2 (K + D))) (anytime: k + d k), because the policy takes d steps between
playing an episode and seeing its feedback and the analysis pays a drift term of order
eta H^2 D for them; and no step is taken before the first feedback arrives. (Their update uses
the Q of the policy that played the arrived episode because adversarial losses are only known
for it; with stochastic rewards the current policy's optimistic Q on the current model is
available and is what both variants use.)

Run:
    python algos/optimistic_po.py --mdp random --S 5 --A 3 --H 5 --episodes 100000 --seed 0
    python algos/optimistic_po.py --mdp lock --S 6 --A 2 --H 6 --c-b 0 --episodes 20000
    python algos/optimistic_po.py --episodes 16384 --delay 100 --delay-adapted

Writes to runs/optimistic_po/<mdp>_S<S>_A<A>_H<H>_cb<c_b>_seed<seed>_<timestamp>/ (or --run-dir):
config.json, regret.csv (episode, cumulative pseudo-regret) and regret.png (log-log, with a
sqrt(K) reference). Regret is pseudo-regret: each policy's value is computed exactly with the
true model, and the comparator is V* (stochastic) or the best fixed policy in hindsight
(adversarial/switching rewards).
"""

from __future__ import annotations

import json
import sys
import time
from collections import deque
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from controlrl.cli import SEED_MAX, available_memory, cli
from theory.mdp import TabularMDP, combination_lock, evaluate_finite, random_mdp, value_iteration


@dataclass
class Args:
    mdp: Literal["random", "lock"] = "random"
    """instance: `random` (P_h ~ Dirichlet(0.5), R_h = U^3, Bernoulli rewards) or
    `lock` (combination lock, reward 1 only at the end of one action sequence)"""
    S: int = 5
    """number of states (5 for random, 6 for the lock in the rate experiment)"""
    A: int = 3
    """number of actions (3 for random, 2 for the lock in the rate experiment)"""
    H: int = 5
    """horizon (5 for random, 6 for the lock in the rate experiment)"""
    episodes: int = 100_000
    """number of episodes K"""
    seed: int = 0
    """seed of the algorithm's randomness (rollouts, reward noise)"""
    mdp_seed: int = 0
    """seed of the instance (random MDP draw, lock combination); fixed across --seed"""
    c_b: float = 0.1
    """bonus scale; 1 is the theory constant (Shani et al.), which saturates the truncation until
    n >> S L and looks linear for K <= 2^16; 0.1 shows the sqrt(K) rate at these K. It scales the
    bonus of visited pairs only: unvisited pairs stay at the cap H - h (as the paper's bonus puts
    them), so --c-b 0 still explores them once; --no-bonus is the greedy learner"""
    bonus: bool = True
    """exploration bonus and optimism for unvisited pairs; --no-bonus is the greedy ablation"""
    losses: Literal["stochastic", "adversarial"] = "stochastic"
    """`adversarial`: reward means switch between two tables every --switch-every episodes; the
    comparator is then the best fixed policy in hindsight"""
    switch_every: int = 1000
    """period of the reward switch when --losses adversarial"""
    delay: int = 0
    """feedback delay d: an episode's trajectory and rewards reach the learner d episodes later"""
    delay_adapted: bool = False
    """delay-adapted PO (Delayed OPPO, Lancewicki et al. 2022): step size tuned to K + D with
    D = d K the total delay, no step before the first feedback; off = naive PO under delay"""
    eta_schedule: Literal["anytime", "fixed"] = "anytime"
    """mirror-descent step: anytime sqrt(2 log A / (H^2 k)) or fixed sqrt(2 log A / (H^2 K))"""
    delta: float = 0.1
    """confidence level delta in L = log(3 S A H K / delta)"""
    lock_distractor: float = 0.0
    """per-step reward of the lock's dead state (0 = the plain lock)"""
    run_dir: str | None = None
    """output directory (default runs/optimistic_po/<name>_<timestamp>)"""
    progress: bool = True
    """show a tqdm progress bar"""


def validate(args: Args) -> None:
    """Exit with status 2 and a one-line message naming the first bad flag."""
    checks = [
        ("--seed", 0 <= args.seed <= SEED_MAX, f"an integer in [0, {SEED_MAX}]", args.seed),
        (
            "--mdp-seed",
            0 <= args.mdp_seed <= SEED_MAX,
            f"an integer in [0, {SEED_MAX}]",
            args.mdp_seed,
        ),
        ("--S", args.S >= 2, "an integer >= 2", args.S),
        ("--A", args.A >= 2, "an integer >= 2", args.A),
        ("--H", args.H >= 1, "an integer >= 1", args.H),
        ("--episodes", args.episodes >= 1, "an integer >= 1", args.episodes),
        ("--c-b", np.isfinite(args.c_b) and args.c_b >= 0, "a finite float >= 0", args.c_b),
        ("--switch-every", args.switch_every >= 1, "an integer >= 1", args.switch_every),
        (
            "--delay",
            0 <= args.delay < args.episodes,
            "an integer in [0, --episodes)",
            args.delay,
        ),
        ("--delta", 0 < args.delta < 1, "a float in (0, 1)", args.delta),
        (
            "--lock-distractor",
            0 <= args.lock_distractor <= 1,
            "a float in [0, 1]",
            args.lock_distractor,
        ),
    ]
    for flag, ok, allowed, value in checks:
        if not ok:
            print(f"error: {flag} must be {allowed} (got {value})", file=sys.stderr)
            raise SystemExit(2)
    need, free = memory_needed(args), available_memory()
    if free is not None and need > free:
        print(
            f"error: --S {args.S} --A {args.A} --H {args.H} --episodes {args.episodes} need at "
            f"least {need / 2**30:.1f} GiB (four [H, S, A, S] arrays, three of K), more than the "
            f"{free / 2**30:.1f} GiB of memory available",
            file=sys.stderr,
        )
        raise SystemExit(2)


def memory_needed(args: Args) -> int:
    """Bytes run() allocates at least: four float64 [H, S, A, S] arrays (the true P, its
    cumulative sums, the transition counts, the empirical P_hat) and three per episode."""
    return 8 * (4 * args.H * args.S * args.A * args.S + 3 * args.episodes)


def make_instance(args: Args) -> tuple[TabularMDP, np.ndarray | None]:
    """The true MDP and, for adversarial losses, the second reward table R_B[H, S, A]."""
    rng = np.random.default_rng(args.mdp_seed)
    if args.mdp == "random":
        mdp = random_mdp(args.S, args.A, rng, horizon=args.H, alpha=0.5, reward_power=3.0)
    else:
        mdp = combination_lock(args.S, args.H, args.A, args.lock_distractor, seed=args.mdp_seed)
    R_b = None
    if args.losses == "adversarial":
        R_b = rng.random(mdp.R.shape) ** 3 if args.mdp == "random" else mdp.R[:, ::-1].copy()
    return mdp, R_b


# ---------------------------------------------------------------------------------------------
# the algorithm: bonus, optimistic evaluation of the current policy, mirror-descent update
# ---------------------------------------------------------------------------------------------


def bonus(n: np.ndarray, S: int, A: int, H: int, K: int, delta: float, c_b: float) -> np.ndarray:
    """b_h(s,a) = c_b (sqrt(2 L / nbar) + H sqrt(4 S L / nbar)), L = log(3 S A H K / delta)."""
    L = np.log(3 * S * A * H * K / delta)
    nbar = np.maximum(n, 1)
    return c_b * (np.sqrt(2 * L / nbar) + H * np.sqrt(4 * S * L / nbar))


def optimistic_evaluation(
    R_hat: np.ndarray,
    P_hat: np.ndarray,
    b: np.ndarray,
    pi: np.ndarray,
    unvisited: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Truncated optimistic Q of the CURRENT policy: Q_h = min(H - h, R_hat + b + P_hat V_{h+1}).

    R_hat, b, pi: [H, S, A]; P_hat: [H, S, A, S]. Pairs marked in `unvisited` get the maximal
    value H - h (a scaled-down bonus would otherwise drop their future value).
    Returns (Q [H, S, A], V [H + 1, S]).
    """
    H, S, _ = R_hat.shape
    V = np.zeros((H + 1, S))
    Q = np.empty_like(R_hat)
    for h in range(H - 1, -1, -1):  # loop over steps; each step is vectorised over (s, a)
        Q[h] = np.minimum(H - h, R_hat[h] + b[h] + P_hat[h] @ V[h + 1])
        if unvisited is not None:
            Q[h] = np.where(unvisited[h], H - h, Q[h])
        V[h] = np.einsum("sa,sa->s", pi[h], Q[h])
    return Q, V


def mirror_descent_update(logits: np.ndarray, Q: np.ndarray, eta: float):
    """Exponential weights in log space: logits += eta Q; pi = softmax(logits). Returns both."""
    logits = logits + eta * Q
    logits -= logits.max(axis=-1, keepdims=True)  # keep numbers bounded; pi is unchanged
    pi = np.exp(logits)  # max entry is exp(0) = 1, so the sum is in [1, A]: no overflow
    return logits, pi / pi.sum(axis=-1, keepdims=True)


def run(args: Args, callback=None) -> dict[str, np.ndarray]:
    """Run optimistic PO; returns per-episode values, comparator increments and cumulative regret.

    The comparator increment is V* (stochastic) or the change of max_pi sum_j V_j^pi (adversarial),
    so regret = cumsum(best - values) in both cases.
    """
    rng = np.random.default_rng(args.seed)
    mdp, R_b = make_instance(args)
    H, S, A, K = mdp.horizon, mdp.S, mdp.A, args.episodes
    P_cum = np.cumsum(mdp.P, axis=-1)
    logits = np.zeros((H, S, A))
    pi = np.full((H, S, A), 1.0 / A)
    n = np.zeros((H, S, A))
    n_sas = np.zeros((H, S, A, S))
    r_sum = np.zeros((H, S, A))
    steps = np.arange(H)
    pending: deque = deque()
    values = np.empty(K)
    best = np.empty(K)
    v_star = float(value_iteration(mdp)[0][0, 0])
    R_total = np.zeros((H, S, A))  # cumulative reward means, for the best policy in hindsight
    best_prev = 0.0
    log_a = np.log(A)
    episodes = range(K)
    if args.progress:
        from tqdm import tqdm

        episodes = tqdm(episodes, mininterval=1.0, desc="optimistic_po")
    for k in episodes:
        R_k = mdp.R if R_b is None or (k // args.switch_every) % 2 == 0 else R_b
        # 1. roll out pi_k from s_1 = 0 (exact value with the true model: pseudo-regret)
        values[k] = evaluate_finite(mdp.P, R_k, pi)[0][0, 0]
        if R_b is None:
            best[k] = v_star
        else:  # best fixed policy for the rewards so far: V* of the summed reward tables
            R_total += R_k
            best_cum = value_iteration(TabularMDP(mdp.P, R_total, mdp.rho0, horizon=H))[0][0, 0]
            best[k], best_prev = best_cum - best_prev, best_cum
        u = rng.random((H, 3))
        s_traj = np.empty(H + 1, dtype=np.int64)
        a_traj = np.empty(H, dtype=np.int64)
        s_traj[0] = 0
        for h in range(H):
            s = s_traj[h]
            a_traj[h] = min(np.searchsorted(np.cumsum(pi[h, s]), u[h, 0], side="right"), A - 1)
            nxt = np.searchsorted(P_cum[h, s, a_traj[h]], u[h, 1], side="right")
            s_traj[h + 1] = min(nxt, S - 1)
        r_traj = (u[:, 2] < R_k[steps, s_traj[:-1], a_traj]).astype(float)  # Bernoulli rewards
        # 6. (delayed) feedback: counts of the episodes that have arrived
        pending.append((s_traj, a_traj, r_traj))
        if len(pending) > args.delay:
            s_f, a_f, r_f = pending.popleft()
            n[steps, s_f[:-1], a_f] += 1
            n_sas[steps, s_f[:-1], a_f, s_f[1:]] += 1
            r_sum[steps, s_f[:-1], a_f] += r_f
        # 2.-4. empirical model, bonus, optimistic evaluation of pi_k
        nbar = np.maximum(n, 1)[..., None]
        P_hat = n_sas / nbar
        R_hat = r_sum / nbar[..., 0]
        if args.bonus:
            b = bonus(n, S, A, H, K, args.delta, args.c_b)
            Q, _ = optimistic_evaluation(R_hat, P_hat, b, pi, unvisited=n == 0)
        else:
            Q, _ = optimistic_evaluation(R_hat, P_hat, np.zeros_like(R_hat), pi)
        # 5. mirror-descent step at every (h, s); delay-adapted: tuned to K + D, D = d K
        t = K if args.eta_schedule == "fixed" else k + 1
        if args.delay_adapted:
            t *= 1 + args.delay
        eta = np.sqrt(2 * log_a / (H**2 * t))
        if not (args.delay_adapted and k < args.delay):  # adapted: no step before feedback
            logits, pi = mirror_descent_update(logits, Q, eta)
        if callback is not None:
            callback(k, pi, Q)
    return {"values": values, "best": best, "regret": np.cumsum(best - values)}


def run_name(args: Args) -> str:
    """Default run-directory name."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    cb = f"cb{args.c_b:g}" if args.bonus else "nobonus"
    if args.delay:
        cb += f"_delay{args.delay}" + ("adapted" if args.delay_adapted else "")
    return f"{args.mdp}_S{args.S}_A{args.A}_H{args.H}_{cb}_seed{args.seed}_{stamp}"


def main(args: Args) -> Path:
    """Validate, run, and write config.json, regret.csv and regret.png; returns the run dir."""
    validate(args)
    run_dir = Path(args.run_dir or Path("runs/optimistic_po") / run_name(args))
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.json").write_text(json.dumps(asdict(args), indent=2))
    out = run(args)
    reg = out["regret"]
    K = np.arange(1, args.episodes + 1)
    np.savetxt(
        run_dir / "regret.csv",
        np.column_stack([K, reg]),
        delimiter=",",
        header="episode,cumulative_regret",
        comments="",
        fmt=["%d", "%.10g"],
    )
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.6))
    ax.loglog(K, np.maximum(reg, 1e-12), label="optimistic PO")
    ref = reg[-1] * np.sqrt(K / K[-1])
    ax.loglog(K, ref, "k--", lw=1, label=r"$\propto\sqrt{K}$")
    ax.set_xlabel("episode K")
    ax.set_ylabel("cumulative regret")
    ax.set_title(f"{args.mdp} S={args.S} A={args.A} H={args.H}, c_b={args.c_b:g}", fontsize=9)
    ax.legend()
    fig.tight_layout()
    fig.savefig(run_dir / "regret.png", dpi=100)
    plt.close(fig)
    print(f"final regret {reg[-1]:.2f} after {args.episodes} episodes; wrote {run_dir}")
    return run_dir


if __name__ == "__main__":
    main(cli(Args, description=__doc__))
