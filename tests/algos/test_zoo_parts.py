"""algos/grpo.py with the advantage estimators, KL estimators and mismatch corrections of
controlrl/advantages.py, kl_estimators.py and mismatch.py: seed k of a population is --seed k
alone (the same actions and returns: the batch-level estimators reduce over one seed's batch,
the perturbed sampler draws from each seed's own stream); the perturbed sampler changes what is
drawn; bad input is refused with one line naming the flag and exit 2 (an unknown estimator or
correction, a mismatch without a correction kind, a correction without a mismatch, BNPO on
shaped scores, a mismatch on a continuous policy)."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest
import torch

from algos import grpo
from controlrl import checkpoint
from controlrl.cli import parse

QUIET = ["--no-tensorboard", "--no-progress", "--eval-every", "0", "--eval-episodes", "2"]
SMALL = ["--hidden-sizes", "8", "--num-envs", "16", "--group-size", "4"]
BANDIT = ["--env-id", "bandit:contextual-4-5", "--total-timesteps", "64"]
torch.set_num_threads(1)


def train(run_dir, *argv):
    grpo.main(parse(grpo.Args, [*BANDIT, *argv, *SMALL, *QUIET, "--run-dir", str(run_dir)]))


def returns(path: Path, seed: int | None = None) -> list[str]:
    with path.open() as f:
        rows = list(csv.DictReader(f))
    return [r["train/episode_return"] for r in rows if seed is None or int(r["seed"]) == seed]


FLAGS = {
    "bnpo": ["--adv-norm", "bnpo"],
    "lite-ppo-k3-unbiased": ["--adv-norm", "lite-ppo", "--kl-estimator", "k3-unbiased"],
    "mismatch-tis": ["--rollout-mismatch", "temperature", "--mismatch-correction", "tis"],
}


@pytest.mark.parametrize("case", list(FLAGS))
def test_seed_k_of_a_population_is_seed_k_alone(case, tmp_path, recorded_actions):
    S, k, N = 2, 1, 16
    train(tmp_path / "pop", *FLAGS[case], "--seed", "4", "--num-seeds", str(S))
    pop = list(recorded_actions)
    recorded_actions.clear()
    train(tmp_path / "single", *FLAGS[case], "--seed", str(4 + k))
    assert len(pop) == len(recorded_actions) == 4
    for a, b in zip(pop, recorded_actions):
        np.testing.assert_array_equal(a[:, k * N : (k + 1) * N], b)
    mine = returns(tmp_path / "pop" / "metrics.csv", 4 + k)
    assert mine == returns(tmp_path / "single" / "metrics.csv")
    mine, alone = (
        checkpoint.load(tmp_path / d / "checkpoints" / "latest.pt")["policy"]
        for d in ("pop", "single")
    )
    a = torch.cat([mine[name][k].reshape(-1) for name in alone])
    b = torch.cat([value.reshape(-1) for value in alone.values()])
    assert (a - b).abs().max() <= 1e-5 * b.abs().max()  # the final parameters


def test_the_perturbed_sampler_draws_other_actions(tmp_path, recorded_actions):
    train(tmp_path / "a", "--seed", "0")
    plain = list(recorded_actions)
    recorded_actions.clear()
    cold = ["--rollout-mismatch", "temperature", "--rollout-temperature", "0.02"]
    train(tmp_path / "b", *cold, "--mismatch-correction", "none", "--seed", "0")
    assert len(plain) == len(recorded_actions) == 4
    # the same noise stream; the sharpened logits draw other arms
    assert not np.array_equal(plain[0], recorded_actions[0])


def test_mis_masking_every_step_leaves_the_policy_where_it_was(tmp_path):
    """Every weight outside [100, 200] (they are near 1): the policy loss is 0 on every step,
    so with no KL term the policy never moves (the weights do reach the loss)."""
    argv = ["--rollout-mismatch", "temperature", "--mismatch-correction", "mis"]
    train(tmp_path / "m", *argv, "--mis-low", "100", "--mis-high", "200", "--kl-coef", "0")
    with (tmp_path / "m" / "metrics.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 4 and all(float(r["train/kl_max"]) == 0.0 for r in rows)
    train(tmp_path / "t", *argv[:3], "tis", "--kl-coef", "0")
    with (tmp_path / "t" / "metrics.csv").open() as f:
        assert all(float(r["train/kl_max"]) > 0.0 for r in csv.DictReader(f))


BAD = [
    (
        ["--adv-norm", "rlooo"],
        "--adv-norm must be one of batch-mean, bnpo, gpg, lite-ppo, mean, mean-std",
    ),
    (["--kl-estimator", "k4"], "--kl-estimator must be one of k1, k2, k3, k3-unbiased"),
    (
        ["--rollout-mismatch", "fp8"],
        "--rollout-mismatch must be one of bf16, bf16-forward, fp8-forward, none, temperature",
    ),
    (
        ["--rollout-mismatch", "bf16"],
        "--mismatch-correction is required with --rollout-mismatch or --rollout-lag: one of mis, "
        "none, tis",
    ),
    (["--rollout-lag", "1"], "--mismatch-correction is required with --rollout-mismatch or"),
    (["--rollout-lag", "-1", "--mismatch-correction", "tis"], "--rollout-lag must be >= 0"),
    (
        ["--mismatch-correction", "tis"],
        "--mismatch-correction needs --rollout-mismatch or --rollout-lag",
    ),
    (
        ["--rollout-mismatch", "bf16", "--mismatch-correction", "clip"],
        "--mismatch-correction must be one of mis, none, tis, got 'clip'",
    ),
    (["--tis-cap", "0"], "--tis-cap must be > 0"),
    (["--mis-low", "2", "--mis-high", "1"], "--mis-high must be > --mis-low (2.0)"),
    (["--adv-norm", "bnpo", "--kl-in", "reward"], "--adv-norm bnpo needs scores in [0, 1]"),
]


@pytest.mark.parametrize("argv, fragment", BAD)
def test_bad_input_is_one_line_naming_the_flag(argv, fragment, capsys):
    with pytest.raises(SystemExit) as exc:
        parse(grpo.Args, argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and len(err.splitlines()) == 1 and fragment in err, err


def test_a_mismatch_on_a_continuous_policy_exits_2(tmp_path, capsys):
    argv = ["--rollout-mismatch", "temperature", "--mismatch-correction", "tis"]
    argv += ["--env-id", "Pendulum-v1", "--num-envs", "4", "--group-size", "2"]
    argv += ["--total-timesteps", "8", "--run-dir", str(tmp_path / "r"), *QUIET]
    with pytest.raises(SystemExit) as exc:
        grpo.main(parse(grpo.Args, argv))
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(
        "error: --rollout-mismatch perturbs logits: it needs a discrete action space"
    )
