"""FixPO (Zentner, Puri, Huang, Sukhatme 2023, "Guaranteed Trust Region Optimization via Two-Phase
KL Penalization"; reference uscresl/stabilized-rl src/fixpo_tianshou.py): the trust-region
guarantee after update() (max per-state KL <= eps_KL on every batch state), beta, the untouched
critic, the reference's critic loss, return normalisation, Adam eps and KL statistic, resume."""

import math

import numpy as np
import pytest
import torch
from test_spo import smoke  # sibling file: pytest puts tests/algos on sys.path
from test_trpo_gae_runs import run_in_process, stop_and_resume

from algos import fixpo
from algos.fixpo import Args, beta_loss, fixup, normalize_value_targets, update, value_loss
from controlrl.diagnostics import NonFiniteError, dist_params, per_state_kl
from controlrl.nets import CategoricalPolicy, GaussianPolicy, ValueNet
from controlrl.normalize import RunningMeanStd


def setup(seed: int, lr: float, discrete: bool = False, n: int = 256):
    torch.manual_seed(seed)
    policy = CategoricalPolicy(4, 3) if discrete else GaussianPolicy(4, 2)
    value_net = ValueNet(4)
    optimizer = torch.optim.Adam([*policy.parameters(), *value_net.parameters()], lr=lr, eps=1e-5)
    beta = torch.nn.Parameter(torch.tensor(1.0))
    beta_opt = torch.optim.Adam([beta], lr=0.01)
    obs = torch.randn(n, 4)
    with torch.no_grad():
        actions = policy.sample(obs)
        logp = policy.log_prob_entropy(obs, actions)[0]
    batch = {
        "obs": obs,
        "actions": actions,
        "logprobs": logp,
        "values": torch.zeros(n),
        "advantages": 10 * torch.randn(n),
        "returns": torch.randn(n),
    }
    return policy, value_net, optimizer, beta, beta_opt, batch, dist_params(policy, obs)


