"""Verifiable-sequence bandit (RLVR in miniature): L token steps, reward 1 iff a checkable rule
holds for the whole answer. Rules: 'reverse' (answer = the prompt reversed, exact match: the
terminal-reward token reversal of Target Policy Optimization, Kaddour 2026, section 3.6;
github.com/JeanKaddour/tpo) and 'summod' (no prompt; tokens sum to 0 mod V). Ids, observation
layout and groups: envs/bandits.py."""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from envs.bandits import BanditVectorEnv

RULES = ("reverse", "summod")


class SequenceBandit(BanditVectorEnv):
    """L steps per episode, one token from a vocabulary of V each; the reward, at the last step,
    is check(answer, prompt). All envs are at the same step (episodes start together). With
    copy=False the observation handed out is updated in place by the next step of the episode:
    the caller copies it at once (as controlrl's Collector does)."""

    def __init__(
        self,
        name: str,
        num_envs: int,
        rule: str,
        vocab: int,
        length: int,
        group_size: int = 1,
        copy: bool = True,
    ) -> None:
        if rule not in RULES:
            raise ValueError(f"rule must be one of {RULES}, got {rule!r}")
        self.rule, self.vocab, self.length = rule, vocab, length
        self.prompt_length = length if rule == "reverse" else 0
        self.optimal_reward = 1.0  # every prompt has an answer: solve() gives one
        self.uniform_success = float(vocab) ** -length if rule == "reverse" else 1.0 / vocab
        # observation: [prompt one-hot | emitted tokens one-hot | position one-hot]
        self._token_offset = self.prompt_length * vocab
        self._pos_offset = self._token_offset + length * vocab
        obs_dim = self._pos_offset + length
        super().__init__(name, num_envs, obs_dim, gym.spaces.Discrete(vocab), group_size, copy)
        self.contexts = np.zeros((num_envs, self.prompt_length), np.int64)  # the prompts
        self._tokens = np.zeros((num_envs, length), np.int64)
        self._t = 0
        self._obs = np.zeros((num_envs, obs_dim), np.float32)

    def check(self, tokens: np.ndarray, prompts: np.ndarray | None = None) -> np.ndarray:
        """Reward of answers tokens [..., L] to prompts [..., P] (bool [...])."""
        tokens = np.asarray(tokens)
        if self.rule == "reverse":
            if prompts is None:
                raise ValueError("prompts are needed by the 'reverse' rule")
            return np.all(tokens == np.asarray(prompts)[..., ::-1], axis=-1)
        return tokens.sum(-1) % self.vocab == 0

    def solve(self, prompts: np.ndarray) -> np.ndarray:
        """One answer [..., L] with reward 1 for each prompt [..., P]."""
        prompts = np.asarray(prompts)
        if self.rule == "reverse":
            return prompts[..., ::-1].copy()
        return np.zeros((*prompts.shape[:-1], self.length), np.int64)

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
