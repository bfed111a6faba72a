"""Bandit backend: ids 'bandit:<name>' as Gymnasium VectorEnvs that expose their truth.

TPO: Target Policy Optimization (Kaddour 2026; github.com/JeanKaddour/tpo,
paper_for_agents/tpo_for_agents.md), whose bandit and token-reversal tasks two of these copy.

Names (K arms, C contexts, V tokens in the vocabulary, L tokens per answer):

  bernoulli-K           K arms; reward 1 with probability means[k], means ~ U(0, 1)
  gaussian-K            K arms; reward ~ N(means[k], 1), means ~ N(0, 1)
  sparse-K              one good arm among K: reward 1 on it, 0 on every other arm (the one-hot
                        bandit of TPO's section 3.1 with K = 100; sparse-1000 for its abstract's
                        sparse-reward claim)
  onehot-C-K            C contexts, K arms each, context one-hot in the observation and drawn
                        uniformly per episode; one correct arm per context (drawn uniformly):
                        reward 1 on it, 0 on every other arm (TPO's multi-context bandit of
                        section 3.2 is C = 100, K = 10)
  contextual-C-K        C contexts, K Bernoulli arms each, context one-hot in the observation and
                        drawn uniformly per episode; ceil(C/4) contexts are "hard": every arm
                        fails except one that succeeds with probability 1/2, so a uniform policy
                        succeeds there w.p. 1/(2K) (0.05 or less for K >= 10); the others like
                        bernoulli-K
  continuous            one action a in [-1, 1]; reward exp(-(a - 0.5)^2 / (2 * 0.1^2))
  bimodal               the same bump at -0.5 and at +0.5 (the larger of the two): two equally
                        good modes, 10 widths apart (reward at a = 0 is below 1e-5)
  sequence-reverse-V-L  verifiable-sequence bandit (RLVR in miniature): a prompt of L tokens,
                        then L steps that each emit a token; reward 1 iff the answer is the
                        prompt reversed (TPO's terminal-reward token reversal, section 3.6, is
                        V = 2, L = 7..10). A uniform policy succeeds w.p. V^-L.
  sequence-summod-V-L   no prompt; reward 1 iff the L tokens sum to 0 mod V (V^(L-1) answers
                        succeed; a uniform policy succeeds w.p. 1/V)
  sequence-add-V-D      addition: the prompt is two D-digit numbers in base V (2D tokens, each
                        number least significant digit first, leading zeros allowed), the answer
                        the L = D + 1 digits of their sum in base V, least significant first
                        (the last is the carry out); one right answer per prompt, so a uniform
                        policy succeeds w.p. V^-(D+1); V = 10 is decimal addition
  sequence-stop-V-P     answers of variable length: a prompt of m tokens (m uniform in 1..P),
                        the answer the prompt reversed, then the end-of-sequence token EOS (one
                        more action, V + 1 in all); an episode ends at EOS or is cut at the cap
                        of L = 2P tokens (truncated), so episodes differ in length (DAPO's
                        overlong shaping acts on them); not a population's bandit (its envs do
                        not end together)

The instance (arm means, hard contexts, the good arm) comes from np.random.default_rng(instance)
with make(..., instance=0): every run seed faces the same bandit, and the seed given to reset
drives only rewards and contexts (one generator for the whole batch; the same seed gives the
same stream).

Episodes: one step (one pull) for all but the sequence bandits, so every step ends every
episode (terminated, never truncated) and, as with the other backends, the returned observation
is already the next episode's (same-step autoreset; info['final_obs'] holds the one acted on).
A sequence bandit's episode is L steps, one token each (per-step ratios are per token, per-
episode ratios per sequence); the reward comes at the last step; all envs step in lockstep
(but sequence-stop's, whose episodes end at EOS or at the cap).
Observations are float32: the one-hot context (a constant [1.0] where there is one context);
for a sequence bandit [prompt one-hot (P*V) | tokens emitted so far, one-hot (L*V) | position
one-hot (L)] with P = L (reverse), 0 (summod) or 2D (add; L = D + 1). Each rule is one class
of envs/sequence_bandit.py, registered there under its rule name (RULES).

Groups (GRPO's G samples per context): make(..., group_size=G) puts env n in group n // G; the
G envs of a group get the same context (or prompt) at every reset and autoreset, and draw their
rewards independently. reset(options={"contexts": c}) sets the contexts of the first episodes
(c: [num_envs] context indices, or [num_envs, P] prompt tokens for a sequence bandit).

Speed: one numpy pass per step for the whole batch (about 6 us a step at 8-64 envs for
bernoulli-10, 13-16 us for the others): 100k pulls of bernoulli-10 take 0.07 s at 8 envs.

Truth, for tests and figures (all exact, none estimated; a script asks the env, never its id):
  optimal_reward       expected reward of the best policy (contexts uniform)
  sequence, rule       whether an episode is an answer of tokens, and the rule that checks it
                       (False, None for the one-step bandits)
  length               steps per episode (1, or a sequence bandit's answer length L)
  hard_contexts        number of hard contexts (0 but for contextual-C-K)
  unit_rewards         every reward in [0, 1] (False for gaussian-K)
  contexts             current context index per env [N] (prompt tokens [N, P] for sequences)
  discrete bandits     means [C, K] (success probability, or Gaussian mean), hard [C] (bool),
                       expected_reward(actions, contexts)
  continuous bandits   modes, width, expected_reward(actions [n, 1])
  sequence bandits     vocab, prompt_length P, check(tokens [..., L], prompts [..., P]) -> bool
                       (the vectorised reward checker), solve(prompts) -> one answer with
                       reward 1, uniform_success
"""

