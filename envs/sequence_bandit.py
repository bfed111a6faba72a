"""Verifiable-sequence bandits (RLVR in miniature): an episode is an answer of L token steps, the
reward (1 or 0, at the last step) says whether a checkable rule holds for the whole answer.

One class per rule, registered under its rule name in RULES (its id: bandit:sequence-<rule>-...,
the form in envs/bandits.py's KINDS):

  ReverseBandit   'reverse', sequence-reverse-V-L: a prompt of L tokens; the answer must be the
                  prompt reversed, exact match (the terminal-reward token reversal of Target Policy
                  Optimization, Kaddour 2026, section 3.6; github.com/JeanKaddour/tpo)
  SumModBandit    'summod', sequence-summod-V-L: no prompt; the L tokens must sum to 0 mod V
  AdditionBandit  'add', sequence-add-V-D: the prompt is two D-digit numbers in base V, the
                  answer the D + 1 digits of their sum in base V (sequence-add-10-D is decimal);
                  every number is written least significant digit first
  StopBandit      'stop', sequence-stop-V-P: answers of variable length; a prompt of 1..P tokens,
                  the answer the prompt reversed and then EOS (action V); an episode ends at EOS
                  or is cut at the cap of 2P tokens, each env on its own (not in lockstep)

Each class says what it is: rule, vocab, length (answer tokens per episode), prompt_length,
optimal_reward and uniform_success (exact), check(tokens, prompts) (the vectorised reward) and
solve(prompts) (one answer with reward 1). Observation layout and groups: envs/bandits.py."""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from envs.bandits import BanditVectorEnv

RULES: dict[str, type[SequenceBandit]] = {}  # rule name -> its class


def register(cls: type[SequenceBandit]) -> type[SequenceBandit]:
    """Class decorator: the rule `cls.rule` is built by `cls`."""
    if cls.rule in RULES:
        raise ValueError(f"sequence rule {cls.rule!r} is registered twice")
    RULES[cls.rule] = cls
    return cls


class SequenceBandit(BanditVectorEnv):
    """L steps per episode, one token from a vocabulary of V each; the reward, at the last step,
    is check(answer, prompt). All envs are at the same step (episodes start together). With
    copy=False the observation handed out is updated in place by the next step of the episode:
    the caller copies it at once (as controlrl's Collector does). A rule subclasses it with
    rule, shape(), check(), solve() and uniform_success."""

    rule = ""  # the registered rule name
    sequence = True

    @staticmethod
    def shape(vocab: int, size: int) -> tuple[int, int]:
        """(prompt length P, answer length L) of the id's parameters (V, size)."""
        raise NotImplementedError

    _episode_state = ("contexts", "_obs", "_tokens", "_t")

    def __init__(
        self,
        name: str,
        num_envs: int,
        vocab: int,
        size: int,
        group_size: int = 1,
        copy: bool = True,
    ) -> None:
        self.vocab, self.size = vocab, size
        self.prompt_length, self.length = self.shape(vocab, size)
        self.optimal_reward = 1.0  # every prompt has an answer: solve() gives one
        # observation: [prompt one-hot | emitted tokens one-hot | position one-hot]
        self._token_offset = self.prompt_length * vocab
        self._pos_offset = self._token_offset + self.length * vocab
        obs_dim = self._pos_offset + self.length
        super().__init__(name, num_envs, obs_dim, gym.spaces.Discrete(vocab), group_size, copy)
        self.contexts = np.zeros((num_envs, self.prompt_length), np.int64)  # the prompts
        self._tokens = np.zeros((num_envs, self.length), np.int64)
        self._t = 0
        self._obs = np.zeros((num_envs, obs_dim), np.float32)

    @property
    def uniform_success(self) -> float:
        """Success probability of the uniform policy (prompts uniform), exact."""
        raise NotImplementedError

    def check(self, tokens: np.ndarray, prompts: np.ndarray | None = None) -> np.ndarray:
        """Reward of answers tokens [..., L] to prompts [..., P] (bool [...])."""
        raise NotImplementedError

    def solve(self, prompts: np.ndarray) -> np.ndarray:
        """One answer [..., L] with reward 1 for each prompt [..., P]."""
        raise NotImplementedError

    def _prompts(self, prompts: np.ndarray | None) -> np.ndarray:
        if prompts is None:
            raise ValueError(f"prompts are needed by the {self.rule!r} rule")
        return np.asarray(prompts)

    def _draw_groups(self, num_groups: int) -> np.ndarray:
        return self._rng.integers(0, self.vocab, (num_groups, self.prompt_length))

    def _check_contexts(self, contexts: np.ndarray) -> None:
        shape = (self.num_envs, self.prompt_length)
        if contexts.shape != shape or contexts.dtype.kind not in "iu":
            raise ValueError(f"contexts must be prompt tokens (integers) of shape {shape}")
        if contexts.size and (contexts.min() < 0 or contexts.max() >= self.vocab):
            raise ValueError(f"contexts must lie in [0, {self.vocab})")

    def _start(self, contexts: np.ndarray | None = None) -> None:
        self.contexts = self._new_contexts() if contexts is None else contexts.astype(np.int64)
        self._t = 0
        # a fresh array: the previous one may be the final observation handed out
        self._obs = np.zeros_like(self._obs)
        if self.prompt_length:
            cols = np.arange(self.prompt_length) * self.vocab + self.contexts  # [N, P]
            self._obs[self._rows[:, None], cols] = 1.0
        self._obs[:, self._pos_offset] = 1.0

    def step(self, actions):
        a = self._check_actions(actions, self.vocab)
        t = self._t
        self._tokens[:, t] = a
        obs = self._obs
        obs[self._rows, self._token_offset + t * self.vocab + a] = 1.0
        obs[:, self._pos_offset + t] = 0.0
        if t + 1 < self.length:
            obs[:, self._pos_offset + t + 1] = 1.0
            self._t = t + 1
            zeros = self._running.copy()
            return self._out(obs), np.zeros(self.num_envs), zeros, zeros.copy(), {}
        # the final observation keeps the whole answer and no position
        reward = self.check(self._tokens, self.contexts).astype(np.float64)
        return self._one_step_out(reward)


