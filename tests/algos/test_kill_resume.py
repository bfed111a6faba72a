"""Every algorithm file, and every --num-seeds population path, killed with SIGKILL and resumed,
against the uninterrupted run: metrics.csv, aggregate.csv and final_eval.json byte for byte.

Each case runs its script uninterrupted, then again killed at three moments (tests/algos/
kill_resume.py: as its first checkpoint is about to be written, right after the first one,
right after a later one) and resumed with --resume (ppo_brax.py included: its checkpoint holds
the Brax envs' state, a JAX pytree). optimistic_po.py writes no checkpoints (a tabular run of
seconds; no --resume): its --help offers none, and a rerun is the same run. grpo.py's
train-inference mismatches are cases of their own, single-seed and population: --rollout-lag 2
(the checkpoint holds the two past policies the sampler lags behind) and --rollout-mismatch
bf16-forward.

The fast tier runs three cheap cases (rarl.py, ppo.py's bandit population, grpo.py's); the slow
tier every case.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from kill_resume import ROOT, first_difference, kill_at, run, same_files
from timeouts import scaled

QUIET = ["--no-progress", "--no-tensorboard"]
# 8 iterations, a checkpoint every 2nd, evaluations in between (their draws must resume too)
ON_POLICY = ["--env-id", "Pendulum-v1", "--num-envs", "2", "--num-steps", "32"]
ON_POLICY += ["--total-timesteps", "512", "--checkpoint-every", "2", "--eval-every", "128"]
ON_POLICY += ["--eval-episodes", "1", *QUIET]
MINIBATCHES = ["--num-minibatches", "2", "--update-epochs", "2"]
BANDIT = ["--env-id", "bandit:bernoulli-10", "--num-envs", "8", "--total-timesteps", "128"]
BANDIT += ["--checkpoint-every", "2", "--eval-every", "32", "--eval-episodes", "2", *QUIET]
BANDIT_AC = ["--env-id", "bandit:contextual-4-5", "--num-envs", "8", "--num-steps", "4"]
BANDIT_AC += ["--total-timesteps", "256", "--checkpoint-every", "2", "--eval-every", "64"]
BANDIT_AC += ["--eval-episodes", "2", *MINIBATCHES, *QUIET]
SEEDS = ["--num-seeds", "3"]
LAG = ["--rollout-lag", "2", "--mismatch-correction", "tis"]
BF16 = ["--rollout-mismatch", "bf16-forward", "--mismatch-correction", "mis"]
# replaced by the datasets fixture's files: iql's Pendulum, dppo's Hopper (actions in [-1, 1])
PENDULUM, HOPPER = "{pendulum}", "{hopper}"

CASES = {
    "ppo": ("algos/ppo.py", [*ON_POLICY, *MINIBATCHES]),
    "dpo": ("algos/dpo.py", [*ON_POLICY, *MINIBATCHES]),
    "spo": ("algos/spo.py", [*ON_POLICY, *MINIBATCHES]),
    "bpo": ("algos/bpo.py", [*ON_POLICY, *MINIBATCHES]),
    "fixpo": ("algos/fixpo.py", [*ON_POLICY, *MINIBATCHES, "--fixup-batchsize", "32"]),
    "trpo": ("algos/trpo.py", [*ON_POLICY, "--cg-max-steps", "3"]),
    "gae": ("algos/gae.py", [*ON_POLICY, "--cg-max-steps", "3"]),
    "fpo": ("algos/fpo.py", [*ON_POLICY, *MINIBATCHES, "--hidden-sizes", "8"]),
    "rarl": (
        "algos/rarl.py",
        ["--total-timesteps", "512", "--num-steps", "32", *MINIBATCHES, "--checkpoint-every"]
        + ["2", "--eval-every", "128", "--eval-episodes", "1", *QUIET],
    ),
    "retrace": (
        "algos/retrace.py",
        ["--env-id", "Hopper-v5", "--hidden-sizes", "32", "32", "--batch-size", "32"]
        + ["--segment-length", "4", "--buffer-size", "2000", "--total-timesteps", "500"]
        + ["--learning-starts", "150", "--log-every", "50", "--eval-every", "250"]
        + ["--eval-episodes", "1", "--checkpoint-every", "2", *QUIET],
    ),
    "iql": (
        "algos/iql.py",
        ["--dataset", PENDULUM, "--hidden-sizes", "32", "32", "--batch-size", "32"]
        + ["--total-timesteps", "80", "--log-every", "10", "--eval-every", "40"]
        + ["--eval-episodes", "1", "--checkpoint-every", "2", *QUIET],
    ),
    "dppo": (
        "algos/dppo.py",
        ["--dataset", HOPPER, "--hidden-sizes", "16", "16", "16", "--critic-hidden-sizes"]
        + ["16", "--num-envs", "2", "--num-steps", "8", "--total-timesteps", "128"]
        + [*MINIBATCHES, "--pretrain-steps", "20", "--checkpoint-every", "2"]
        + ["--eval-every", "32", "--eval-episodes", "1", *QUIET],
    ),
    "grpo": ("algos/grpo.py", [*BANDIT]),
    "tpo": ("algos/tpo.py", [*BANDIT]),
    "ppo-population": ("algos/ppo.py", [*BANDIT_AC, *SEEDS]),
    "dpo-population": ("algos/dpo.py", [*BANDIT_AC, *SEEDS]),
    "grpo-population": ("algos/grpo.py", [*BANDIT, *SEEDS]),
    # the train-inference mismatches: a lag of 2 keeps two past policies in the checkpoint
    "grpo-lag": ("algos/grpo.py", [*BANDIT, *LAG]),
    "grpo-population-lag": ("algos/grpo.py", [*BANDIT, *LAG, *SEEDS]),
    "grpo-bf16": ("algos/grpo.py", [*BANDIT, *BF16]),
    "grpo-population-bf16": ("algos/grpo.py", [*BANDIT, *BF16, *SEEDS]),
    "tpo-population": ("algos/tpo.py", [*BANDIT, *SEEDS]),
    # control populations (controlrl/population_control.py): Pendulum truncates mid-rollout
    "ppo-population-control": ("algos/ppo.py", [*ON_POLICY, *MINIBATCHES, *SEEDS]),
    "spo-population": ("algos/spo.py", [*ON_POLICY, *MINIBATCHES, *SEEDS]),
    "bpo-population": ("algos/bpo.py", [*ON_POLICY, *MINIBATCHES, *SEEDS]),
    "ppo_brax": (
        "algos/ppo_brax.py",
        ["--env-id", "brax:inverted_pendulum", "--num-envs", "4", "--num-steps", "16"]
        + [*MINIBATCHES, "--episode-length", "10", "--total-timesteps", "512"]
        + ["--checkpoint-every", "2", "--eval-every", "128", "--eval-episodes", "2", *QUIET],
    ),
}
CASES["ppo_brax-population"] = (CASES["ppo_brax"][0], [*CASES["ppo_brax"][1], *SEEDS])
FAST = ("rarl", "ppo-population", "grpo-population")
MOMENTS = ("before", "first", "late")


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    """Small D4RL-layout dataset files: Pendulum under a uniformly random policy (iql), Hopper
    under a fixed function of the observation (dppo)."""
    from test_dppo import hopper_dataset
    from test_iql import rollout_dataset

    from envs.offline.d4rl import write_hdf5

    folder = tmp_path_factory.mktemp("data")
    return {
        PENDULUM: write_hdf5(rollout_dataset(steps=400), folder / "pendulum-random.hdf5"),
        HOPPER: write_hdf5(hopper_dataset(), folder / "hopper-fixed.hdf5"),
    }


def case_argv(name: str, dataset: dict) -> tuple[str, list[str]]:
    script, argv = CASES[name]
    return script, [str(dataset.get(a, a)) for a in argv]


def check_kill_resume(name: str, moments, tmp_path, dataset) -> None:
    script, argv = case_argv(name, dataset)
    whole = tmp_path / "whole"
    run(script, *argv, "--run-dir", str(whole))
    for moment in moments:
        cut = tmp_path / moment
        kill_at(script, moment, *argv, "--run-dir", str(cut))
        assert not (cut / "final_eval.json").exists()
        assert (cut / "checkpoints" / "latest.pt").exists() == (moment != "before")
        run(script, "--resume", str(cut))
        differ = same_files(whole, cut)
        assert not differ, f"{moment}: " + "; ".join(
            first_difference(whole, cut, n) for n in differ
        )


@pytest.mark.parametrize("name", FAST)
def test_a_killed_run_resumes_as_the_uninterrupted_one(name, tmp_path):
    check_kill_resume(name, ("before", "late"), tmp_path, {})  # no dataset among these


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CASES))
def test_every_file_killed_at_three_moments_resumes_as_the_uninterrupted_one(
    name, tmp_path, dataset
):
    check_kill_resume(name, MOMENTS, tmp_path, dataset)


def test_every_algorithm_file_and_population_path_is_a_case():
    """A new file in algos/ (or a new --num-seeds path) joins CASES, or this fails."""
    files = {p.stem for p in (ROOT / "algos").glob("*.py") if p.stem != "__init__"}
    covered = {script.removeprefix("algos/").removesuffix(".py") for script, _ in CASES.values()}
    assert files - covered == {"optimistic_po"}
    population = {p.stem for p in (ROOT / "algos").glob("*.py") if "num_seeds" in p.read_text()} | {
        p.stem for p in (ROOT / "algos").glob("*.py") if "group_run(" in p.read_text()
    }
    assert population == {n.split("-")[0] for n in CASES if "-population" in n}
    # a file that batches seeds on Gymnasium ids has a population case on one (Pendulum)
    control = {
        p.stem
        for p in (ROOT / "algos").glob("*.py")
        if any("population_backends" in line and '"gym"' in line for line in p.open())
    }
    on_gym = {
        n.split("-")[0] for n, (_, a) in CASES.items() if "-population" in n and "Pendulum-v1" in a
    }
    assert control == on_gym


def test_optimistic_po_has_no_resume_and_reruns_alike(tmp_path):
    help_text = subprocess.run(
        [sys.executable, "algos/optimistic_po.py", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=scaled(60),
    ).stdout
    assert "--resume" not in help_text
    argv = ["--mdp", "random", "--S", "3", "--A", "2", "--H", "3", "--episodes", "64"]
    for d in ("a", "b"):
        run("algos/optimistic_po.py", *argv, "--run-dir", str(tmp_path / d))
    assert (tmp_path / "a" / "regret.csv").read_bytes() == (
        tmp_path / "b" / "regret.csv"
    ).read_bytes()