from __future__ import annotations

import difflib
import math
from typing import Any

import gymnasium as gym
import numpy as np

from envs.errors import UnknownEnvError

# kind -> names of its integer parameters and their minima, in the order they appear
KINDS: dict[str, tuple[tuple[str, int], ...]] = {
    "bernoulli": (("K", 2),),
    "gaussian": (("K", 2),),
    "sparse": (("K", 2),),
    "contextual": (("C", 1), ("K", 2)),
    "onehot": (("C", 1), ("K", 2)),
    "continuous": (),
    "bimodal": (),
    "sequence-reverse": (("V", 2), ("L", 1)),
    "sequence-summod": (("V", 2), ("L", 1)),
    "sequence-add": (("V", 2), ("D", 1)),
    "sequence-stop": (("V", 2), ("P", 1)),
}
SEQUENCE = "sequence-"  # kinds sequence-<rule>: built by envs.sequence_bandit.RULES[rule]
# the largest parameters an id may ask for: arm tables and observation widths stay megabytes,
# not a request that allocates the machine away (bernoulli-1000000000)
MAXIMA = {"K": 100_000, "C": 100_000, "V": 10_000, "L": 1_000, "D": 1_000, "P": 500}
MAX_CELLS = 1_000_000  # contexts x arms, vocabulary x length: the table / observation width
FORMS = tuple("-".join([kind, *(p for p, _ in params)]) for kind, params in KINDS.items())
EXAMPLES = (
    "bernoulli-10",
    "gaussian-10",
    "sparse-1000",
    "contextual-16-10",
    "onehot-100-10",
    "continuous",
    "bimodal",
    "sequence-reverse-2-8",
    "sequence-summod-2-8",
    "sequence-add-2-3",
)
HARD_GOOD_P = 0.5  # success probability of the one good arm of a hard context
BUMP_WIDTH = 0.1  # std of the continuous bandits' reward bump