@pytest.fixture(autouse=True)
def one_thread():
    """Small MLPs: one torch thread is fastest."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


ARGS = dict(num_minibatches=8, update_epochs=3, fixup_batchsize=128)


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("lr, discrete", [(3e-4, False), (0.03, False), (0.03, True)])
def test_max_kl_within_eps_after_update_even_with_huge_lr(seed, lr, discrete):
    args = Args(learning_rate=lr, eps_kl=0.2, **ARGS)
    policy, value_net, opt, beta, beta_opt, batch, old = setup(seed, lr, discrete)
    stats = update(policy, value_net, opt, beta, beta_opt, batch, old, args)
    with torch.no_grad():
        kl = per_state_kl(old, policy.dist_params(batch["obs"]))
    assert stats["fixup_capped"] == 0  # the fixup itself restored the region, no backtracking
    assert kl.max().item() <= args.eps_kl
    assert beta.item() >= 0 and stats["beta"] >= 0
    assert stats["grad_steps"] == stats["primary_steps"] + stats["fixup_steps"]
    if lr == 0.03:  # 100x the default: the primary phase alone leaves the region, the fixup acts
        assert stats["fixup_steps"] > 0


@pytest.mark.parametrize("seed", range(3))
def test_absurd_lr_hits_the_cap_and_backtracking_keeps_the_guarantee(seed):
    # Adam's steps have size ~lr whatever beta is, so at lr = 1 the fixup cannot converge
    args = Args(learning_rate=1.0, eps_kl=0.2, fixup_max_passes=5, **ARGS)
    policy, value_net, opt, beta, beta_opt, batch, old = setup(seed, 1.0)
    stats = update(policy, value_net, opt, beta, beta_opt, batch, old, args)
    with torch.no_grad():
        kl = per_state_kl(old, policy.dist_params(batch["obs"]))
    assert stats["fixup_capped"] > 0 and kl.max().item() <= args.eps_kl


def test_beta_rises_iff_kl_exceeds_target_on_a_fresh_optimiser():
    for kl_max, rises in ((0.3, True), (0.1, False)):  # eps_kl / c_beta = 0.5 / 3 = 0.167
        beta = torch.nn.Parameter(torch.tensor(1.0))
        opt = torch.optim.Adam([beta], lr=0.01)
        beta_loss(beta, torch.tensor(kl_max), 0.5, 3.0).backward()
        opt.step()
        assert (beta.item() > 1.0) == rises


def test_beta_is_clamped_at_zero():
    args = Args(beta_init=0.0, eps_kl=100.0, **ARGS)  # the constraint never binds: beta falls
    policy, value_net, opt, beta, beta_opt, batch, old = setup(0, 3e-4)
    with torch.no_grad():
        beta.fill_(0.005)
    update(policy, value_net, opt, beta, beta_opt, batch, old, args)
    assert beta.item() == 0.0


def test_critic_bit_identical_across_fixup_while_the_actor_moves():
    args = Args(learning_rate=0.03, eps_kl=0.05, **ARGS)
    policy, value_net, opt, beta, beta_opt, batch, old = setup(3, 0.03)
    # one primary step with the huge lr: momentum in Adam for actor AND critic
    loss = -(policy.log_prob_entropy(batch["obs"], batch["actions"])[0] * batch["advantages"])
    loss = loss.mean() + (value_net(batch["obs"]) - batch["returns"]).pow(2).mean()
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    critic = [p.detach().clone() for p in value_net.parameters()]
    actor = [p.detach().clone() for p in policy.parameters()]
    result = fixup(policy, opt, beta, beta_opt, batch["obs"], old, args)
    assert result["fixup_steps"] > 0 and result["fixup_capped"] == 0
    for before, after in zip(critic, value_net.parameters()):
        assert torch.equal(before, after)
    assert any(not torch.equal(b, a) for b, a in zip(actor, policy.parameters()))


def test_fixup_cap_is_reported():
    args = Args(learning_rate=1e-6, eps_kl=1e-6, fixup_max_passes=2, **ARGS)
    policy, value_net, opt, beta, beta_opt, batch, old = setup(0, 1e-6)
    with torch.no_grad():
        policy.log_std.add_(1.0)  # far outside the region, tiny steps: cannot get back in 2 passes
    result = fixup(policy, opt, beta, beta_opt, batch["obs"], old, args)
    # every minibatch violates in both passes: 2 passes x 256 / 128 minibatches, then the cap
    assert result == {"fixup_steps": 4, "fixup_passes": 2, "fixup_capped": 1}
    with torch.no_grad():
        assert per_state_kl(old, policy.dist_params(batch["obs"])).max() > args.eps_kl


def test_nan_in_the_fixup_phase_stops_instead_of_looping():
    """A NaN KL is never <= eps_KL: the fixup must raise (the NaN guard then stops the run with
    the last good checkpoint kept), not step on NaN until the pass cap."""
    args = Args(fixup_max_passes=3, **ARGS)
    policy, value_net, opt, beta, beta_opt, batch, old = setup(0, 1e-3)
    with torch.no_grad():
        policy.log_std.fill_(float("nan"))
    with pytest.raises(NonFiniteError, match="fixup"):
        fixup(policy, opt, beta, beta_opt, batch["obs"], old, args)


@pytest.mark.parametrize("env_id", ["Hopper-v5", "CartPole-v1"])
def test_smoke(env_id, tmp_path):
    run = smoke("algos/fixpo.py", env_id, tmp_path, "--fixup-batchsize", "64")
    header = (run / "metrics.csv").read_text().splitlines()[0]
    for column in ("train/fixup_share", "train/fixup_capped", "train/beta"):
        assert column in header


# --- the reference's critic loss, return normalisation, Adam eps and KL statistic ---


def test_value_loss_is_tianshous_on_a_known_batch():
    v_new, v_old, returns = torch.tensor([1.0, 0.0, 3.0]), torch.zeros(3), torch.tensor([0, 2, 2.0])
    # clipped: V_clip = [0.2, 0, 0.2]; max((V - R)^2, (V_clip - R)^2) = [1, 4, 3.24]
    assert value_loss(v_new, v_old, returns, 0.2, clip=True).item() == pytest.approx(8.24 / 3)
    assert value_loss(v_new, v_old, returns, 0.2, clip=False).item() == pytest.approx(6 / 3)


def test_update_weighs_the_unhalved_critic_loss():
    """update() logs and minimises vf_coef * mean((V - R)^2): with the policy terms zeroed
    (advantages 0, beta 0, no entropy bonus) the total loss is the critic's term alone."""
    args = Args(update_epochs=1, num_minibatches=1, value_clip_eps=1e9)
    policy, value_net, opt, beta, beta_opt, batch, old = setup(0, 3e-4)
    batch["advantages"].zero_()
    with torch.no_grad():
        beta.zero_()
        v0 = value_net(batch["obs"])
    stats = update(policy, value_net, opt, beta, beta_opt, batch, old, args)
    expected = (v0 - batch["returns"]).pow(2).mean().item()  # the minibatch is the batch
    assert stats["value_loss"] == pytest.approx(expected, rel=1e-6)
    assert stats["loss"] == pytest.approx(args.vf_coef * expected, rel=1e-5)


