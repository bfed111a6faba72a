"""FPO (McAllister et al. 2025, arXiv 2507.21053; reference akanazawa/fpo
playground/src/flow_policy/fpo.py): the CFM ratio at theta_old, the policy gradient it gives, an
update that learns on a 1-D bandit, smoke runs and bad flags."""

import csv
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from timeouts import scaled

from algos.fpo import Args, FlowPolicy, attach_cfm_pairs, fpo_loss, update
from controlrl.cli import parse
from controlrl.generative import euler_sample, sample_cfm_pairs
from controlrl.nets import ValueNet
from controlrl.update import adam
from envs.bandits import make as make_bandit

ROOT = Path(__file__).resolve().parents[2]


def policy_and_batch(B=64, obs_dim=3, act_dim=2, seed=0, **flags):
    torch.manual_seed(seed)
    args = Args(**flags)
    policy = FlowPolicy(obs_dim, act_dim, args).double()
    batch = {"obs": torch.randn(B, obs_dim).double(), "actions": torch.randn(B, act_dim).double()}
    return args, policy, batch


@pytest.mark.parametrize("per_pair", [False, True])
def test_ratio_is_one_at_theta_old_and_gradient_is_advantage_weighted_cfm_gradient(per_pair):
    args, policy, batch = policy_and_batch(per_pair_ratio=per_pair)
    attach_cfm_pairs(policy, batch, args)
    adv = torch.randn(64).double()
    l_new = policy.cfm_losses(batch["obs"], batch["actions"], batch["cfm_eps"], batch["cfm_t"])
    assert torch.equal(l_new.detach(), batch["cfm_old"])  # same draws, same parameters
    loss, stats = fpo_loss(l_new, batch["cfm_old"], adv, args.clip_coef, per_pair)
    assert stats["ratio_mean"] == 1 and stats["ratio_max"] == 1 and stats["ratio_min"] == 1
    assert stats["clip_frac"] == 0 and stats["approx_kl"] == 0
    params = list(policy.parameters())
    g_fpo = torch.autograd.grad(loss, params)
    # -mean(A * grad(-mean_i l_i)): descending it lowers the CFM loss of positive-A actions
    l_new = policy.cfm_losses(batch["obs"], batch["actions"], batch["cfm_eps"], batch["cfm_t"])
    g_ref = torch.autograd.grad(-(adv * -l_new.mean(-1)).mean(), params)
    for a, b in zip(g_fpo, g_ref):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


def test_ratio_is_exp_of_mean_loss_difference_and_clipped_per_pair():
    l_old = torch.tensor([[1.0, 2.0], [0.5, 0.5]])
    l_new = torch.tensor([[0.5, 1.5], [0.5, 10.0]])
    adv = torch.tensor([1.0, -1.0])
    loss, stats = fpo_loss(l_new, l_old, adv, 0.05)
    rho = torch.exp(torch.tensor([0.5, -4.75]))
    expected = torch.max(-adv * rho, -adv * rho.clamp(0.95, 1.05)).mean()
    torch.testing.assert_close(loss, expected)
    assert stats["ratio_max"] == pytest.approx(rho.max().item())
    loss, stats = fpo_loss(l_new, l_old, adv, 0.05, per_pair=True)
    rho_i = torch.exp(torch.tensor([[0.5, 0.5], [0.0, -3.0]]))  # -9.5 clipped to -3
    expected = torch.max(-adv[:, None] * rho_i, -adv[:, None] * rho_i.clamp(0.95, 1.05)).mean()
    torch.testing.assert_close(loss, expected)
    assert stats["ratio_min"] == pytest.approx(np.exp(-3.0))


def bandit_iteration(policy, value_net, optimizer, env, args, B):
    obs = torch.ones(B, 1)
    actions = policy.sample(obs)
    reward = torch.as_tensor(env.expected_reward(actions.numpy()), dtype=torch.float32)
    values = torch.zeros(B)
    batch = {"obs": obs, "actions": actions, "values": values}
    batch["advantages"], batch["returns"] = reward - values, reward
    stats = update(policy, value_net, optimizer, batch, args)  # adds the CFM pairs to batch
    with torch.no_grad():
        l_new = policy.cfm_losses(obs, actions, batch["cfm_eps"], batch["cfm_t"])
    rho = (batch["cfm_old"].mean(-1) - l_new.mean(-1)).exp()
    adv = batch["advantages"] - batch["advantages"].mean()
    return stats, rho, adv