@register
class ReverseBandit(SequenceBandit):
    """A prompt of L tokens; reward 1 iff the answer is the prompt reversed."""

    rule = "reverse"

    @staticmethod
    def shape(vocab: int, size: int) -> tuple[int, int]:
        """The prompt and the answer are L = size tokens each."""
        return size, size

    @property
    def uniform_success(self) -> float:
        """One answer of V^L succeeds."""
        return float(self.vocab) ** -self.length

    def check(self, tokens: np.ndarray, prompts: np.ndarray | None = None) -> np.ndarray:
        """Reward of answers tokens [..., L] to prompts [..., L] (bool [...])."""
        return np.all(np.asarray(tokens) == self._prompts(prompts)[..., ::-1], axis=-1)

    def solve(self, prompts: np.ndarray) -> np.ndarray:
        """The prompts reversed."""
        return np.asarray(prompts)[..., ::-1].copy()


@register
class SumModBandit(SequenceBandit):
    """No prompt; reward 1 iff the L tokens sum to 0 mod V."""

    rule = "summod"

    @staticmethod
    def shape(vocab: int, size: int) -> tuple[int, int]:
        """No prompt, L = size answer tokens."""
        return 0, size

    @property
    def uniform_success(self) -> float:
        """V^(L-1) answers of V^L succeed."""
        return 1.0 / self.vocab

    def check(self, tokens: np.ndarray, prompts: np.ndarray | None = None) -> np.ndarray:
        """Reward of answers tokens [..., L] (the prompts, empty, are not read)."""
        return np.asarray(tokens).sum(-1) % self.vocab == 0

    def solve(self, prompts: np.ndarray) -> np.ndarray:
        """All zeros."""
        return np.zeros((*np.asarray(prompts).shape[:-1], self.length), np.int64)


@register
class AdditionBandit(SequenceBandit):
    """Prompt: the D digits of a, then the D digits of b, in base V, least significant first;
    reward 1 iff the D + 1 answer tokens are the digits of a + b, least significant first (the
    last one is the carry out, 0 or 1)."""

    rule = "add"

    @staticmethod
    def shape(vocab: int, size: int) -> tuple[int, int]:
        """P = 2D prompt digits, L = D + 1 answer digits for D = size."""
        return 2 * size, size + 1

    @property
    def uniform_success(self) -> float:
        """Each prompt has one right answer of V^(D+1)."""
        return float(self.vocab) ** -self.length

    def check(self, tokens: np.ndarray, prompts: np.ndarray | None = None) -> np.ndarray:
        """Reward of answers tokens [..., D+1] to prompts [..., 2D] (bool [...])."""
        return np.all(np.asarray(tokens) == self.solve(self._prompts(prompts)), axis=-1)

    def solve(self, prompts: np.ndarray) -> np.ndarray:
        """The digits of the sum, by schoolbook addition with a carry."""
        prompts = np.asarray(prompts)
        a, b = prompts[..., : self.size], prompts[..., self.size :]
        answer = np.zeros((*prompts.shape[:-1], self.length), np.int64)
        carry = np.zeros(prompts.shape[:-1], np.int64)
        for i in range(self.size):
            total = a[..., i] + b[..., i] + carry
            answer[..., i], carry = total % self.vocab, total // self.vocab
        answer[..., self.size] = carry
        return answer


