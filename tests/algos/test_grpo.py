"""GRPO (Shao et al. 2024, "DeepSeekMath", arXiv 2402.03300): the unit-testable properties of its
objective (all-equal groups give exactly zero gradient; k3 is >= 0 and unbiased for
KL(pi_theta || pi_ref); at theta = theta_old, beta = 0 the gradient is the group-normalised
REINFORCE gradient; the population update on a one-hot bandit is sqrt(p / (1 - p)) (e_y - pi)),
zero-variance groups through the algorithm (the logged zero-variance fraction matches
p^G + (1 - p)^G per context), learning on bernoulli-10 and the sequence bandit, --resume, bad
flags."""

from __future__ import annotations

import csv
import math

import numpy as np
import pytest
import torch

from algos.grpo import (
    Args,
    RolloutRatios,
    grpo_batch,
    grpo_loss,
    k3,
    loss_weights,
    main,
    objective_of,
    update,
)
from controlrl import checkpoint
from controlrl.cli import parse
from controlrl.group import group_advantages
from controlrl.group_rollout import GroupRollout
from controlrl.nets import CategoricalPolicy, GaussianPolicy
from controlrl.normalize import ObsNormalizer
from controlrl.objective import Objective, Tokens
from controlrl.ratios import EpisodeRatios, filtered_log_ratio
from controlrl.update import adam
from theory.group_po import zero_variance_probability

# the scripts' default (--torch-threads 1): small nets on two threads contend with other jobs
torch.set_num_threads(1)

QUIET = ["--no-tensorboard", "--no-progress", "--eval-every", "0", "--eval-episodes", "2"]


def rollout_of(policy, lengths, rewards, group_size, obs_dim, discrete, seed=0):
    """A GroupRollout of N envs whose episodes have the given lengths and returns."""
    gen = torch.Generator().manual_seed(seed)
    T, N = max(lengths), len(lengths)
    dtype = next(policy.parameters()).dtype  # float64 policies get float64 rollouts
    obs = torch.randn(T, N, obs_dim, generator=gen, dtype=torch.float64).to(dtype).numpy()
    with torch.no_grad():
        actions = policy.sample(torch.from_numpy(obs).reshape(T * N, -1)).numpy()
    actions = actions.reshape(T, N, *actions.shape[1:])
    valid = np.arange(T)[:, None] < np.asarray(lengths)[None]
    ended = ~valid | (np.arange(T)[:, None] == np.asarray(lengths)[None] - 1)
    return GroupRollout(
        obs=obs,
        actions=actions,
        valid=valid,
        ended=ended,
        returns=np.asarray(rewards, np.float64),
        lengths=np.asarray(lengths),
        group_size=group_size,
    )


def args_for(**kw) -> Args:
    return Args(**{"num_envs": 8, "group_size": 4, "kl_coef": 0.0, **kw})


def policy_grad(policy, loss):
    return torch.cat([g.reshape(-1) for g in torch.autograd.grad(loss, list(policy.parameters()))])


def batch_loss(policy, batch, ratios, args, logp_shift=0.0):
    """The update's loss on the whole batch (old log-probs shifted: theta != theta_old)."""
    logp, _ = policy.log_prob_entropy(batch["obs"], batch["actions"])
    old = batch["logprobs"] + logp_shift
    idx = torch.arange(logp.numel())
    ratio = ratios(logp, old, idx)
    return grpo_loss(
        Tokens(logp, old, ratio, batch["advantages"], batch["ref_logprobs"], batch["weights"]),
        objective_of(args),
    )


@pytest.mark.parametrize("ratio", ["step", "sequence", "kalman"])
def test_all_equal_groups_give_exactly_zero_policy_gradient(ratio):
    torch.manual_seed(0)
    policy = CategoricalPolicy(3, 4, (16,))
    roll = rollout_of(policy, [2, 3, 1, 3, 2, 2, 3, 1], [1, 1, 1, 1, 0, 0, 0, 0], 4, 3, True)
    old_logp, _, _ = roll.log_probs(policy)
    args = args_for(ratio=ratio)
    batch, ratios, kept = grpo_batch(roll, old_logp, policy, args)
    assert torch.equal(batch["advantages"], torch.zeros(24)) and kept == 1.0
    shift = 0.3 * torch.randn(24)  # ratios away from 1, some clipped: still no signal
    loss, _ = batch_loss(policy, batch, ratios, args, shift)
    assert torch.equal(
        policy_grad(policy, loss), torch.zeros(sum(p.numel() for p in policy.parameters()))
    )
    # the KL term is what moves such groups when beta > 0 (here pi_ref != pi_theta)
    batch["ref_logprobs"] = batch["ref_logprobs"] + torch.randn(24)
    args.kl_coef = 0.1
    loss, _ = batch_loss(policy, batch, ratios, args, shift)
    assert policy_grad(policy, loss).abs().max() > 1e-4


