"""Bandit backend (envs/bandits.py, envs/sequence_bandit.py): spaces, seeding, the stored truth
against samples, groups sharing a context, the sequence checker against brute force, id and
argument errors, and the shared Collector consuming a bandit."""

import itertools

import gymnasium as gym
import numpy as np
import pytest
import torch

import envs
from controlrl.buffers import RolloutBuffer
from controlrl.cli import ArgError, CommonArgs
from controlrl.rollout import Collector
from envs.bandits import EXAMPLES, FORMS

ALL = [f"bandit:{name}" for name in EXAMPLES]
# per example: observation size, number of discrete actions (None: Box of shape (1,)), steps
# per episode
SHAPES = {
    "bernoulli-10": (1, 10, 1),
    "gaussian-10": (1, 10, 1),
    "sparse-1000": (1, 1000, 1),
    "contextual-16-10": (16, 10, 1),
    "onehot-100-10": (100, 10, 1),
    "continuous": (1, None, 1),
    "bimodal": (1, None, 1),
    "sequence-reverse-2-8": (2 * 8 + 2 * 8 + 8, 2, 8),  # prompt, answer so far, position
    "sequence-summod-2-8": (2 * 8 + 8, 2, 8),
    "sequence-add-2-3": (2 * 2 * 3 + 2 * 4 + 4, 2, 4),  # two 3-digit numbers, a 4-digit sum
}


def pull(env, arms, contexts=None):
    """One step of every env with actions `arms` (after a reset with these contexts)."""
    env.reset(seed=0, options=None if contexts is None else {"contexts": contexts})
    return env.step(np.asarray(arms))[1]


@pytest.mark.parametrize("name", EXAMPLES)
def test_spaces_shapes_and_episode_length(name):
    obs_dim, num_actions, length = SHAPES[name]
    vec = envs.make(f"bandit:{name}", 6, seed=0)
    assert isinstance(vec, gym.vector.VectorEnv) and vec.num_envs == 6
    assert vec.single_observation_space.shape == (obs_dim,)
    if num_actions is None:
        assert isinstance(vec.single_action_space, gym.spaces.Box)
        assert vec.single_action_space.shape == (1,)
    else:
        assert vec.single_action_space == gym.spaces.Discrete(num_actions)
    obs, _ = vec.reset(seed=0)
    assert obs.shape == (6, obs_dim) and obs.dtype == np.float32
    assert vec.observation_space.contains(obs)
    for t in range(2 * length):
        obs, reward, terminated, truncated, info = vec.step(vec.action_space.sample())
        assert obs.shape == (6, obs_dim) and vec.observation_space.contains(obs)
        assert reward.shape == (6,) and terminated.shape == truncated.shape == (6,)
        assert terminated.dtype == truncated.dtype == bool and not truncated.any()
        ends = (t + 1) % length == 0
        assert terminated.all() == ends and terminated.any() == ends
        if ends:  # the final observation is the one acted on, obs already the next episode's
            assert info["_final_obs"].all() and info["final_obs"].shape == (6, obs_dim)
        elif vec.sequence:
            assert not reward.any()  # the reward of a sequence comes at its last token


@pytest.mark.parametrize("name", EXAMPLES)
def test_same_seed_same_stream(name):
    def run(seed, actions_seed=0):
        vec = envs.make(f"bandit:{name}", 5, seed=actions_seed)
        out = [vec.reset(seed=seed)[0].ravel()]
        for _ in range(24):
            obs, reward, *_ = vec.step(vec.action_space.sample())
            out += [obs.ravel(), reward]
        return np.concatenate(out)

    np.testing.assert_array_equal(run(3), run(3))
    random = ("bernoulli", "gaussian", "contextual", "onehot", "sequence-reverse", "sequence-add")
    if name.startswith(random):
        # rewards or contexts are random: another seed, the same actions, another stream
        assert not np.array_equal(run(3), run(4))


@pytest.mark.parametrize("kind", ["bernoulli", "gaussian"])
def test_empirical_arm_means_match_the_stored_truth(kind):
    vec = envs.make(f"bandit:{kind}-10", 10 * 4000, seed=0)
    arms = np.repeat(np.arange(10), 4000)
    reward = pull(vec, arms).reshape(10, 4000)
    means = vec.means[0]
    se = np.sqrt(means * (1 - means) / 4000) if kind == "bernoulli" else 1 / np.sqrt(4000)
    assert np.all(np.abs(reward.mean(1) - means) < 5 * se + 1e-12)
    if kind == "gaussian":  # unit-variance noise
        np.testing.assert_allclose(reward.std(1), 1.0, atol=0.05)
    assert vec.optimal_reward == means.max()
    assert len(np.unique(means)) == 10  # the instance's means are not all one value


