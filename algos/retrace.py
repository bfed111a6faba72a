"""Retrace(lambda) actor-critic (Munos, Stepleton, Harutyunyan, Bellemare, "Safe and Efficient
Off-Policy Reinforcement Learning", NeurIPS 2016) for continuous control: a twin-Q critic
regressed onto Retrace targets over replayed segments, a SAC actor (Haarnoja et al. 2018).

    python algos/retrace.py --env-id Hopper-v5 --total-timesteps 1000000 --seed 1 --trace retrace

Each env step stores (x, a, log mu(a|x), r, terminated, truncated, x') in a ReplayBuffer
(controlrl.replay); each gradient step samples --batch-size transitions as contiguous segments
of --segment-length steps and regresses both Q heads onto G (controlrl.returns.retrace_targets,
google-deepmind/rlax retrace): Q(x_t, a_t) of the TARGET critic (min of its heads), V^pi(x') =
E_pi[Q_targ(x', a') - alpha log pi(a'|x')] (SAC's soft value; --v-samples actions from pi), and
c = trace_coefficients(log pi, log mu, --lam, --trace): retrace lam min(1, pi/mu), is lam pi/mu,
tree_backup lam pi (pi a density here), q_lambda lam (uncorrected). A segment is cut where its
episode ended; a truncated end bootstraps from V of the true final observation.

Actor: SAC's reparameterised tanh-Gaussian with automatic entropy temperature (target entropy
-act_dim), not MPO's E-step/M-step fit: the trace needs log pi(a|x) of STORED actions, which a
tanh-squashed Gaussian gives exactly (the Gaussian density at atanh(a), minus the log-Jacobian of
tanh and of the scaling to the action box), and the same function gives log mu at acting time,
so pi = mu yields the ratio 1 to the bit. Before --learning-starts, actions are uniform on the
box and log mu is the log of that density, -sum log(high - low). All three losses of a step read
the networks as they were before it (one backward; the actor's Q gradient stops at the critic's
weights), then the Polyak update of the target critic.

Logs (config.json, metrics.csv, timing.csv, tb/, checkpoints/) one row per --log-every env steps:
train/episode_return, episode_length, episodes, and over the row's gradient steps (NaN before
--learning-starts): q_loss, actor_loss, alpha, entropy (-log pi of fresh actions), q_mean,
target_mean (G), trace_mean (c of the sampled steps after each segment's first); eval/return.
Checkpoints hold the nets, the optimisers, the replay buffer (every stored step: about 100 bytes
a step at HalfCheetah's sizes, ~100 MB at 1M), the sampler's generator and the envs' simulator
state, so --resume continues bit for bit (Gymnasium ids, sync vectorization: see EnvLoop).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

import envs
from controlrl.cli import (
    ArgError,
    CommonArgs,
    fail,
    parse,
    require,
    require_memory,
    require_nonnegative,
    require_positive,
    require_sizes,
    require_unit_interval,
)
from controlrl.diagnostics import check_finite
from controlrl.evaluate import evaluate
from controlrl.nets import LOG_2PI, TwinQ, fast_forward, flatten_parameters, mlp
from controlrl.replay import ReplayBuffer
from controlrl.returns import retrace_targets, trace_coefficients
from controlrl.rollout import Episode, to_arrays, to_tensors
from controlrl.seeding import eval_seed, reset_seed
from controlrl.session import Session, Timer
from controlrl.training import episode_metrics
from controlrl.update import adam, params_of
from envs import state as env_state

TRACES = ("retrace", "is", "tree_backup", "q_lambda")  # theory.retrace.TRACE_KINDS, continuous


def critic_loss(q: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """0.5 (G - Q)^2 per head q [2, B], mean over the batch, summed over the heads (SB3 SAC's
    scaling); G has no gradient."""
    return 0.5 * (q - target.detach()).square().mean(-1).sum()


def actor_loss(logp: torch.Tensor, q_pi: torch.Tensor, alpha: torch.Tensor) -> torch.Tensor:
    """SAC: mean(alpha log pi(a~|x) - min Q(x, a~)), a~ reparameterised from pi."""
    return (alpha * logp - q_pi).mean()


def temperature_loss(log_alpha: torch.Tensor, logp: torch.Tensor, target_entropy: float):
    """SAC's automatic temperature: -mean(log alpha (log pi + target entropy)), log pi fixed."""
    return -(log_alpha * (logp.detach() + target_entropy)).mean()


