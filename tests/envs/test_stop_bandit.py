"""The variable-length sequence bandit (envs/sequence_bandit.py StopBandit, bandit:sequence-stop-
V-P): the checker against brute force over every (prompt, answer), each env's episode ending at
its own first EOS (terminated) or at the cap (truncated), the group rollout's lengths, DAPO's
soft overlong punishment on those lengths through algos/grpo.py's batch, and the population
runner's refusal (its envs must end together)."""

import itertools

import numpy as np
import pytest
import torch

import envs
from algos import grpo
from controlrl.cli import parse
from controlrl.group import group_advantages
from controlrl.group_rollout import GroupCollector
from controlrl.nets import CategoricalPolicy
from controlrl.objective import overlong_penalty
from envs.bandits import lockstep

V, P = 2, 2  # tokens 0, 1; EOS = blank = 2; prompts of 1..2 tokens, a cap of 4 tokens
EOS = V


def brute_force(prompt, answer) -> tuple[bool, int]:
    """(reward, episode length) of an answer of L tokens: it ends at its first EOS, or is cut
    at L; reward iff the tokens before that EOS are the prompt's (before its blanks) reversed."""
    tokens = [int(x) for x in prompt if x != EOS]
    answer = [int(x) for x in answer]
    end = answer.index(EOS) if EOS in answer else None
    if end is None:
        return False, len(answer)
    return answer[:end] == tokens[::-1], end + 1


def all_prompts():
    """Every prompt with its probability: m uniform in 1..P, then m uniform tokens."""
    out = []
    for m in range(1, P + 1):
        for tokens in itertools.product(range(V), repeat=m):
            out.append(([*tokens] + [EOS] * (P - m), 1 / P * V**-m))
    return out


def test_checker_solver_and_episodes_agree_with_brute_force():
    prompts, weights = map(np.array, zip(*all_prompts(), strict=True))
    one = envs.make(f"bandit:sequence-stop-{V}-{P}", 1, seed=0)
    L = one.length
    assert (L, one.vocab, one.prompt_length, one.optimal_reward) == (2 * P, V + 1, P, 1.0)
    assert not one.lockstep and not lockstep(f"sequence-stop-{V}-{P}")
    assert lockstep("sequence-add-2-2") and lockstep("bernoulli-10")
    answers = np.array(list(itertools.product(range(V + 1), repeat=L)))  # [(V+1)^L, L]
    table = np.array([[brute_force(p, a)[0] for a in answers] for p in prompts])
    lengths = np.array([[brute_force(p, a)[1] for a in answers] for p in prompts])
    np.testing.assert_array_equal(one.check(answers[None], prompts[:, None]), table)
    assert one.check(one.solve(prompts), prompts).all()
    assert one.uniform_success == pytest.approx(float(weights @ table.mean(1)), rel=1e-12)
    # every (prompt, answer) stepped token by token: each env on its own clock
    num = len(prompts) * len(answers)
    vec = envs.make(f"bandit:sequence-stop-{V}-{P}", num, seed=0)
    prompt_of, answer_of = np.repeat(prompts, len(answers), 0), np.tile(answers, (len(prompts), 1))
    obs, _ = vec.reset(seed=0, options={"contexts": prompt_of})
    reward, ended_at = np.zeros(num), np.zeros(num, np.int64)
    cut = np.zeros(num, bool)
    for t in range(L):
        position = obs[:, -L:].argmax(1)
        np.testing.assert_array_equal(position[ended_at == 0], t)  # the running ones' step
        obs, r, terminated, truncated, info = vec.step(answer_of[:, t])
        first = (terminated | truncated) & (ended_at == 0)
        reward[first], ended_at[first], cut[first] = r[first], t + 1, truncated[first]
        assert not (terminated & truncated).any()
        if first.any():  # the final observation holds the answer; obs restarts those envs
            np.testing.assert_array_equal(info["_final_obs"], terminated | truncated)
            np.testing.assert_array_equal(obs[first, -L:].argmax(1), 0)
            assert not obs[first, P * (V + 1) : -L].any()
    np.testing.assert_array_equal(reward, table.ravel())
    np.testing.assert_array_equal(ended_at, lengths.ravel())
    np.testing.assert_array_equal(cut, ~(answer_of == EOS).any(1))  # cut iff no EOS at all
    assert set(np.unique(ended_at)) == set(range(1, L + 1))


def test_overlong_punishment_on_the_bandits_own_episode_lengths():
    """A group rollout of sequence-stop-2-4 (cap 8): every env runs its own episode to its own
    length, and --overlong-max 8 --overlong-cache 3 takes DAPO's (5 - length) / 3 off each
    score from length 6 on (-1 at the cap) before the group advantage, exactly."""
    torch.manual_seed(0)
    vec = envs.make("bandit:sequence-stop-2-4", 32, seed=0, group_size=8)
    policy = CategoricalPolicy(vec.single_observation_space.shape[0], 3, (16,))
    collector = GroupCollector(vec, 8, None, max_steps=1000)
    rollout = collector.collect(policy.sample, seed=3)
    T = rollout.num_steps
    assert T == 8 and len(set(rollout.lengths.tolist())) >= 4  # episodes differ in length
    np.testing.assert_array_equal(rollout.valid.sum(0), rollout.lengths)
    np.testing.assert_array_equal(rollout.valid, np.arange(T)[:, None] < rollout.lengths)
    old_logp, _, _ = rollout.log_probs(policy)
    args = grpo.Args(num_envs=32, group_size=8, overlong_max=8, overlong_cache=3, kl_coef=0.0)
    batch, _, _ = grpo.grpo_batch(rollout, old_logp, policy, args)
    lengths = torch.from_numpy(rollout.lengths)
    penalty, n = overlong_penalty(lengths, 8, 3), rollout.lengths
    np.testing.assert_array_equal(
        penalty.numpy(), np.select([n <= 5, n < 8], [0.0, (5 - n) / 3], -1.0), strict=True
    )
    shaped = torch.from_numpy(rollout.returns) + penalty
    want = group_advantages(shaped.reshape(4, 8)).reshape(-1).float()
    torch.testing.assert_close(batch["advantages"].reshape(T, 32)[0], want, rtol=0, atol=0)
    assert float(penalty.min()) < 0  # some episode ran past 5 tokens


def test_a_population_refuses_it_with_one_line(capsys, tmp_path):
    argv = ["--env-id", "bandit:sequence-stop-2-4", "--num-seeds", "2", "--run-dir", str(tmp_path)]
    with pytest.raises(SystemExit) as exc:
        parse(grpo.Args, argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--num-seeds needs envs that end" in err, err
