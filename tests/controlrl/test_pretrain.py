"""controlrl/pretrain.py: the dataset's normaliser state, behaviour cloning (the loss lowered on
normalised inputs, the cosine learning rate, ending on the EMA of the weights by hand) and the
pretrained.pt round trip (foreign files, other flags and other shapes refused: exit 2)."""

from __future__ import annotations

import math
import types

import numpy as np
import pytest
import torch
from torch import nn

from controlrl import checkpoint, pretrain
from controlrl.cli import ArgError
from controlrl.normalize import ObsNormalizer
from envs.offline import Dataset

O, A = 4, 2


def linear_dataset(m: int = 256, seed: int = 0) -> Dataset:
    """Observations far from N(0, I) (offset 5, scales 1..4), actions a fixed linear map of them."""
    rng = np.random.default_rng(seed)
    obs = (5.0 + rng.normal(size=(m, O)) * np.arange(1, O + 1)).astype(np.float32)
    w = rng.normal(size=(O, A)).astype(np.float32)
    actions = np.tanh((obs - 5.0) @ w / 4).astype(np.float32)
    flags = np.zeros(m, bool)
    return Dataset(obs, actions, np.zeros(m, np.float32), obs, flags, flags, "Pendulum-v1")


def settings(**overrides) -> types.SimpleNamespace:
    base = dict(
        pretrain_steps=200,
        pretrain_batch_size=64,
        pretrain_lr=1e-2,
        pretrain_min_lr=1e-3,
        ema_decay=0.9,
        seed=0,
    )
    return types.SimpleNamespace(**{**base, **overrides})


def normalizer_of(data: Dataset) -> ObsNormalizer:
    normalizer = ObsNormalizer((O,))
    normalizer.load_state_dict(pretrain.dataset_normalizer_state(data.observations))
    normalizer.frozen = True
    return normalizer


def test_dataset_normalizer_state_is_the_datasets_mean_and_variance():
    obs = np.array([[1.0, 2.0], [3.0, 2.0], [5.0, 2.0]], np.float32)  # a constant column
    state = pretrain.dataset_normalizer_state(obs)
    assert state["mean"].tolist() == [3.0, 2.0]
    torch.testing.assert_close(
        state["var"], torch.tensor([8 / 3 + 1e-6, 1e-6], dtype=torch.float64)
    )
    assert state["count"].item() == 3.0
    normalizer = ObsNormalizer((2,))
    normalizer.load_state_dict(state)
    out = normalizer(obs, update=False)
    assert np.isfinite(out).all() and np.abs(out[:, 1]).max() == 0.0
    np.testing.assert_allclose(out[:, 0].std(), 1.0, rtol=1e-5)


def test_cosine_lr_runs_from_lr_to_min_lr():
    assert pretrain.cosine_lr(0, 10, 1e-3, 1e-4) == pytest.approx(1e-3, rel=1e-12)
    assert pretrain.cosine_lr(5, 10, 1e-3, 1e-4) == pytest.approx(5.5e-4, rel=1e-12)
    assert pretrain.cosine_lr(10, 10, 1e-3, 1e-4) == pytest.approx(1e-4, rel=1e-12)
    by_hand = 1e-4 + 9e-4 * 0.5 * (1 + math.cos(math.pi * 0.3))
    assert pretrain.cosine_lr(3, 10, 1e-3, 1e-4) == pytest.approx(by_hand, rel=1e-12)