@torch.no_grad()
def retrace_target(nets: Nets, batch: dict, logp_pi: torch.Tensor, alpha, args) -> tuple:
    """Retrace targets G [N, K] of sampled segments and the trace c [N, K], from the TARGET
    critic and the buffer's behaviour log-probs. logp_pi [N, K]: log pi of the stored actions
    under the current policy; alpha: the entropy temperature of the soft value."""
    obs, actions, next_obs = batch["obs"], batch["actions"], batch["next_obs"]
    n, k, obs_dim = obs.shape
    q_taken = nets.q_target(obs.reshape(n * k, obs_dim), actions.reshape(n * k, -1))
    q_taken = q_taken.min(0).values.view(n, k)
    # V^pi(x') = E_pi[min Q_targ(x', a') - alpha log pi(a'|x')]: the mean of --v-samples draws
    x = next_obs.reshape(n * k, obs_dim).repeat(args.v_samples, 1)  # [M N K, obs_dim]
    a_next, logp_next = nets.policy.rsample(*nets.policy.dist(x))
    soft_q = nets.q_target(x, a_next).min(0).values - alpha * logp_next
    v_next = soft_q.view(args.v_samples, n, k).mean(0)
    c = trace_coefficients(logp_pi, batch["behaviour_logp"], args.lam, args.trace)
    discounts = args.gamma * (1.0 - batch["terminated"])
    target = retrace_targets(batch["rewards"], discounts, batch["ended"], q_taken, v_next, c)
    return target, c


@dataclass
class Args(CommonArgs):
    total_timesteps: int = 1_000_000
    """env steps in all, summed over the envs (CleanRL sac_continuous_action.py 1M)"""
    trace: str = "retrace"
    """trace coefficient c: retrace (lam min(1, pi/mu)), is (lam pi/mu), tree_backup (lam pi),
    q_lambda (lam, uncorrected)"""
    lam: float = 1.0
    """lambda of the trace (Munos et al. 2016 and rlax use 1)"""
    segment_length: int = 8
    """K, steps per replayed segment (ACER used 20, MPO about 10)"""
    batch_size: int = 256
    """TRANSITIONS per gradient step, --batch-size / --segment-length segments (SB3 SAC 256)"""
    buffer_size: int = 1_000_000
    """replay capacity in transitions, all envs together (SB3 SAC 1M)"""
    learning_starts: int = 5000
    """env steps of uniform random actions before the first update (CleanRL SAC 5e3)"""
    updates_per_step: int = 1
    """gradient steps per vector-env step (SB3 SAC train_freq 1, gradient_steps 1)"""
    v_samples: int = 1
    """actions drawn from pi per next state to estimate V^pi(x'): unbiased with one, as SAC's
    target; each more costs one more policy and target-critic pass over the batch"""
    gamma: float = 0.99
    """discount (SB3 SAC 0.99)"""
    polyak: float = 0.005
    """target critic rate: Q_targ <- polyak Q + (1 - polyak) Q_targ (SB3 SAC tau 0.005)"""
    learning_rate: float = 3e-4
    """Adam learning rate of actor, critic and temperature (SB3 SAC 3e-4)"""
    init_alpha: float = 1.0
    """initial entropy temperature (SB3 SAC ent_coef 'auto' starts at 1.0)"""
    hidden_sizes: tuple[int, ...] = (256, 256)
    """hidden layers of the actor and of both Q heads, ReLU (SB3 SAC net_arch 256, 256)"""
    log_every: int = 1000
    """env steps per iteration: one metrics.csv row each; --checkpoint-every counts these"""
    eval_every: int = 10_000
    """env steps between deterministic evaluations, 0: only at the end"""

    def validate(self) -> None:
        require(
            self.trace in TRACES, "trace", f"must be one of {', '.join(TRACES)}, got {self.trace!r}"
        )
        require_nonnegative(self, "learning_starts")
        require_positive(self, "segment_length", "batch_size", "buffer_size", "updates_per_step")
        require_positive(self, "v_samples", "learning_rate", "init_alpha", "log_every")
        require_unit_interval(self, "lam", "gamma", "polyak")
        require_sizes(self, "hidden_sizes")
        capacity = self.buffer_size // max(self.num_envs, 1)
        require(
            self.segment_length <= capacity,
            "segment_length",
            f"must be <= the buffer's steps per env (--buffer-size / --num-envs = {capacity}), "
            f"got {self.segment_length}",
        )
        require(
            self.batch_size % self.segment_length == 0,
            "batch_size",
            f"must be a multiple of --segment-length ({self.segment_length}), "
            f"got {self.batch_size}",
        )
        require(
            self.buffer_size >= self.batch_size,
            "buffer_size",
            f"must be >= --batch-size ({self.batch_size}), got {self.buffer_size}",
        )
        require(
            self.log_every % max(self.num_envs, 1) == 0,
            "log_every",
            f"must be a multiple of --num-envs ({self.num_envs}), got {self.log_every}",
        )
        require(
            self.total_timesteps >= self.log_every,
            "total_timesteps",
            f"must be >= --log-every ({self.log_every}), got {self.total_timesteps}",
        )
        steps = self.total_timesteps // self.log_every * self.log_every  # the env steps run
        require(
            self.learning_starts < steps,
            "learning_starts",
            f"must be < the env steps run ({steps}: --total-timesteps in whole --log-every), "
            f"got {self.learning_starts}: no update would run",
        )
        # the buffer's rows hold at least an observation, an action and 4 numbers (float32)
        require_memory("buffer_size", 4 * 6 * self.buffer_size, "the replay buffer")
        super().validate()
        require(
            self.vectorization == "sync",
            "vectorization",
            "must be sync for retrace (the envs' simulator state is checkpointed)",
        )
        require(
            envs.split_id(self.env_id)[0] == "gym",
            "env_id",
            f"must be a Gymnasium id for retrace (its simulator state is checkpointed), got "
            f"{self.env_id}",
        )
        check_env(self.env_id)


