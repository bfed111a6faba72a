"""A finished run's policy loaded back (controlrl.evaluate.frozen_act): it reproduces the run's
own final evaluation, an MLP and a Chebyshev policy alike, and it normalises observations with
the checkpoint's statistics."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from timeouts import scaled

from controlrl.evaluate import evaluate, frozen_act
from controlrl.nets import make_policy
from controlrl.seeding import eval_seed

ROOT = Path(__file__).resolve().parents[2]
ENV = "MountainCar-v0"


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    out = {}
    for name, extra in {"mlp": [], "chebyshev": ["--chebyshev-degree", "3"]}.items():
        run = tmp_path_factory.mktemp(name) / "run"
        argv = [sys.executable, "algos/ppo.py", "--env-id", ENV, "--run-dir", str(run)]
        argv += ["--num-envs", "4", "--num-steps", "64", "--total-timesteps", "512"]
        argv += ["--no-progress", "--no-tensorboard", *extra]
        done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=scaled(300))
        assert done.returncode == 0, done.stderr[-2000:]
        out[name] = run
    return out


@pytest.mark.parametrize("name, params", [("mlp", 4547), ("chebyshev", 51)])
def test_the_loaded_policy_reproduces_the_runs_final_evaluation(runs, name, params):
    act, n_params = frozen_act(runs[name], ENV)
    assert n_params == params  # 64-64 MLP; 16 Chebyshev features x 3 actions + 3
    returns = evaluate(lambda obs: torch.from_numpy(act(obs.numpy())), ENV, None, 10,
                       seed=eval_seed(1))  # fmt: skip
    final = json.loads((runs[name] / "final_eval.json").read_text())["eval_return_mean"]
    assert float(returns.mean()) == final


def test_the_loaded_policy_normalises_with_the_checkpoints_statistics(runs, tmp_path):
    run = shutil.copytree(runs["mlp"], tmp_path / "run")
    path = run / "checkpoints" / "latest.pt"
    state = torch.load(path, weights_only=True)
    gen = torch.Generator().manual_seed(0)
    state["policy"] = {
        k: 3 * torch.randn(v.shape, generator=gen) for k, v in state["policy"].items()
    }
    mean, var = torch.tensor([-0.3, 0.01], dtype=torch.float64), torch.tensor([0.04, 1e-4])
    state["obs_normalizer"].update(mean=mean, var=var.double())
    torch.save(state, path)
    act, _ = frozen_act(run, ENV)
    policy = make_policy(gym.make(ENV).observation_space, gym.spaces.Discrete(3))
    policy.load_state_dict(state["policy"])
    rng = np.random.default_rng(0)
    obs = np.stack([rng.uniform(-1.2, 0.6, 200), rng.uniform(-0.07, 0.07, 200)], 1)
    z = (torch.tensor(obs).float().double() - mean) / torch.sqrt(var.double() + 1e-8)
    want = policy.mode(z.clamp(-10, 10).float()).numpy()
    assert (want != policy.mode(torch.tensor(obs).float()).numpy()).any()  # statistics matter
    np.testing.assert_array_equal(act(obs), want)
