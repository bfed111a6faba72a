"""The --ratio option of ppo.py and spo.py (controlrl.cli.RatioArgs, controlrl.update's hook,
controlrl.ratios): the default is the pre-option update to the bit; each kind reaches the loss
(the gradient is the full filter's, not the per-step one); kalman with zero measurement noise
is step to the bit through the whole update and through a whole run; bad flags are one line,
exit 2; short runs on the token-per-step sequence bandit complete."""

from __future__ import annotations

import copy

import pytest
import torch

from algos import ppo, ppo_brax, spo  # ppo_brax imports JAX only when it runs
from controlrl.buffers import RolloutBuffer
from controlrl.cli import parse
from controlrl.losses import clipped_value_loss
from controlrl.nets import GaussianPolicy, ValueNet
from controlrl.ratios import episode_starts, filtered_log_ratio
from controlrl.update import minibatch_update, normalize_advantages, rollout_ratios

T, N, OBS, ACT = 24, 3, 4, 2
ALGOS = {"ppo": (ppo, "clip_coef"), "spo": (spo, "eps")}


@pytest.fixture(autouse=True)
def _one_thread():
    """Tiny nets run fastest on one torch thread (the scripts' --torch-threads default)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _rollout(seed: int = 0):
    """A RolloutBuffer batch of T x N steps with episodes of several steps (ended ~ 1 in 4),
    log-probs of a perturbed copy of the policy (so ratios are not 1), and its ended flags."""
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    policy = GaussianPolicy(OBS, ACT, (8,))
    behaviour = copy.deepcopy(policy)
    with torch.no_grad():
        for p in behaviour.parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=gen))
    buffer = RolloutBuffer(T, N, (OBS,), (ACT,), discrete=False)
    buffer.obs[:] = torch.randn(T, N, OBS, generator=gen).numpy()
    buffer.actions[:] = torch.randn(T, N, ACT, generator=gen).numpy()
    buffer.values[:] = torch.randn(T, N, generator=gen).numpy()
    buffer.ended[:] = (torch.rand(T, N, generator=gen) < 0.25).numpy()
    with torch.no_grad():
        flat = buffer.flat()
        logp, _ = behaviour.log_prob_entropy(flat["obs"], flat["actions"])
        buffer.logprobs[:] = logp.reshape(T, N).numpy()
    adv = torch.randn(T, N, generator=gen).numpy()
    batch = buffer.flat(advantages=adv, returns=adv + buffer.values)
    assert buffer.ended.sum() > N and (~buffer.ended).sum() > T  # multi-step episodes
    return policy, batch, buffer.ended.copy()


def _args(algo: str, **flags):
    module, _ = ALGOS[algo]
    args = dict(num_steps=T, num_envs=N, num_minibatches=3, update_epochs=3, hidden_sizes=(8,))
    return module.Args(**{**args, **flags})


def _run_update(algo: str, args, seed: int = 0, optimizer=None):
    """The algorithm's update on _rollout(seed) from the same initial nets and minibatch order;
    returns (policy, value_net, stats)."""
    module, _ = ALGOS[algo]
    policy, batch, ended = _rollout(seed)
    torch.manual_seed(100)
    value_net = ValueNet(OBS, (8,))
    params = [*policy.parameters(), *value_net.parameters()]
    optimizer = optimizer(params) if optimizer else torch.optim.Adam(params, lr=3e-3, eps=1e-5)
    torch.manual_seed(7)  # the minibatch permutations
    stats = module.update(policy, value_net, optimizer, batch, args, ended)
    return policy, value_net, stats


def _old_loss_fn(algo: str, policy, value_net, args):
    """The per-minibatch loss of ppo.py / spo.py before --ratio existed (commit 249c5ec:
    ppo_loss / spo_loss, surrogate_stats and actor_critic_loss, written out)."""
    eps = args.clip_coef if algo == "ppo" else args.eps

    def loss_fn(mb, idx):
        logp, entropy = policy.log_prob_entropy(mb["obs"], mb["actions"], args.ent_coef != 0)
        log_ratio = logp - mb["logprobs"]
        ratio = log_ratio.exp()
        adv = mb["advantages"]
        if algo == "ppo":
            pg_loss = torch.max(-adv * ratio, -adv * ratio.clamp(1 - eps, 1 + eps)).mean()
        else:
            pg_loss = -(adv * ratio - adv.abs() * (ratio - 1).pow(2) / (2 * eps)).mean()
        with torch.no_grad():
            stats = {
                "approx_kl": ((ratio - 1) - log_ratio).mean(),
                "clip_frac": ((ratio - 1).abs() > eps).float().mean(),
            }
        v_new = value_net(mb["obs"])
        v_loss = clipped_value_loss(v_new, mb["values"], mb["returns"], eps, args.clip_vloss)
        ent = entropy.mean()
        loss = (pg_loss - args.ent_coef * ent if args.ent_coef else pg_loss) + args.vf_coef * v_loss
        terms = {"loss": loss, "policy_loss": pg_loss, "value_loss": v_loss, "entropy": ent}
        return loss, {**stats, **{k: v.detach() for k, v in terms.items()}}

    return loss_fn


def _assert_same_bits(a, b):
    (pa, va, sa), (pb, vb, sb) = a, b
    for x, y in zip([*pa.parameters(), *va.parameters()], [*pb.parameters(), *vb.parameters()]):
        assert torch.equal(x, y)
    assert sa == sb


@pytest.mark.parametrize("algo", ["ppo", "spo"])
@pytest.mark.parametrize("ent_coef", [0.0, 0.01])
def test_default_ratio_is_the_pre_option_update_to_the_bit(algo, ent_coef):
    args = _args(algo, ent_coef=ent_coef)
    assert args.ratio == "step"
    new = _run_update(algo, args)
    policy, batch, _ = _rollout()
    torch.manual_seed(100)
    value_net = ValueNet(OBS, (8,))
    params = [*policy.parameters(), *value_net.parameters()]
    optimizer = torch.optim.Adam(params, lr=3e-3, eps=1e-5)
    torch.manual_seed(7)
    old_fn = _old_loss_fn(algo, policy, value_net, args)
    stats = minibatch_update(optimizer, batch, old_fn, args)
    _assert_same_bits(new, (policy, value_net, stats))
    assert stats["grad_steps"] == 9 and stats["clip_frac"] > 0  # ratios away from 1


@pytest.mark.parametrize("algo", ["ppo", "spo"])
def test_kalman_without_measurement_noise_is_step_to_the_bit(algo):
    """K = 1 at every step: the filter passes the per-step log-ratios through unchanged, in
    every minibatch and epoch (EpisodeRatios' references refreshed in between). Large Adam
    steps, so that log-ratios change sign between epochs (where z_old + (z_new - z_old) would
    round in float32)."""

    def adam(params):
        return torch.optim.Adam(params, lr=0.2, eps=1e-5)

    step = _run_update(algo, _args(algo, update_epochs=4), optimizer=adam)
    flags = {"ratio": "kalman", "kalman_v": 0.0, "kalman_q": 0.5, "update_epochs": 4}
    kalman = _run_update(algo, _args(algo, **flags), optimizer=adam)
    _assert_same_bits(step, kalman)
    filtered = _run_update(algo, _args(algo, ratio="kalman", update_epochs=4), optimizer=adam)
    assert not torch.equal(step[0].log_std, filtered[0].log_std)


def _reference(algo: str, kind: str, args):
    """d loss / d policy parameters on the whole batch, the ratio filtered over [T, N] by
    controlrl.ratios.filtered_log_ratio (rows t * N + n), advantages normalised as the loop;
    and the statistics: k3 of the per-step ratio, the fraction of the filtered one beyond eps."""
    policy, batch, ended = _rollout()
    logp, _ = policy.log_prob_entropy(batch["obs"], batch["actions"])
    z = (logp - batch["logprobs"]).reshape(T, N)
    kalman = {"q": args.kalman_q, "v": args.kalman_v, "p0": args.kalman_p0}
    x = filtered_log_ratio(z, episode_starts(ended), kind, **kalman) if kind != "step" else z
    ratio, adv = x.reshape(-1).exp(), normalize_advantages(batch["advantages"])
    eps = args.clip_coef if algo == "ppo" else args.eps
    if algo == "ppo":
        loss = torch.max(-adv * ratio, -adv * ratio.clamp(1 - eps, 1 + eps)).mean()
    else:
        loss = -(adv * ratio - adv.abs() * (ratio - 1).pow(2) / (2 * eps)).mean()
    with torch.no_grad():
        stats = {
            "approx_kl": float((z.exp() - 1 - z).mean()),
            "clip_frac": float(((ratio - 1).abs() > eps).float().mean()),
        }
    return torch.autograd.grad(loss, list(policy.parameters())), stats


@pytest.mark.parametrize("algo", ["ppo", "spo"])
@pytest.mark.parametrize("kind", ["sequence", "sequence_mean", "kalman"])
def test_each_kind_reaches_the_loss(algo, kind):
    """One plain SGD step (lr 1, no clipping) on the whole batch moves the policy by minus the
    gradient of the loss with the filtered ratio, which is not the per-step ratio's gradient."""
    flags = {"num_minibatches": 1, "update_epochs": 1, "max_grad_norm": 1e9, "vf_coef": 0.0}
    args = _args(algo, ratio=kind, kalman_q=0.01, **flags)
    before, _, _ = _rollout()
    after, _, stats = _run_update(algo, args, optimizer=lambda p: torch.optim.SGD(p, lr=1.0))
    moved = [b.detach() - a.detach() for b, a in zip(before.parameters(), after.parameters())]
    want, want_stats = _reference(algo, kind, args)
    per_step, step_stats = _reference(algo, "step", args)
    for g, w in zip(moved, want):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-6)
    gap = sum(float((w - s).norm()) for w, s in zip(want, per_step))
    assert gap > 0.1 * sum(float(s.norm()) for s in per_step)
    assert stats["grad_steps"] == 1
    # approx_kl stays the per-step k3 (target-KL means the same for every kind); clip_frac is
    # of the ratio the loss uses
    assert stats["approx_kl"] == pytest.approx(want_stats["approx_kl"], rel=1e-5)
    assert stats["clip_frac"] == pytest.approx(want_stats["clip_frac"], abs=1e-6)
    assert want_stats["clip_frac"] != step_stats["clip_frac"]