def test_filtered_all_equal_rollout_skips_the_update():
    torch.manual_seed(1)
    policy = CategoricalPolicy(3, 4, (16,))
    roll = rollout_of(policy, [1] * 8, [1, 1, 1, 1, 0, 0, 0, 0], 4, 3, True)
    old_logp, _, _ = roll.log_probs(policy)
    args = args_for(filter_zero_variance=True, kl_coef=0.04)
    batch, ratios, kept = grpo_batch(roll, old_logp, policy, args)
    assert kept == 0.0 and torch.equal(batch["weights"], torch.zeros(8))
    opt = adam(policy, lr=0.1)
    before = [p.detach().clone() for p in policy.parameters()]
    stats = update(policy, opt, batch, ratios, args)
    assert stats["grad_steps"] == 0 and math.isnan(stats["loss"])
    assert all(torch.equal(a, b) for a, b in zip(before, policy.parameters()))
    # one flat group and one with signal: only the flat group's rows leave the loss
    roll.returns = np.array([1.0, 1, 1, 1, 0, 1, 0, 0])
    batch, _, kept = grpo_batch(roll, old_logp, policy, args)
    assert kept == 0.5
    assert torch.equal(batch["weights"] > 0, torch.tensor([False] * 4 + [True] * 4))


@pytest.mark.parametrize(
    "r, adv, expected",
    [
        (1.0, 2.0, -2.0),  # inside the region: -A
        (1.1, -3.0, 3.0),
        (1.3, 2.0, 0.0),  # A > 0 beyond 1 + eps: clipped, no gradient
        (0.7, -2.0, 0.0),  # A < 0 below 1 - eps: clipped
        (0.7, 2.0, -2.0),  # A > 0 below 1 - eps: not clipped (the min picks r A)
        (1.3, -2.0, 2.0),  # A < 0 above 1 + eps: not clipped
    ],
)
def test_clipped_surrogate_gradient_table(r, adv, expected):
    ratio = torch.tensor([r], dtype=torch.float64, requires_grad=True)
    zero = torch.zeros(1, dtype=torch.float64)
    adv_t, one = torch.tensor([adv], dtype=torch.float64), torch.ones(1, dtype=torch.float64)
    loss, _ = grpo_loss(Tokens(zero, zero, ratio, adv_t, zero, one), Objective())
    (grad,) = torch.autograd.grad(loss, ratio)
    assert float(grad) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("kind", ["sequence", "sequence_mean", "kalman"])
def test_whole_rollout_minibatch_filters_like_episode_ratios(kind):
    """RolloutRatios' O(T N) path (a minibatch of every row, shuffled) gives the ratios and
    gradients of controlrl.ratios' filter, and of EpisodeRatios' minibatch path."""
    gen = torch.Generator().manual_seed(6)
    T, N = 5, 4
    ended = torch.rand(T, N, generator=gen) < 0.3
    z = torch.randn(T * N, generator=gen, dtype=torch.float64)
    idx = torch.randperm(T * N, generator=gen)
    kalman = {"q": 0.01, "v": 0.5, "p0": 1.0}
    logp = z[idx].clone().requires_grad_()
    ratio = RolloutRatios(kind, ended, **kalman)(logp, torch.zeros_like(logp), idx)
    full = filtered_log_ratio(z.reshape(T, N), RolloutRatios(kind, ended).starts, kind, **kalman)
    torch.testing.assert_close(ratio, full.reshape(-1)[idx].exp(), rtol=1e-12, atol=1e-12)
    logp2 = z[idx].clone().requires_grad_()
    other = EpisodeRatios(kind, RolloutRatios(kind, ended).starts, **kalman)
    ratio2 = other(logp2, torch.zeros_like(logp2), idx)
    torch.testing.assert_close(ratio, ratio2, rtol=1e-10, atol=1e-12)
    w = torch.randn(T * N, generator=gen, dtype=torch.float64)
    (g1,) = torch.autograd.grad((w * ratio).sum(), logp)
    (g2,) = torch.autograd.grad((w * ratio2).sum(), logp2)
    torch.testing.assert_close(g1, g2, rtol=1e-10, atol=1e-12)