def test_instance_is_fixed_per_id_and_changes_with_instance():
    a, b = envs.make("bandit:bernoulli-10", 1, 0), envs.make("bandit:bernoulli-10", 1, 5)
    np.testing.assert_array_equal(a.means, b.means)  # the run seed does not move the arms
    c = envs.make("bandit:bernoulli-10", 1, 0, instance=1)
    assert not np.array_equal(a.means, c.means)


def test_sparse_bandit_has_exactly_one_good_arm():
    vec = envs.make("bandit:sparse-1000", 1000, seed=0)
    means = vec.means[0]
    assert np.count_nonzero(means) == 1 and means.max() == 1.0 and vec.optimal_reward == 1.0
    reward = pull(vec, np.arange(1000))  # every arm once: reward is 1 on the good arm only
    np.testing.assert_array_equal(reward, means)
    np.testing.assert_array_equal(vec.expected_reward(np.arange(1000)), means)
    other = envs.make("bandit:sparse-1000", 1, 0, instance=1).means[0]
    assert np.argmax(other) != np.argmax(means)


def test_onehot_bandit_has_one_correct_arm_per_context():
    """TPO's multi-context bandit: reward 1 exactly on each context's correct arm."""
    vec = envs.make("bandit:onehot-100-10", 1000, seed=0)
    assert vec.means.shape == (100, 10) and vec.optimal_reward == 1.0
    np.testing.assert_array_equal((vec.means == 1).sum(1), 1)
    np.testing.assert_array_equal((vec.means == 0).sum(1), 9)
    assert len(np.unique(vec.means.argmax(1))) > 1  # not one arm for every context
    contexts = np.repeat(np.arange(100), 10)
    reward = pull(vec, np.tile(np.arange(10), 100), contexts)
    np.testing.assert_array_equal(reward, vec.means.ravel())
    obs, *_ = vec.step(np.zeros(1000, np.int64))
    drawn = obs.argmax(1)  # the next episodes' contexts, drawn uniformly
    np.testing.assert_array_equal(obs.sum(1), 1.0)
    assert len(np.unique(drawn)) > 90 and abs(drawn.mean() - 49.5) < 5


def test_bimodal_modes_are_equally_good_and_well_separated():
    vec = envs.make("bandit:bimodal", 2, seed=0)
    grid = np.arange(-10000, 10001)[:, None] / 10000  # exactly symmetric, holds +-0.5
    r = vec.expected_reward(grid)
    np.testing.assert_array_equal(r, r[::-1])  # symmetric about 0
    left, right = grid[:, 0] < 0, grid[:, 0] > 0
    assert r[left].max() == r[right].max() == vec.optimal_reward == 1.0
    assert grid[left][np.argmax(r[left]), 0] == -0.5 and grid[right][np.argmax(r[right]), 0] == 0.5
    assert vec.expected_reward(np.zeros((1, 1)))[0] < 1e-5  # a valley between the modes
    # the stepped reward is the stored one, and actions sampled around either mode earn the same
    rng = np.random.default_rng(0)
    noise = rng.normal(0, 0.1, (4000, 1)).astype(np.float32)
    pulled = envs.make("bandit:bimodal", 4000, seed=0)
    at_left, at_right = pull(pulled, noise - 0.5), pull(pulled, noise + 0.5)
    np.testing.assert_allclose(at_left, vec.expected_reward(noise - 0.5))
    np.testing.assert_allclose(at_left, at_right, rtol=1e-5)
    one = envs.make("bandit:continuous", 1, seed=0)
    r1 = one.expected_reward(grid)
    assert grid[np.argmax(r1), 0] == 0.5 and r1.max() == 1.0
    assert one.expected_reward(np.array([[-0.5]]))[0] < 1e-5  # one mode only


