"""Population runs (controlrl/population.py): S = 1 is the single run to the byte; seed k of a
population is `--seed k` alone up to rounding (parameters after each update, the actions it
samples) and does not depend on the other seeds; a killed population resumes bit for bit;
the batched bandit draws each seed's stream; bad --num-seeds exits 2 with one line."""

from __future__ import annotations

import copy
import csv
import json

import numpy as np
import pytest
import torch
from population_rows import assert_only_seed_zero_moved, rows, without_seed

import envs
from algos import grpo, tpo
from controlrl import checkpoint
from controlrl.cli import parse
from controlrl.nets import CategoricalPolicy
from controlrl.population import PopulationPolicy
from envs import bandits

QUIET = ["--no-tensorboard", "--no-progress", "--eval-every", "0", "--eval-episodes", "2"]
SMALL = ["--hidden-sizes", "8", "--num-envs", "16", "--group-size", "4"]
CASES = {  # algo module, flags: a sequence bandit (per-row forward) and a one-context one
    "grpo-seq-kalman": (
        grpo,
        [
            "--env-id",
            "bandit:sequence-reverse-2-3",
            "--ratio",
            "kalman",
            "--total-timesteps",
            "240",
        ],
    ),
    "grpo-ctx-filter": (
        grpo,
        [
            "--env-id",
            "bandit:contextual-4-5",
            "--num-minibatches",
            "2",
            "--filter-zero-variance",
            "--total-timesteps",
            "80",
        ],
    ),  # fmt: skip
    "tpo-bernoulli": (tpo, ["--env-id", "bandit:bernoulli-10", "--total-timesteps", "80"]),
    "tpo-bimodal": (tpo, ["--env-id", "bandit:bimodal", "--total-timesteps", "80"]),
}


def train(module, run_dir, *argv):
    module.main(parse(module.Args, [*argv, *SMALL, *QUIET, "--run-dir", str(run_dir)]))


@pytest.mark.parametrize("case", ["grpo-seq-kalman", "tpo-bernoulli"])
def test_one_seed_population_is_the_single_run_to_the_byte(case, tmp_path):
    module, argv = CASES[case]
    train(module, tmp_path / "single", *argv, "--seed", "3")
    train(module, tmp_path / "pop", *argv, "--seed", "3", "--num-seeds", "1")
    single = (tmp_path / "single" / "metrics.csv").read_text()
    assert without_seed(tmp_path / "pop" / "metrics.csv") == single
    final = [json.loads((tmp_path / d / "final_eval.json").read_text()) for d in ("single", "pop")]
    assert final[1]["eval_return_per_seed"] == [final[0]["eval_return_mean"]]


@pytest.mark.parametrize("case", list(CASES))
def test_seed_k_of_a_population_is_seed_k_alone(case, tmp_path, recorded_actions):
    module, argv = CASES[case]
    S, k, N = 3, 1, 16
    keep = ["--checkpoint-every", "1", "--keep-checkpoints"]
    train(module, tmp_path / "pop", *argv, *keep, "--seed", "4", "--num-seeds", str(S))
    pop_actions = list(recorded_actions)
    recorded_actions.clear()
    train(module, tmp_path / "single", *argv, *keep, "--seed", str(4 + k))
    assert len(pop_actions) == len(recorded_actions) >= 3
    for a, b in zip(pop_actions, recorded_actions):
        np.testing.assert_array_equal(a[:, k * N : (k + 1) * N], b)  # the same actions sampled
    kept = sorted((tmp_path / "single" / "checkpoints").glob("step_*.pt"))[:3]
    for path in kept:  # the parameters after each of the first 3 updates
        mine = checkpoint.load(tmp_path / "pop" / "checkpoints" / path.name)["policy"]
        alone = checkpoint.load(path)["policy"]
        a = torch.cat([mine[name][k].reshape(-1) for name in alone])
        b = torch.cat([value.reshape(-1) for value in alone.values()])
        err = (a - b).abs().max() / b.abs().max()  # relative to the parameter vector's scale
        assert err <= 1e-5, (path.name, float(err))
    _, mine = rows(tmp_path / "pop" / "metrics.csv", seed=4 + k)
    _, alone = rows(tmp_path / "single" / "metrics.csv")
    ret = 1  # train/episode_return: the same actions and rewards give the same mean exactly
    assert [r[ret] for r in mine] == [r[ret] for r in alone]