@pytest.mark.parametrize("lr", [3e-3, 0.0])
def test_update_moves_sampled_actions_toward_the_bandit_optimum(lr):
    """bandit:continuous, reward peak at a = 0.5 (width 0.1); the initial flow policy samples
    ~N(0, 1). Five rollouts of FPO updates move the mean of actions sampled from fixed noise
    towards 0.5; with a zero learning rate they stay where they are (the test is of learning)."""
    torch.manual_seed(0)
    env = make_bandit("continuous", 1)
    args = Args(num_minibatches=4, update_epochs=8, learning_rate=lr, clip_coef=0.2)
    policy = FlowPolicy(1, 1, args)
    value_net = ValueNet(1, (16,))
    optimizer = adam(policy, value_net, lr=max(lr, 1e-12))
    if lr == 0:
        optimizer.param_groups[0]["lr"] = 0.0
    x_init, obs = torch.randn(2000, 1), torch.ones(2000, 1)
    before = euler_sample(policy.velocity, obs, 1, 10, x_init=x_init)
    stats, rho, adv = bandit_iteration(policy, value_net, optimizer, env, args, 512)
    # the ratio moved with the advantage: up where it is positive, down where negative
    up, down = rho[adv > 0].mean().item(), rho[adv < 0].mean().item()
    for _ in range(4):
        stats, _, _ = bandit_iteration(policy, value_net, optimizer, env, args, 512)
    after = euler_sample(policy.velocity, obs, 1, 10, x_init=x_init)
    gap_before = (before.mean() - 0.5).abs().item()
    gap_after = (after.mean() - 0.5).abs().item()
    reward_before = env.expected_reward(before.numpy()).mean()
    reward_after = env.expected_reward(after.numpy()).mean()
    if lr > 0:
        assert gap_after < gap_before - 0.2, (gap_before, gap_after)
        assert reward_after > reward_before + 0.1, (reward_before, reward_after)
        assert stats["clip_frac"] > 0  # the ratio moved
        assert up > 1.05 and down < 0.99, (up, down)
    else:
        assert gap_after == pytest.approx(gap_before, abs=1e-6)
        assert up == down == 1


def run_fpo(tmp_path: Path, env_id: str, *extra: str) -> Path:
    run = tmp_path / env_id.replace(":", "_")
    cmd = [sys.executable, "algos/fpo.py", "--env-id", env_id, "--run-dir", str(run)]
    cmd += ["--no-progress", "--eval-every", "0", "--eval-episodes", "1", *extra]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=scaled(300))
    assert proc.returncode == 0, proc.stderr[-2000:]
    return run


def test_smoke_hopper(tmp_path):
    flags = ["--num-envs", "2", "--num-steps", "64", "--total-timesteps", "256"]
    run = run_fpo(tmp_path, "Hopper-v5", *flags, "--num-minibatches", "2", "--update-epochs", "2")
    rows = list(csv.DictReader(open(run / "metrics.csv")))
    assert [int(r["step"]) for r in rows] == [128, 256]
    assert "train/ratio_mean" in rows[0] and "train/kl_mean" not in rows[0]
    assert all(np.isfinite(float(r["train/loss"])) for r in rows)
    assert np.isfinite(json.loads((run / "final_eval.json").read_text())["eval_return_mean"])
    assert (run / "checkpoints" / "latest.pt").exists()


def test_smoke_bandit_learns(tmp_path):
    run = run_fpo(tmp_path, "bandit:continuous", "--num-envs", "64", "--num-steps", "8",
                  "--total-timesteps", "12288", "--num-minibatches", "4", "--update-epochs", "4",
                  "--eval-episodes", "20")  # fmt: skip
    rows = list(csv.DictReader(open(run / "metrics.csv")))
    first, last = float(rows[0]["train/episode_return"]), float(rows[-1]["train/episode_return"])
    assert first < 0.3 and last > 0.6, (first, last)


@pytest.mark.parametrize(
    "argv, flag",
    [
        (["--clip-coef", "0"], "--clip-coef"),
        (["--clip-coef", "-0.1"], "--clip-coef"),
        (["--n-mc", "0"], "--n-mc"),
        (["--flow-steps", "0"], "--flow-steps"),
        (["--cfm-mode", "x"], "--cfm-mode"),
        (["--time-dim", "3"], "--time-dim"),
    ],
)
def test_bad_flags_one_line_exit_2(argv, flag, capsys):
    with pytest.raises(SystemExit) as exc:
        parse(Args, argv)
    assert exc.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and flag in lines[0], lines


def test_discrete_actions_refused_one_line_exit_2(tmp_path):
    cmd = [sys.executable, "algos/fpo.py", "--run-dir", str(tmp_path / "r")]
    cmd += ["--env-id", "bandit:bernoulli-4", "--num-steps", "8", "--num-minibatches", "1"]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=scaled(120))
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "--env-id" in lines[0] and "Box" in lines[0], proc.stderr
    assert not (tmp_path / "r" / "metrics.csv").exists()


def test_cfm_log_ratio_variance_falls_as_one_over_the_number_of_pairs():
    """At theta != theta_old the estimate log rho = mean_i (l_old_i - l_new_i) is a mean over N
    independent (eps, t) pairs, so its variance over fresh draws is Var(N = 1) / N (FPO, arXiv
    2507.21053: more pairs, better estimates); a sampler that shared t or eps across a sample's
    pairs would not shrink it."""
    torch.manual_seed(0)
    args = Args()
    old = FlowPolicy(3, 2, args).double()
    new = FlowPolicy(3, 2, args).double()
    new.load_state_dict(old.state_dict())
    with torch.no_grad():
        for p in new.parameters():
            p.add_(0.05 * torch.randn_like(p))
    R = 4000  # independent draws for the same (obs, action)
    obs, action = torch.randn(1, 3).double().expand(R, 3), torch.randn(1, 2).double().expand(R, 2)
    variances = {}
    for n in (1, 8):
        eps, t = sample_cfm_pairs(R, n, 2, args.flow_steps)
        with torch.no_grad():
            diff = old.cfm_losses(obs, action, eps.double(), t.double())
            diff = diff - new.cfm_losses(obs, action, eps.double(), t.double())
        variances[n] = diff.mean(-1).var().item()
    assert variances[1] > 0
    assert variances[1] / variances[8] == pytest.approx(8, rel=0.25), variances