def test_value_targets_normalised_advantages_left_in_reward_units():
    rng = np.random.default_rng(0)

    def batch(mean, std):
        return {
            k: torch.tensor(rng.normal(mean, std, 64), dtype=torch.float32)
            for k in ("returns", "values", "advantages")
        }

    rms = RunningMeanStd(epsilon=0.0)  # tianshou's ret_rms: mean 0, var 1, count 0
    first, second = batch(3, 5), batch(-1, 2)
    out = normalize_value_targets(first, rms)
    torch.testing.assert_close(out["returns"], first["returns"] / math.sqrt(1 + 1e-8))
    var1 = np.var(first["returns"].double().numpy())  # the first batch sets the statistics
    assert float(rms.var) == pytest.approx(var1, rel=1e-12)
    out = normalize_value_targets(second, rms)
    scale = math.sqrt(var1 + 1e-8)  # the statistics BEFORE this batch, as tianshou
    torch.testing.assert_close(out["returns"], second["returns"] / scale)
    torch.testing.assert_close(out["values"], second["values"] / scale)
    assert out["advantages"] is second["advantages"]  # reward units, untouched
    both = np.concatenate([first["returns"].double().numpy(), second["returns"].double().numpy()])
    assert float(rms.var) == pytest.approx(np.var(both), rel=1e-9)
    assert normalize_value_targets(second, None) is second


FAST = ["--env-id", "Pendulum-v1", "--num-envs", "2", "--num-steps", "64"]
FAST += ["--num-minibatches", "2", "--update-epochs", "2", "--fixup-batchsize", "64"]
FAST += ["--total-timesteps", "256", "--eval-every", "0", "--eval-episodes", "1"]
FAST += ["--no-progress", "--no-tensorboard", "--checkpoint-every", "1"]


def record_updates(monkeypatch) -> list[dict]:
    """Wrap fixpo.update: record each call's batch, the critic's raw outputs on it, the return
    statistics before it and the optimiser's eps."""
    calls, real = [], fixpo.update

    def wrapped(policy, value_net, optimizer, beta, beta_opt, batch, old, args, rms=None):
        with torch.no_grad():
            raw = value_net(batch["obs"])
        calls.append(
            {
                "batch": {k: v.clone() for k, v in batch.items()},
                "critic": raw,
                "var": None if rms is None else float(rms.var),
                "eps": optimizer.param_groups[0]["eps"],
            }
        )
        return real(policy, value_net, optimizer, beta, beta_opt, batch, old, args, rms)

    monkeypatch.setattr(fixpo, "update", wrapped)
    return calls


def test_main_follows_tianshou_rew_norm_and_adam_eps(tmp_path, monkeypatch):
    calls = record_updates(monkeypatch)
    run_in_process(fixpo, [*FAST, "--run-dir", str(tmp_path / "ref")], monkeypatch)
    assert [c["eps"] for c in calls] == [1e-8, 1e-8]  # torch's default, as the reference
    first, second = calls
    assert first["var"] == 1.0  # nothing seen yet: V is the critic's output
    torch.testing.assert_close(first["batch"]["values"], first["critic"] * math.sqrt(1 + 1e-8))
    # the second rollout's V is the critic scaled back by the first batch's return std
    var1 = np.var(first["batch"]["returns"].double().numpy())
    assert second["var"] == pytest.approx(var1, rel=1e-9)
    torch.testing.assert_close(second["batch"]["values"], second["critic"] * math.sqrt(var1 + 1e-8))
    # advantages in reward units: the first rollout's equal those of a run without any
    # return normalisation; CleanRL reward scaling (the old default) shrinks them
    for flags, same in ((["--no-value-norm"], True), (["--no-value-norm", "--norm-reward"], False)):
        calls.clear()
        run_dir = tmp_path / "_".join(flags)
        run_in_process(fixpo, [*FAST, *flags, "--run-dir", str(run_dir)], monkeypatch)
        adv, ref = calls[0]["batch"]["advantages"], first["batch"]["advantages"]
        assert torch.allclose(adv, ref, rtol=1e-5, atol=1e-5) == same
        assert calls[0]["var"] is None


def test_norm_reward_and_value_norm_are_refused_together(capsys):
    with pytest.raises(SystemExit) as exc:
        fixpo_parse(["--norm-reward"])
    assert exc.value.code == 2
    assert "--norm-reward" in capsys.readouterr().err
    assert fixpo_parse(["--norm-reward", "--no-value-norm"]).norm_reward


