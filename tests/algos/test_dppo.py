"""algos/dppo.py: the denoising discount and clip schedule, ratio 1 and L = -mean(A_j) right
after a rollout (and the gradient there), the stored chains against the rollout network,
behaviour cloning (controlrl/pretrain.py) lowering each policy's loss, tiny pre-train +
fine-tune runs of both policies on Hopper-v5 (and --pretrained), and bad input (exit 2, one
line)."""

from __future__ import annotations

import json
import math
from functools import partial

import gymnasium as gym
import numpy as np
import pytest
import torch

from algos import dppo
from algos.dppo import (
    Args,
    DiffusionPolicy,
    clip_schedule,
    denoising_discount,
    dppo_loss,
    old_step_log_probs,
)
from controlrl import checkpoint, pretrain
from controlrl.cli import parse
from controlrl.generative import reverse_step_params
from controlrl.nets import ValueNet
from controlrl.normalize import ObsNormalizer
from controlrl.training import Run
from envs.offline import Dataset
from envs.offline.d4rl import write_hdf5

TINY = [
    "--hidden-sizes", "16", "16", "16",
    "--critic-hidden-sizes", "16",
    "--num-envs", "2",
    "--num-steps", "8",
    "--total-timesteps", "32",
    "--num-minibatches", "2",
    "--update-epochs", "2",
    "--pretrain-steps", "20",
    "--eval-every", "0",
    "--eval-episodes", "1",
    "--no-tensorboard",
    "--no-progress",
]  # fmt: skip


def hopper_dataset(steps: int = 200, seed: int = 0) -> Dataset:
    """A D4RL-layout Hopper-v5 dataset whose actions are a fixed function of the observation
    (something to clone), played in the env."""
    env = gym.make("Hopper-v5")
    obs, _ = env.reset(seed=seed)
    w = np.random.default_rng(seed).normal(size=(11, 3)).astype(np.float32)
    rows: dict[str, list] = {k: [] for k in ("o", "a", "r", "n", "term", "trunc")}
    for _ in range(steps):
        action = np.tanh(obs @ w).astype(np.float32)
        nxt, reward, term, trunc, _ = env.step(action)
        for k, v in zip(rows, (obs, action, reward, nxt, term, trunc)):
            rows[k].append(v)
        obs = env.reset()[0] if term or trunc else nxt
    f32 = lambda k: np.asarray(rows[k], np.float32)  # noqa: E731
    flags = lambda k: np.asarray(rows[k], bool)  # noqa: E731
    return Dataset(
        f32("o"), f32("a"), f32("r"), f32("n"), flags("term"), flags("trunc"), "Hopper-v5"
    )


@pytest.fixture(scope="module")
def dataset_file(tmp_path_factory):
    return str(write_hdf5(hopper_dataset(), tmp_path_factory.mktemp("data") / "hop.hdf5"))


def small_policy(obs_dim=3, act_dim=2, ft=3, k=5, seed=0) -> DiffusionPolicy:
    torch.manual_seed(seed)
    args = Args(hidden_sizes=(16, 16, 16), denoising_steps=k, ft_denoising_steps=ft)
    policy = DiffusionPolicy(obs_dim, act_dim, args)
    policy.start_finetuning()
    return policy


# -- the loss's pieces ----------------------------------------------------------------------


def test_denoising_discount_and_clip_schedule():
    torch.testing.assert_close(
        denoising_discount(0.9, 4), torch.tensor([0.729, 0.81, 0.9, 1.0]), rtol=0, atol=1e-7
    )
    eps = clip_schedule(0.01, 0.001, 3.0, 10)
    assert eps.shape == (10,)
    assert eps[0].item() == pytest.approx(0.001, abs=1e-9)  # the noisiest fine-tuned step
    assert eps[-1].item() == pytest.approx(0.01, abs=1e-9)  # the final step
    mid = 0.001 + 0.009 * (math.exp(3 * 4 / 9) - 1) / (math.exp(3) - 1)  # j = 4, by hand
    assert eps[4].item() == pytest.approx(mid, rel=1e-6)
    assert (eps.diff() > 0).all()
    assert clip_schedule(0.01, 0.01, 3.0, 10).eq(torch.tensor(0.01)).all()  # Gym: constant
    assert clip_schedule(0.2, 0.001, 3.0, 1).tolist() == [pytest.approx(0.2)]