def parse(name: str) -> tuple[str, tuple[int, ...]]:
    """('contextual', (16, 10)) for 'contextual-16-10'; UnknownEnvError naming the id if bad."""
    for kind, params in KINDS.items():
        if name != kind and not name.startswith(kind + "-"):
            continue
        tail = name[len(kind) + 1 :]
        parts = tail.split("-") if tail else []
        form = FORMS[list(KINDS).index(kind)]
        if len(parts) != len(params) or not all(p.isdigit() for p in parts):
            raise UnknownEnvError(f"bandit:{name}: expected the form '{form}' (integers)")
        values = tuple(int(p) for p in parts)
        for (pname, low), value in zip(params, values, strict=True):
            if value < low:
                raise UnknownEnvError(f"bandit:{name}: {pname} must be >= {low}, got {value}")
            if value > MAXIMA[pname]:
                raise UnknownEnvError(
                    f"bandit:{name}: {pname} must be <= {MAXIMA[pname]}, got {value}"
                )
        if len(values) == 2 and math.prod(values) > MAX_CELLS:
            names = " x ".join(p for p, _ in params)
            raise UnknownEnvError(f"bandit:{name}: {names} must be <= {MAX_CELLS}")
        return kind, values
    close = difflib.get_close_matches(name, EXAMPLES, n=3, cutoff=0.5)
    hint = f"; closest: {', '.join(close)}" if close else ""
    raise UnknownEnvError(
        f"unknown env id '{name}' for backend 'bandit' (names: {', '.join(FORMS)};"
        f" e.g. {', '.join(EXAMPLES)}){hint}"
    )


def check_id(name: str) -> None:
    """Raise UnknownEnvError if `name` is not a bandit name with valid parameters."""
    parse(name)


def lockstep(name: str) -> bool:
    """Whether every env of the bandit `name` ends its episodes at the same step (all but
    sequence-stop), as a population's envs must."""
    kind, _ = parse(name)
    if not kind.startswith(SEQUENCE):
        return True
    from envs.sequence_bandit import RULES

    return RULES[kind.removeprefix(SEQUENCE)].lockstep


