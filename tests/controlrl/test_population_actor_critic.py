"""ppo.py --num-seeds (controlrl/population_actor_critic.py): S = 1 is the single run to the
byte; seed k of a population is `--seed k` alone up to rounding (actor and critic after each
update, the actions it samples) and does not depend on the other seeds; a resumed population
is each seed's resumed run; the per-seed reward scaler is the single scaler's arithmetic; flags
the population path lacks exit 2 with one line."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from population_rows import assert_only_seed_zero_moved, rows, without_seed

from algos import ppo
from controlrl import checkpoint
from controlrl.cli import parse
from controlrl.normalize import RewardScaler
from controlrl.population_actor_critic import PopulationRewardScaler

QUIET = ["--no-tensorboard", "--no-progress", "--eval-every", "0", "--eval-episodes", "2"]
SMALL = ["--hidden-sizes", "8", "--num-envs", "16", "--update-epochs", "3"]
CASES = {  # a sequence bandit (GAE over 3 steps, 2 minibatches, annealed lr) and a one-step one
    "sequence": [
        "--env-id",
        "bandit:sequence-reverse-2-3",
        "--num-steps",
        "3",
        "--num-minibatches",
        "2",
        "--total-timesteps",
        "240",
    ],
    # rollouts of 4 steps over 3-step episodes: episodes cross rollouts (the bootstrap value)
    "sequence-cut": [
        "--env-id",
        "bandit:sequence-reverse-2-3",
        "--num-steps",
        "4",
        "--num-minibatches",
        "1",
        "--total-timesteps",
        "320",
    ],
    # a constant observation over 4 steps: normalised at different steps, the rows differ
    "bernoulli-steps": [
        "--env-id",
        "bandit:bernoulli-10",
        "--num-steps",
        "4",
        "--num-minibatches",
        "2",
        "--total-timesteps",
        "192",
    ],
    "bernoulli": [
        "--env-id",
        "bandit:bernoulli-10",
        "--num-steps",
        "1",
        "--num-minibatches",
        "1",
        "--no-anneal-lr",
        "--total-timesteps",
        "80",
    ],
}


def train(run_dir, *argv):
    ppo.main(parse(ppo.Args, [*argv, *SMALL, *QUIET, "--run-dir", str(run_dir)]))


@pytest.mark.parametrize("case", list(CASES))
def test_one_seed_population_is_the_single_run_to_the_byte(case, tmp_path):
    argv = CASES[case]
    train(tmp_path / "single", *argv, "--seed", "3")
    train(tmp_path / "pop", *argv, "--seed", "3", "--num-seeds", "1")
    single = (tmp_path / "single" / "metrics.csv").read_text()
    assert without_seed(tmp_path / "pop" / "metrics.csv") == single
    final = [json.loads((tmp_path / d / "final_eval.json").read_text()) for d in ("single", "pop")]
    assert final[1]["eval_return_per_seed"] == [final[0]["eval_return_mean"]]


def test_one_seed_of_one_env_is_the_single_run_to_the_byte(tmp_path):
    """S = N = 1: the collector's one-env path (Episode records of scalars) in both."""
    argv = [*CASES["bernoulli"], "--seed", "2", *QUIET, "--hidden-sizes", "8", "--num-steps", "4"]
    for name, extra in (("single", []), ("pop", ["--num-seeds", "1"])):
        ppo.main(
            parse(ppo.Args, [*argv, "--num-envs", "1", *extra, "--run-dir", str(tmp_path / name)])
        )
    header, body = rows(tmp_path / "pop" / "metrics.csv")
    single = (tmp_path / "single" / "metrics.csv").read_text()
    assert "\n".join(",".join(r) for r in [header, *body]) + "\n" == single


@pytest.mark.parametrize("case", list(CASES))
def test_seed_k_of_a_population_is_seed_k_alone(case, tmp_path, recorded_actions):
    argv = CASES[case]
    S, k, N = 3, 1, 16
    keep = ["--checkpoint-every", "1", "--keep-checkpoints"]
    train(tmp_path / "pop", *argv, *keep, "--seed", "4", "--num-seeds", str(S))
    pop_actions = list(recorded_actions)
    recorded_actions.clear()
    train(tmp_path / "single", *argv, *keep, "--seed", str(4 + k))
    assert len(pop_actions) == len(recorded_actions) >= 3
    for a, b in zip(pop_actions, recorded_actions):
        np.testing.assert_array_equal(a[:, k * N : (k + 1) * N], b)  # the same actions sampled
    kept = sorted((tmp_path / "single" / "checkpoints").glob("step_*.pt"))[:3]
    for path in kept:  # actor and critic after each of the first 3 updates
        mine = checkpoint.load(tmp_path / "pop" / "checkpoints" / path.name)["policy"]
        state = checkpoint.load(path)
        alone = {**state["policy"], **{f"critic.{n}": v for n, v in state["value"].items()}}
        assert list(mine) == list(alone)
        a = torch.cat([mine[name][k].reshape(-1) for name in alone])
        b = torch.cat([value.reshape(-1) for value in alone.values()])
        err = (a - b).abs().max() / b.abs().max()  # relative to the parameter vector's scale
        assert err <= 1e-5, (path.name, float(err))
    header, mine = rows(tmp_path / "pop" / "metrics.csv", seed=4 + k)
    _, alone = rows(tmp_path / "single" / "metrics.csv")
    ret = header.index("train/episode_return")  # the same actions and rewards: the same mean
    assert [r[ret] for r in mine] == [r[ret] for r in alone]


