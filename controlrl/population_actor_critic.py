"""Population runs of the actor-critic path (controlrl.training.Run: collector, rollout buffer,
critic, GAE, observation and reward normalisers) on a bandit: S seeds of algos/ppo.py in one
process, as controlrl/population.py does for the group methods.

    python algos/ppo.py --env-id bandit:bernoulli-10 --num-steps 1 --num-seeds 200

Seed k of a population is the run `--seed s + k` alone, by the same construction as the group
path: its actor and critic are initialised after torch.manual_seed(s + k) in the single run's
order (actor, then critic) and stacked into one PopulationPolicy row (the critic a submodule of
the actor, so that one Adam and one gradient-norm clip per seed cover both, as ppo.py's flat
Adam over actor and critic does); its torch generator continues that seed's stream (action
samples, minibatch shuffles); its bandit draws from its own numpy generator; its observation
normaliser, reward scaler, Adam state and learning rate are its own.

The single run's collector (controlrl.rollout.Collector) and rollout buffer run unchanged on the
S * N envs (seed-major columns: env k * N + n is env n of seed k); GAE is per column, so the
same function gives every seed its own advantages. What the single run computes on the flat
[T * N] batch (values, old log-probabilities, the update, the policy-shift statistics) runs on
seed-batched [S, T * N] rows in the single run's (t, n) order. S = 1 is the single run's
metrics.csv to the byte (once the seed column is dropped); for S > 1 vmap's batched matmuls
replace the plain ones, so seed k agrees with its run alone up to float rounding.

Here bandits, with their episodes in lockstep (every env of a rollout ends at the same steps;
a truncated episode is refused); a checkpoint holds the bandits' generators and episodes in
progress (envs.state), so a resumed population continues the uninterrupted one bit for bit.
Gymnasium and envpool: ids, whose episodes end at any step: controlrl/population_control.py,
on the same run.
"""

from __future__ import annotations

import numpy as np
import torch

from controlrl import diagnostics
from controlrl.buffers import RolloutBuffer
from controlrl.diagnostics import explained_variance
from controlrl.nets import ValueNet, make_policy
from controlrl.normalize import RewardScaler, RunningMeanStd
from controlrl.population import PopulationObsNormalizer, PopulationPolicy, PopulationSession
from controlrl.population_update import SeedGenerators
from controlrl.returns import gae
from controlrl.rollout import Collector, Episode
from controlrl.seeding import reset_seed
from controlrl.session import Timer
from controlrl.update import adam, linear_lr


class PopulationRewardScaler(RewardScaler):
    """One RewardScaler per seed over a population's S * N envs (seed-major): each seed's
    running discounted returns fold into its own statistics, in the single scaler's arithmetic
    (its N returns reduced as one contiguous row)."""

    def __init__(self, num_seeds: int, num_envs: int, gamma: float, **kwargs) -> None:
        super().__init__(num_seeds * num_envs, gamma, **kwargs)
        self.num_seeds = num_seeds
        self.rms = RunningMeanStd((num_seeds,))

    def __call__(
        self, reward: np.ndarray, ended: np.ndarray, out: np.ndarray | None = None
    ) -> np.ndarray:
        S = self.num_seeds
        returns = self.returns * self.gamma
        returns += reward
        self.rms.update(returns.reshape(S, -1), axis=1)
        returns[ended] = 0.0
        self.returns = returns
        std = np.sqrt(self.rms.var + self.eps)[:, None]  # float64, as the single scaler's
        scaled = (reward.reshape(S, -1) / std).reshape(-1)
        np.maximum(scaled, -self.clip, out=scaled)
        if out is None:
            return np.minimum(scaled, self.clip, out=scaled).astype(np.float32)
        return np.minimum(scaled, self.clip, out=out)


