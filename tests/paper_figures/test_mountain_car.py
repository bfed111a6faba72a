"""The Mountain Car figure (paper_figures/mountain_car.py): a loaded run's controller reproduces
the run's own final evaluation, the reference dynamics take the steps Gymnasium's env takes under
it, and the toy run writes per-seed regrets against a reference no greater than its sources."""

import csv
import importlib.util
import json
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

from controlrl.evaluate import evaluate
from controlrl.seeding import eval_seed
from theory import mountain_car as mc

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location(
    "mountain_car", ROOT / "paper_figures/mountain_car.py"
)
fig = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = fig
spec.loader.exec_module(fig)


def gym_steps(act, x0: float, max_steps: int = 200) -> int:
    """Steps of act in Gymnasium's own env from (x0, 0), up to its time limit."""
    env = gym.make("MountainCar-v0").unwrapped
    env.reset(seed=0)
    env.state = np.array([x0, 0.0])
    for t in range(1, max_steps + 1):
        x, v = env.state
        _, _, terminated, _, _ = env.step(int(act(np.array([x]), np.array([v]))[0]))
        if terminated:
            return t
    return max_steps


@pytest.mark.slow  # the figure script end to end at toy size
def test_toy_run(tmp_path):
    out = tmp_path / "out"
    fig.main(["--toy", "--seeds", "1", "--total-timesteps", "1024", "--out", str(out),
              "--sweeps-root", str(tmp_path / "sweeps")])  # fmt: skip
    with open(out / "mountain_car.csv") as f:
        rows = list(csv.DictReader(f))
    with open(out / "mountain_car_reference.csv") as f:
        ref = list(csv.DictReader(f))
    assert {r["policy"] for r in rows} == {"mlp", "chebyshev"}
    assert {r["params"] for r in rows} == {"4547", "51"}  # 64-64 MLP; 16 features x 3 + 3
    steps = np.array([int(r["reference_steps"]) for r in ref])
    for r in ref:
        sources = [int(r[k]) for k in ("grid20_steps", "grid40_steps", "bang_bang_steps")]
        assert int(r["reference_steps"]) == min(sources[1:]) <= 200
    for r in rows:
        assert abs(float(r["regret"]) - (float(r["mean_steps"]) - steps.mean())) < 1e-3
    # the controller the figure scores is the one the env runs (normaliser and mode included)
    for name in ("mlp", "chebyshev"):
        run = tmp_path / "sweeps" / f"{name}_1024" / "runs" / "ppo" / "MountainCar-v0" / "seed1"
        act, _ = fig.load_act(run)
        # the run's own final evaluation (its envs, seeds and frozen normaliser) is reproduced
        returns = evaluate(
            lambda obs, act=act: torch.from_numpy(act(obs[:, 0].numpy(), obs[:, 1].numpy())),
            "MountainCar-v0",
            None,
            10,
            seed=eval_seed(1),
        )
        final = json.loads((run / "final_eval.json").read_text())["eval_return_mean"]
        assert float(returns.mean()) == final
        x0 = np.array([-0.6, -0.47, -0.4])
        ours = mc.policy_steps(act, x0, np.zeros(3))
        assert list(ours) == [gym_steps(act, x) for x in x0]


def test_load_act_normalises_with_the_checkpoints_statistics(tmp_path):
    fig.main(["--toy", "--seeds", "1", "--total-timesteps", "512", "--grids", "10",
              "--starts", "2", "--switch-horizon", "20", "--out", str(tmp_path / "out"),
              "--sweeps-root", str(tmp_path / "sweeps")])  # fmt: skip
    run = tmp_path / "sweeps" / "mlp_512" / "runs" / "ppo" / "MountainCar-v0" / "seed1"
    path = run / "checkpoints" / "latest.pt"
    state = torch.load(path, weights_only=True)
    gen = torch.Generator().manual_seed(0)
    state["policy"] = {
        k: 3 * torch.randn(v.shape, generator=gen) for k, v in state["policy"].items()
    }
    mean, var = torch.tensor([-0.3, 0.01], dtype=torch.float64), torch.tensor([0.04, 1e-4])
    state["obs_normalizer"].update(mean=mean, var=var.double())
    torch.save(state, path)
    act, _ = fig.load_act(run)
    policy = fig.make_policy(gym.make("MountainCar-v0").observation_space, gym.spaces.Discrete(3))
    policy.load_state_dict(state["policy"])
    rng = np.random.default_rng(0)
    x, v = rng.uniform(-1.2, 0.6, 200), rng.uniform(-0.07, 0.07, 200)
    obs = torch.tensor(np.stack([x, v], 1), dtype=torch.float32)
    z = ((obs.double() - mean) / torch.sqrt(var.double() + 1e-8)).clamp(-10, 10).float()
    want = policy.mode(z).numpy()
    assert (want != policy.mode(obs).numpy()).any()  # the statistics matter at these states
    np.testing.assert_array_equal(act(x, v), want)