def test_ratio_is_one_right_after_the_rollout_and_the_loss_is_minus_mean_discounted_adv():
    policy = small_policy()
    obs = torch.randn(64, 3)
    with torch.no_grad():
        _, extras = policy.sample(obs)
    batch = {"obs": obs, "chain": extras["chain"]}
    old = old_step_log_probs(policy, batch, chunk=10)  # in chunks, as after a rollout
    adv = torch.randn(64)
    eps, discount = clip_schedule(0.01, 0.001, 3.0, 3), denoising_discount(0.99, 3)
    logp = policy.step_log_probs(obs, batch["chain"])
    loss, stats = dppo_loss(logp, old, adv, eps, discount)
    assert torch.equal(logp.detach(), old)  # theta = theta_old: every ratio_j exactly 1
    assert stats["ratio_mean"].item() == 1.0 and stats["clip_frac"].item() == 0.0
    assert stats["approx_kl"].item() == 0.0
    adv_j = adv[:, None] * discount
    assert loss.item() == pytest.approx(-adv_j.mean().item(), rel=1e-6)
    # and the gradient is the policy gradient of -mean(A_j logp_j) (d ratio = d logp at 1)
    grad = torch.autograd.grad(loss, list(policy.ft.parameters()))
    logp2 = policy.step_log_probs(obs, batch["chain"])
    ref = torch.autograd.grad(-(adv_j * logp2).mean(), list(policy.ft.parameters()))
    for g, r in zip(grad, ref):
        torch.testing.assert_close(g, r)
    assert not any(p.requires_grad for p in policy.base.parameters())  # frozen


@pytest.mark.parametrize("kind", ["diffusion", "gaussian"])
def test_update_raises_the_log_probs_of_positive_advantage_samples(kind):
    # the whole update (shared minibatch loop, both Adam groups): chains (or actions) with
    # A > 0 gain log-probability relative to those with A < 0
    torch.manual_seed(0)
    args = Args(
        policy=kind,
        hidden_sizes=(16, 16, 16),
        denoising_steps=5,
        ft_denoising_steps=3,
        clip_coef=0.2,
        clip_coef_base=0.2,
        actor_lr=1e-3,
        update_epochs=4,
        num_minibatches=2,
    )
    policy = dppo.make_policy(3, 2, args)
    obs = torch.randn(128, 3)
    with torch.no_grad():
        if kind == "diffusion":
            policy.start_finetuning()
            actions, extras = policy.sample(obs)
            batch = {"obs": obs, "actions": actions, "chain": extras["chain"]}
        else:
            batch = {"obs": obs, "actions": policy.sample(obs)}
            batch["logprobs"] = policy.log_prob_entropy(obs, batch["actions"])[0]
    adv = torch.where(torch.arange(128) % 2 == 0, 1.0, -1.0)
    batch.update(advantages=adv, returns=torch.zeros(128), values=torch.zeros(128))
    value_net = ValueNet(3, (16,))

    def logp() -> torch.Tensor:  # [B] under the current weights, mean over denoising steps
        with torch.no_grad():
            if kind == "diffusion":
                return policy.step_log_probs(obs, batch["chain"]).mean(1)
            return policy.log_prob_entropy(obs, batch["actions"])[0]

    before = logp()
    optimizer = dppo.make_optimizer(policy, value_net, args)
    stats = dppo.update(policy, value_net, optimizer, batch, args)
    assert stats["grad_steps"] == 8
    gain = logp() - before
    assert gain[adv > 0].mean() > gain[adv < 0].mean() + 0.01, gain


