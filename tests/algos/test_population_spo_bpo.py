"""spo.py and bpo.py --num-seeds on a MuJoCo id (controlrl/population_control.py, each file's own
loss): seed k of a population holds the actor and critic of `--seed k` alone after the first
update, up to float rounding."""

from __future__ import annotations

import importlib

import pytest
import torch

from controlrl import checkpoint
from controlrl.cli import parse

TINY = ["--env-id", "Hopper-v5", "--num-steps", "64", "--num-minibatches", "4"]
TINY += ["--update-epochs", "2", "--hidden-sizes", "16", "16", "--no-tensorboard"]
TINY += ["--no-progress", "--eval-every", "0", "--eval-episodes", "1", "--checkpoint-every", "1"]


@pytest.mark.parametrize(
    "algo, extra",
    [
        ("spo", ["--num-envs", "2", "--critic-hidden-sizes", "16", "16"]),
        ("bpo", ["--num-envs", "1"]),  # its median head: the critic's own method, vmapped
    ],
)
def test_seed_k_of_a_population_is_seed_k_alone_after_the_first_update(algo, extra, tmp_path):
    module = importlib.import_module(f"algos.{algo}")
    S, k = 3, 2
    argv = [*TINY, *extra, "--total-timesteps", "128"]

    def run(name, *flags):
        module.main(parse(module.Args, [*argv, *flags, "--run-dir", str(tmp_path / name)]))
        return checkpoint.load(tmp_path / name / "checkpoints" / "latest.pt")

    pop = run("pop", "--seed", "7", "--num-seeds", str(S))["policy"]
    alone = run("single", "--seed", str(7 + k))
    merged = {**alone["policy"], **{f"critic.{n}": v for n, v in alone["value"].items()}}
    assert list(pop) == list(merged)
    mine = torch.cat([pop[name][k].reshape(-1) for name in merged])
    theirs = torch.cat([v.reshape(-1) for v in merged.values()])
    err = float((mine - theirs).abs().max() / theirs.abs().max())
    assert err <= 1e-5, err
    other = torch.cat([pop[name][k - 1].reshape(-1) for name in merged])
    assert float((other - theirs).abs().max() / theirs.abs().max()) > 1e-2  # not any seed's
