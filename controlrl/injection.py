"""Synthetic success injection with a Thompson-sampling gate: HAPO's operator (Wu et al. 2026,
"Hindsight-Anchored Policy Optimization", arXiv 2603.11321) on the group layer, for one-step
discrete bandits whose contexts stand for prompts and whose best arm is the teacher.

When every member of a group fails (no member reaches the success reward), the gate may replace
the group's first member by a teacher demonstration that succeeded: the context's best arm with
the success reward. The gate is Thompson sampling on the context's own success rate:
theta ~ Beta(1 + s_c, 1 + f_c), s_c and f_c the policy's own successes and failures in context
c so far (this rollout's included; injected members never count), and the group is injected iff
theta < threshold. As the policy learns a context, its posterior moves above the threshold and
all-fail groups become rare, so injection fades and the gradient returns to the on-policy one
(the paper's asymptotic consistency); threshold 1 injects into every failed group (static
teacher forcing, no gate). The abstract is all the material here has of the paper: the gate's
exact form (threshold, prior) is this module's reading of it, not a copy of the reference.

The injected member enters the update as a sample of the rollout policy (its old log-prob is
the rollout policy's log-prob of the teacher's arm): the same objective, one member changed.
The draws: one Beta draw per group and iteration from Generator(PCG64([seed, iteration,
GATE_STREAM])), made whether or not the group failed, so a run's draws depend on its seed and
iteration only (a resumed run repeats them; a population's seed k draws what --seed k draws).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from controlrl.group_rollout import GroupRollout

GATE_STREAM = 0x4A70  # separates the gate's draws from every other stream of a seed
KINDS = ("bernoulli", "sparse", "onehot", "contextual")  # one-step bandits with 0/1 rewards


def injectable(env_id: str) -> bool:
    """Whether env_id is a bandit the operator applies to (a teacher arm, 0/1 rewards)."""
    from envs import bandits, split_id

    backend, name = split_id(env_id)
    if backend != "bandit":
        return False
    try:
        return bandits.parse(name)[0] in KINDS
    except ValueError:
        return False


def failed_groups(scores: torch.Tensor, success: float) -> torch.Tensor:
    """[..., B] bool: every member of the group scored below `success` ([..., B, G] scores)."""
    return (scores < success).all(-1)


def gate_draws(seeds: list[int], iteration: int, alpha: np.ndarray, beta: np.ndarray):
    """theta ~ Beta(alpha, beta) [S, B], row k from seed k's generator for this iteration."""
    return np.stack(
        [
            np.random.Generator(np.random.PCG64([s, iteration, GATE_STREAM])).beta(a, b)
            for s, a, b in zip(seeds, alpha, beta)
        ]
    )


class SuccessInjection:
    """The gate's state (per seed and context: successes, failures) and the operator.

    inject(rollout, old_logp, policy) -> (rollout', old_logp', injected [..., B] bool): rollout'
    is a copy with the chosen groups' first member replaced; old_logp' is the rollout policy's
    log-prob of rollout' (recomputed only where a member was replaced)."""

    def __init__(self, env, seeds: list[int], group_size: int, threshold: float) -> None:
        means = getattr(env, "means", None)
        if means is None or getattr(env, "sequence", False) or not env.unit_rewards:
            raise ValueError(
                "needs a one-step discrete bandit with 0/1 rewards (bernoulli, sparse, onehot, "
                "contextual): its best arm is the teacher"
            )
        self.teacher = means.argmax(1)  # [C] the best arm of each context
        self.success = 1.0
        self.seeds, self.G, self.threshold = list(seeds), group_size, threshold
        self.counts = np.zeros((len(self.seeds), means.shape[0], 2), np.int64)  # s, f
        self.iteration = 0

    def state_dict(self) -> dict:
        return {"counts": torch.from_numpy(self.counts.copy()), "iteration": self.iteration}

    def load_state_dict(self, state: dict) -> None:
        self.counts = state["counts"].numpy().copy()
        self.iteration = int(state["iteration"])

    def contexts(self, rollout: GroupRollout) -> np.ndarray:
        """[S, N] the context of every env (the one-hot observation's largest entry; a
        normalised one-hot keeps it, a one-context bandit is context 0)."""
        first = rollout.obs.reshape(len(self.seeds), *rollout.obs.shape[len(rollout.lead) :])
        return first[:, 0].argmax(-1)

    def inject(self, rollout: GroupRollout, old_logp: torch.Tensor, policy):
        S, G = len(self.seeds), self.G
        lead = rollout.lead
        ctx = self.contexts(rollout)  # [S, N]
        won = rollout.returns.reshape(S, -1) >= self.success  # [S, N]
        rows = np.arange(S)[:, None]
        np.add.at(self.counts[..., 0], (rows, ctx), won)
        np.add.at(self.counts[..., 1], (rows, ctx), ~won)
        group_ctx = ctx[:, ::G]  # [S, B]
        s, f = self.counts[rows, group_ctx, 0], self.counts[rows, group_ctx, 1]
        theta = gate_draws(self.seeds, self.iteration, 1.0 + s, 1.0 + f)
        self.iteration += 1
        failed = failed_groups(rollout.scores().reshape(S, -1, G), self.success).numpy()
        chosen = failed & (theta < self.threshold)  # [S, B]
        injected = torch.from_numpy(chosen.reshape(*lead, -1))
        if not chosen.any():
            return rollout, old_logp, injected
        envs = np.zeros_like(won)
        envs[:, ::G] = chosen  # the first member of each chosen group
        actions = rollout.actions.copy()
        returns = rollout.returns.copy()
        flat_actions = actions.reshape(S, *actions.shape[len(lead) :])  # [S, T, N]
        flat_returns = returns.reshape(S, -1)
        k, n = np.nonzero(envs)
        flat_actions[k, 0, n] = self.teacher[ctx[k, n]]
        flat_returns[k, n] = self.success
        changed = dataclasses.replace(rollout, actions=actions, returns=returns)
        new_logp, _, _ = changed.log_probs(policy)
        mask = torch.from_numpy(envs.reshape(*lead, 1, -1))
        return changed, torch.where(mask, new_logp, old_logp), injected