def check_env(env_id: str) -> None:
    """Box actions and a simulator state envs.state can capture, or ArgError naming --env-id:
    checked on one env before the run directory is made."""
    probe = envs.make(env_id, 1, 0, "sync")
    try:
        if not hasattr(probe.single_action_space, "low"):
            raise ArgError(f"--env-id {env_id}: retrace needs continuous (Box) actions")
        probe.reset(seed=0)
        if env_state.capture(probe) is None:
            raise ArgError(
                f"--env-id {env_id}: retrace checkpoints the envs mid-episode, and "
                "envs.state cannot capture this one (MuJoCo and classic control only)"
            )
    finally:
        probe.close()


class TanhGaussianPolicy(nn.Module):
    """SAC's actor: u ~ N(mean(x), std(x)^2), a = bias + scale tanh(u) in the action box
    [low, high]; log std state-dependent, clamped to [-20, 2] (SB3 sac/policies.py). One MLP
    (ReLU, orthogonal init, last layer gain 0.01) outputs mean and log std."""

    LOG_STD_MIN, LOG_STD_MAX = -20.0, 2.0
    EDGE = 1.0 - 1e-6  # stored actions at the box's edge are read as this far inside it

    def __init__(self, obs_dim: int, act_dim: int, hidden, low, high) -> None:
        super().__init__()
        self.net = mlp([obs_dim, *hidden, 2 * act_dim], nn.ReLU, out_gain=0.01)
        low, high = torch.as_tensor(low).float(), torch.as_tensor(high).float()
        self.register_buffer("scale", (high - low) / 2)
        self.register_buffer("bias", (high + low) / 2)
        self.log_scale_sum = float(self.scale.log().sum())

    def dist(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(mean, log_std) [B, act_dim] of u."""
        mean, log_std = fast_forward(self._modules["net"], obs).chunk(2, -1)
        return mean, log_std.clamp(self.LOG_STD_MIN, self.LOG_STD_MAX)

    def log_prob_u(self, mean, log_std, u: torch.Tensor) -> torch.Tensor:
        """log pi(a|x) [B] of a = bias + scale tanh(u): the Gaussian's log density at u minus
        log |da/du| = sum log scale + log(1 - tanh(u)^2), the latter as 2 (log 2 - u -
        softplus(-2u)), exact and stable for large |u|."""
        z = (u - mean) * torch.exp(-log_std)
        gauss = (-0.5 * z.square() - log_std).sum(-1) - 0.5 * LOG_2PI * u.shape[-1]
        log_det = (2.0 * (math.log(2.0) - u - nn.functional.softplus(-2.0 * u))).sum(-1)
        return gauss - log_det - self.log_scale_sum

    def log_prob(self, mean, log_std, actions: torch.Tensor) -> torch.Tensor:
        """log pi(a|x) [B] of actions in the box (stored ones): u = atanh of the action scaled
        to [-1, 1], read EDGE inside at the edges (where float32 tanh saturates)."""
        y = ((actions - self.bias) / self.scale).clamp(-self.EDGE, self.EDGE)
        return self.log_prob_u(mean, log_std, torch.atanh(y))

    def rsample(self, mean, log_std) -> tuple[torch.Tensor, torch.Tensor]:
        """Reparameterised actions [B, act_dim] and their log pi [B]."""
        u = mean + torch.exp(log_std) * torch.randn_like(mean)
        return self.bias + self.scale * torch.tanh(u), self.log_prob_u(mean, log_std, u)

    @torch.no_grad()
    def act(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Sampled actions and their behaviour log mu [B], computed from the action as it is
        stored (float32), by the function that later gives log pi of stored actions."""
        mean, log_std = self.dist(obs)
        actions, _ = self.rsample(mean, log_std)
        return actions, self.log_prob(mean, log_std, actions)

    def mode(self, obs: torch.Tensor) -> torch.Tensor:
        """The deterministic action bias + scale tanh(mean) (evaluation)."""
        return self.bias + self.scale * torch.tanh(self.dist(obs)[0])


class Temperature(nn.Module):
    """log alpha as a module (optimiser, checkpoint)."""

    def __init__(self, init_alpha: float) -> None:
        super().__init__()
        self.log_alpha = nn.Parameter(torch.tensor(math.log(init_alpha)))


@dataclass
class Nets:
    """Actor, twin Q, its Polyak target (never trained by a gradient), temperature."""

    policy: TanhGaussianPolicy
    q: TwinQ
    q_target: TwinQ
    temperature: Temperature

    @classmethod
    def build(cls, obs_dim: int, act_dim: int, low, high, args: Args) -> Nets:
        """TwinQ: both heads in batched matmuls (controlrl.nets); the target starts equal to Q."""
        policy = TanhGaussianPolicy(obs_dim, act_dim, args.hidden_sizes, low, high)
        q = TwinQ(obs_dim, act_dim, args.hidden_sizes)
        q_target = TwinQ(obs_dim, act_dim, args.hidden_sizes).requires_grad_(False)
        q_target.load_state_dict(q.state_dict())
        return cls(policy, q, q_target, Temperature(args.init_alpha))

    def parameters(self) -> list[torch.Tensor]:
        """Every trained parameter (the NaN guard's)."""
        return [p for net in (self.policy, self.q, self.temperature) for p in net.parameters()]


STATS = ("q_loss", "actor_loss", "alpha", "entropy", "q_mean", "target_mean", "trace_mean")


class Learner:
    """One fused Adam per net over a flat parameter, the flat target critic; a gradient step is
    one sample, three losses, one backward, three Adam steps and one lerp."""

    def __init__(self, nets: Nets, args: Args, act_dim: int) -> None:
        self.nets, self.args = nets, args
        lr = args.learning_rate
        self.opt_pi = adam(nets.policy, lr=lr, eps=1e-8)  # torch's default eps, as SB3
        self.opt_q = adam(nets.q, lr=lr, eps=1e-8)
        self.opt_alpha = adam(nets.temperature, lr=lr, eps=1e-8)
        self.target_flat = flatten_parameters(nets.q_target)
        self.q_flat = params_of(self.opt_q)[0]
        self.q_params = list(nets.q.parameters())
        self.target_entropy = -float(act_dim)  # SB3/CleanRL: -dim(A)
        self.stats = torch.zeros(len(STATS))
        self.steps = 0

    def optimizers(self) -> dict:
        """The optimisers under their checkpoint names."""
        return {
            "actor_optimizer": self.opt_pi,
            "q_optimizer": self.opt_q,
            "alpha_optimizer": self.opt_alpha,
        }

    def step(self, batch: dict[str, torch.Tensor]) -> None:
        """One gradient step of actor, critic and temperature on a batch of segments."""
        nets, args = self.nets, self.args
        n, k, obs_dim = batch["obs"].shape
        obs, actions = batch["obs"].reshape(n * k, obs_dim), batch["actions"].reshape(n * k, -1)
        log_alpha = nets.temperature.log_alpha
        alpha = log_alpha.detach().exp()
        mean, log_std = nets.policy.dist(obs)
        a_new, logp_new = nets.policy.rsample(mean, log_std)
        with torch.no_grad():
            logp_pi = nets.policy.log_prob(mean, log_std, actions).view(n, k)
        target, c = retrace_target(nets, batch, logp_pi, alpha, args)
        q = nets.q(obs, actions)  # [2, N K]
        loss_q = critic_loss(q, target.reshape(n * k))
        for p in self.q_params:  # the actor's gradient stops at the critic's weights
            p.requires_grad_(False)
        q_pi = nets.q(obs, a_new).min(0).values
        for p in self.q_params:
            p.requires_grad_(True)
        loss_pi = actor_loss(logp_new, q_pi, alpha)
        loss_alpha = temperature_loss(log_alpha, logp_new, self.target_entropy)
        for opt in (self.opt_pi, self.opt_q, self.opt_alpha):
            opt.zero_grad(set_to_none=False)
        (loss_q + loss_pi + loss_alpha).backward()
        for opt in (self.opt_pi, self.opt_q, self.opt_alpha):
            opt.step()
        with torch.no_grad():
            self.target_flat.lerp_(self.q_flat, args.polyak)
            stats = [loss_q, loss_pi, alpha, -logp_new.mean(), q.mean(), target.mean()]
            stats.append(c[:, 1:].mean() if k > 1 else torch.tensor(float("nan")))
            self.stats += torch.stack(stats)
        self.steps += 1

    def pop_stats(self) -> dict[str, float]:
        """Means of the statistics since the last call (NaN when no step was taken), reset."""
        means = (self.stats / self.steps).tolist() if self.steps else [math.nan] * len(STATS)
        self.stats.zero_()
        self.steps = 0
        return {f"train/{k}": v for k, v in zip(STATS, means)}


class Sampler:
    """The generator of the replay sampling, checkpointed with the run."""

    def __init__(self, seed: int) -> None:
        self.generator = torch.Generator().manual_seed(seed)

    def state_dict(self) -> dict:
        return {"generator": self.generator.get_state()}

    def load_state_dict(self, state: dict) -> None:
        self.generator.set_state(state["generator"])


class EnvLoop:
    """The training envs: acting (uniform on the box before --learning-starts, then pi), the
    transitions into the buffer, episode statistics. Its state_dict holds the envs mid-episode
    (envs.state: simulator state, time-limit counter and reset RNG), the current observations
    and episode sums, so a resumed run continues the uninterrupted one (the replay buffer
    would otherwise hold episodes that never finish)."""

    def __init__(self, args: Args) -> None:
        self.args = args
        self.envs = envs.make(args.env_id, args.num_envs, args.seed, args.vectorization)
        space = self.envs.single_action_space
        if not hasattr(space, "low"):
            fail(f"--env-id {args.env_id}: retrace needs continuous (Box) actions")
        self.low = torch.as_tensor(space.low, dtype=torch.float32)
        self.high = torch.as_tensor(space.high, dtype=torch.float32)
        self.obs_dim = int(np.prod(self.envs.single_observation_space.shape))
        self.act_dim = int(np.prod(space.shape))
        self.uniform_logp = -float((self.high - self.low).log().sum())  # log 1/volume
        self.obs = self.envs.reset(seed=reset_seed(args.seed, 0))[0].astype(np.float32)
        if env_state.capture(self.envs) is None:
            fail(
                f"--env-id {args.env_id}: retrace checkpoints the envs mid-episode, and "
                "envs.state cannot capture this one (MuJoCo and classic control only)"
            )
        self.ret = np.zeros(args.num_envs)
        self.length = np.zeros(args.num_envs, np.int64)
        self.episodes: list[Episode] = []
        self.step_count = 0

    def step(self, policy: TanhGaussianPolicy | None, buffer: ReplayBuffer) -> None:
        """One vector step with pi (None: uniform actions), stored with its exact log mu."""
        obs = torch.from_numpy(self.obs)
        if policy is None:
            u = torch.rand(obs.shape[0], self.act_dim)
            actions = self.low + (self.high - self.low) * u
            logp = torch.full((obs.shape[0],), self.uniform_logp)
        else:
            actions, logp = policy.act(obs)
        actions_np = actions.numpy()
        next_obs, reward, terminated, truncated, infos = self.envs.step(actions_np)
        next_obs = next_obs.astype(np.float32)
        final = next_obs.copy()
        ended = terminated | truncated
        for i in np.flatnonzero(ended):
            final[i] = infos["final_obs"][i]
        if self.args.truncation_as_terminal:
            terminated = ended
        buffer.add(self.obs, actions_np, logp.numpy(), reward, terminated, truncated, final)
        self.step_count += len(reward)
        self.ret += reward
        self.length += 1
        for i in np.flatnonzero(ended):
            self.episodes.append(Episode(float(self.ret[i]), int(self.length[i]), self.step_count))
            self.ret[i], self.length[i] = 0.0, 0
        self.obs = next_obs

    def pop_metrics(self) -> dict[str, float]:
        """train/episode_* of the episodes that ended since the last call."""
        metrics, self.episodes = episode_metrics(self.episodes), []
        return metrics

    def state_dict(self) -> dict:
        return {
            "obs": torch.from_numpy(self.obs.copy()),
            "ret": torch.from_numpy(self.ret.copy()),
            "length": torch.from_numpy(self.length.copy()),
            "step_count": self.step_count,
            "envs": to_tensors(env_state.capture(self.envs)),
        }

    def load_state_dict(self, state: dict) -> None:
        self.obs = state["obs"].numpy().copy()
        self.ret, self.length = state["ret"].numpy().copy(), state["length"].numpy().copy()
        self.step_count = int(state["step_count"])
        env_state.restore(self.envs, to_arrays(state["envs"]))


def main(args: Args) -> float:
    """Train; returns the final evaluation's mean return."""
    session = Session(args, steps_per_iteration=args.log_every)
    loop = EnvLoop(args)
    num_envs = args.num_envs
    buffer = ReplayBuffer(
        args.buffer_size // num_envs, num_envs, loop.obs_dim, loop.act_dim, args.segment_length
    )
    nets = Nets.build(loop.obs_dim, loop.act_dim, loop.low, loop.high, args)
    learner = Learner(nets, args, loop.act_dim)
    sampler = Sampler(args.seed)
    stateful = {**vars(nets), **learner.optimizers(), "buffer": buffer, "sampler": sampler}
    num_segments = args.batch_size // args.segment_length

    def evaluate_policy() -> float:
        video = (
            session.run_dir / "videos" / f"step_{session.step}.mp4" if args.capture_video else None
        )
        returns = evaluate(
            nets.policy.mode, args.env_id, None, args.eval_episodes, eval_seed(args.seed), video
        )
        return float(returns.mean())

    for iteration in session.start(**stateful, envs=loop):
        timer = Timer()
        with session.guard():
            for _ in range(args.log_every // num_envs):
                learning = session.step >= args.learning_starts
                loop.step(nets.policy if learning else None, buffer)
                session.step += num_envs
                if learning and buffer.can_sample():
                    for _ in range(args.updates_per_step):
                        learner.step(buffer.sample(num_segments, sampler.generator))
            updated, stats = learner.steps > 0, learner.pop_stats()  # NaN stats: no update yet
            check_finite(stats if updated else {}, nets.parameters())
        timer.lap("train_s")
        session.end_iteration(
            iteration,
            {**loop.pop_metrics(), **stats},
            timer.timing(args.log_every),
            evaluate_policy,
        )
    loop.envs.close()
    return session.finish(evaluate_policy)


if __name__ == "__main__":
    main(parse(Args))