def test_a_seed_does_not_depend_on_the_other_seeds(tmp_path, monkeypatch):
    module, argv = CASES["grpo-seq-kalman"]
    argv = [*argv, "--seed", "0", "--num-seeds", "3", "--max-grad-norm", "0.05"]  # clipping acts
    train(module, tmp_path / "a", *argv)
    adam = module.adam

    def perturbed(policy, lr):
        optimizer = adam(policy, lr=lr)
        optimizer.lrs[0] = 10 * lr  # seed 0 alone learns faster
        return optimizer

    monkeypatch.setattr(module, "adam", perturbed)
    train(module, tmp_path / "b", *argv)
    assert_only_seed_zero_moved(tmp_path / "a", tmp_path / "b")


def test_killed_population_resumes_bit_for_bit_with_aggregate_intervals(tmp_path):
    module, argv = CASES["tpo-bernoulli"]
    argv = [*argv, "--total-timesteps", "96", "--seed", "2", "--num-seeds", "5"]
    argv += ["--checkpoint-every", "2", "--keep-checkpoints"]
    train(module, tmp_path / "a", *argv)
    a, b = tmp_path / "a", tmp_path / "b"
    (b / "checkpoints").mkdir(parents=True)
    for name in ("config.json", "metrics.csv", "aggregate.csv"):
        (b / name).write_bytes((a / name).read_bytes())
    (b / "checkpoints" / "latest.pt").write_bytes(
        (a / "checkpoints" / "step_000000032.pt").read_bytes()
    )
    module.main(parse(module.Args, ["--resume", str(b)]))
    for name in ("metrics.csv", "aggregate.csv"):
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
    with (a / "aggregate.csv").open() as f:
        agg = list(csv.DictReader(f))
    with (a / "metrics.csv").open() as f:
        per_seed = list(csv.DictReader(f))
    assert len(agg) == 6 and len(per_seed) == 30 and agg[0]["seeds"] == "5"
    last = [float(r["train/entropy"]) for r in per_seed if r["step"] == agg[-1]["step"]]
    mean, lo, hi = (float(agg[-1][f"train/entropy{s}"]) for s in ("", "_lo", "_hi"))
    assert mean == pytest.approx(np.mean(last)) and lo < mean < hi
    # the t-interval of 5 seeds: t_{0.975, 4} = 2.776 standard errors either side
    assert hi - mean == pytest.approx(2.776 * np.std(last, ddof=1) / np.sqrt(5), rel=1e-3)


@pytest.mark.parametrize("name", ["contextual-4-5", "sequence-reverse-2-3", "gaussian-3"])
def test_population_bandit_gives_each_seed_its_single_stream(name):
    S, N, G = 3, 8, 4
    pop = bandits.make_population(name, S, N, G)
    alone = [envs.make(f"bandit:{name}", N, 0, group_size=G) for _ in range(S)]
    seeds = [11, 5, 11]  # seeds 0 and 2 share a seed: the same stream twice
    obs = pop.reset(seed=seeds)[0].reshape(S, N, -1)
    single = [env.reset(seed=s)[0] for env, s in zip(alone, seeds)]
    rng = np.random.default_rng(0)
    rewards = []
    for _ in range(7):
        np.testing.assert_array_equal(obs, np.stack(single))
        actions = rng.integers(0, pop.single_action_space.n, (1, N)).repeat(S, 0)
        out = pop.step(actions.reshape(-1))
        outs = [env.step(a) for env, a in zip(alone, actions)]
        rewards.append(out[1].reshape(S, N))
        np.testing.assert_array_equal(rewards[-1], np.stack([o[1] for o in outs]))
        obs, single = out[0].reshape(S, N, -1), [o[0] for o in outs]
    rewards = np.stack(rewards, 1)  # [S, steps, N]: same actions, each seed's own draws
    assert np.array_equal(rewards[0], rewards[2]) and not np.array_equal(rewards[0], rewards[1])


