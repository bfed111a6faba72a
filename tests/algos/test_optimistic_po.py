"""optimistic_po (Shani, Efroni, Rosenberg, Mannor 2020, "Optimistic Policy Optimization with
Bandit Feedback"): plain functions (exact evaluation with the true model, the mirror-descent
step's closed form, optimism of the bonus), determinism, delay, CLI validation, outputs."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.optimize import minimize

from algos import optimistic_po as opo
from theory.mdp import evaluate, random_mdp

ROOT = Path(__file__).resolve().parents[2]


def test_true_model_without_bonus_gives_exact_values():
    rng = np.random.default_rng(0)
    mdp = random_mdp(5, 3, rng, gamma=None, horizon=5)
    pi = rng.dirichlet(np.ones(3), size=(5, 5))
    Q, V = opo.optimistic_evaluation(mdp.R, mdp.P, np.zeros_like(mdp.R), pi)
    V_true, Q_true = evaluate(mdp, pi)
    np.testing.assert_allclose(Q, Q_true, atol=1e-12)
    np.testing.assert_allclose(V, V_true, atol=1e-12)


def test_mirror_descent_step_is_the_kl_proximal_argmax():
    rng = np.random.default_rng(1)
    logits = rng.normal(size=4)
    pi = np.exp(logits) / np.exp(logits).sum()
    q, eta = rng.uniform(0, 5, size=4), 0.7
    _, new = opo.mirror_descent_update(logits, q, eta)

    def neg(z):
        p = np.exp(z - z.max())
        p /= p.sum()
        return -(eta * p @ q - np.sum(p * np.log(p / pi)))

    res = minimize(neg, np.zeros(4), method="BFGS", options={"gtol": 1e-10})
    num = np.exp(res.x - res.x.max())
    np.testing.assert_allclose(new, num / num.sum(), atol=1e-5)


def test_theory_bonus_is_optimistic_where_the_cap_does_not_bind():
    """Shani et al.'s optimism lemma, Q_k >= Q^{pi_k}, with the theory constant c_b = 1. On the
    5x3x5 instance the cap H - h binds everywhere for K <= 2^14 (so Q >= Q^pi holds trivially
    and pi stays uniform); on a 2x2x2 instance the bonus drops below the cap after ~1400
    episodes, so the check below is made where it is not trivial, and asserted to be so."""
    S, A, H, K = 2, 2, 2, 3000
    args = opo.Args(episodes=K, c_b=1.0, S=S, A=A, H=H, progress=False)
    mdp, _ = opo.make_instance(args)
    cap = (H - np.arange(H))[:, None, None] * np.ones((H, S, A))
    seen = {}  # episode -> (pi_{k+1}, optimistic Q of pi_k)
    opo.run(args, callback=lambda k, pi_next, Q: seen.__setitem__(k, (pi_next.copy(), Q.copy())))
    pi = np.full((H, S, A), 1 / A)
    unbound_episodes, margins = 0, []
    for k in range(K):
        pi_next, Q = seen[k]
        free = Q < cap - 1e-9  # entries where the truncation did not bind
        if free.any():
            unbound_episodes += 1
            margins.append((Q - evaluate(mdp, pi)[1])[free].min())
        pi = pi_next
    assert unbound_episodes >= 1000  # the cap did not bind in the last third of the run...
    assert np.abs(pi - 1 / A).max() > 0.2  # ...and the policy left uniform
    assert min(margins) >= -1e-12  # optimistic where it is not trivially so


def test_same_seed_same_output_and_delay_holds_feedback():
    a = opo.run(opo.Args(episodes=500, seed=3, progress=False))["regret"]
    b = opo.run(opo.Args(episodes=500, seed=3, progress=False))["regret"]
    c = opo.run(opo.Args(episodes=500, seed=4, progress=False))["regret"]
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    pis = []
    args = opo.Args(episodes=30, delay=20, c_b=0.001, progress=False)
    opo.run(args, callback=lambda k, p, q: pis.append(p))
    np.testing.assert_allclose(pis[19], 1 / 3)  # no feedback yet: every pair looks unvisited
    assert not np.allclose(pis[25], 1 / 3)


@pytest.mark.parametrize("adapted", [False, True])
def test_delay_adapted_step_size_is_tuned_to_k_plus_total_delay(adapted, monkeypatch):
    """Naive PO steps every episode with eta_k = sqrt(2 log A / (H^2 k)); delay-adapted PO
    (Delayed OPPO) takes no step before the first feedback and uses k + D_k = k (1 + d)."""
    K, d, H, A = 40, 7, 5, 3
    step, etas = opo.mirror_descent_update, []

    def record(logits, Q, eta):
        etas.append(eta)
        return step(logits, Q, eta)

    monkeypatch.setattr(opo, "mirror_descent_update", record)
    opo.run(opo.Args(episodes=K, delay=d, delay_adapted=adapted, progress=False))
    k = np.arange(d + 1, K + 1) if adapted else np.arange(1, K + 1)
    want = np.sqrt(2 * np.log(A) / (H**2 * k * (1 + d if adapted else 1)))
    np.testing.assert_allclose(etas, want, rtol=1e-12)


def test_c_b_zero_keeps_the_cap_on_unvisited_pairs_only(capsys):
    """Documented choice (module docstring, --help): c_b scales the bonus of visited pairs;
    unvisited pairs sit at the cap H - h for every c_b, as the paper's bonus (>= H at n = 0)
    puts them. --no-bonus is the greedy learner: no data means Q = 0 there."""
    H = 5
    cap = (H - np.arange(H))[:, None, None]
    first = {}
    for name, kw in {"c_b=0": dict(c_b=0.0), "no-bonus": dict(bonus=False)}.items():
        args = opo.Args(episodes=1, **kw, progress=False)
        opo.run(args, callback=lambda k, p, q, name=name: first.setdefault(name, q.copy()))
    visited_once = first["c_b=0"] < cap  # one episode: H pairs visited, the rest at the cap
    assert visited_once.sum() <= H and visited_once.any()
    assert np.all(first["no-bonus"][~visited_once] == 0)
    with pytest.raises(SystemExit):
        import tyro

        tyro.cli(opo.Args, args=["--help"])
    assert "--c-b 0 still explores" in " ".join(capsys.readouterr().out.split())


def test_adversarial_regret_against_best_fixed_policy():
    out = opo.run(opo.Args(episodes=2000, losses="adversarial", switch_every=100, progress=False))
    assert np.all(np.isfinite(out["regret"]))
    assert out["regret"][-1] / 2000 < out["regret"][199] / 200  # average regret falls


@pytest.mark.parametrize(
    "flag,value",
    [("--S", "1"), ("--c-b", "-1"), ("--delay", "-2"), ("--delay", "100000"), ("--delta", "2")],
)
def test_bad_flag_exits_2_naming_flag(flag, value, tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "algos/optimistic_po.py"),
            flag,
            value,
            "--run-dir",
            str(tmp_path / "r"),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert proc.returncode == 2
    assert flag in proc.stderr.strip().splitlines()[-1]
    assert not (tmp_path / "r").exists()


def test_cli_writes_run_directory(tmp_path):
    run_dir = tmp_path / "run"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "algos/optimistic_po.py"),
            "--episodes",
            "200",
            "--run-dir",
            str(run_dir),
            "--no-progress",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads((run_dir / "config.json").read_text())["episodes"] == 200
    rows = np.loadtxt(run_dir / "regret.csv", delimiter=",", skiprows=1)
    assert rows.shape == (200, 2) and np.all(np.diff(rows[:, 1]) >= -1e-12)
    assert (run_dir / "regret.png").stat().st_size > 1000