class LockstepCollector(Collector):
    """The Collector over a population's envs, whose episodes all end at the same steps: each
    step's ended episodes are kept as one Episode of arrays (returns, lengths [S * N]) instead
    of S * N Episode records (one env in all, S = N = 1, takes the single env's path and its
    records); a truncated episode is refused (no bootstrap from its final observation)."""

    def _episodes_ended(self, buffer, episodes, t: int, ended, terminated, info) -> None:
        if not ended.all():
            raise RuntimeError("a population's envs must end their episodes together")
        if not terminated.all():
            raise RuntimeError("a population's bandit episodes must end, not be truncated")
        episodes.append(
            Episode(self.ep_return.copy(), self._steps - self._ep_start, self.global_step)
        )
        self._ep_start[:] = self._steps


class PopulationCritic:
    """The seeds' critics inside a PopulationPolicy (the template's `critic` submodule): V(s) of
    obs [S, B, d] -> [S, B]; bound to one seed inside a vmapped loss, that seed's [B]."""

    def __init__(self, policy: PopulationPolicy) -> None:
        self.policy = policy

    def __call__(self, obs: torch.Tensor) -> torch.Tensor:
        return self.policy.per_seed("critic", obs)

    def __getattr__(self, method: str):
        """Another method of the critic (bpo.py's value_and_median), of every seed."""
        return lambda *args: self.policy.per_seed(f"critic.{method}", *args)