def test_contextual_hard_contexts_have_success_near_zero():
    c, k, n = 16, 10, 200
    vec = envs.make(f"bandit:contextual-{c}-{k}", c * k * n, seed=0)
    assert vec.hard.sum() == 4  # ceil(C / 4)
    uniform = vec.means.mean(1)  # success of a uniform policy per context
    assert np.all(uniform[vec.hard] <= 0.05) and np.all(uniform[~vec.hard] > 0.2)
    # each hard context is solvable: one arm succeeds with probability 1/2, the others never
    np.testing.assert_array_equal(np.count_nonzero(vec.means[vec.hard], axis=1), 1)
    np.testing.assert_array_equal(vec.means[vec.hard].max(1), 0.5)
    assert vec.optimal_reward == vec.means.max(1).mean()
    # every (context, arm) n times, contexts set through reset's options
    contexts = np.repeat(np.arange(c), k * n)
    arms = np.tile(np.repeat(np.arange(k), n), c)
    reward = pull(vec, arms, contexts).reshape(c, k, n).mean(2)
    se = np.sqrt(vec.means * (1 - vec.means) / n)
    assert np.all(np.abs(reward - vec.means) < 5 * se + 1e-12)
    # contexts drawn at reset are uniform, and uniform pulls in hard contexts rarely succeed
    vec.reset(seed=1)
    counts = np.bincount(vec.contexts, minlength=c) / vec.num_envs
    assert np.all(np.abs(counts - 1 / c) < 5 * np.sqrt(1 / c / vec.num_envs))
    hard_envs = vec.hard[vec.contexts]
    reward = vec.step(np.random.default_rng(0).integers(0, k, vec.num_envs))[1]
    assert reward[hard_envs].mean() < 0.07 and reward[~hard_envs].mean() > 0.3


def test_groups_share_a_context_and_draw_rewards_independently():
    vec = envs.make("bandit:contextual-16-10", 12, seed=0, group_size=4)
    obs, _ = vec.reset(seed=0)
    seen = set()
    for _ in range(20):
        groups = vec.contexts.reshape(3, 4)
        assert np.all(groups == groups[:, :1])
        np.testing.assert_array_equal(obs.argmax(1), vec.contexts)  # the one-hot is the context
        seen.update(groups[:, 0].tolist())
        before = vec.contexts.copy()
        obs, *_, info = vec.step(np.zeros(12, np.int64))
        np.testing.assert_array_equal(info["final_obs"].argmax(1), before)  # the one acted on
    assert len(seen) > 5  # contexts are redrawn per group at every autoreset
    seq = envs.make("bandit:sequence-reverse-3-4", 6, seed=0, group_size=3)
    seq.reset(seed=0)
    prompts = seq.contexts.reshape(2, 3, 4)
    assert np.all(prompts == prompts[:, :1]) and not np.array_equal(prompts[0], prompts[1])
    # independent rewards in a group: all-equal groups occur with frequency p^G + (1 - p)^G
    G, groups = 8, 20000
    bern = envs.make("bandit:bernoulli-10", G * groups, seed=0, group_size=G)
    arm = int(np.argmin(np.abs(bern.means[0] - 0.5)))
    p = bern.means[0, arm]
    reward = pull(bern, np.full(G * groups, arm)).reshape(groups, G)
    zero_var = np.mean(np.all(reward == reward[:, :1], axis=1))
    expected = p**G + (1 - p) ** G
    assert abs(zero_var - expected) < 5 * np.sqrt(expected * (1 - expected) / groups)


def test_reset_options_set_the_contexts():
    vec = envs.make("bandit:contextual-16-10", 4, seed=0)
    obs, _ = vec.reset(seed=0, options={"contexts": np.array([3, 3, 15, 0])})
    np.testing.assert_array_equal(vec.contexts, [3, 3, 15, 0])
    np.testing.assert_array_equal(obs.argmax(1), [3, 3, 15, 0])
    for bad in (np.array([0, 1, 2]), np.array([0, 1, 2, 16]), np.array([0.0, 1, 2, 3])):
        with pytest.raises(ValueError, match="^contexts"):
            vec.reset(options={"contexts": bad})


def brute_force_reward(rule, vocab, answer, prompt):
    """The rule written out, one sequence at a time."""
    if rule == "reverse":
        return all(answer[i] == prompt[len(answer) - 1 - i] for i in range(len(answer)))
    if rule == "add":  # numbers as integers, digits least significant first

        def value(digits):
            return sum(int(d) * vocab**i for i, d in enumerate(digits))

        half = len(prompt) // 2
        return value(answer) == value(prompt[:half]) + value(prompt[half:])
    return sum(answer) % vocab == 0