def test_pretraining_lowers_the_loss_on_normalised_observations(tmp_path):
    data = linear_dataset()
    normalizer = normalizer_of(data)
    torch.manual_seed(0)
    net = nn.Linear(O, A)
    seen = []

    def mse(obs: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        seen.append(obs)
        return (net(obs) - actions).square().mean()

    obs = torch.from_numpy(normalizer(data.observations, update=False))
    actions = torch.from_numpy(data.actions)
    with torch.no_grad():
        before = mse(obs, actions).item()
    seen.clear()
    args = settings(pretrain_steps=100)
    history = pretrain.pretrain(net, mse, data, normalizer, args, tmp_path / "bc.csv")
    with torch.no_grad():
        after = mse(obs, actions).item()
    assert after < 0.2 * before, (before, after)
    # the loss saw the frozen normaliser's outputs, not the raw observations (mean 5)
    inputs = torch.cat(seen[:-1])
    assert len(seen) == 101 and inputs.shape == (100 * 64, O)
    assert inputs.mean().abs() < 0.2 and (inputs.std(0) - 1).abs().max() < 0.2
    assert len(history) == 100 and history[0][0] == 1 and history[-1][0] == 100
    assert history[-1][1] < 0.2 * history[0][1]
    rows = (tmp_path / "bc.csv").read_text().splitlines()
    assert rows[0] == "step,bc_loss" and len(rows) == 101
    assert rows[-1].startswith("100,")


class RecordingAdam(torch.optim.Adam):
    """Adam that records its learning rate at each step and the parameters after it."""

    log: list = []

    def step(self, closure=None):
        super().step(closure)
        params = [p.detach().clone() for p in self.param_groups[0]["params"]]
        RecordingAdam.log.append((self.param_groups[0]["lr"], params))


def test_pretraining_follows_the_cosine_lr_and_ends_on_the_ema_of_the_weights(
    monkeypatch, tmp_path
):
    data = linear_dataset(64)
    RecordingAdam.log = []
    monkeypatch.setattr(pretrain.torch.optim, "Adam", RecordingAdam)
    torch.manual_seed(0)
    net = nn.Linear(O, A)
    initial = [p.detach().clone() for p in net.parameters()]
    args = settings(pretrain_steps=5, ema_decay=0.6)

    def mse(obs, actions):
        return (net(obs) - actions).square().mean()

    pretrain.pretrain(net, mse, data, None, args, tmp_path / "bc.csv")
    lrs = [lr for lr, _ in RecordingAdam.log]
    assert lrs == [pretrain.cosine_lr(i, 5, 1e-2, 1e-3) for i in range(5)]
    ema = initial  # the average by hand: ema <- 0.6 ema + 0.4 p after every step
    for _, params in RecordingAdam.log:
        ema = [0.6 * e + 0.4 * p for e, p in zip(ema, params)]
    for got, want, last in zip(net.parameters(), ema, RecordingAdam.log[-1][1]):
        torch.testing.assert_close(got.detach(), want)
        assert not torch.allclose(got, last)  # not the last weights
    # decay 1: the average never leaves the weights it started from
    start = [p.detach().clone() for p in net.parameters()]
    args = settings(pretrain_steps=3, ema_decay=1.0)
    pretrain.pretrain(net, mse, data, None, args, tmp_path / "bc2.csv")
    assert all(torch.equal(got.detach(), want) for got, want in zip(net.parameters(), start))


def test_pretrained_file_round_trip_and_refusals(tmp_path, capsys):
    data = linear_dataset(32)
    normalizer = normalizer_of(data)
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(O, 8), nn.Tanh(), nn.Linear(8, A))
    args = types.SimpleNamespace(hidden_sizes=(8,), norm_obs=True, seed=3)
    path = tmp_path / "pretrained.pt"
    flags = ("hidden_sizes", "norm_obs")
    pretrain.save_pretrained(path, "toy-pretrained", net, normalizer, args, flags, env_id="E")
    saved = pretrain.load_pretrained(str(path), "toy-pretrained")
    assert saved["env_id"] == "E" and saved["config"] == {"hidden_sizes": (8,), "norm_obs": True}
    pretrain.require_same_flags(args, saved)  # the same flags: accepted
    torch.manual_seed(1)
    fresh = nn.Sequential(nn.Linear(O, 8), nn.Tanh(), nn.Linear(8, A))
    fresh_normalizer = ObsNormalizer((O,))
    pretrain.load_into(fresh, fresh_normalizer, saved)
    for name, value in net.state_dict().items():
        assert torch.equal(fresh.state_dict()[name], value), name
    obs = data.observations[:5]
    assert np.array_equal(fresh_normalizer(obs, update=False), normalizer(obs, update=False))

    with pytest.raises(ArgError, match="--hidden-sizes must match --pretrained"):
        pretrain.require_same_flags(types.SimpleNamespace(hidden_sizes=(16,), norm_obs=True), saved)
    with pytest.raises(ArgError, match="--pretrained: .*not a pretrained.pt of kind 'other'"):
        pretrain.load_pretrained(str(path), "other")
    checkpoint.save(tmp_path / "ckpt.pt", {"step": 3})  # a training checkpoint: no kind
    with pytest.raises(ArgError, match="--pretrained"):
        pretrain.load_pretrained(str(tmp_path / "ckpt.pt"), "toy-pretrained")
    with pytest.raises(ArgError, match="--pretrained"):
        pretrain.load_pretrained(str(tmp_path / "missing.pt"), "toy-pretrained")
    with pytest.raises(SystemExit) as exc:  # another network's shapes
        pretrain.load_into(nn.Linear(O, A), None, saved)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "--pretrained: does not fit" in err


def fake_run(run_dir, act_dim: int = A) -> types.SimpleNamespace:
    """What start_from_clone reads of a controlrl.training.Run."""
    return types.SimpleNamespace(
        run_dir=str(run_dir),
        obs_normalizer=ObsNormalizer((O,)),
        obs_space=types.SimpleNamespace(shape=(O,)),
        act_space=types.SimpleNamespace(shape=(act_dim,)),
    )