@register
class StopBandit(SequenceBandit):
    """Answers of any length up to a cap: a prompt of m tokens (m uniform in 1..P, then blanks),
    the answer must be the prompt reversed and then EOS, the end-of-sequence token (action V).
    An episode ends at its first EOS (terminated) or after the cap of L = 2P tokens (truncated:
    the answer was cut), so episodes differ in length within a group, as LLM responses do;
    reward 1 iff it ended at EOS right after the reversed prompt (length m + 1 <= P + 1)."""

    rule = "stop"
    lockstep = False  # envs end at different steps: not a population's bandit
    _episode_state = (*SequenceBandit._episode_state, "_pos")

    @staticmethod
    def shape(vocab: int, size: int) -> tuple[int, int]:
        """P = size prompt slots, a cap of L = 2 * size answer tokens."""
        return size, 2 * size

    def __init__(self, name: str, num_envs: int, vocab: int, size: int, **kw) -> None:
        super().__init__(name, num_envs, vocab + 1, size, **kw)  # V tokens, EOS = blank = V
        self.eos = vocab
        self._pos = np.zeros(num_envs, np.int64)  # each env's step in its episode

    @property
    def uniform_success(self) -> float:
        """Mean over m = 1..P of (V + 1)^-(m + 1): the uniform policy over V + 1 actions."""
        m = np.arange(1, self.prompt_length + 1)
        return float(np.mean(float(self.vocab) ** -(m + 1.0)))

    def _draw_groups(self, num_groups: int) -> np.ndarray:
        m = self._rng.integers(1, self.prompt_length + 1, num_groups)
        tokens = self._rng.integers(0, self.eos, (num_groups, self.prompt_length))
        return np.where(np.arange(self.prompt_length) < m[:, None], tokens, self.eos)

    def check(self, tokens: np.ndarray, prompts: np.ndarray | None = None) -> np.ndarray:
        """Reward of answers tokens [..., L] (what follows the first EOS is not read) to prompts
        [..., P] (bool [...])."""
        prompts = self._prompts(prompts)
        m = (prompts != self.eos).sum(-1, keepdims=True)  # [..., 1]
        read = np.arange(self.length) <= m  # the m tokens and the EOS after them
        return np.all((np.asarray(tokens) == self.solve(prompts)) | ~read, axis=-1)

    def solve(self, prompts: np.ndarray) -> np.ndarray:
        """The prompt's tokens reversed, then EOS (and EOS to the cap)."""
        prompts = np.asarray(prompts)
        m = (prompts != self.eos).sum(-1, keepdims=True)
        j = np.arange(self.length)
        src = np.clip(m - 1 - j, 0, self.prompt_length - 1)  # answer j is prompt token m-1-j
        return np.where(j < m, np.take_along_axis(prompts, src, -1), self.eos)

    def _start(self, contexts: np.ndarray | None = None) -> None:
        super()._start(contexts)
        self._pos[:] = 0

    def step(self, actions):
        a = self._check_actions(actions, self.vocab)
        t, rows, obs = self._pos, self._rows, self._obs
        self._tokens[rows, t] = a
        obs[rows, self._token_offset + t * self.vocab + a] = 1.0
        obs[rows, self._pos_offset + t] = 0.0
        stop, cut = a == self.eos, (a != self.eos) & (t + 1 == self.length)
        ended = stop | cut
        reward = np.where(ended, self.check(self._tokens, self.contexts), False).astype(float)
        going = np.flatnonzero(~ended)
        obs[going, self._pos_offset + t[going] + 1] = 1.0
        self._pos[going] += 1
        info = {}
        if ended.any():  # these envs start a new episode now (same-step autoreset), alone
            info = {"final_obs": obs.copy(), "_final_obs": ended.copy()}
            fresh = self._new_contexts()
            self.contexts = np.where(ended[:, None], fresh, self.contexts)
            self._obs = obs = obs.copy()  # the final observations stay as handed out
            done = np.flatnonzero(ended)
            obs[done] = 0.0
            cols = np.arange(self.prompt_length) * self.vocab + self.contexts[done]
            obs[done[:, None], cols] = 1.0
            obs[done, self._pos_offset] = 1.0
            self._pos[done] = 0
        return self._out(obs), reward, stop, cut, info