@pytest.mark.parametrize(
    "rule, vocab, size",
    [("reverse", 2, 3), ("reverse", 3, 2), ("summod", 2, 4), ("summod", 3, 3), ("add", 2, 2),
     ("add", 3, 2), ("add", 10, 1)],
)  # fmt: skip
def test_sequence_checker_and_optimum_agree_with_brute_force(rule, vocab, size):
    vec = envs.make(f"bandit:sequence-{rule}-{vocab}-{size}", 1, seed=0)
    length, prompt_length = vec.length, vec.prompt_length
    answers = np.array(list(itertools.product(range(vocab), repeat=length)))  # [V^L, L]
    prompts = np.array(list(itertools.product(range(vocab), repeat=prompt_length)), np.int64)
    prompts = prompts.reshape(len(prompts), prompt_length)  # [V^P, P]; [1, 0] without a prompt
    table = np.array(
        [[brute_force_reward(rule, vocab, a, p) for a in answers] for p in prompts]
    )  # [prompts, answers]
    num = len(prompts) * len(answers)
    vec = envs.make(f"bandit:sequence-{rule}-{vocab}-{size}", num, seed=0)
    assert vec.sequence and vec.rule == rule and vec.vocab == vocab
    np.testing.assert_array_equal(vec.check(answers[None], prompts[:, None]), table)
    assert vec.optimal_reward == table.max(1).mean() == 1.0
    assert vec.uniform_success == pytest.approx(table.mean(), rel=1e-12)
    assert vec.check(vec.solve(prompts), prompts).all()
    # the env, stepped token by token through every (prompt, answer), pays the same rewards
    prompt_of, answer_of = np.repeat(prompts, len(answers), 0), np.tile(answers, (len(prompts), 1))
    obs, _ = vec.reset(seed=0, options={"contexts": prompt_of})
    p_width = prompt_of.shape[1] * vocab
    decoded = obs[:, :p_width].reshape(num, -1, vocab).argmax(-1) if p_width else prompt_of
    np.testing.assert_array_equal(decoded, prompt_of)  # the prompt is in the observation
    for t in range(length):
        np.testing.assert_array_equal(obs[:, -length:].argmax(1), t)  # position one-hot
        obs, reward, terminated, _, info = vec.step(answer_of[:, t])
    np.testing.assert_array_equal(reward, table.ravel())
    assert terminated.all()
    emitted = info["final_obs"][:, p_width : p_width + length * vocab].reshape(num, length, vocab)
    np.testing.assert_array_equal(emitted.argmax(-1), answer_of)  # the whole answer, one-hot


@pytest.mark.parametrize(
    "env_id, match",
    [
        ("bandit:bernoulli-1", "bandit:bernoulli-1: K must be >= 2"),
        ("bandit:bernoulli-x", "bandit:bernoulli-x: expected the form 'bernoulli-K'"),
        ("bandit:contextual-3", "bandit:contextual-3: expected the form 'contextual-C-K'"),
        ("bandit:sequence-reverse-1-4", "V must be >= 2"),
        ("bandit:sequence-xor-2-3", "unknown env id 'sequence-xor-2-3' for backend 'bandit'"),
        ("bandit:bernouli-10", "closest: bernoulli-10"),
        ("bandit:continuous-2", "expected the form 'continuous'"),
    ],
)
def test_bad_ids_name_the_id(env_id, match):
    with pytest.raises(envs.UnknownEnvError, match=match):
        envs.check_env_id(env_id)
    with pytest.raises(envs.UnknownEnvError, match=match):
        envs.make(env_id, 1, seed=0)


def test_unknown_name_lists_every_form_and_the_cli_names_the_flag():
    with pytest.raises(envs.UnknownEnvError) as exc:
        envs.check_env_id("bandit:two-arm")
    assert all(form in str(exc.value) for form in FORMS)
    with pytest.raises(ArgError, match="^--env-id: .*bandit"):
        CommonArgs(env_id="bandit:two-arm").validate()
    CommonArgs(env_id="bandit:sparse-1000").validate()


def test_bad_arguments_raise_naming_the_argument():
    with pytest.raises(ValueError, match="^group_size"):
        envs.make("bandit:bernoulli-10", 4, seed=0, group_size=3)
    with pytest.raises(ValueError, match="render"):
        envs.make("bandit:bernoulli-10", 1, seed=0, render_mode="rgb_array")
    vec = envs.make("bandit:bernoulli-10", 2, seed=0)
    with pytest.raises(RuntimeError, match="reset"):
        vec.step(np.zeros(2, np.int64))
    vec.reset(seed=0)
    for bad in (np.array([0, 10]), np.array([-1, 0]), np.zeros(3, np.int64), np.zeros(2)):
        with pytest.raises(ValueError, match="^actions"):
            vec.step(bad)
    with pytest.raises(ValueError, match="^actions"):
        cont = envs.make("bandit:continuous", 2, seed=0)
        cont.reset(seed=0)
        cont.step(np.zeros(2))