class BanditVectorEnv(gym.vector.VectorEnv):
    """What every bandit shares: the batch generator, groups sharing a context, spaces."""

    # what the bandit is, for scripts that must not read it off its id
    sequence = False  # True: an episode is an answer of `length` tokens, checked by `rule`
    rule: str | None = None  # a sequence bandit's rule (envs.sequence_bandit.RULES)
    length = 1  # steps per episode (the most steps, where episodes end early)
    lockstep = True  # every env's episode ends at the same step (a population needs it)
    hard_contexts = 0  # contexts where the uniform policy succeeds w.p. 1/(2K) (contextual-C-K)
    unit_rewards = True  # every reward in [0, 1], so success = return / optimal_reward

    def __init__(
        self,
        name: str,
        num_envs: int,
        obs_dim: int,
        single_action_space: gym.Space,
        group_size: int,
        copy: bool,
    ) -> None:
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        if group_size < 1 or num_envs % group_size:
            raise ValueError(
                f"group_size must be >= 1 and divide num_envs ({num_envs}), got {group_size}"
            )
        self.name, self.num_envs, self.group_size, self.copy = name, num_envs, group_size, copy
        self.single_observation_space = gym.spaces.Box(0.0, 1.0, (obs_dim,), np.float32)
        self.single_action_space = single_action_space
        self.observation_space = gym.vector.utils.batch_space(
            self.single_observation_space, num_envs
        )
        self.action_space = gym.vector.utils.batch_space(single_action_space, num_envs)
        self.metadata = {"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP}
        self._rng: np.random.Generator | None = None
        # every observation the same (one context): a population's policy runs on one row
        self.constant_observation = False
        self._rows = np.arange(num_envs)
        self._ended = np.ones(num_envs, bool)
        self._running = np.zeros(num_envs, bool)

    # one generator for the whole batch; make_population's envs get one per seed instead
    _make_rng = staticmethod(np.random.default_rng)
    # the episodes in progress, besides the generator: what capture_state saves
    _episode_state: tuple[str, ...] = ("contexts", "_obs")

    def capture_state(self) -> dict | None:
        """The generators' states and the episodes in progress, as plain arrays and ints, so
        that restore_state continues the stream bit for bit (a resumed run's envs, see
        envs.state); None before the first reset."""
        if self._rng is None:
            return None
        generators = getattr(self._rng, "generators", [self._rng])
        saved = {"rng": [g.bit_generator.state for g in generators]}
        for name in self._episode_state:
            if hasattr(self, name):
                saved[name] = np.array(getattr(self, name))
        return saved

    def restore_state(self, state: dict) -> None:
        """Put back what capture_state saved (into a bandit of the same id and size)."""
        rng = state["rng"]
        self._rng = self._make_rng(None)  # as many generators as this bandit draws from
        generators = getattr(self._rng, "generators", [self._rng])
        if len(generators) != len(rng):
            raise ValueError(f"{len(rng)} saved generators for {len(generators)}")
        for generator, saved in zip(generators, rng, strict=True):
            generator.bit_generator.state = saved
        for name in self._episode_state:
            if name not in state:
                continue
            value = np.asarray(state[name])
            if isinstance(getattr(self, name, None), int):
                setattr(self, name, int(value))
            elif len(value) != self.num_envs:
                raise ValueError(f"saved {name} of {len(value)} envs for {self.num_envs}")
            else:
                setattr(self, name, value.copy())

    def _draw_groups(self, num_groups: int) -> np.ndarray:
        """Contexts of num_groups groups [num_groups, ...] (drawn from self._rng)."""
        raise NotImplementedError

    def _check_contexts(self, contexts: np.ndarray) -> None:
        """Raise ValueError naming 'contexts' unless they are valid for every env."""
        raise NotImplementedError

    def _start(self, contexts: np.ndarray | None = None) -> None:
        """Begin a new episode in every env, with these contexts or freshly drawn ones."""
        raise NotImplementedError

    def _new_contexts(self) -> np.ndarray:
        groups = self._draw_groups(self.num_envs // self.group_size)
        return np.repeat(groups, self.group_size, axis=0) if self.group_size > 1 else groups

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        if seed is not None or self._rng is None:
            self._rng = self._make_rng(seed)
        contexts = None
        if options and "contexts" in options:
            contexts = np.asarray(options["contexts"])
            self._check_contexts(contexts)
        self._start(contexts)
        return self._out(self._obs), {}

    def _out(self, obs: np.ndarray) -> np.ndarray:
        return obs.copy() if self.copy else obs

    def _check_started(self) -> None:
        if self._rng is None:
            raise RuntimeError("call reset() before step()")

    def _check_actions(self, actions, num_actions: int) -> np.ndarray:
        self._check_started()
        a = np.asarray(actions)
        if a.shape != (self.num_envs,) or a.dtype.kind not in "iu":
            raise ValueError(f"actions must be integers of shape ({self.num_envs},), got {a.shape}")
        if a.min() < 0 or a.max() >= num_actions:
            raise ValueError(f"actions must lie in [0, {num_actions}), got {a.min()}..{a.max()}")
        return a

    def _one_step_out(self, reward: np.ndarray):
        """Every episode ended: the next episodes start now (same-step autoreset)."""
        final_obs = self._obs
        self._start()
        info = {"final_obs": final_obs, "_final_obs": self._ended.copy()}
        return self._out(self._obs), reward, self._ended.copy(), self._running.copy(), info


class DiscreteBandit(BanditVectorEnv):
    """K arms in each of C contexts: Bernoulli(means[c, k]) or N(means[c, k], 1) rewards."""

    def __init__(
        self,
        name: str,
        num_envs: int,
        means: np.ndarray,
        gaussian: bool = False,
        hard: np.ndarray | None = None,
        group_size: int = 1,
        copy: bool = True,
    ) -> None:
        self.means = means  # [C, K]
        self.num_contexts, self.num_arms = means.shape
        self.gaussian = gaussian
        self.hard = np.zeros(self.num_contexts, bool) if hard is None else hard
        self.optimal_reward = float(means.max(1).mean())
        space = gym.spaces.Discrete(self.num_arms)
        super().__init__(name, num_envs, self.num_contexts, space, group_size, copy)
        self.hard_contexts = int(self.hard.sum())
        self.unit_rewards = not gaussian
        self.constant_observation = self.num_contexts == 1
        self.contexts = np.zeros(num_envs, np.int64)
        self._obs = np.ones((num_envs, 1), np.float32)

    def expected_reward(self, actions: np.ndarray, contexts: np.ndarray | None = None):
        """Mean reward of arms `actions` in `contexts` (context 0 when None)."""
        return self.means[0 if contexts is None else contexts, actions]

    def _draw_groups(self, num_groups: int) -> np.ndarray:
        return self._rng.integers(0, self.num_contexts, num_groups)

    def _check_contexts(self, contexts: np.ndarray) -> None:
        if contexts.shape != (self.num_envs,) or contexts.dtype.kind not in "iu":
            raise ValueError(f"contexts must be integers of shape ({self.num_envs},)")
        if contexts.min() < 0 or contexts.max() >= self.num_contexts:
            raise ValueError(f"contexts must lie in [0, {self.num_contexts})")

    def _start(self, contexts: np.ndarray | None = None) -> None:
        if self.num_contexts == 1:
            return  # one context: the constant observation [1.0], nothing to draw
        self.contexts = self._new_contexts() if contexts is None else contexts.astype(np.int64)
        self._obs = np.zeros((self.num_envs, self.num_contexts), np.float32)
        self._obs[self._rows, self.contexts] = 1.0

    def step(self, actions):
        a = self._check_actions(actions, self.num_arms)
        mean = self.means[self.contexts, a]  # [N]
        if self.gaussian:
            reward = self._rng.standard_normal(self.num_envs) + mean
        else:
            reward = (self._rng.random(self.num_envs) < mean).astype(np.float64)
        return self._one_step_out(reward)


class ContinuousBandit(BanditVectorEnv):
    """One action in [-1, 1], deterministic reward: a Gaussian bump around the nearest mode."""

    def __init__(
        self,
        name: str,
        num_envs: int,
        modes: tuple[float, ...],
        width: float = BUMP_WIDTH,
        group_size: int = 1,
        copy: bool = True,
    ) -> None:
        self.modes, self.width = np.asarray(modes, np.float64), width
        self.optimal_reward = 1.0
        space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
        super().__init__(name, num_envs, 1, space, group_size, copy)
        self.constant_observation = True
        self.contexts = np.zeros(num_envs, np.int64)
        self._obs = np.ones((num_envs, 1), np.float32)

    def expected_reward(self, actions: np.ndarray) -> np.ndarray:
        """Reward of actions [n, 1] (clipped to [-1, 1]) -> [n]."""
        a = np.clip(np.asarray(actions, np.float64), -1.0, 1.0)
        dist2 = np.min((a - self.modes) ** 2, axis=-1)  # [n, 1] - [M] -> [n, M]
        return np.exp(-dist2 / (2 * self.width**2))

    def _draw_groups(self, num_groups: int) -> np.ndarray:
        return np.zeros(num_groups, np.int64)

    def _check_contexts(self, contexts: np.ndarray) -> None:
        if contexts.shape != (self.num_envs,) or np.any(contexts != 0):
            raise ValueError(f"contexts must be {self.num_envs} zeros (one context)")

    def _start(self, contexts: np.ndarray | None = None) -> None:
        pass  # one context, constant observation

    def step(self, actions):
        self._check_started()
        a = np.asarray(actions)
        if a.shape != (self.num_envs, 1):
            raise ValueError(f"actions must have shape ({self.num_envs}, 1), got {a.shape}")
        return self._one_step_out(self.expected_reward(a))


def make(
    name: str,
    num_envs: int,
    vectorization: str = "sync",
    render_mode: str | None = None,
    copy: bool = True,
    group_size: int = 1,
    instance: int = 0,
) -> gym.vector.VectorEnv:
    """The bandit `name` batched over num_envs (vectorization does not apply: one numpy call per
    step for the whole batch); the instance is drawn from default_rng(instance)."""
    if render_mode is not None:
        raise ValueError("bandit: ids do not render (no video); drop --capture-video")
    kind, params = parse(name)
    rng = np.random.default_rng(instance)
    kw = {"group_size": group_size, "copy": copy}
    if kind in ("bernoulli", "gaussian", "sparse"):
        (k,) = params
        if kind == "bernoulli":
            means = rng.uniform(0.0, 1.0, k)
        elif kind == "gaussian":
            means = rng.standard_normal(k)
        else:
            means = np.zeros(k)
            means[rng.integers(k)] = 1.0
        return DiscreteBandit(name, num_envs, means[None], kind == "gaussian", **kw)
    if kind == "contextual":
        c, k = params
        means = rng.uniform(0.0, 1.0, (c, k))
        hard = np.zeros(c, bool)
        hard[rng.permutation(c)[: math.ceil(c / 4)]] = True
        means[hard] = 0.0
        means[hard, rng.integers(0, k, int(hard.sum()))] = HARD_GOOD_P
        return DiscreteBandit(name, num_envs, means, hard=hard, **kw)
    if kind == "onehot":
        c, k = params
        means = np.zeros((c, k))
        means[np.arange(c), rng.integers(0, k, c)] = 1.0
        return DiscreteBandit(name, num_envs, means, **kw)
    if kind in ("continuous", "bimodal"):
        modes = (0.5,) if kind == "continuous" else (-0.5, 0.5)
        return ContinuousBandit(name, num_envs, modes, **kw)
    from envs.sequence_bandit import RULES

    return RULES[kind.removeprefix(SEQUENCE)](name, num_envs, *params, **kw)


class SeedStreams:
    """S numpy generators behind one Generator-like object: a draw of n = S * m values (or rows)
    is S draws of m, one from each seed's own generator, concatenated in seed order. A
    population's bandit (make_population) draws through it, so that the envs of seed k see
    exactly the stream a bandit reset with seed k alone would see."""

    def __init__(self, seeds) -> None:
        # default_rng(s) is Generator(PCG64(s)); built directly it takes half the time
        self.generators = [np.random.Generator(np.random.PCG64(s)) for s in seeds]

    def _split(self, size) -> tuple[int, ...]:
        shape = (size,) if np.isscalar(size) else tuple(size)
        if shape[0] % len(self.generators):
            raise ValueError(f"size {size}: the first axis must split over {len(self.generators)}")
        return (shape[0] // len(self.generators), *shape[1:])

    def random(self, size) -> np.ndarray:
        """U[0, 1) draws, size[0] split over the seeds."""
        part = self._split(size)
        return np.concatenate([g.random(part) for g in self.generators])

    def standard_normal(self, size) -> np.ndarray:
        """N(0, 1) draws, size[0] split over the seeds."""
        part = self._split(size)
        return np.concatenate([g.standard_normal(part) for g in self.generators])

    def integers(self, low, high, size) -> np.ndarray:
        """Integers in [low, high), size[0] split over the seeds."""
        part = self._split(size)
        return np.concatenate([g.integers(low, high, part) for g in self.generators])


def make_population(
    name: str, num_seeds: int, num_envs: int, group_size: int = 1, instance: int = 0
) -> gym.vector.VectorEnv:
    """The bandit `name` batched over num_seeds x num_envs envs (env k * num_envs + n is env n
    of seed k; one numpy pass per step for all of them): reset(seed=[s_0, ..., s_{S-1}]) gives
    seed k its own generator default_rng(s_k), drawing what make(name, num_envs, ...) reset with
    s_k would draw. Every seed faces the same instance, as every single run does."""
    if num_seeds < 1:
        raise ValueError(f"num_seeds must be >= 1, got {num_seeds}")
    env = make(name, num_seeds * num_envs, group_size=group_size, instance=instance)
    env.num_seeds = num_seeds
    env._make_rng = lambda seeds: SeedStreams(
        [seeds] * num_seeds if seeds is None or np.isscalar(seeds) else seeds
    )
    return env