def test_clip_acts_per_denoising_step():
    # one ratio above 1 + eps_j at each step: clipped (no gradient) where A > 0 and eps small
    eps = torch.tensor([0.001, 0.5])
    old = torch.zeros(1, 2)
    logp = torch.full((1, 2), math.log(1.1), requires_grad=True)
    loss, stats = dppo_loss(logp, old, torch.ones(1), eps, torch.ones(2))
    loss.backward()
    assert logp.grad[0, 0].item() == 0.0  # clipped at 1.001
    assert logp.grad[0, 1].item() == pytest.approx(-1.1 / 2)  # inside 1 +- 0.5
    assert stats["clip_frac"].item() == 0.5


def test_advantages_are_clipped_to_their_quantiles():
    adv = torch.arange(11.0)  # quantiles 0.1 and 0.9 (linear interpolation): 1 and 9
    clipped = dppo.clip_advantages(adv, 0.1, 0.9)
    assert clipped.tolist() == [1.0, *range(1, 10), 9.0]
    assert dppo.clip_advantages(adv, 0.0, 1.0) is adv  # the default: untouched
    assert dppo.clip_advantages(adv, 0.0, 0.5).max().item() == 5.0


# -- the rollout ----------------------------------------------------------------------------


def test_stored_chains_are_the_rollout_networks_and_end_in_the_actions(tmp_path):
    args = Args(
        env_id="Hopper-v5",
        hidden_sizes=(16, 16, 16),
        critic_hidden_sizes=(16,),
        denoising_steps=6,
        ft_denoising_steps=4,
        num_envs=3,
        num_steps=10,
        run_dir=str(tmp_path / "run"),
        tensorboard=False,
        progress=False,
    )
    torch.manual_seed(0)
    run = Run(args)
    policy = DiffusionPolicy(run.obs_dim, 3, args)
    policy.start_finetuning()
    with torch.no_grad():  # ft != base: the last K' steps must be ft's
        for p in policy.ft.parameters():
            p.add_(0.3 * torch.randn_like(p))
    value_net = ValueNet(run.obs_dim, (16,))
    run.buffer.add_extra("chain", (5, 3))
    run.start(policy=policy, value=value_net)
    batch, _ = run.collect(policy, value_net)
    run.envs.close()
    chain, obs = batch["chain"], batch["obs"]
    assert chain.shape == (30, 5, 3) and "logprobs" not in batch
    torch.testing.assert_close(chain[:, -1], batch["actions"], rtol=0, atol=0)
    # every stored transition is a reverse step of ft from the row's own observation: the
    # noise, clipped to +-3 when sampling, is (x_{j+1} - mean_j) / std_j
    for j in range(4):
        k = torch.full((30,), 3 - j)
        mean, std = reverse_step_params(policy.ft, policy.sched, chain[:, j], k, obs, 1.0)
        z = (chain[:, j + 1] - mean) / std.clamp(min=0.1)
        assert z.abs().max() <= 3.0 + 1e-4 and z.std() > 0.5, j
    # the old log-probs (batched, chunked) are the per-element Gaussian log-densities of these
    old = old_step_log_probs(policy, batch, chunk=7)
    by_hand = torch.stack(
        [
            torch.distributions.Normal(*step_params(policy, chain, obs, j))
            .log_prob(chain[:, j + 1])
            .clamp(-5, 2)
            .mean(-1)
            for j in range(4)
        ],
        1,
    )
    torch.testing.assert_close(old, by_hand)


def step_params(policy, chain, obs, j):
    k = torch.full((chain.shape[0],), chain.shape[1] - 2 - j)
    mean, std = reverse_step_params(policy.ft, policy.sched, chain[:, j], k, obs, 1.0)
    return mean, std.clamp(min=0.1)