def test_rollout_ratios_needs_the_episode_ends():
    with pytest.raises(ValueError, match="^ended"):
        rollout_ratios(_args("ppo", ratio="sequence"), None)
    assert rollout_ratios(_args("ppo"), None) is None  # step: the loss's own ratio


def _refusal(module, argv, capsys) -> str:
    with pytest.raises(SystemExit) as exc:
        parse(module.Args, argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: "), err
    return err[0]


@pytest.mark.parametrize("algo", ["ppo", "spo"])
@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["--ratio", "token"], "--ratio must be one of step, sequence, sequence_mean, kalman"),
        (["--kalman-q", "-1e-3"], "--kalman-q must be >= 0"),
        (["--kalman-v", "-1"], "--kalman-v must be >= 0"),
        (["--kalman-p0", "-2"], "--kalman-p0 must be >= 0"),
    ],
)
def test_bad_ratio_flags_are_one_line(algo, argv, fragment, capsys, tmp_path):
    line = _refusal(ALGOS[algo][0], [*argv, "--run-dir", str(tmp_path / "r")], capsys)
    assert fragment in line
    assert not (tmp_path / "r").exists()


def test_ppo_brax_refuses_other_ratios(capsys):
    pytest.importorskip("brax")
    line = _refusal(ppo_brax, ["--ratio", "kalman"], capsys)
    assert "--ratio is not supported by ppo_brax.py" in line