def fixpo_parse(argv):
    from controlrl.cli import parse

    return parse(Args, ["--env-id", "Pendulum-v1", *argv])


def region_with_kl(kl_per_state: list[float]):
    """A policy, its optimisers and old distribution parameters whose per-state KL(old || new)
    is kl_per_state (old = the policy's mean shifted along the first action dimension)."""
    n = len(kl_per_state)
    policy, value_net, opt, beta, beta_opt, batch, _ = setup(0, 1e-3, n=n)
    mean, log_std = dist_params(policy, batch["obs"])
    target = torch.tensor(kl_per_state, dtype=mean.dtype)
    shift = torch.zeros_like(mean)
    shift[:, 0] = log_std[:, 0].exp() * (2 * target).sqrt()
    old = ((mean + shift).detach(), log_std.detach())
    with torch.no_grad():
        torch.testing.assert_close(per_state_kl(old, policy.dist_params(batch["obs"])), target)
    return policy, opt, beta, beta_opt, batch["obs"], old


FEW_FAR = [4.0] * 10 + [0.0] * 246  # mean KL 0.16 <= eps_kl 0.25 < max KL 4


def test_fixup_holds_the_configured_statistic():
    # mean: one fixup minibatch holding the whole batch does not violate, nothing to fix
    args = Args(kl_target_stat="mean", eps_kl=0.25, fixup_batchsize=256)
    policy, opt, beta, beta_opt, obs, old = region_with_kl(FEW_FAR)
    before = [p.detach().clone() for p in policy.parameters()]
    result = fixup(policy, opt, beta, beta_opt, obs, old, args)
    assert result == {"fixup_steps": 0, "fixup_passes": 0, "fixup_capped": 0}
    assert all(torch.equal(a, b) for a, b in zip(before, policy.parameters()))
    # max: the same policy violates on 10 states; a step in every pass until the cap
    args = Args(kl_target_stat="max", eps_kl=0.25, fixup_batchsize=256, fixup_max_passes=3)
    policy, opt, beta, beta_opt, obs, old = region_with_kl(FEW_FAR)
    result = fixup(policy, opt, beta, beta_opt, obs, old, args)
    assert result == {"fixup_steps": 3, "fixup_passes": 3, "fixup_capped": 1}


def test_fixup_steps_only_on_minibatches_whose_mean_violates():
    # KL [1, 0, 1, 1] in minibatches of 2: whatever the shuffle, one pairs the 0 with a 1 (mean
    # 0.5 <= eps_kl 0.6, max 1 above it: no step under "mean") and the other is {1, 1}
    args = Args(kl_target_stat="mean", eps_kl=0.6, fixup_batchsize=2, fixup_max_passes=1)
    policy, opt, beta, beta_opt, obs, old = region_with_kl([1.0, 0.0, 1.0, 1.0])
    result = fixup(policy, opt, beta, beta_opt, obs, old, args)
    assert result == {"fixup_steps": 1, "fixup_passes": 1, "fixup_capped": 1}


def test_fixup_beta_steps_use_the_configured_statistic():
    # mean KL 0.31 > eps_kl 0.25: both statistics violate. With c_beta 0.5 the Lagrangian's
    # gradient eps - c_beta KL is > 0 at the mean (beta falls) and < 0 at the max (it rises)
    for stat, falls in (("mean", True), ("max", False)):
        args = Args(kl_target_stat=stat, eps_kl=0.25, c_beta=0.5, fixup_batchsize=256)
        args.fixup_max_passes = 1
        policy, opt, beta, beta_opt, obs, old = region_with_kl([8.0] * 10 + [0.0] * 246)
        result = fixup(policy, opt, beta, beta_opt, obs, old, args)
        assert result["fixup_steps"] >= 1
        assert (beta.item() < 1.0) == falls, stat


def test_stopped_part_way_resumes_where_it_stopped(tmp_path, monkeypatch):
    final, rows = stop_and_resume(fixpo, FAST, tmp_path, monkeypatch, batch=128)
    assert {"beta", "beta_optimizer", "return_rms"} <= final.keys()
    # per-tensor Adam: the actor stepped in both phases, the critic in the primary one only;
    # the counts span both segments only if the optimiser was restored
    header = rows[0].split(",")
    total = {
        c: sum(int(float(r.split(",")[header.index(f"train/{c}")])) for r in rows[1:])
        for c in ("grad_steps", "primary_steps")
    }
    steps = [int(s["step"]) for s in final["optimizer"]["state"].values()]
    assert max(steps) == total["grad_steps"] and min(steps) == total["primary_steps"]