@pytest.mark.parametrize("name", ALL)
def test_make_round_trip(name):
    envs.check_env_id(name)
    a, b = envs.make(name, 3, seed=7), envs.make(name, 3, seed=7)
    assert a.metadata["autoreset_mode"] == gym.vector.AutoresetMode.SAME_STEP
    np.testing.assert_array_equal(a.action_space.sample(), b.action_space.sample())  # seeded
    assert envs.eval_num_envs(name, 5) == 1 and not envs.renders(name)
    obs, _ = a.reset(seed=0)
    same = envs.make(name, 3, seed=7, copy=False)
    np.testing.assert_array_equal(same.reset(seed=0)[0], obs)


@pytest.mark.parametrize("name, length", [("bernoulli-10", 1), ("sequence-reverse-2-4", 4)])
def test_the_shared_collector_consumes_a_bandit(name, length):
    """What algos/ppo.py runs on: episodes of `length` steps, all terminated, returns in {0, 1}."""
    vec = envs.make(f"bandit:{name}", 4, seed=0, copy=False)
    collector = Collector(vec, obs_normalizer=None, reward_scaler=None)
    assert collector.discrete
    collector.reset(seed=0)
    buffer = RolloutBuffer(8, 4, vec.single_observation_space.shape, (), discrete=True)
    gen = torch.Generator().manual_seed(0)
    n = vec.single_action_space.n
    episodes = collector.collect(
        buffer, lambda obs: torch.randint(0, n, (len(obs),), generator=gen)
    )
    assert len(episodes) == 4 * 8 // length and {e.length for e in episodes} == {length}
    assert {e.ret for e in episodes} <= {0.0, 1.0} and buffer.trunc_index == []
    ends = (np.arange(8) + 1) % length == 0
    np.testing.assert_array_equal(buffer.terminated, np.broadcast_to(ends[:, None], (8, 4)))


def test_every_sequence_kind_is_one_registered_rule_class():
    """envs/bandits.py's sequence-<rule> ids and envs/sequence_bandit.py's RULES are the same
    set, each id built by its own class, which says what it is."""
    from envs.bandits import KINDS, SEQUENCE
    from envs.sequence_bandit import RULES, SequenceBandit, register

    kinds = {k.removeprefix(SEQUENCE) for k in KINDS if k.startswith(SEQUENCE)}
    assert kinds == set(RULES) == {"reverse", "summod", "add", "stop"}
    for rule, cls in RULES.items():
        vec = envs.make(f"bandit:sequence-{rule}-3-2", 2, seed=0)
        assert type(vec) is cls and issubclass(cls, SequenceBandit) and cls.rule == rule
        assert vec.sequence and vec.length == cls.shape(3, 2)[1] > 1
    with pytest.raises(ValueError, match="registered twice"):
        register(RULES["add"])


@pytest.mark.parametrize(
    "name, sequence, length, hard, unit",
    [
        ("bernoulli-10", False, 1, 0, True),
        ("gaussian-10", False, 1, 0, False),
        ("contextual-16-10", False, 1, 4, True),
        ("continuous", False, 1, 0, True),
        ("sequence-summod-2-8", True, 8, 0, True),
        ("sequence-add-10-4", True, 5, 0, True),
    ],
)
def test_a_bandit_says_what_it_is(name, sequence, length, hard, unit):
    """What figure scripts ask instead of parsing the id."""
    vec = envs.make(f"bandit:{name}", 1, seed=0)
    assert (vec.sequence, vec.length, vec.hard_contexts, vec.unit_rewards) == (
        sequence, length, hard, unit
    )  # fmt: skip
    assert (vec.rule is None) != sequence


def test_addition_answers_and_uniform_success():
    """sequence-add-10-3: 999 + 1 = 1000 and 456 + 789 = 1245, digits least significant first;
    one right answer of 10^4, so the uniform policy succeeds w.p. 1e-4."""
    vec = envs.make("bandit:sequence-add-10-3", 2, seed=0)
    prompts = np.array([[9, 9, 9, 1, 0, 0], [6, 5, 4, 9, 8, 7]])
    np.testing.assert_array_equal(vec.solve(prompts), [[0, 0, 0, 1], [5, 4, 2, 1]])
    np.testing.assert_array_equal(vec.check([[0, 0, 0, 1], [5, 4, 2, 2]], prompts), [1, 0])
    assert vec.uniform_success == 1e-4 and vec.prompt_length == 6
    with pytest.raises(ValueError, match="prompts are needed"):
        vec.check([[0, 0, 0, 1]])