class PopulationActorCriticRun(PopulationSession):
    """training.Run's loop for S seeds at once (see the module docstring)."""

    def __init__(self, args) -> None:
        T, N, S = args.num_steps, args.num_envs, args.num_seeds
        super().__init__(args, steps_per_iteration=T * N)
        self.gamma, self.gae_lambda = args.gamma, args.gae_lambda
        self.envs = self.make_envs()
        self.obs_space = self.envs.single_observation_space
        self.act_space = self.envs.single_action_space
        shape = self.obs_space.shape
        self.obs_normalizer = PopulationObsNormalizer(S, shape) if args.norm_obs else None
        # one seed: the single run's scaler itself (its one-env path is scalar arithmetic)
        scaler = PopulationRewardScaler(S, N, args.gamma) if S > 1 else RewardScaler(N, args.gamma)
        self.reward_scaler = scaler if args.norm_reward else None
        self.collector = self.make_collector()
        self.buffer = RolloutBuffer(T, S * N, shape, self.act_space.shape, self.collector.discrete)

    def make_envs(self):
        """The S * N envs, seed-major (a bandit population's)."""
        from envs import bandits

        return bandits.make_population(self.bandit, self.args.num_seeds, self.args.num_envs)

    def make_collector(self) -> Collector:
        """The collector over self.envs (episodes in lockstep: a bandit population's)."""
        return LockstepCollector(
            self.envs, self.obs_normalizer, self.reward_scaler, self.args.truncation_as_terminal
        )

    def make_actor_critic(
        self,
        hidden_sizes: tuple[int, ...],
        critic_hidden_sizes: tuple[int, ...],
        build_actor_critic=None,
    ) -> tuple[PopulationPolicy, PopulationCritic]:
        """Every seed's actor and critic, initialised as its single run's (ppo.py: make_policy,
        then ValueNet; or build_actor_critic(obs_space, act_space) -> (actor, critic), the
        file's own order), as one PopulationPolicy whose template holds the critic."""
        obs_dim = int(np.prod(self.obs_space.shape))

        def build():
            if build_actor_critic is not None:
                policy, critic = build_actor_critic(self.obs_space, self.act_space)
            else:
                policy = make_policy(self.obs_space, self.act_space, hidden_sizes)
                critic = ValueNet(obs_dim, critic_hidden_sizes)
            policy.critic = critic
            return policy

        # a constant observation stays constant over a batch only if it is one step's: the
        # normaliser moves between steps
        one_step = self.args.num_steps == 1
        policy = self.population_policy(self.seeded_models(build), constant=one_step)
        return policy, PopulationCritic(policy)

    def _seeds_first(self, x: np.ndarray) -> torch.Tensor:
        """Buffer rows [T, S * N, ...] as the seeds' flat batches [S, T * N, ...] (rows t * N + n,
        RolloutBuffer.flat's order)."""
        T, S = x.shape[0], len(self.seeds)
        rest = x.shape[2:]
        seeds = x.reshape(T, S, -1, *rest).swapaxes(0, 1)
        return torch.from_numpy(np.ascontiguousarray(seeds).reshape(S, -1, *rest))

    def _columns(self, x: torch.Tensor, T: int) -> np.ndarray:
        """[S, T * N] back to the buffer's [T, S * N]."""
        S = len(self.seeds)
        return x.reshape(S, T, -1).transpose(0, 1).reshape(T, -1).numpy()

    def collect(self, policy: PopulationPolicy, critic: PopulationCritic):
        """One rollout of every seed, then values, old log-probabilities and GAE as
        training.collect_batch computes them, per seed: (batch of [S, T * N] entries,
        old distribution parameters, returns [T, S * N], per-seed episode statistics)."""
        buffer, S = self.buffer, len(self.seeds)
        T = buffer.num_steps
        episodes = self.collector.collect(buffer, policy.sample)
        self.step = self.collector.global_step // S
        obs, actions = self._seeds_first(buffer.obs), self._seeds_first(buffer.actions)
        with torch.no_grad():
            buffer.values[:] = self._columns(critic(obs), T)
            buffer.next_values[:-1] = buffer.values[1:]
            last = self._seeds_first(buffer.last_obs[None])
            buffer.next_values[-1] = critic(last).reshape(-1).numpy()
            if buffer.trunc_obs:  # a truncated episode bootstraps from V(its final obs)
                self._bootstrap_truncated(critic)
        old_params = diagnostics.dist_params(policy, obs)
        with torch.no_grad():
            logp = policy.log_prob_at(old_params, actions)
        buffer.logprobs[:] = self._columns(logp, T)
        advantages = gae(
            buffer.rewards,
            buffer.values,
            buffer.next_values,
            buffer.terminated,
            buffer.ended,
            self.gamma,
            self.gae_lambda,
        )
        returns = advantages + buffer.values
        batch = {
            "obs": obs,
            "actions": actions,
            "logprobs": self._seeds_first(buffer.logprobs),
            "values": self._seeds_first(buffer.values),
            "advantages": self._seeds_first(advantages.astype(np.float32)),
            "returns": self._seeds_first(returns.astype(np.float32)),
        }
        return batch, old_params, returns, self._episode_stats(episodes)

    def _bootstrap_truncated(self, critic: PopulationCritic) -> None:
        """next_values at the truncated steps: V(final obs) of each seed's critic, as
        RolloutBuffer.fill_values computes them (each seed's final observations in one batch,
        in the order they ended; a seed with fewer is padded)."""
        buffer, S = self.buffer, len(self.seeds)
        N = buffer.num_envs // S
        owner = [n // N for _, n in buffer.trunc_index]
        counts, rows = [0] * S, []  # each final observation's row in its seed's batch
        for k in owner:
            rows.append(counts[k])
            counts[k] += 1
        x = np.zeros((S, max(rows) + 1, *buffer.obs.shape[2:]), np.float32)
        x[owner, rows] = np.stack(buffer.trunc_obs)
        values = critic(torch.from_numpy(x)).numpy()  # [S, M]
        for (t, n), k, i in zip(buffer.trunc_index, owner, rows):
            buffer.next_values[t, n] = values[k, i]

    def _episode_stats(self, episodes) -> dict[str, np.ndarray]:
        """training.episode_metrics of each seed's episodes, in the order its run lists them
        (step by step, env by env), from the collector's Episodes (of arrays [S * N] each)."""
        S = len(self.seeds)
        if not episodes:
            nan = np.full(S, np.nan)
            return {
                "train/episode_return": nan,
                "train/episode_length": nan,
                "train/episodes": np.zeros(S, np.int64),
            }

        def per_seed(values) -> np.ndarray:  # [ends, S * N] -> np.mean of each seed's row
            x = np.stack(values).astype(np.float64).reshape(len(values), S, -1)
            rows = np.ascontiguousarray(x.swapaxes(0, 1)).reshape(S, -1)
            return np.add.reduce(rows, axis=1) / rows.shape[1]

        return {
            "train/episode_return": per_seed([e.ret for e in episodes]),
            "train/episode_length": per_seed([e.length for e in episodes]),
            "train/episodes": np.full(S, len(episodes) * self.envs.num_envs // S),
        }

    def train(
        self,
        update_fn,
        policy: PopulationPolicy,
        critic: PopulationCritic,
        ratio_eps: diagnostics.Eps,
        optimizer=None,
        **stateful,
    ) -> float:
        """training.Run.train for every seed at once; returns the mean final evaluation."""
        args, S = self.args, len(self.seeds)
        stateful = {"optimizer": optimizer, **stateful} if optimizer is not None else stateful
        stateful["generators"] = SeedGenerators(self.generators)
        for name in ("obs_normalizer", "reward_scaler"):
            if getattr(self, name) is not None:
                stateful[name] = getattr(self, name)
        # the bandits mid-stream (their generators, envs.state); a checkpoint written before
        # they were saved resumes with fresh episodes
        if self.resume_state is None or "collector" in self.resume_state:
            stateful["collector"] = self.collector
        for iteration in self.start(policy=policy, **stateful):
            if optimizer is not None and args.anneal_lr:
                lr = linear_lr(args.learning_rate, iteration, self.num_iterations, True)
                optimizer.lrs = [lr] * S
            timer = Timer()
            batch, old_params, returns, episode_stats = self.collect(policy, critic)
            timer.lap("rollout_s")
            with self.guard():
                stats = update_fn(batch)
            shift = diagnostics.batch_shift(policy, batch, old_params, ratio_eps)
            stats = {**stats, **shift}
            if optimizer is not None:
                stats["learning_rate"] = np.asarray(optimizer.lrs, np.float64)
            metrics = {
                **episode_stats,
                "train/explained_variance": self._explained_variance(returns),
                **{f"train/{k}": v for k, v in stats.items()},
            }
            timer.lap("update_s")
            self.end_iteration(
                iteration,
                metrics,
                timer.timing(self.steps_per_iteration * S),
                lambda: self.evaluate(policy),
            )
        final = self.finish(lambda: self.evaluate(policy))
        self.envs.close()
        return final

    def start(self, **stateful):
        """PopulationSession.start, then every seed's envs reset as its run resets them."""
        iterations = super().start(**stateful)
        self.stateful["collector"] = self.collector
        if not self.collector.restored:
            self.collector.reset(seed=[reset_seed(s, self.start_iteration) for s in self.seeds])
        self.collector.global_step = self.step * len(self.seeds)
        return iterations

    def _explained_variance(self, returns: np.ndarray) -> np.ndarray:
        """diagnostics.explained_variance of each seed's [T, N] values and returns."""
        values, S = self.buffer.values, len(self.seeds)
        N = values.shape[1] // S
        cols = [slice(k * N, (k + 1) * N) for k in range(S)]
        return np.array(
            [explained_variance(values[:, c].ravel(), returns[:, c].ravel()) for c in cols]
        )


def train_population(args, update, build_actor_critic=None, ratio_eps=None) -> None:
    """--num-seeds of an on-policy actor-critic file (ppo.py, dpo.py, spo.py, bpo.py): its
    actor-critic (build_actor_critic(obs_space, act_space) -> (actor, critic) as its single run
    builds them; default: ppo.py's MLP actor and ValueNet), one Adam over every seed's
    parameters, and `update(policy, value_net, optimizer, batch, args)`, the file's own update,
    on each population batch; ratio_eps (default args.clip_coef) counts the ratio deviation. A
    bandit: id runs here; a Gymnasium or envpool: id in controlrl/population_control.py."""
    from envs import split_id

    if split_id(args.env_id)[0] == "bandit":
        run = PopulationActorCriticRun(args)
    else:
        from controlrl.population_control import ControlPopulationRun

        run = ControlPopulationRun(args)
    critic_sizes = getattr(args, "critic_hidden_sizes", None) or args.hidden_sizes
    policy, value_net = run.make_actor_critic(args.hidden_sizes, critic_sizes, build_actor_critic)
    optimizer = adam(policy, lr=args.learning_rate)
    run.train(
        lambda batch: update(policy, value_net, optimizer, batch, args),
        policy,
        value_net,
        ratio_eps=args.clip_coef if ratio_eps is None else ratio_eps,
        optimizer=optimizer,
    )