def test_minibatch_losses_estimate_the_whole_rollout_loss():
    """With 2 minibatches each is scaled by rows / minibatch rows: their mean is the loss."""
    torch.manual_seed(7)
    policy = CategoricalPolicy(3, 4, (16,))
    roll = rollout_of(policy, [2, 3, 1, 3, 2, 1, 3, 2], [0.5, 2, -1, 0.3, 1, 1.5, 0, 4], 4, 3, True)
    old_logp, _, _ = roll.log_probs(policy)
    args = args_for(num_minibatches=2, update_epochs=1, kl_coef=0.1)
    batch, ratios, _ = grpo_batch(roll, old_logp, policy, args)
    batch["ref_logprobs"] = batch["ref_logprobs"] - 0.5  # a reference apart: the KL term counts
    with torch.no_grad():
        full, _ = batch_loss(policy, batch, ratios, args)
    stats = update(policy, adam(policy, lr=1e-12), batch, ratios, args)
    assert stats["loss"] == pytest.approx(float(full), rel=1e-5)


def test_k3_is_nonnegative_and_unbiased_for_kl_theta_ref():
    d = torch.linspace(-25, 25, 2001, dtype=torch.float64)
    assert (k3(torch.zeros_like(d), d) >= 0).all()
    gen = torch.Generator().manual_seed(0)
    logits, ref_logits = (
        torch.randn(6, generator=gen).double(),
        torch.randn(6, generator=gen).double(),
    )
    logp, ref_logp = torch.log_softmax(logits, 0), torch.log_softmax(ref_logits, 0)
    kl = float((logp.exp() * (logp - ref_logp)).sum())  # KL(pi_theta || pi_ref)
    kl_rev = float((ref_logp.exp() * (ref_logp - logp)).sum())
    a = torch.multinomial(logp.exp(), 400_000, replacement=True, generator=gen)
    est = k3(logp[a], ref_logp[a])
    se = float(est.std()) / math.sqrt(a.numel())
    assert abs(float(est.mean()) - kl) < 4 * se
    assert abs(kl_rev - kl) > 20 * se  # the direction is told apart at this sample size