# -- pre-training ---------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["diffusion", "gaussian"])
def test_pretraining_lowers_the_bc_loss(kind, tmp_path):
    data = hopper_dataset(300)
    args = Args(policy=kind, hidden_sizes=(32, 32, 32), pretrain_steps=300, ema_decay=0.9)
    torch.manual_seed(0)
    policy = dppo.make_policy(11, 3, args)
    state = pretrain.dataset_normalizer_state(data.observations)
    normalizer = ObsNormalizer((11,))
    normalizer.load_state_dict(state)
    obs = torch.from_numpy(normalizer(data.observations, update=False))
    actions = torch.from_numpy(data.actions)

    def loss() -> float:
        torch.manual_seed(1)  # the same noise and steps before and after
        with torch.no_grad():
            return dppo.bc_loss(policy, obs, actions).item()

    before = loss()
    bc_loss = partial(dppo.bc_loss, policy)  # the loss and the network dppo.main pre-trains
    net = dppo.cloned_net(policy)
    history = pretrain.pretrain(net, bc_loss, data, normalizer, args, tmp_path / "pretrain.csv")
    after = loss()
    if kind == "diffusion":  # eps-MSE: ~1 for a net that knows nothing
        assert after < 0.6 * before, (before, after)
    else:  # Gaussian NLL in nats (may go below 0)
        assert after < before - 1.0, (before, after)
    assert len(history) == 100 and history[-1][1] < history[0][1]
    assert (tmp_path / "pretrain.csv").read_text().startswith("step,bc_loss")


# -- runs -----------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["diffusion", "gaussian"])
def test_pretrain_then_finetune_runs_and_pretrained_restarts_from_the_clone(
    kind, dataset_file, tmp_path
):
    first = tmp_path / "first"
    argv = ["--dataset", dataset_file, "--policy", kind, *TINY, "--run-dir", str(first)]
    dppo.main(parse(Args, argv))
    final = json.loads((first / "final_eval.json").read_text())
    assert final["step"] == 32 and math.isfinite(final["eval_return_mean"])
    header = (first / "metrics.csv").read_text().splitlines()[0]
    for column in ("train/policy_loss", "train/value_loss", "train/approx_kl", "train/clip_frac"):
        assert column in header
    saved = checkpoint.load(first / "pretrained.pt")
    assert saved["kind"] == "dppo-pretrained" and saved["policy"] == kind
    second = tmp_path / "second"
    argv = ["--pretrained", str(first / "pretrained.pt"), "--policy", kind, *TINY]
    dppo.main(parse(Args, [*argv, "--total-timesteps", "16", "--run-dir", str(second)]))
    assert not (second / "pretrain.csv").exists()  # no pre-training
    trained = checkpoint.load(second / "checkpoints" / "latest.pt")["policy"]
    prefix = "ft." if kind == "diffusion" else ""
    # fine-tuned from the clone: 4 Adam steps of lr 1e-4 move no weight by 1e-2 (a fresh
    # init would differ by ~0.1), but they move it
    gaps = [(trained[prefix + n] - v).abs().max().item() for n, v in saved["network"].items()]
    assert 0 < max(gaps) < 1e-2, max(gaps)
    if kind == "diffusion":  # the frozen base is the clone, bit for bit
        for name, value in saved["network"].items():
            assert torch.equal(trained["base." + name], value), name


# -- bad input ------------------------------------------------------------------------------


