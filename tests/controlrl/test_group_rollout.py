"""controlrl/group_rollout.py: groups share a start (Gymnasium: the same reset seed; bandits: the
same context), every episode is whole (a prefix of valid steps, then padding that ends a segment
at every step), returns and lengths are the episodes' own, and a rollout is a function of its
seed and the torch RNG."""

import numpy as np
import pytest
import torch

import envs
from controlrl.group_rollout import GroupCollector, make_group_envs
from controlrl.nets import make_policy

# the scripts' default (--torch-threads 1): small nets on two threads contend with other jobs
torch.set_num_threads(1)


def collector(env_id: str, num_envs: int, group_size: int, max_steps: int = 500):
    vec = make_group_envs(env_id, num_envs, group_size, seed=0)
    return GroupCollector(vec, group_size, None, max_steps), vec


def random_act(space):
    def act(obs):
        n = obs.shape[0]
        if hasattr(space, "n"):
            return torch.randint(space.n, (n,))
        return torch.rand(n, *space.shape) * 2 - 1

    return act


def test_gym_groups_start_from_the_same_state_and_episodes_are_whole():
    coll, vec = collector("CartPole-v1", num_envs=6, group_size=3)
    torch.manual_seed(0)
    roll = coll.collect(random_act(vec.single_action_space), seed=11)
    first = roll.obs[0].reshape(2, 3, -1)  # [groups, G, d]
    assert np.array_equal(first[:, 0], first[:, 1]) and np.array_equal(first[:, 0], first[:, 2])
    assert not np.array_equal(first[0, 0], first[1, 0])  # groups start apart
    T = roll.num_steps
    lengths = roll.valid.sum(0)
    assert np.array_equal(lengths, roll.lengths) and T == lengths.max()
    for n in range(6):  # valid is a prefix: the episode, then padding
        assert roll.valid[: lengths[n], n].all() and not roll.valid[lengths[n] :, n].any()
        assert roll.ended[lengths[n] - 1 :, n].all() and not roll.ended[: lengths[n] - 1, n].any()
    # CartPole pays 1 a step: the return is the episode's length, not the padding's
    assert np.array_equal(roll.returns, lengths.astype(float))
    assert len(set(lengths.tolist())) > 1  # episodes of different lengths in one rollout


def test_rollout_is_a_function_of_seed_and_torch_rng():
    coll, vec = collector("CartPole-v1", num_envs=4, group_size=2)
    act = random_act(vec.single_action_space)
    torch.manual_seed(3)
    a = coll.collect(act, seed=5)
    a = (a.obs.copy(), a.returns.copy())
    torch.manual_seed(3)
    b = coll.collect(act, seed=5)
    assert np.array_equal(a[0], b.obs) and np.array_equal(a[1], b.returns)
    torch.manual_seed(3)
    c = coll.collect(act, seed=6)
    assert not np.array_equal(a[0][0], c.obs[0])


def test_bandit_groups_share_contexts_and_sequences_have_length_L():
    coll, vec = collector("bandit:contextual-8-5", num_envs=12, group_size=4)
    assert coll.reset_seeds(7) == 7  # the bandit groups its envs itself
    roll = coll.collect(random_act(vec.single_action_space), seed=7)
    ctx = roll.obs[0].argmax(-1).reshape(3, 4)
    assert (ctx == ctx[:, :1]).all() and roll.num_steps == 1 and roll.valid.all()
    coll, vec = collector("bandit:sequence-reverse-2-3", num_envs=4, group_size=2)
    policy = make_policy(vec.single_observation_space, vec.single_action_space, (8,))
    roll = coll.collect(policy.sample, seed=1)
    assert roll.num_steps == 3 and roll.valid.all() and roll.ended[-1].all()
    prompts = roll.obs[0][:, :6].reshape(4, 3, 2).argmax(-1)
    answers = roll.actions.T  # [N, L]
    expected = vec.check(answers, prompts).astype(float)
    assert np.array_equal(roll.returns, expected)
    logp, entropy, _ = roll.log_probs(policy)
    assert logp.shape == (3, 4) and torch.allclose(
        entropy, entropy.new_full((3, 4), np.log(2)), atol=1e-3
    )


def test_episode_longer_than_max_steps_is_cut_there():
    coll, vec = collector("Pendulum-v1", num_envs=2, group_size=2, max_steps=7)
    roll = coll.collect(random_act(vec.single_action_space), seed=0)
    assert roll.num_steps == 7 and roll.valid.all() and roll.ended[-1].all()
    assert (roll.lengths == 7).all()


def test_unknown_group_size_is_refused():
    vec = envs.make("CartPole-v1", 4, 0)
    with pytest.raises(ValueError, match="group_size"):
        GroupCollector(vec, 3, None, 10)
    bandit = envs.make("bandit:contextual-4-5", 4, 0)  # not grouped: contexts would differ
    with pytest.raises(ValueError, match="groups its envs by 1"):
        GroupCollector(bandit, 2, None, 10)