def manual_group_reinforce_grad(policy, roll, eps=1e-4):
    """-sum_i (1/G)(1/|o_i|) sum_t A_i grad log pi, per-group loop, unbiased std (TRL)."""
    G = roll.group_size
    T, N = roll.valid.shape
    obs = torch.from_numpy(roll.obs)
    acts = torch.from_numpy(roll.actions)
    total = 0.0
    for g in range(N // G):
        r = roll.returns[g * G : (g + 1) * G]
        adv = (r - r.mean()) / (r.std(ddof=1) + eps)
        for i in range(G):
            n = g * G + i
            L = int(roll.lengths[n])
            logp, _ = policy.log_prob_entropy(obs[:L, n], acts[:L, n])
            total = total - adv[i] * logp.sum() / (L * N)
    return policy_grad(policy, total)


@pytest.mark.parametrize("discrete", [True, False])
def test_gradient_at_theta_old_is_group_normalised_reinforce(discrete):
    torch.manual_seed(2)
    policy = (CategoricalPolicy(3, 4, (16,)) if discrete else GaussianPolicy(3, 2, (16,))).double()
    rewards = [0.5, 2.0, -1.0, 0.3, 1.0, 1.5, 0.0, 4.0]
    roll = rollout_of(policy, [2, 3, 1, 3, 2, 1, 3, 2], rewards, 4, 3, discrete)
    old_logp, _, _ = roll.log_probs(policy)
    args = args_for()
    batch, ratios, _ = grpo_batch(roll, old_logp, policy, args)
    batch["advantages"] = batch["advantages"].double()  # float64 end to end for the comparison
    batch["weights"] = batch["weights"].double()
    loss, _ = batch_loss(policy, batch, ratios, args)
    torch.testing.assert_close(
        policy_grad(policy, loss), manual_group_reinforce_grad(policy, roll), rtol=1e-5, atol=1e-7
    )


def test_population_update_on_one_hot_bandit_is_sqrt_odds_times_e_y_minus_pi():
    """DG/TPO appendix: with A = (r - p) / sqrt(p (1 - p)), E[A grad log pi] = sqrt(p/(1-p))
    (e_y - pi) in logit space; exactly with the arm distribution as weights, and from one large
    sampled group through controlrl.group's advantages."""
    K, y = 10, 3
    gen = torch.Generator().manual_seed(4)
    logits = torch.randn(K, generator=gen, dtype=torch.float64).requires_grad_()
    pi = torch.softmax(logits.detach(), 0)
    p = float(pi[y])
    e_y = torch.eye(K, dtype=torch.float64)[y]
    expected = math.sqrt(p / (1 - p)) * (e_y - pi)
    arms = torch.arange(K)
    r = (arms == y).double()
    logp = torch.log_softmax(logits, 0)
    adv = (r - p) / math.sqrt(p * (1 - p))
    loss, _ = grpo_loss(
        Tokens(logp, logp.detach(), torch.exp(logp - logp.detach()), adv, logp.detach(), pi),
        Objective(),
    )
    (grad,) = torch.autograd.grad(-loss, logits)
    torch.testing.assert_close(grad, expected, rtol=1e-12, atol=1e-14)
    G = 400_000
    a = torch.multinomial(pi, G, replacement=True, generator=gen)
    r = (a == y).double()
    adv = group_advantages(r[None])[0]
    logp = torch.log_softmax(logits, 0)[a]
    weight = torch.full((G,), 1 / G, dtype=torch.float64)
    ratio = torch.exp(logp - logp.detach())
    loss, _ = grpo_loss(Tokens(logp, logp.detach(), ratio, adv, logp.detach(), weight), Objective())
    (grad,) = torch.autograd.grad(-loss, logits)
    assert float((grad - expected).abs().max()) < 0.01 * float(expected.abs().max()) + 3e-3
    # at p = 0.1 the coefficient is 1/3 (TPO's one-hot bandit: 0.33 for GRPO)
    assert math.sqrt(0.1 / 0.9) == pytest.approx(1 / 3)


def test_loss_weights_average_as_named():
    valid = torch.tensor([[1, 1, 1, 0], [1, 0, 1, 0], [1, 0, 1, 0]], dtype=torch.bool)  # [T, N]
    steps = valid.sum(0).float()  # 3, 1, 3, 0: the last sequence is dropped
    w = loss_weights(valid, "seq-mean-token-mean", 5)
    torch.testing.assert_close(w.sum(0), torch.tensor([1 / 3, 1 / 3, 1 / 3, 0.0]))
    torch.testing.assert_close(loss_weights(valid, "token-mean", 5), valid / 7.0)
    torch.testing.assert_close(loss_weights(valid, "seq-mean-token-sum", 5).sum(0), steps / 3)
    torch.testing.assert_close(loss_weights(valid, "seq-mean-token-sum-norm", 5).sum(0), steps / 15)


def train(tmp_path, name, *argv) -> tuple[np.ndarray, dict]:
    """Run grpo.py in this process; the metrics table and the final checkpoint."""
    run = tmp_path / name
    main(parse(Args, [*argv, *QUIET, "--run-dir", str(run)]))
    lines = (run / "metrics.csv").read_text().splitlines()
    header = lines[0].split(",")
    table = np.array([[float(x) if x else np.nan for x in row.split(",")] for row in lines[1:]])
    return {h: table[:, i] for i, h in enumerate(header)}, checkpoint.load(
        run / "checkpoints" / "latest.pt"
    )


def normalised(state, obs: np.ndarray) -> torch.Tensor:
    """obs through the run's saved observation normaliser."""
    normalizer = ObsNormalizer(obs.shape[1:])
    normalizer.load_state_dict(state["obs_normalizer"])
    return torch.from_numpy(normalizer(obs, update=False))


def bandit_policy(state, obs_dim, num_arms, hidden=(64, 64)):
    policy = CategoricalPolicy(obs_dim, num_arms, hidden)
    policy.load_state_dict(state["policy"])
    return policy


@pytest.mark.parametrize("G", [2, 5])
def test_logged_zero_variance_fraction_is_p_to_the_G_plus_q_to_the_G(G, tmp_path):
    """Zero-variance groups through the algorithm on contextual-4-10 (one hard context): per context
    c the success probability p_c = pi(.|c) . means[c] is known, so the logged fraction's mean must
    be mean_c p_c^G + (1 - p_c)^G within a 4-sigma binomial interval. The step size is tiny so p_c
    stays at its initial value (this is a logging check, not a learning one)."""
    import envs

    bandit = envs.make("bandit:contextual-4-10", 1, 0)
    metrics, state = train(
        tmp_path,
        f"g{G}",
        "--env-id", "bandit:contextual-4-10",
        "--num-envs", str(40 * G),
        "--group-size", str(G),
        "--total-timesteps", str(40 * G * 120),
        "--learning-rate", "1e-9",
        "--no-norm-obs",
    )  # fmt: skip
    policy = bandit_policy(state, 4, 10)
    with torch.no_grad():
        pi = torch.softmax(policy.logits(torch.eye(4)), -1).numpy()
    p = (pi * bandit.means).sum(1)  # [C]
    expected = float(np.mean(zero_variance_probability(p, G)))
    frac = metrics["train/zero_variance_frac"]
    groups = 40 * len(frac)
    se = math.sqrt(expected * (1 - expected) / groups)
    assert abs(frac.mean() - expected) < 4 * se, (frac.mean(), expected, se)
    # the wrong grouping (contexts mixed) would give a clearly different number
    mixed = float(zero_variance_probability(p.mean(), G))
    assert abs(mixed - expected) > 8 * se


def test_learns_bernoulli_10_to_near_its_optimum(tmp_path):
    import envs

    bandit = envs.make("bandit:bernoulli-10", 1, 0)
    metrics, state = train(
        tmp_path, "b10", "--env-id", "bandit:bernoulli-10", "--num-envs", "256",
        "--total-timesteps", "30000",
    )  # fmt: skip
    policy = bandit_policy(state, 1, 10)
    obs = normalised(state, np.ones((1, 1), np.float32))
    with torch.no_grad():
        pi = torch.softmax(policy.logits(obs), -1).numpy()[0]
    value = float(pi @ bandit.means[0])
    assert value > bandit.optimal_reward - 0.03, (value, bandit.optimal_reward)
    assert metrics["train/episode_return"][:5].mean() < 0.65  # started near uniform (0.55)
    assert metrics["train/entropy"][-1] < 0.5 * metrics["train/entropy"][0]
    # KL to the frozen initial policy: 0 on the first rollout, then it grows
    kl_ref = metrics["train/kl_ref"]
    assert kl_ref[0] == 0.0 and kl_ref[-1] > 0.05


def test_entropy_falls_monotonically_with_one_update_per_rollout(tmp_path):
    """Monotone entropy collapse (Cui et al. 2025, arXiv 2505.22617): on-policy GRPO on a 100-arm
    bandit with a unique best arm (bernoulli-100). With one update per rollout (DeepSeekMath's
    setting) the policy's entropy never rises (to float32 rounding) and R = -a e^H + b fits the
    (rollout reward, entropy) pairs with R^2 > 0.9. Finding: with the default 4 epochs per rollout
    the entropy still falls overall, but not monotonically: about a third of the iterations raise it
    (0.34 and 0.42 in two runs, rises up to 0.27 nats)."""
    argv = ["--env-id", "bandit:bernoulli-100", "--num-envs", "256", "--total-timesteps", "30000"]
    for epochs in (1, 4):
        metrics, _ = train(tmp_path, f"e{epochs}", *argv, "--update-epochs", str(epochs))
        H, R = metrics["train/entropy"], metrics["train/episode_return"]
        rises = np.diff(H) > 1e-5
        assert H[-1] < 0.6 * H[0], (epochs, H[0], H[-1])
        if epochs == 1:
            assert not rises.any(), np.diff(H).max()
            X = np.stack([np.exp(H), np.ones_like(H)], 1)
            fit = X @ np.linalg.lstsq(X, R, rcond=None)[0]
            assert 1 - ((R - fit) ** 2).sum() / ((R - R.mean()) ** 2).sum() > 0.9
        else:
            assert rises.mean() > 0.1, rises.mean()


def test_sequence_bandit_run(tmp_path):
    metrics, state = train(
        tmp_path, "seq", "--env-id", "bandit:sequence-reverse-2-3", "--num-envs", "128",
        "--group-size", "8", "--total-timesteps", "24000", "--ratio", "kalman",
        "--filter-zero-variance",
    )  # fmt: skip
    assert (metrics["train/episode_length"] == 3).all()
    assert np.array_equal(np.diff(metrics["step"]), np.full(len(metrics["step"]) - 1, 384))
    assert state["step"] == metrics["step"][-1] >= 24000
    # uniform answers succeed w.p. 1/8; it learns to reverse the prompt
    assert metrics["train/episode_return"][-5:].mean() > 0.5
    kept = metrics["train/kept_frac"]
    np.testing.assert_allclose(kept, 1 - metrics["train/zero_variance_frac"])


def test_gymnasium_groups_of_whole_episodes(tmp_path):
    """CartPole: the G envs of a group start from one state, episodes differ in length; a step
    counts once per episode step (padding is not counted), returns are the episodes' own."""
    metrics, state = train(
        tmp_path, "cp", "--env-id", "CartPole-v1", "--num-envs", "8", "--group-size", "4",
        "--total-timesteps", "600", "--ratio", "kalman", "--num-minibatches", "2",
    )  # fmt: skip
    steps = np.diff(np.concatenate([[0], metrics["step"]]))
    np.testing.assert_array_equal(steps, metrics["train/episode_length"] * 8)
    np.testing.assert_array_equal(metrics["train/episode_return"], metrics["train/episode_length"])
    assert state["step"] == metrics["step"][-1] >= 600 > metrics["step"][-2]
    assert np.isfinite(metrics["train/clip_frac"]).all()


def test_resume_repeats_the_uninterrupted_run_bit_for_bit(tmp_path):
    argv = [
        "--env-id", "bandit:contextual-4-5", "--num-envs", "32", "--group-size", "4",
        "--total-timesteps", "320", "--checkpoint-every", "3", "--keep-checkpoints",
        "--ratio", "kalman", "--num-minibatches", "2", "--filter-zero-variance",
    ]  # fmt: skip
    train(tmp_path, "a", *argv)
    a, b = tmp_path / "a", tmp_path / "b"
    (b / "checkpoints").mkdir(parents=True)
    for name in ("config.json", "metrics.csv"):
        (b / name).write_bytes((a / name).read_bytes())
    mid = a / "checkpoints" / "step_000000192.pt"
    (b / "checkpoints" / "latest.pt").write_bytes(mid.read_bytes())
    main(parse(Args, ["--resume", str(b)]))
    assert (a / "metrics.csv").read_bytes() == (b / "metrics.csv").read_bytes()
    sa, sb = (checkpoint.load(d / "checkpoints" / "latest.pt") for d in (a, b))
    assert sa["step"] == sb["step"] == 320
    for k in sa["policy"]:
        assert torch.equal(sa["policy"][k], sb["policy"][k])


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["--group-size", "1"], "--group-size must be >= 2"),
        (["--group-size", "0", "--adv-norm", "batch-mean"], "1 with --adv-norm batch-mean), got 0"),
        (
            ["--group-size", "1", "--adv-norm", "batch-mean", "--filter-zero-variance"],
            "--filter-zero-variance needs groups of >= 2",
        ),
        (["--group-size", "3"], "--group-size must divide --num-envs (64)"),
        (["--kl-coef", "-0.1"], "--kl-coef must be >= 0"),
        (["--kalman-v", "-1"], "--kalman-v must be >= 0"),
        (["--env-id", "brax:ant"], "--env-id brax:ant: groups need resets"),
        (["--num-minibatches", "65"], "--num-minibatches must be <="),
        (["--ratio", "bogus"], "--ratio must be one of step, sequence, sequence_mean, kalman"),
    ],
)
def test_bad_flags_exit_2_with_one_line(argv, fragment, capsys, tmp_path):
    with pytest.raises(SystemExit) as exc:
        parse(Args, ["--env-id", "bandit:bernoulli-10", *argv, "--run-dir", str(tmp_path / "r")])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    if fragment:
        assert len(err) == 1 and err[0].startswith("error: ") and fragment in err[0], err
    assert not (tmp_path / "r").exists()


def test_groups_of_one_take_the_batch_mean_baseline(tmp_path):
    """One answer per prompt (the TPO reference's PG / PPO / DG): groups of 1 train under
    --adv-norm batch-mean (controlrl/advantages.py's test checks the estimator itself)."""
    argv = ["--env-id", "bandit:sequence-reverse-2-3", "--group-size", "1", "--num-envs", "16"]
    argv += ["--adv-norm", "batch-mean", "--kl-coef", "0", "--total-timesteps", "96"]
    argv += ["--hidden-sizes", "8", "--no-tensorboard", "--no-progress", "--eval-episodes", "1"]
    main(parse(Args, [*argv, "--run-dir", str(tmp_path / "r")]))
    with (tmp_path / "r" / "metrics.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 2 and all(float(r["train/grad_steps"]) > 0 for r in rows)