def test_start_from_clone_pretrains_once_then_loads_the_clone(tmp_path, capsys):
    data = linear_dataset(64)
    args = settings(pretrain_steps=20, resume=None, pretrained=None, env_id="E", hidden_sizes=(8,))
    torch.manual_seed(0)
    net = nn.Linear(O, A)
    initial = {k: v.clone() for k, v in net.state_dict().items()}

    def mse(obs, actions):
        return (net(obs) - actions).square().mean()

    first = fake_run(tmp_path / "first")
    pretrain.start_from_clone(first, net, mse, data, args, "toy", ("hidden_sizes",), policy="p")
    saved = pretrain.load_pretrained(str(tmp_path / "first" / "pretrained.pt"), "toy")
    assert (saved["policy"], saved["env_id"], saved["config"]) == ("p", "E", {"hidden_sizes": (8,)})
    assert (tmp_path / "first" / "pretrain.csv").exists()
    clone = {k: v.clone() for k, v in net.state_dict().items()}
    assert all(torch.equal(saved["network"][k], v) for k, v in clone.items())
    assert not torch.equal(clone["weight"], initial["weight"])  # it trained
    state = pretrain.dataset_normalizer_state(data.observations)
    assert first.obs_normalizer.frozen
    assert np.array_equal(first.obs_normalizer.rms.mean, state["mean"].numpy())

    def loads_the_clone(run, args) -> None:  # a fresh net, no dataset: the clone is loaded
        torch.manual_seed(1)
        fresh = nn.Linear(O, A)
        pretrain.start_from_clone(run, fresh, mse, None, args, "toy", ("hidden_sizes",))
        assert all(torch.equal(fresh.state_dict()[k], v) for k, v in clone.items())
        assert run.obs_normalizer.frozen
        assert np.array_equal(run.obs_normalizer.rms.mean, state["mean"].numpy())

    second = fake_run(tmp_path / "second")
    loads_the_clone(second, settings(resume=None, pretrained=str(tmp_path / "first/pretrained.pt")))
    assert not (tmp_path / "second" / "pretrain.csv").exists()  # not pre-trained again
    (tmp_path / "first" / "pretrain.csv").unlink()
    resumed = settings(resume=str(tmp_path / "first"), pretrained=None)
    loads_the_clone(fake_run(tmp_path / "first"), resumed)  # a resumed run: its own clone
    assert not (tmp_path / "first" / "pretrain.csv").exists()

    with pytest.raises(SystemExit) as exc:  # a dataset of other action shapes
        pretrain.start_from_clone(
            fake_run(tmp_path / "bad", A + 1), net, mse, data, args, "toy", ()
        )
    assert exc.value.code == 2 and "--dataset: obs x action shapes" in capsys.readouterr().err


def test_behaviour_clone_fits_the_demonstrations_on_normalised_inputs():
    from controlrl.nets import CategoricalPolicy

    rng = np.random.default_rng(0)
    obs = np.stack([rng.uniform(-1.2, 0.6, 300), rng.uniform(-0.07, 0.07, 300)], 1)
    actions = np.where(obs[:, 1] >= 0, 2, 0)  # the sign of a tiny velocity decides
    torch.manual_seed(0)
    policy = CategoricalPolicy(2, 3, (32,))
    normalizer = ObsNormalizer((2,))
    losses = pretrain.behaviour_clone(policy, obs, actions, 200, 1e-2, normalizer)
    assert len(losses) == 200 and losses[0] > 1.0 > 0.3 > losses[-1]  # from ~log 3
    # the normaliser took in the demonstrations: the policy acts on normalised observations
    np.testing.assert_allclose(normalizer.rms.mean, obs.mean(0), atol=1e-3)
    x = torch.from_numpy(normalizer(obs.astype(np.float32), update=False))
    assert (policy.mode(x).numpy() == actions).mean() > 0.9


def test_demos_files_are_checked(tmp_path):
    np.savez(tmp_path / "ok.npz", obs=np.zeros((3, 2), np.float32), actions=np.zeros(3, int))
    obs, actions = pretrain.load_demos(str(tmp_path / "ok.npz"))
    assert obs.dtype == np.float32 and obs.shape == (3, 2) and actions.shape == (3,)
    np.savez(tmp_path / "no_actions.npz", obs=np.zeros((3, 2)))
    np.savez(tmp_path / "short.npz", obs=np.zeros((3, 2)), actions=np.zeros(2))
    for name, words in [("no_actions", "no key 'actions'"), ("short", "3 rows"), ("none", "npz")]:
        with pytest.raises(ArgError, match=words):
            pretrain.load_demos(str(tmp_path / f"{name}.npz"))