def _run(algo: str, run_dir, *flags: str) -> list[str]:
    """A short run on the sequence bandit (episodes of 4 token steps) in this process; returns
    metrics.csv's lines."""
    argv = ["--env-id", "bandit:sequence-reverse-2-4", "--run-dir", str(run_dir)]
    argv += ["--num-envs", "2", "--num-steps", "32", "--total-timesteps", "128"]
    argv += ["--num-minibatches", "2", "--update-epochs", "2", "--hidden-sizes", "16"]
    argv += ["--no-progress", "--no-tensorboard", "--eval-episodes", "2", *flags]
    module = ALGOS[algo][0]
    module.main(parse(module.Args, argv))
    return (run_dir / "metrics.csv").read_text().splitlines()


@pytest.mark.parametrize("algo", ["ppo", "spo"])
def test_short_runs_on_the_sequence_bandit(algo, tmp_path):
    """kalman and sequence runs complete; kalman with v = 0 logs step's metrics to the bit;
    filtered and sequence ratios change them."""
    step = _run(algo, tmp_path / "step")
    exact = _run(algo, tmp_path / "exact", "--ratio", "kalman", "--kalman-v", "0")
    kalman = _run(algo, tmp_path / "kalman", "--ratio", "kalman", "--kalman-q", "0.01")
    sequence = _run(algo, tmp_path / "sequence", "--ratio", "sequence")
    assert len(step) == 3 and [r.split(",")[0] for r in step[1:]] == ["64", "128"]
    assert exact == step
    header = step[0].split(",")
    loss = header.index("train/policy_loss")
    for other in (kalman, sequence):
        assert other[0] == step[0] and len(other) == 3
        assert other[2].split(",")[loss] != step[2].split(",")[loss]