@pytest.mark.parametrize("hidden", [16, 9])
def test_population_adam_on_the_whole_rows_steps_each_row_to_the_bit(hidden):
    # CategoricalPolicy(3, 16, (h,)): 20 h + 16 parameters, 336 (21 cache lines of 16 floats)
    # for h = 16; 196 for h = 9, its rows padded with zeros to 208
    torch.manual_seed(0)
    pop = PopulationPolicy.build([CategoricalPolicy(3, 16, (hidden,)) for _ in range(64)])
    P = 20 * hidden + 16
    assert pop.num_params == P and pop.flat.shape == (64, -(-P // 16) * 16)
    twin, start = copy.deepcopy(pop), pop.params().clone()
    adam, per_row = pop.population_adam(0.01, 1e-5), twin.population_adam(0.01, 1e-5)
    assert adam.whole_rows
    per_row.whole_rows = False
    gen = torch.Generator().manual_seed(1)
    everyone = torch.ones(64, dtype=torch.bool)
    for _ in range(4):
        grad = torch.randn(64, P, generator=gen)
        pop.flat.grad[:, :P] = grad
        twin.flat.grad[:, :P] = grad
        adam.step(everyone)
        per_row.step(everyone)
        assert torch.equal(pop.flat, twin.flat)
        assert torch.equal(adam.exp_avg_sq, per_row.exp_avg_sq)
    assert not torch.equal(pop.params(), start)
    assert not pop.flat[:, P:].any()  # the padding stays zero


def test_constant_obs_refuses_rows_that_differ_within_a_seed():
    """A constant-observation population runs one row per seed: rows that differ (one entry
    of one seed, or a NaN) are refused, not silently replaced by the first row."""
    torch.manual_seed(0)
    pop = PopulationPolicy.build([CategoricalPolicy(2, 5, (8,)) for _ in range(3)])
    pop.constant_obs = True
    pop.generators = [torch.Generator().manual_seed(k) for k in range(3)]
    obs = torch.randn(3, 1, 2).expand(3, 4, 2).contiguous()
    with torch.inference_mode():
        pop.sample(obs.reshape(12, 2))  # every seed's rows equal (seeds differ): fine
        for bad in (1e-6, float("nan")):
            odd = obs.clone()
            odd[2, 3, 1] += bad
            with pytest.raises(ValueError, match="constant_obs"):
                pop.sample(odd.reshape(12, 2))


@pytest.mark.parametrize("constant_obs", [True, False])
def test_per_seed_draws_on_two_threads_are_the_one_thread_draws(constant_obs):
    def draws(threads: int):
        torch.manual_seed(0)
        pop = PopulationPolicy.build([CategoricalPolicy(2, 5, (8,)) for _ in range(7)])
        pop.constant_obs = constant_obs
        pop.generators = [torch.Generator().manual_seed(100 + k) for k in range(7)]
        adam = pop.population_adam(0.01, 1e-5)
        obs = torch.randn(7, 1, 2).expand(7, 6, 2).reshape(42, 2)
        previous = torch.get_num_threads()
        torch.set_num_threads(threads)
        try:
            with torch.inference_mode():  # as the collector calls it
                actions = [pop.sample(obs) for _ in range(3)]
            perms = adam.permutations(
                10, torch.tensor([True, False, True, True, True, False, True])
            )
        finally:
            torch.set_num_threads(previous)
        return torch.stack(actions), perms, [g.get_state() for g in pop.generators]

    (a1, p1, g1), (a2, p2, g2) = draws(1), draws(2)
    assert torch.equal(a1, a2) and torch.equal(p1, p2)
    assert all(torch.equal(x, y) for x, y in zip(g1, g2))
    assert torch.equal(p1[1], torch.arange(10)) and not torch.equal(p1[0], torch.arange(10))
    assert not torch.equal(a1[:, :6], a1[:, 6:12])  # seeds draw from their own streams


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["--num-seeds", "0"], "--num-seeds must be >= 1, got 0"),
        (["--num-seeds", "4", "--env-id", "CartPole-v1"], "--num-seeds needs a bandit: env id"),
        (["--num-seeds", "1000000000"], "--num-seeds 1000000000: about"),
        (
            ["--num-seeds", "2", "--ratio", "sequence", "--num-minibatches", "2"],
            "--num-seeds with --ratio sequence needs --num-minibatches 1",
        ),
    ],
)
def test_bad_num_seeds_exit_2_with_one_line(argv, fragment, capsys, tmp_path):
    with pytest.raises(SystemExit) as exc:
        parse(
            grpo.Args, ["--env-id", "bandit:bernoulli-10", *argv, "--run-dir", str(tmp_path / "r")]
        )
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and fragment in err[0], err
    assert not (tmp_path / "r").exists()
