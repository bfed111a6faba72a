"""Roll a policy out in a Gymnasium vector env into D4RL-layout rows (one env's episodes stay
contiguous; the true final observation of every ended episode is its last s')."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

import envs

Act = Callable[[np.ndarray], np.ndarray]  # float32 obs [n, d] -> actions [n, a]


class Roller:
    """Steps num_envs envs with whatever policy each collect() call is given, keeping the envs
    (and their unfinished episodes) between calls, as a training run does."""

    def __init__(self, env_id: str, num_envs: int, seed: int, bar=None) -> None:
        self.envs = envs.make(env_id, num_envs, seed)
        space = self.envs.single_action_space
        self.low, self.high = space.low.astype(np.float32), space.high.astype(np.float32)
        self.obs_dim = int(np.prod(self.envs.single_observation_space.shape))
        self.act_dim = int(np.prod(space.shape))
        self.num_envs = num_envs
        obs, _ = self.envs.reset(seed=seed)
        self.obs = obs.reshape(num_envs, -1).astype(np.float32)
        self.ep_return = np.zeros(num_envs)
        self.returns: list[float] = []  # returns of the episodes that ended
        self.env_returns: list[list[float]] = [[] for _ in range(num_envs)]  # the same, by env
        self.chunks: list[dict[str, np.ndarray]] = []
        self.bar = bar

    def collect(self, act: Act, steps: int) -> None:
        """`steps` vector steps with act (its actions clipped to the action space, as the env
        executes them; the clipped ones are stored)."""
        n, d, a = self.num_envs, self.obs_dim, self.act_dim
        chunk = {
            "observations": np.empty((steps, n, d), np.float32),
            "next_observations": np.empty((steps, n, d), np.float32),
            "actions": np.empty((steps, n, a), np.float32),
            "rewards": np.empty((steps, n), np.float32),
            "terminals": np.empty((steps, n), np.bool_),
            "timeouts": np.empty((steps, n), np.bool_),
        }
        for t in range(steps):
            action = np.clip(act(self.obs).reshape(n, a), self.low, self.high)
            obs, reward, terminated, truncated, info = self.envs.step(action)
            obs = obs.reshape(n, -1).astype(np.float32)
            chunk["observations"][t] = self.obs
            chunk["actions"][t] = action
            chunk["rewards"][t] = reward
            chunk["terminals"][t] = terminated
            chunk["timeouts"][t] = truncated & ~terminated
            chunk["next_observations"][t] = obs
            self.ep_return += reward
            for i in np.flatnonzero(terminated | truncated):
                chunk["next_observations"][t, i] = np.asarray(info["final_obs"][i]).ravel()
                self.returns.append(float(self.ep_return[i]))
                self.env_returns[i].append(float(self.ep_return[i]))
                self.ep_return[i] = 0.0
            self.obs = obs
            if self.bar is not None:
                self.bar.update(n)
        self.chunks.append(chunk)

    def arrays(self, limit: int | None = None) -> dict[str, np.ndarray]:
        """All rows so far, env by env (each env's episodes in order); an episode still running
        is cut with a timeout on its last row (a cut, not a terminal: D4RL does the same at the
        end of collection). limit: keep the first `limit` rows (the cut row gets a timeout)."""
        whole = {k: np.concatenate([c[k] for c in self.chunks]) for k in self.chunks[0]}
        whole["timeouts"][-1] |= ~whole["terminals"][-1]
        rows = {k: np.concatenate(np.swapaxes(v, 0, 1)) for k, v in whole.items()}
        if limit is not None:
            rows = {k: v[:limit] for k, v in rows.items()}
            rows["timeouts"][-1] |= ~rows["terminals"][-1]
        return rows

    def close(self) -> None:
        """Close the envs."""
        self.envs.close()


def episode_returns(rewards: np.ndarray, terminals: np.ndarray, timeouts: np.ndarray) -> list:
    """Returns of the episodes in D4RL rows (an episode ends at a terminal or timeout row)."""
    ends = np.flatnonzero(terminals | timeouts)
    sums = np.add.reduceat(rewards.astype(np.float64), np.concatenate([[0], ends[:-1] + 1]))
    return sums[: len(ends)].tolist() if len(ends) else []
