"""HAPO's synthetic success injection (controlrl/injection.py): which groups the operator
replaces (all members failed and the Thompson draw below the threshold), what it writes (the
teacher's arm, the success reward, the rollout policy's log-prob of that arm), that the gate's
counts are the policy's own outcomes, and through algos/grpo.py a resumed run and a population
equal to the runs alone."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import envs
from algos import grpo
from controlrl import checkpoint
from controlrl.cli import parse
from controlrl.group_rollout import GroupRollout
from controlrl.injection import GATE_STREAM, SuccessInjection, failed_groups, gate_draws
from controlrl.nets import CategoricalPolicy

torch.set_num_threads(1)
QUIET = ["--no-tensorboard", "--no-progress", "--eval-every", "0", "--eval-episodes", "2"]


def rollout_of(contexts, arms, returns, num_contexts=4, group_size=4) -> GroupRollout:
    """A one-step rollout: env n pulled arm arms[n] in context contexts[n] for returns[n]."""
    N = len(contexts)
    obs = np.zeros((1, N, num_contexts), np.float32)
    obs[0, np.arange(N), contexts] = 1.0
    return GroupRollout(
        obs=obs,
        actions=np.asarray(arms, np.int64)[None],
        valid=np.ones((1, N), bool),
        ended=np.ones((1, N), bool),
        returns=np.asarray(returns, np.float64),
        lengths=np.ones(N, np.int64),
        group_size=group_size,
    )


def test_failed_groups_are_those_without_a_success():
    scores = torch.tensor([[0.0, 0.0, 0.0], [0.0, 1.0, 0.0], [1.0, 1.0, 1.0]])
    assert failed_groups(scores, 1.0).tolist() == [True, False, False]


def test_the_gate_draws_one_beta_per_group_from_the_seed_and_iteration():
    a, b = np.array([[1.0, 3.0]]), np.array([[2.0, 1.0]])
    got = gate_draws([7], 5, a, b)
    want = np.random.Generator(np.random.PCG64([7, 5, GATE_STREAM])).beta(a[0], b[0])
    np.testing.assert_array_equal(got[0], want)
    assert not np.array_equal(got, gate_draws([7], 6, a, b))  # a new draw every iteration


def test_without_a_gate_every_failed_group_gets_the_teacher_and_nothing_else_changes():
    env = envs.make("bandit:contextual-4-5", 8, 0, group_size=4)
    torch.manual_seed(0)
    policy = CategoricalPolicy(4, 5, (8,))
    for p in policy.parameters():  # log-probs far apart: a stale one cannot pass for the new
        p.data.normal_()
    op = SuccessInjection(env, [1], group_size=4, threshold=1.0)
    teacher = int(env.means[2].argmax())
    first = (teacher + 1) % 5  # the member replaced pulled another arm
    # group 0 (context 2) all failed, group 1 (context 3) one success
    arms = [first, 1, 2, 3, 4, 0, 1, 2]
    rollout = rollout_of([2] * 4 + [3] * 4, arms, [0, 0, 0, 0, 0, 1, 0, 0])
    old_logp, _, _ = rollout.log_probs(policy)
    before = rollout.actions.copy(), rollout.returns.copy()
    new, logp, injected = op.inject(rollout, old_logp, policy)
    assert injected.tolist() == [True, False]
    assert new.actions[0, 0] == teacher and new.returns[0] == 1.0
    np.testing.assert_array_equal(new.actions[0, 1:], before[0][0, 1:])
    np.testing.assert_array_equal(new.returns[1:], before[1][1:])
    obs = torch.from_numpy(rollout.obs[0, :1])
    want = policy.log_prob_at(policy.dist_params(obs), torch.tensor([teacher]))
    assert torch.allclose(logp[0, 0], want[0])
    assert not torch.allclose(old_logp[0, 0], want[0])
    assert torch.equal(logp[0, 1:], old_logp[0, 1:])
    # the caller's rollout is untouched (it is the one logged)
    np.testing.assert_array_equal(rollout.actions, before[0])
    np.testing.assert_array_equal(rollout.returns, before[1])


def test_the_gate_counts_the_policys_own_outcomes_and_closes_on_a_learnt_context():
    env = envs.make("bandit:contextual-4-5", 4, 0, group_size=4)
    policy = CategoricalPolicy(4, 5, (8,))
    op = SuccessInjection(env, [3], group_size=4, threshold=0.5)
    op.counts[0, 1] = [200, 0]  # context 1: 200 successes, no failure: theta ~ Beta(201, 1)
    failed = rollout_of([1] * 4, [0, 1, 2, 3], [0, 0, 0, 0])
    old_logp, _, _ = failed.log_probs(policy)
    for _ in range(20):  # P(theta < 0.5) = 0.5^201: never
        _, _, injected = op.inject(failed, old_logp, policy)
        assert not injected.any()
    # the injected successes are not counted: only the 80 failures of the rollouts
    assert op.counts[0, 1].tolist() == [200, 80]
    fresh = SuccessInjection(env, [3], group_size=4, threshold=0.5)
    hits = 0
    for _ in range(200):  # no history: theta ~ Beta(1, 1 + 4 k) after k failed groups
        hits += int(fresh.inject(failed, old_logp, policy)[2].any())
    assert hits > 190


def test_threshold_and_bandit_kind_are_checked(capsys, tmp_path):
    for argv, fragment in [
        (["--env-id", "bandit:bernoulli-10", "--inject-threshold", "0"], "--inject-threshold"),
        (["--env-id", "bandit:bernoulli-10", "--inject-threshold", "1.5"], "must be in (0, 1]"),
        (["--env-id", "bandit:gaussian-3", "--inject-demos"], "--inject-demos needs"),
        (["--env-id", "bandit:sequence-reverse-2-3", "--inject-demos"], "--inject-demos needs"),
    ]:
        with pytest.raises(SystemExit) as exc:
            parse(grpo.Args, [*argv, "--run-dir", str(tmp_path / "x")])
        assert exc.value.code == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and fragment in err, err


def test_a_killed_injection_run_resumes_bit_for_bit(tmp_path):
    argv = ["--env-id", "bandit:contextual-4-5", "--total-timesteps", "96", "--seed", "3"]
    argv += ["--hidden-sizes", "8", "--num-envs", "16", "--group-size", "4", "--inject-demos"]
    argv += ["--checkpoint-every", "2", "--keep-checkpoints", *QUIET]
    a, b = tmp_path / "a", tmp_path / "b"
    grpo.main(parse(grpo.Args, [*argv, "--run-dir", str(a)]))
    (b / "checkpoints").mkdir(parents=True)
    for name in ("config.json", "metrics.csv"):
        (b / name).write_bytes((a / name).read_bytes())
    (b / "checkpoints" / "latest.pt").write_bytes(
        (a / "checkpoints" / "step_000000032.pt").read_bytes()
    )
    grpo.main(parse(grpo.Args, ["--resume", str(b)]))
    assert (a / "metrics.csv").read_bytes() == (b / "metrics.csv").read_bytes()
    gate_a = checkpoint.load(a / "checkpoints" / "latest.pt")["injection"]
    gate_b = checkpoint.load(b / "checkpoints" / "latest.pt")["injection"]
    assert gate_a["iteration"] == gate_b["iteration"] == 6
    assert torch.equal(gate_a["counts"], gate_b["counts"])
    rows = (a / "metrics.csv").read_text().splitlines()
    col = rows[0].split(",").index("train/inject_frac")
    assert any(float(r.split(",")[col]) > 0 for r in rows[1:])  # it did inject


def test_seed_k_of_a_population_gate_is_the_gate_of_seed_k_alone():
    """Rows of a population's rollout (leading seed axis) get the decisions and counts the
    single runs of their seeds get: each seed its own draws, its own posterior."""
    env = envs.make("bandit:contextual-4-5", 16, 0, group_size=4)
    policy = CategoricalPolicy(4, 5, (8,))
    seeds = [4, 5]
    population = SuccessInjection(env, seeds, group_size=4, threshold=0.2)
    alone = [SuccessInjection(env, [s], group_size=4, threshold=0.2) for s in seeds]
    rng = np.random.default_rng(0)
    opened = closed = 0
    for _ in range(10):
        rows = [
            rollout_of(rng.integers(0, 4, 4).repeat(4), rng.integers(0, 5, 16),
                       (rng.random(16) < 0.1).astype(float))
            for _ in seeds
        ]  # fmt: skip
        both = GroupRollout(
            obs=np.stack([r.obs for r in rows]),
            actions=np.stack([r.actions for r in rows]),
            valid=rows[0].valid,
            ended=rows[0].ended,
            returns=np.stack([r.returns for r in rows]),
            lengths=np.stack([r.lengths for r in rows]),
            group_size=4,
            lead=(2,),
        )
        logp, _, _ = both.log_probs(policy)
        new, _, injected = population.inject(both, logp, policy)
        for k, r in enumerate(rows):
            one, _, mine = alone[k].inject(r, r.log_probs(policy)[0], policy)
            assert torch.equal(injected[k], mine)
            np.testing.assert_array_equal(new.actions[k], one.actions)
            np.testing.assert_array_equal(new.returns[k], one.returns)
            opened += int(mine.sum())
            closed += int((~mine & failed_groups(r.scores(), 1.0)).sum())
    for k in range(2):
        np.testing.assert_array_equal(population.counts[k], alone[k].counts[0])
    assert opened > 0 and closed > 0  # the draws decided: the gate opened and closed