def test_a_seed_does_not_depend_on_the_other_seeds(tmp_path, monkeypatch):
    argv = [*CASES["sequence"], "--seed", "0", "--num-seeds", "3", "--max-grad-norm", "0.05"]
    argv += ["--no-anneal-lr"]  # the perturbed learning rate stays
    train(tmp_path / "a", *argv)
    from controlrl import population_actor_critic as population

    adam = population.adam

    def perturbed(policy, lr):
        optimizer = adam(policy, lr=lr)
        optimizer.lrs[0] = 10 * lr  # seed 0 alone learns faster
        return optimizer

    monkeypatch.setattr(population, "adam", perturbed)
    train(tmp_path / "b", *argv)
    assert_only_seed_zero_moved(tmp_path / "a", tmp_path / "b")


def test_a_resumed_population_is_each_seed_resumed_alone(tmp_path):
    """A killed population resumes as its seeds' single runs resume (the bandits' streams and
    episodes in progress from the checkpoint): S = 1 against ppo.py alone, both resumed from
    iteration 2 of 5, and both the uninterrupted run byte for byte."""
    argv = [*CASES["sequence"], "--seed", "5", "--checkpoint-every", "2", "--keep-checkpoints"]
    for name, extra in (("single", []), ("pop", ["--num-seeds", "1"])):
        a, b = tmp_path / f"{name}_a", tmp_path / f"{name}_b"
        train(a, *argv, *extra)
        (b / "checkpoints").mkdir(parents=True)
        for part in ("config.json", "metrics.csv", *(["aggregate.csv"] if extra else [])):
            (b / part).write_bytes((a / part).read_bytes())
        kept = sorted((a / "checkpoints").glob("step_*.pt"))[0]
        (b / "checkpoints" / "latest.pt").write_bytes(kept.read_bytes())
        ppo.main(parse(ppo.Args, ["--resume", str(b)]))
    single = (tmp_path / "single_b" / "metrics.csv").read_text()
    header, body = rows(tmp_path / "pop_b" / "metrics.csv")
    assert "\n".join(",".join(r) for r in [header, *body]) + "\n" == single
    assert single == (tmp_path / "single_a" / "metrics.csv").read_text()  # bit for bit


def test_population_reward_scaler_is_each_seeds_scaler_to_the_bit():
    S, N, T = 3, 16, 6
    rng = np.random.default_rng(0)
    rewards = rng.standard_normal((T, S, N)).astype(np.float32)
    ended = rng.random((T, S, N)) < 0.3
    pop = PopulationRewardScaler(S, N, 0.99)
    mine = np.stack([pop(r.reshape(-1), e.reshape(-1)) for r, e in zip(rewards, ended)])
    for k in range(S):
        alone = RewardScaler(N, 0.99)
        theirs = np.stack([alone(r[k], e[k]) for r, e in zip(rewards, ended)])
        np.testing.assert_array_equal(mine.reshape(T, S, N)[:, k], theirs)
        assert pop.rms.var[k] == alone.rms.var and pop.rms.mean[k] == alone.rms.mean


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["--num-seeds", "0"], "--num-seeds must be >= 1, got 0"),
        (
            ["--num-seeds", "4", "--env-id", "dmc:cheetah-run"],
            "--num-seeds needs a bandit:, Gymnasium or envpool: env id",
        ),
        (["--num-seeds", "2", "--ratio", "sequence"], "--num-seeds needs --ratio step"),
        (["--num-seeds", "2", "--chebyshev-degree", "2"], "needs --chebyshev-degree 0"),
        (["--num-seeds", "1000000000"], "--num-seeds 1000000000: about"),
    ],
)
def test_bad_num_seeds_exit_2_with_one_line(argv, fragment, capsys, tmp_path):
    with pytest.raises(SystemExit) as exc:
        parse(ppo.Args, ["--env-id", "bandit:bernoulli-10", *argv, "--run-dir", str(tmp_path)])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and fragment in err[0], err
