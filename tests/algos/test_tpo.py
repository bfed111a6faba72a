"""TPO (Kaddour 2026, "Target Policy Optimization"; JeanKaddour/tpo src/tpo/algorithms.py): the
gradient on the group logits is p - q and vanishes at the target; equal scores give
q = p_old and no gradient at theta_old; q maximises q.u - eta KL(q || p_old); the one-hot
K = 10 bandit's coefficient beta(0.1) = 0.73; the population std and the 1e-6 floor of the
scores; q built from sequence log-probs and log-densities; learning on bernoulli-10 and on the
continuous bandit, the sequence bandit, fitting to the target, --resume, bad flags."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from timeouts import scaled

from algos.tpo import Args, main, standardized_scores, tpo_batch, tpo_loss, tpo_target, update
from controlrl import checkpoint
from controlrl.cli import parse
from controlrl.group_rollout import GroupRollout
from controlrl.nets import CategoricalPolicy, GaussianPolicy
from controlrl.normalize import ObsNormalizer
from controlrl.update import adam
from theory.group_po import tpo_onehot_coefficient

# the scripts' default (--torch-threads 1): small nets on two threads contend with other jobs
torch.set_num_threads(1)

QUIET = ["--no-tensorboard", "--no-progress", "--eval-every", "0", "--eval-episodes", "2"]


def test_gradient_on_group_logits_is_p_minus_q():
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(5, 8, generator=gen, dtype=torch.float64).requires_grad_()
    q = torch.softmax(torch.randn(5, 8, generator=gen, dtype=torch.float64), -1)
    loss, stats = tpo_loss(logits, q)
    (grad,) = torch.autograd.grad(loss, logits)
    p = torch.softmax(logits.detach(), -1)
    torch.testing.assert_close(grad, (p - q) / 5, rtol=1e-12, atol=1e-15)
    assert float(stats["target_kl"]) > 0
    # at the target (p = q) the gradient and the KL to the target vanish
    at_target = q.log().requires_grad_()
    loss, stats = tpo_loss(at_target, q)
    (grad,) = torch.autograd.grad(loss, at_target)
    assert float(grad.abs().max()) < 1e-15 and abs(float(stats["target_kl"])) < 1e-15


def test_scores_are_standardised_with_the_population_std_and_floored():
    s = torch.tensor([[1.0, 2.0, 4.0, 9.0], [3.0, 3.0, 3.0, 3.0], [0.0, 0.0, 0.0, 1e-7]])
    u = standardized_scores(s.double())
    x = s[0].double().numpy()
    np.testing.assert_allclose(u[0].numpy(), (x - x.mean()) / x.std(ddof=0), rtol=1e-12)
    assert torch.equal(u[1:], torch.zeros(2, 4, dtype=torch.float64))  # std 0, std 4.3e-8


def test_equal_scores_give_q_equal_p_old_and_zero_gradient_at_theta_old():
    torch.manual_seed(1)
    policy = CategoricalPolicy(3, 4, (16,)).double()
    obs, actions = torch.randn(6 * 4, 3, dtype=torch.float64), torch.randint(4, (6 * 4,))

    def group_logits():
        logp, _ = policy.log_prob_entropy(obs, actions)
        return logp.reshape(6, 4)

    old = group_logits().detach()
    q = tpo_target(old, torch.full((6, 4), 0.7, dtype=torch.float64), eta=0.5)
    torch.testing.assert_close(q, torch.softmax(old, -1), rtol=1e-14, atol=1e-15)
    loss, _ = tpo_loss(group_logits(), q)
    grads = torch.autograd.grad(loss, list(policy.parameters()))
    assert max(float(g.abs().max()) for g in grads) < 1e-15
    q = tpo_target(old, torch.randn(6, 4, dtype=torch.float64), eta=0.5)  # scores differ
    loss, _ = tpo_loss(group_logits(), q)
    grads = torch.autograd.grad(loss, list(policy.parameters()))
    assert max(float(g.abs().max()) for g in grads) > 1e-3


def test_target_maximises_score_minus_eta_kl_to_p_old():
    gen = torch.Generator().manual_seed(2)
    old = torch.randn(8, generator=gen, dtype=torch.float64)
    scores = torch.randn(8, generator=gen, dtype=torch.float64)
    eta = 0.7
    p_old = torch.softmax(old, 0)
    u = standardized_scores(scores)

    def objective(q):  # [M, 8] -> [M]
        return q @ u - eta * torch.sum(torch.xlogy(q, q) - q * p_old.log(), -1)

    q = tpo_target(old, scores, eta)
    best = float(objective(q[None])[0])
    assert best == pytest.approx(eta * float(torch.logsumexp(p_old.log() + u / eta, 0)), rel=1e-12)
    dirichlet = torch.distributions.Dirichlet(torch.ones(8, dtype=torch.float64))
    torch.manual_seed(3)
    others = torch.cat([dirichlet.sample((20000,)), (q + 1e-3 * dirichlet.sample((2000,)))])
    others = others / others.sum(-1, keepdim=True)  # random and near-q points of the simplex
    assert float(objective(others).max()) < best


def test_one_hot_ten_armed_bandit_coefficient_is_073_at_p_01():
    """Population TPO over the whole action set (scores = e_y, standardised over the K arms):
    q - pi = beta(p) (e_y - pi), beta(p) = p (lambda - 1) / (1 - p + lambda p), lambda = e^(10/3);
    beta(0.1) = 0.73 (GRPO's sqrt(p / (1 - p)) = 0.33 there)."""
    K, y, p = 10, 4, 0.1
    pi = torch.full((K,), (1 - p) / (K - 1), dtype=torch.float64)
    pi[y] = p
    e_y = torch.eye(K, dtype=torch.float64)[y]
    q = tpo_target(pi.log(), e_y, eta=1.0)
    beta = (q - pi) / (e_y - pi)
    torch.testing.assert_close(beta, torch.full((K,), float(beta[0]), dtype=torch.float64))
    assert float(beta[0]) == pytest.approx(0.73, abs=0.005)
    assert float(beta[0]) == pytest.approx(tpo_onehot_coefficient(p, K), rel=1e-12)


def test_batch_targets_use_sequence_log_probs_and_log_densities():
    """q of tpo_batch = softmax(sum_t log pi_old(a_t|s_t) + u / eta) per group, padding excluded;
    Gaussian log-densities far below -700 (exp underflows) still give a proper target."""
    torch.manual_seed(4)
    policy = GaussianPolicy(2, 1, (8,))
    with torch.no_grad():
        policy.log_std.fill_(-6.0)  # narrow: log-densities of off-mean actions are hugely negative
    T, N, G = 3, 4, 2
    obs = torch.randn(T, N, 2).numpy()
    actions = torch.randn(T, N, 1).numpy()
    lengths = np.array([3, 1, 2, 3])
    valid = np.arange(T)[:, None] < lengths[None]
    roll = GroupRollout(obs, actions, valid, ~valid, np.array([0.0, 1.0, 2.0, -1.0]), lengths, G)
    old_logp, _, _ = roll.log_probs(policy)
    assert float(old_logp.min()) < -1000
    args = Args(num_envs=N, group_size=G, eta=0.5)
    batch = tpo_batch(roll, old_logp, args)
    seq = torch.stack([old_logp[: lengths[n], n].sum() for n in range(N)]).double().reshape(2, 2)
    u = torch.tensor([[-1.0, 1.0], [1.0, -1.0]], dtype=torch.float64)
    expected = torch.softmax(seq + u / 0.5, -1).float()
    torch.testing.assert_close(batch["q"], expected)
    assert torch.isfinite(batch["q"]).all() and torch.allclose(batch["q"].sum(-1), torch.ones(2))
    assert batch["obs"].shape == (2, T, G, 2) and batch["valid"].shape == (2, T, G)
    # the update's loss at theta_old: cross-entropy of q to the groups' sequence log-probs
    stats = update(
        policy, adam(policy, lr=1e-12), batch, Args(num_envs=N, group_size=G, update_epochs=1)
    )
    q = batch["q"].double()
    expected_loss = -(q * torch.log_softmax(seq, -1)).sum(-1).mean()
    assert stats["loss"] == pytest.approx(float(expected_loss), rel=1e-5)


@pytest.mark.parametrize("lr, epochs", [(1e-2, 120), (3e-2, 100)])
def test_update_fits_the_policy_to_the_target(lr, epochs):
    """Many epochs on one rollout: KL(q || p_theta) over the groups goes to ~0 (the minimiser of
    the cross-entropy is the target), at either learning rate. The arms of a group are
    distinct: a repeated arm has one logit for two targets, which merge (theory/group_po.py)."""
    torch.manual_seed(5)
    policy = CategoricalPolicy(3, 6, (32,))
    T, N, G = 1, 16, 4
    obs = np.repeat(torch.randn(1, N // G, 3).numpy(), G, axis=1)  # a group shares its context
    actions = torch.stack([torch.randperm(6)[:G] for _ in range(N // G)]).reshape(1, N).numpy()
    roll = GroupRollout(
        obs, actions, np.ones((T, N), bool), np.ones((T, N), bool),
        torch.randn(N).double().numpy(), np.ones(N, np.int64), G,
    )  # fmt: skip
    old_logp, _, _ = roll.log_probs(policy)
    args = Args(num_envs=N, group_size=G, update_epochs=epochs, learning_rate=lr)
    batch = tpo_batch(roll, old_logp, args)
    first = update(
        policy, adam(policy, lr=1e-12), batch, Args(num_envs=N, group_size=G, update_epochs=1)
    )
    stats = update(policy, adam(policy, lr=args.learning_rate), batch, args)
    assert stats["grad_steps"] == epochs
    args.update_epochs = 1
    final = update(policy, adam(policy, lr=1e-12), batch, args)
    assert first["target_kl"] > 0.05 and final["target_kl"] < 1e-4, (first, final)


def train(tmp_path, name, *argv):
    run = tmp_path / name
    main(parse(Args, [*argv, *QUIET, "--run-dir", str(run)]))
    lines = (run / "metrics.csv").read_text().splitlines()
    header = lines[0].split(",")
    table = np.array([[float(x) if x else np.nan for x in row.split(",")] for row in lines[1:]])
    state = checkpoint.load(run / "checkpoints" / "latest.pt")
    return {h: table[:, i] for i, h in enumerate(header)}, state


def normalised(state, obs: np.ndarray) -> torch.Tensor:
    normalizer = ObsNormalizer(obs.shape[1:])
    normalizer.load_state_dict(state["obs_normalizer"])
    return torch.from_numpy(normalizer(obs, update=False))


def test_learns_bernoulli_10_to_near_its_optimum(tmp_path):
    import envs

    bandit = envs.make("bandit:bernoulli-10", 1, 0)
    metrics, state = train(
        tmp_path, "b", "--env-id", "bandit:bernoulli-10", "--num-envs", "256",
        "--total-timesteps", "30000",
    )  # fmt: skip
    policy = CategoricalPolicy(1, 10)
    policy.load_state_dict(state["policy"])
    with torch.no_grad():
        pi = torch.softmax(policy.logits(normalised(state, np.ones((1, 1), np.float32))), -1)
    value = float(pi.numpy()[0] @ bandit.means[0])
    assert value > bandit.optimal_reward - 0.03, (value, bandit.optimal_reward)
    assert metrics["train/episode_return"][:5].mean() < 0.65


def test_learns_the_continuous_bandit_from_sampled_groups(tmp_path):
    metrics, state = train(
        tmp_path, "c", "--env-id", "bandit:continuous", "--num-envs", "256",
        "--total-timesteps", "25600",
    )  # fmt: skip
    policy = GaussianPolicy(1, 1)
    policy.load_state_dict(state["policy"])
    with torch.no_grad():
        mean = float(policy.mode(normalised(state, np.ones((1, 1), np.float32)))[0, 0])
    assert abs(mean - 0.5) < 0.1, mean  # the bump's centre; the initial mean is ~0
    assert float(state["policy"]["log_std"]) < -0.2  # the fit to the group targets narrows it
    assert metrics["train/episode_return"][-3:].mean() > metrics["train/episode_return"][:3].mean()


def test_sequence_bandit_run_and_resume_bit_for_bit(tmp_path):
    argv = [
        "--env-id", "bandit:sequence-reverse-2-3", "--num-envs", "64", "--group-size", "8",
        "--total-timesteps", "1920", "--checkpoint-every", "4", "--keep-checkpoints",
        "--num-minibatches", "2",
    ]  # fmt: skip
    metrics, state = train(tmp_path, "a", *argv)
    assert (metrics["train/episode_length"] == 3).all() and state["step"] == 1920
    assert np.array_equal(metrics["step"], np.arange(1, 11) * 192)
    a, b = tmp_path / "a", tmp_path / "b"
    (b / "checkpoints").mkdir(parents=True)
    for name in ("config.json", "metrics.csv"):
        (b / name).write_bytes((a / name).read_bytes())
    mid = a / "checkpoints" / "step_000000768.pt"
    (b / "checkpoints" / "latest.pt").write_bytes(mid.read_bytes())
    main(parse(Args, ["--resume", str(b)]))
    assert (a / "metrics.csv").read_bytes() == (b / "metrics.csv").read_bytes()


def test_gymnasium_continuous_smoke(tmp_path):
    """Pendulum (Gaussian, 200-step episodes): q from summed log-densities stays finite."""
    metrics, state = train(
        tmp_path, "pend", "--env-id", "Pendulum-v1", "--num-envs", "4", "--group-size", "2",
        "--total-timesteps", "1600",
    )  # fmt: skip
    assert (metrics["train/episode_length"] == 200).all() and state["step"] == 1600
    assert (
        np.isfinite(metrics["train/loss"]).all() and np.isfinite(metrics["train/target_kl"]).all()
    )


@pytest.mark.slow
def test_sparse_1000_tpo_and_grpo_need_about_the_same_samples(tmp_path):
    """TPO's sparse-reward claim (its abstract: much better than PG/GRPO under sparse reward) on
    sparse-1000 (one good arm of 1000), 256 envs in groups of 8, defaults otherwise. Finding: it
    does not hold here. The samples until a rollout's success rate first exceeds 0.5, TPO over
    GRPO, were 0.97, 0.98, 0.73, 0.90, 0.95, 1.07, 1.08 for seeds 1-7 (mean 0.95; GRPO
    9472-12544 samples), and at 60k samples GRPO's success was higher (0.97-0.98 against
    0.88-0.91: TPO's fit to q keeps more entropy). The test keeps what held on every seed: the
    ratio lies within [0.6, 1.25], TPO never twice as fast (seeds 1-4, about a minute)."""
    import algos.grpo as grpo
    import algos.tpo as tpo

    argv = ["--env-id", "bandit:sparse-1000", "--num-envs", "256", "--total-timesteps", "15360"]
    for seed in (1, 2, 3, 4):
        first = {}
        for module in (grpo, tpo):
            run = tmp_path / f"{module.__name__}{seed}"
            args = [*argv, *QUIET, "--seed", str(seed), "--run-dir", str(run)]
            module.main(parse(module.Args, args))
            rows = [line.split(",") for line in (run / "metrics.csv").read_text().splitlines()]
            col = rows[0].index("train/episode_return")
            hits = [int(r[0]) for r in rows[1:] if float(r[col]) > 0.5]
            assert hits, (module.__name__, seed)  # both solve it within 15k samples
            first[module] = hits[0]
        assert 0.6 <= first[tpo] / first[grpo] <= 1.25, (seed, first)


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["--eta", "0"], "--eta must be > 0"),
        (["--eta", "-1"], "--eta must be > 0"),
        (["--group-size", "1"], "--group-size must be >= 2"),
        (["--group-size", "5"], "--group-size must divide --num-envs (64)"),
        (["--num-minibatches", "9"], "--num-minibatches must be <= the groups per iteration"),
        (["--env-id", "dmc:cheetah-run"], "--env-id dmc:cheetah-run: groups need resets"),
    ],
)
def test_bad_flags_exit_2_with_one_line(argv, fragment, capsys, tmp_path):
    with pytest.raises(SystemExit) as exc:
        parse(Args, ["--env-id", "bandit:bernoulli-10", *argv, "--run-dir", str(tmp_path / "r")])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and fragment in err[0], err
    assert not (tmp_path / "r").exists()


def test_script_exits_2_naming_the_flag():
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [sys.executable, "algos/tpo.py", "--env-id", "bandit:bernoulli-10", "--eta", "0"],
        cwd=root, capture_output=True, text=True, timeout=scaled(120),
    )  # fmt: skip
    assert out.returncode == 2 and out.stderr.strip() == "error: --eta must be > 0, got 0.0"