def refuse(argv, capsys) -> str:
    with pytest.raises(SystemExit) as exc:
        parse(Args, argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    return err


def test_bad_datasets_and_checkpoints_are_refused_with_one_line(dataset_file, tmp_path, capsys):
    assert "--dataset" in refuse([], capsys)
    assert "--dataset" in refuse(["--dataset", str(tmp_path / "none.hdf5")], capsys)
    weights = tmp_path / "w.pt"
    checkpoint.save(weights, {"step": 3})  # a checkpoint, not a dataset
    assert "--dataset" in refuse(["--dataset", str(weights)], capsys)
    assert "--pretrained" in refuse(["--pretrained", str(tmp_path / "none.pt")], capsys)
    err = refuse(["--pretrained", str(weights)], capsys)  # a training checkpoint
    assert "--pretrained" in err and "not a pretrained.pt of kind 'dppo-pretrained'" in err
    assert "--pretrained" in refuse(["--pretrained", dataset_file], capsys)  # an HDF5 file
    saved = tmp_path / "p.pt"
    checkpoint.save(
        saved,
        {"kind": "dppo-pretrained", "policy": "diffusion", "env_id": "Hopper-v5",
         "config": {"hidden_sizes": (16, 16, 16), "time_dim": 16, "denoising_steps": 20,
                    "norm_obs": True}, "network": {}, "obs_normalizer": None},
    )  # fmt: skip
    err = refuse(["--pretrained", str(saved), "--policy", "gaussian"], capsys)
    assert "holds a diffusion policy" in err
    err = refuse(["--pretrained", str(saved), "--hidden-sizes", "32", "32", "32"], capsys)
    assert "--hidden-sizes must match --pretrained" in err


@pytest.mark.parametrize(
    "argv, flag",
    [
        (["--ft-denoising-steps", "21"], "--ft-denoising-steps"),
        (["--denoising-steps", "5", "--ft-denoising-steps", "6"], "--ft-denoising-steps"),
        (["--clip-coef", "0"], "--clip-coef"),
        (["--clip-coef", "-0.1"], "--clip-coef"),
        (["--clip-coef-base", "0"], "--clip-coef-base"),
        (["--adv-clip-lower-quantile", "0.6", "--adv-clip-upper-quantile", "0.5"], "--adv-clip"),
        (["--hidden-sizes", "16", "32", "16"], "--hidden-sizes"),
        (["--num-minibatches", "3"], "--num-minibatches"),
    ],
)
def test_bad_numbers_are_refused(argv, flag, dataset_file, capsys):
    assert flag in refuse(["--dataset", dataset_file, *argv], capsys)


def test_a_run_killed_before_its_first_checkpoint_restarts_byte_for_byte(
    dataset_file, tmp_path, monkeypatch
):
    """Killed after pre-training and its rows but before its first checkpoint, --resume starts
    the run again from step 0 and pre-trains again (the same draws): metrics.csv, pretrain.csv
    and the final checkpoint equal the uninterrupted run's."""
    from controlrl.session import Session

    argv = ["--dataset", dataset_file, "--policy", "diffusion", *TINY]  # BC draws noise
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    dppo.main(parse(Args, [*argv, "--run-dir", str(whole)]))

    class Killed(Exception):
        pass

    def die(self, iteration):
        raise Killed

    with monkeypatch.context() as patch:
        patch.setattr(Session, "save_checkpoint", die)  # the first checkpoint: after iteration 2
        with pytest.raises(Killed):
            dppo.main(parse(Args, [*argv, "--run-dir", str(killed)]))
    assert (killed / "pretrained.pt").exists() and len(steps_of(killed)) == 2
    assert not (killed / "checkpoints" / "latest.pt").exists()
    dppo.main(parse(Args, ["--resume", str(killed)]))
    for name in ("metrics.csv", "pretrain.csv"):
        assert (killed / name).read_bytes() == (whole / name).read_bytes(), name
    a, b = (checkpoint.load(d / "checkpoints" / "latest.pt") for d in (whole, killed))
    assert same(a, b)


def steps_of(run_dir) -> list[str]:
    return (run_dir / "metrics.csv").read_text().splitlines()[1:]


def same(a, b) -> bool:
    """Nested dicts, lists and tensors equal bit for bit."""
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, torch.Tensor):
        return a.dtype == b.dtype and torch.equal(a, b)
    return a == b
