"""envs/offline/behaviour_policy.py reads PPO's checkpoints without controlrl (the layering):
on a real tiny PPO checkpoint its normalised observations, deterministic and sampled actions,
fresh policy and updating normaliser equal controlrl's bit for bit; a checkpoint of another
layout is one clear error."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import envs
from controlrl import checkpoint
from controlrl.nets import CategoricalPolicy, make_policy
from controlrl.normalize import ObsNormalizer
from envs.offline.behaviour_policy import (
    CheckpointLayoutError,
    GaussianMLP,
    Normalizer,
    read_checkpoint,
)

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def ppo_checkpoint(tmp_path_factory):
    """latest.pt of 2 tiny PPO iterations on Pendulum (trained weights, non-trivial stats)."""
    run = tmp_path_factory.mktemp("ppo") / "run"
    cmd = [sys.executable, str(REPO / "algos" / "ppo.py"), "--env-id", "Pendulum-v1", "--seed",
           "4", "--total-timesteps", "512", "--num-envs", "1", "--num-steps", "256",
           "--num-minibatches", "4", "--update-epochs", "2", "--hidden-sizes", "32", "16",
           "--eval-every", "0", "--eval-episodes", "1", "--no-tensorboard", "--no-progress",
           "--run-dir", str(run)]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return run / "checkpoints" / "latest.pt"


def controlrl_reference(path):
    state = checkpoint.load(path, ("policy", "obs_normalizer"))
    probe = envs.make("Pendulum-v1", 1, 0)
    obs_space, act_space = probe.single_observation_space, probe.single_action_space
    probe.close()
    policy = make_policy(obs_space, act_space, (32, 16))
    policy.load_state_dict(state["policy"])
    normalizer = ObsNormalizer(obs_space.shape)
    normalizer.load_state_dict(state["obs_normalizer"])
    return policy, normalizer


@pytest.mark.parametrize("rows", [1, 7])  # ObsNormalizer has a separate one-row path
def test_reader_equals_controlrl_bit_for_bit(ppo_checkpoint, rows):
    policy, normalizer = controlrl_reference(ppo_checkpoint)
    mine, my_norm = read_checkpoint(ppo_checkpoint)
    assert my_norm is not None and len(mine.layers) == 3
    rng = np.random.default_rng(rows)
    obs = (rng.normal(size=(rows, 3)) * [1, 1, 30]).astype(np.float32)  # some clipped at 10
    ref_x = normalizer(obs.copy(), update=False)
    x = my_norm(obs)
    assert x.dtype == np.float32
    np.testing.assert_array_equal(x, ref_x)
    wide = obs.astype(np.float64) + 1e-3  # float64 observations: computed wide, then cast
    np.testing.assert_array_equal(my_norm(wide), normalizer(wide, update=False))
    t = torch.from_numpy(x)
    with torch.inference_mode():
        assert torch.equal(mine.mode(t), policy.mode(t))
        torch.manual_seed(11)
        ref_sample = policy.sample(t)
        torch.manual_seed(11)
        sample = mine.sample(t)
    # the same noise draws and the same bits: the sampled stream is unchanged
    assert torch.equal(sample, ref_sample) and not torch.equal(sample, mine.mode(t))


def test_initial_policy_and_updating_normalizer_equal_controlrl():
    probe = envs.make("Pendulum-v1", 1, 0)
    torch.manual_seed(5)
    ref = make_policy(probe.single_observation_space, probe.single_action_space, (32, 16))
    probe.close()
    torch.manual_seed(5)
    mine = GaussianMLP.initial(3, 1, [32, 16])
    ref_linears = [m for m in ref.mean if isinstance(m, torch.nn.Linear)]
    for (w, b), layer in zip(mine.layers, ref_linears, strict=True):
        assert torch.equal(w, layer.weight) and torch.equal(b, layer.bias)
    assert torch.equal(mine.log_std, ref.log_std.detach())
    norm, my_norm = ObsNormalizer((3,)), Normalizer.fresh(3)
    rng = np.random.default_rng(0)
    for rows in (1, 1, 4, 1, 3):  # one-row and batch updates, as 1 or n envs
        obs = rng.normal(3.0, 2.0, size=(rows, 3)).astype(np.float32)
        my_norm.update(obs)
        np.testing.assert_array_equal(my_norm(obs), norm(obs.copy()))  # controlrl updates
    np.testing.assert_array_equal(my_norm.var, norm.rms.var)


def _save(path, state):
    torch.save(state, path)
    return path


def test_other_layouts_one_clear_error(tmp_path, ppo_checkpoint):
    good = torch.load(ppo_checkpoint, weights_only=True)
    categorical = CategoricalPolicy(3, 4, (8,)).state_dict()
    deep = dict(good["policy"])
    deep["mean.2.weight"] = torch.zeros(16, 5)  # a layer that does not chain
    cases = {
        "garbage": ((tmp_path / "g.pt").write_bytes(b"not a checkpoint") and tmp_path / "g.pt",
                    "unreadable"),
        "categorical": (_save(tmp_path / "c.pt", {"policy": categorical}),
                        "unexpected policy key 'logits.0.weight'"),
        "no policy": (_save(tmp_path / "n.pt", {"step": 3}), "no 'policy' state dict"),
        "chain": (_save(tmp_path / "d.pt", {**good, "policy": deep}),
                  "layer mean.2 takes 5, not 32"),
        "normaliser": (_save(tmp_path / "o.pt", {**good, "obs_normalizer": {"mean": 0}}),
                       "obs_normalizer needs mean, var and count"),
    }  # fmt: skip
    for name, (path, words) in cases.items():
        with pytest.raises(CheckpointLayoutError) as info:
            read_checkpoint(path)
        message = str(info.value)
        assert message.startswith(f"{path}: not a PPO Gaussian-policy checkpoint"), name
        assert words in message and "\n" not in message, (name, message)


def test_envs_import_neither_controlrl_nor_algos():
    """DESIGN's layering: envs/ run an algorithm as a process and read its files, no imports."""
    import ast

    found = []
    for path in sorted((REPO / "envs").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            found += [f"{path.relative_to(REPO)}: {n}" for n in names if n.split(".")[0]
                      in ("controlrl", "algos")]  # fmt: skip
    assert not found, found
