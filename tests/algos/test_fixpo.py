"""FixPO (Zentner, Puri, Huang, Sukhatme 2023, "Guaranteed Trust Region Optimization via Two-Phase
KL Penalization"; reference uscresl/stabilized-rl src/fixpo_tianshou.py): the trust-region
guarantee after update() (max per-state KL <= eps_KL on every batch state), beta, the untouched
critic."""

import pytest
import torch
from test_spo import smoke  # sibling file: pytest puts tests/algos on sys.path

from algos.fixpo import Args, beta_loss, fixup, update
from controlrl.diagnostics import NonFiniteError, dist_params, per_state_kl
from controlrl.nets import CategoricalPolicy, GaussianPolicy, ValueNet


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
    """Small MLPs: one torch thread is fastest, and much faster on a loaded machine."""
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
    assert result == {"fixup_steps": result["fixup_steps"], "fixup_passes": 2, "fixup_capped": 1}


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


def test_checkpoint_holds_beta_and_resumes(tmp_path):
    import subprocess
    import sys

    from test_spo import ROOT

    from controlrl import checkpoint

    run = smoke("algos/fixpo.py", "Pendulum-v1", tmp_path, "--checkpoint-every", "1")
    state = checkpoint.load(run / "checkpoints" / "latest.pt")
    assert "beta" in state and "beta_optimizer" in state
    out = subprocess.run(
        [sys.executable, "algos/fixpo.py", "--resume", str(run)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
