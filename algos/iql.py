"""IQL, Implicit Q-Learning (Kostrikov, Nair, Levine, "Offline Reinforcement Learning with
Implicit Q-Learning", ICLR 2022, arXiv 2110.06169), offline, with optional online fine-tuning,
and its behaviour cloning baseline (--bc). IQL never queries Q at actions outside the dataset:
V is fitted by expectile regression onto Q of the dataset's actions (an upper expectile
approximates the best in-support action's value), Q onto r + gamma V(s'), and the policy is
extracted by advantage-weighted regression onto the dataset's actions. Defaults of
tinkoff-ai/CORL algorithms/offline/iql.py (D4RL locomotion); the actor follows
ikostrikov/implicit_q_learning (policy.py, learner.py; the losses as in critic.py, actor.py).

    python algos/iql.py --dataset PATH_OR_ID --total-timesteps 1000000 --seed 1

--dataset: a D4RL-layout HDF5 file, a Minari dataset directory or the id of a generated dataset
(envs.offline). Counting is in gradient steps: --total-timesteps is the number of gradient
steps in all (offline plus --online-steps), one iteration (one metrics.csv row) is --log-every
of them, and --eval-every and the progress bar count them too. Each step: V by expectile
regression onto min(Q1, Q2) of the TARGET critic (value_loss), both Q heads onto
r + gamma (1 - terminal) V(s') (q_loss), the actor by advantage-weighted regression (awr_loss),
one autograd backward of the three, one Adam step per net, then the Polyak target update; all
three losses use the networks as they were before the step (CORL's order; the original steps V
first and uses the new V for the actor and Q targets). The loss functions below are what the
optimisers minimise: edit one and training changes. Logs (config.json, metrics.csv,
timing.csv, tb/, checkpoints/): train/v_loss, q_loss, actor_loss, v_mean, q_mean, adv_mean,
weight_mean, weight_clip_frac (weights at the clip 100), actor_lr; eval/return and, when the
dataset has reference scores, eval/normalized_score (D4RL's 0-100 scale); with --online-steps,
the train/episode_* of the online episodes. Deterministic evaluation: the tanh-bounded mean
action.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

import envs
from controlrl.buffers import OfflineBuffer
from controlrl.cli import (
    ArgError,
    CommonArgs,
    fail,
    forget_datasets,
    load_dataset,
    parse,
    require,
    require_finite,
    require_minibatch_memory,
    require_nonnegative,
    require_positive,
    require_seed,
    require_sizes,
    require_unit_interval,
)
from controlrl.diagnostics import check_finite
from controlrl.evaluate import evaluate
from controlrl.losses import expectile_loss
from controlrl.nets import TanhGaussianActor, TwinQ, ValueNet, flatten_parameters
from controlrl.rollout import Episode
from controlrl.seeding import eval_seed, reset_seed
from controlrl.session import Session, Timer
from controlrl.training import episode_metrics
from controlrl.update import adam, params_of

EXP_ADV_MAX = 100.0  # the clip of the AWR weights exp(beta * A) (both references)


def value_loss(q_target: torch.Tensor, v: torch.Tensor, tau: float) -> torch.Tensor:
    """Expectile regression of V(s) onto the target critic's min(Q1, Q2)(s, a) [B], no
    gradient into Q: the tau-expectile of Q over the dataset's actions."""
    return expectile_loss(q_target.detach() - v, tau)


def td_target(
    rewards: torch.Tensor, dones: torch.Tensor, next_v: torch.Tensor, gamma: float
) -> torch.Tensor:
    """y = r + gamma (1 - done) V(s') [B]: done are terminals only (a timeout bootstraps)."""
    return rewards + gamma * (1.0 - dones) * next_v.detach()


def q_loss(q: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Mean over both heads q [2, B] of (Q(s, a) - y)^2. CORL averages the two heads' MSEs;
    the original sums them (a factor 2, which Adam's step does not see)."""
    return (q - y).square().mean()


def awr_loss(
    logp: torch.Tensor, adv: torch.Tensor, beta: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Advantage-weighted regression: -mean(w log pi(a|s)), w = min(exp(beta A), 100) with A
    detached; beta = 0 gives w = 1, plain behaviour cloning. Returns (loss, w)."""
    w = torch.exp(beta * adv.detach()).clamp(max=EXP_ADV_MAX)
    return -(w * logp).mean(), w


@dataclass
class Args(CommonArgs):
    dataset: str | None = None
    """the offline dataset: a D4RL-layout HDF5 file, a Minari dataset directory or a generated
    dataset's id (envs.offline; required)"""
    env_id: str | None = None
    """Gymnasium id to evaluate and fine-tune in (default: the dataset's env_id)"""
    total_timesteps: int = 1_000_000
    """GRADIENT steps in all, offline plus --online-steps (CORL max_timesteps 1M)"""
    log_every: int = 1000
    """gradient steps per iteration: one metrics.csv row each; --checkpoint-every counts these
    iterations (IQL log_interval 1000)"""
    eval_every: int = 5000
    """gradient steps between deterministic evaluations, 0: only at the end (CORL 5000)"""
    online_steps: int = 0
    """the last N gradient steps each first take one env step with the sampled action and add
    it to the buffer (offline-to-online fine-tuning, IQL train_finetune.py); 0: offline only"""
    bc: bool = False
    """behaviour cloning: train the actor alone on -mean(log pi(a|s)) (the AWR loss with all
    weights 1); V and Q are not trained. The same actor, bit for bit, as --beta 0"""
    tau: float = 0.7
    """expectile of the value regression (CORL iql_tau 0.7 for locomotion; 0.5: the mean)"""
    beta: float = 3.0
    """inverse temperature of the AWR weights exp(beta A) (CORL beta 3.0; 'temperature' in the
    original); 0: behaviour cloning"""
    gamma: float = 0.99
    """discount (CORL 0.99)"""
    polyak: float = 0.005
    """target critic update rate: Q_targ <- polyak Q + (1 - polyak) Q_targ (CORL tau 0.005)"""
    batch_size: int = 256
    """minibatch of transitions per gradient step (CORL 256)"""
    actor_lr: float = 3e-4
    """Adam learning rate of the actor (CORL 3e-4)"""
    value_lr: float = 3e-4
    """Adam learning rate of V (CORL vf_lr 3e-4)"""
    critic_lr: float = 3e-4
    """Adam learning rate of Q (CORL qf_lr 3e-4)"""
    anneal_actor_lr: bool = True
    """cosine-decay the actor's learning rate to 0 over the offline steps (CORL
    CosineAnnealingLR); the online steps keep it at --actor-lr (the reference's fine-tuning
    config does not decay)"""
    hidden_sizes: tuple[int, ...] = (256, 256)
    """hidden layers of actor, V and both Q heads, ReLU (CORL 256, 256)"""
    normalize_obs: bool = True
    """standardise observations with the dataset's mean and std (+1e-3), frozen (CORL True)"""
    normalize_reward: bool = True
    """rewards * 1000 / (max - min return of the dataset's trajectories), IQL's and CORL's
    scaling for D4RL locomotion (hopper, halfcheetah, walker2d)"""

    def validate(self) -> None:
        require_finite(self)
        require_seed(self)
        require_nonnegative(self, "online_steps", "beta")
        require_positive(self, "total_timesteps", "log_every", "batch_size")
        require_positive(self, "actor_lr", "value_lr", "critic_lr")
        require(0 < self.tau < 1, "tau", f"must be in (0, 1), got {self.tau}")
        require_unit_interval(self, "gamma", "polyak")
        require_sizes(self, "hidden_sizes")
        require(self.num_envs == 1, "num_envs", f"must be 1 for iql, got {self.num_envs}")
        require(
            self.total_timesteps >= self.log_every,
            "total_timesteps",
            f"must be >= --log-every ({self.log_every}), got {self.total_timesteps}",
        )
        require(
            self.online_steps <= self.total_timesteps,
            "online_steps",
            f"must be <= --total-timesteps ({self.total_timesteps}), got {self.online_steps}",
        )
        require(self.dataset is not None, "dataset", "is required (a file, directory or id)")
        dims, rows = (1, 1), self.online_steps  # from below, until the dataset is loaded
        if self.env_id is None:  # the dataset's: load it now (kept for main)
            dataset = load_dataset(self.dataset)
            require(bool(dataset.env_id), "env_id", f"is needed: {dataset.source} names no env")
            self.env_id = dataset.env_id
            dims = dataset.observations.shape[1], dataset.actions.shape[1]
            rows += len(dataset)
        require_minibatch_memory("online_steps", rows, *dims, what="the replay buffer")
        require_minibatch_memory("batch_size", self.batch_size, *dims, self.hidden_sizes)
        super().validate()
        if not hasattr(envs.spaces(self.env_id)[1], "low"):  # the dataset's fit: main, first
            raise ArgError(f"--env-id {self.env_id}: iql needs continuous (Box) actions")


@dataclass
class Nets:
    """IQL's networks: actor, twin Q, its Polyak target (never trained by a gradient), V."""

    policy: TanhGaussianActor
    q: TwinQ
    q_target: TwinQ
    value: ValueNet

    @classmethod
    def build(cls, obs_dim: int, act_dim: int, max_action: torch.Tensor, hidden) -> Nets:
        """ReLU MLPs with the original's orthogonal init (gain sqrt(2) on every layer, common.py
        default_init); the target starts equal to Q."""
        relu, gain = torch.nn.ReLU, math.sqrt(2.0)
        policy = TanhGaussianActor(obs_dim, act_dim, hidden, max_action)
        q = TwinQ(obs_dim, act_dim, hidden)
        q_target = TwinQ(obs_dim, act_dim, hidden).requires_grad_(False)
        q_target.load_state_dict(q.state_dict())
        value = ValueNet(obs_dim, hidden, relu, out_gain=gain)
        return cls(policy, q, q_target, value)


class Learner:
    """One Adam per net, each over one flat parameter (fused), and the flat target critic: a
    gradient step is the three losses above, one autograd backward of their sum, three fused
    Adam steps and one Polyak lerp."""

    def __init__(self, nets: Nets, args: Args) -> None:
        self.nets, self.args = nets, args
        self.opt_pi = adam(nets.policy, lr=args.actor_lr, eps=1e-8)  # torch/optax default eps
        self.opt_q = adam(nets.q, lr=args.critic_lr, eps=1e-8)
        self.opt_v = adam(nets.value, lr=args.value_lr, eps=1e-8)
        self.trained = (self.opt_pi,) if args.bc else (self.opt_pi, self.opt_q, self.opt_v)
        self.target_flat = flatten_parameters(nets.q_target)
        self.q_flat = params_of(self.opt_q)[0]
        self.stats = torch.zeros(len(STATS))

    def optimizers(self) -> dict:
        """The optimisers under their checkpoint names."""
        return {
            "actor_optimizer": self.opt_pi,
            "q_optimizer": self.opt_q,
            "v_optimizer": self.opt_v,
        }

    def gradients(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """Backpropagate this minibatch's losses into every trained parameter's .grad (the
        actor's alone with --bc) and return the step's STATS. All three losses read the nets as
        they are before the step; the value target and the advantage read the TARGET critic,
        the policy enters only the actor loss. The nets share no parameter, so one backward of
        the sum gives each net the gradient of its own loss."""
        args, nets = self.args, self.nets
        for opt in self.trained:
            opt.zero_grad(set_to_none=False)  # in place: the parameters' .grad are views
        logp = nets.policy.log_prob(batch["obs"], batch["actions"])
        if args.bc:  # beta 0 with A = 0: w = 1, -mean(log pi)
            loss_pi, _ = awr_loss(logp, torch.zeros_like(logp), 0.0)
            loss_pi.backward()
            stats = torch.zeros(len(STATS))
            stats[2] = loss_pi.detach()
            return stats
        with torch.no_grad():
            q_target = nets.q_target(batch["obs_actions"]).amin(0)  # [B] (amin: no argmin kept)
            next_v = nets.value(batch["next_obs"])
        v = nets.value(batch["obs"])
        loss_v = value_loss(q_target, v, args.tau)
        q = nets.q(batch["obs_actions"])  # [2, B]
        loss_q = q_loss(q, td_target(batch["rewards"], batch["dones"], next_v, args.gamma))
        adv = q_target - v
        loss_pi, w = awr_loss(logp, adv, args.beta)
        (loss_v + loss_q + loss_pi).backward()
        with torch.no_grad():
            return torch.stack(
                [
                    loss_v,
                    loss_q,
                    loss_pi,
                    v.mean(),
                    q.mean(),
                    adv.mean(),
                    w.mean(),
                    (w >= EXP_ADV_MAX).float().mean(),
                ]
            )

    def step(self, batch: dict[str, torch.Tensor], actor_lr: float) -> None:
        """One gradient step of all three nets (the actor alone with --bc) and the target."""
        self.opt_pi.param_groups[0]["lr"] = actor_lr
        self.stats += self.gradients(batch)
        for opt in self.trained:
            opt.step()
        if not self.args.bc:
            with torch.no_grad():
                self.target_flat.lerp_(self.q_flat, self.args.polyak)

    def pop_stats(self, steps: int) -> dict[str, float]:
        """Means of the statistics over the last `steps` steps (one sync), then reset."""
        means = (self.stats / steps).tolist()
        self.stats.zero_()
        out = {f"train/{k}": v for k, v in zip(STATS, means)}
        if self.args.bc:  # only the actor is trained
            return {"train/actor_loss": out["train/actor_loss"]}
        return out


STATS = (
    "v_loss",
    "q_loss",
    "actor_loss",
    "v_mean",
    "q_mean",
    "adv_mean",
    "weight_mean",
    "weight_clip_frac",
)


def cosine_lr(base_lr: float, step: int, steps: int) -> float:
    """base_lr (1 + cos(pi step / steps)) / 2 for step < steps, else base_lr (the online
    phase): CORL's CosineAnnealingLR(T_max = steps), optax's cosine_decay_schedule."""
    if step >= steps:
        return base_lr
    return 0.5 * base_lr * (1.0 + math.cos(math.pi * step / steps))


def reward_scale(dataset) -> float:
    """1000 / (max - min) of the returns of the dataset's complete trajectories (split at
    terminals and timeouts; an unfinished last one is left out, as CORL's
    return_reward_range); IQL's D4RL locomotion scaling (train_offline.py normalize)."""
    ends = np.flatnonzero(dataset.terminals | dataset.timeouts)
    if len(ends) < 2:
        raise ArgError(
            f"--normalize-reward: {dataset.source} has {len(ends)} complete trajectories, "
            "need 2 (or pass --no-normalize-reward)"
        )
    cum = np.cumsum(dataset.rewards, dtype=np.float64)[ends]
    returns = np.diff(cum, prepend=0.0)
    span = float(returns.max() - returns.min())
    if span <= 0:
        raise ArgError(
            f"--normalize-reward: every trajectory of {dataset.source} has the same return"
        )
    return 1000.0 / span


class OnlineActor:
    """The online phase's env: one step with the actor's sampled action (clipped to the
    bounds), the transition into the buffer (which scales the reward as the dataset's; a
    timeout is no terminal unless --truncation-as-terminal), episode statistics."""

    def __init__(self, args: Args, buffer: OfflineBuffer) -> None:
        self.env = envs.make(args.env_id, 1, args.seed)
        self.buffer, self.args = buffer, args
        space = self.env.single_action_space
        self.low, self.high = space.low, space.high
        self.obs = None
        self.ret, self.length = 0.0, 0
        self.episodes: list[Episode] = []

    def reset(self, iteration: int) -> None:
        """Fresh episodes (on resume too, as training.Run)."""
        self.obs, _ = self.env.reset(seed=reset_seed(self.args.seed, iteration))

    def step(self, policy: TanhGaussianActor) -> None:
        """One env step and its transition."""
        with torch.no_grad():
            action = policy.sample(self.buffer.normalize_t(torch.from_numpy(self.obs).float()))
        action = np.clip(action.numpy(), self.low, self.high)
        next_obs, reward, terminated, truncated, infos = self.env.step(action)
        ended = bool(terminated[0] or truncated[0])
        final = infos["final_obs"][0] if ended else next_obs[0]
        terminal = bool(terminated[0] or (truncated[0] and self.args.truncation_as_terminal))
        self.buffer.add(self.obs[0], action[0], float(reward[0]), final, terminal)
        self.ret += float(reward[0])
        self.length += 1
        if ended:
            self.episodes.append(Episode(self.ret, self.length, self.buffer.size))
            self.ret, self.length = 0.0, 0
        self.obs = next_obs

    def pop_metrics(self) -> dict[str, float]:
        """train/episode_* of the episodes that ended since the last call."""
        metrics = episode_metrics(self.episodes)
        self.episodes = []
        return metrics


def make_evaluate(
    args: Args, session: Session, policy: TanhGaussianActor, buffer: OfflineBuffer, dataset
):
    """The evaluation callable (eval/return, and eval/normalized_score when the dataset has
    reference scores) and the columns it adds beside eval/return, NaN between evaluations."""
    ref = None
    if dataset.ref_min_score is not None and dataset.ref_max_score is not None:
        ref = (dataset.ref_min_score, dataset.ref_max_score)

    def evaluate_policy() -> dict[str, float]:
        video = None
        if args.capture_video:
            video = session.run_dir / "videos" / f"step_{session.step}.mp4"
        returns = evaluate(
            policy.mode,
            args.env_id,
            buffer.normalize,
            args.eval_episodes,
            seed=eval_seed(args.seed),
            video_path=video,
        )
        out = {"eval/return": float(returns.mean())}
        if ref is not None:
            out["eval/normalized_score"] = 100.0 * (out["eval/return"] - ref[0]) / (ref[1] - ref[0])
        return out

    return evaluate_policy, {"eval/normalized_score": float("nan")} if ref is not None else {}


def main(args: Args, dataset=None) -> float:
    """Train; returns the final evaluation's mean return. dataset: an envs.offline.Dataset
    instead of loading args.dataset (tests)."""
    try:  # every refusal before the session makes the run directory; the dataset's fit first
        dataset = dataset if dataset is not None else load_dataset(args.dataset)
        bound = env_bound(args.env_id, dataset.observations.shape[1], dataset.actions.shape[1])
        scale = reward_scale(dataset) if args.normalize_reward else 1.0
    except ArgError as exc:
        fail(str(exc))
    forget_datasets()
    session = Session(args, steps_per_iteration=args.log_every)
    buffer = OfflineBuffer.from_dataset(
        dataset,
        capacity=len(dataset) + args.online_steps,
        normalize_obs=args.normalize_obs,
        seed=args.seed,
        reward_scale=scale,
    )
    nets = Nets.build(buffer.obs_dim, buffer.act_dim, bound, args.hidden_sizes)
    learner = Learner(nets, args)
    online = OnlineActor(args, buffer) if args.online_steps else None
    evaluate_policy, eval_columns = make_evaluate(args, session, nets.policy, buffer, dataset)
    del dataset  # the buffer holds the transitions now (a loaded dataset is freed here)
    for iteration in start(
        session, online, {**vars(nets), **learner.optimizers(), "buffer": buffer}
    ):
        timer = Timer()
        with session.guard():
            metrics = train_iteration(session, learner, buffer, online)
        timer.lap("update_s")
        metrics.update(eval_columns)
        session.end_iteration(iteration, metrics, timer.timing(args.log_every), evaluate_policy)
    return session.finish(evaluate_policy)


def train_iteration(
    session: Session, learner: Learner, buffer: OfflineBuffer, online: OnlineActor | None
) -> dict[str, float]:
    """--log-every gradient steps (each after one env step in the online phase); their mean
    statistics, checked finite (NaN guard)."""
    args, nets = learner.args, learner.nets
    offline_steps = args.total_timesteps - args.online_steps
    for _ in range(args.log_every):
        if session.step >= offline_steps:
            online.step(nets.policy)
        lr = args.actor_lr
        if args.anneal_actor_lr:
            lr = cosine_lr(args.actor_lr, session.step, offline_steps)
        learner.step(buffer.sample(args.batch_size), lr)
        session.step += 1
    metrics = {**learner.pop_stats(args.log_every), "train/actor_lr": lr}
    check_finite(metrics, [p for net in vars(nets).values() for p in net.parameters()])
    if online is not None:
        metrics.update(online.pop_metrics())
    return metrics


def start(session: Session, online: OnlineActor | None, stateful: dict):
    """session.start (restores everything on --resume), then the online env's first reset."""
    iterations = session.start(**stateful)
    if online is not None:
        online.reset(session.start_iteration)
    return iterations


def env_bound(env_id: str, obs_dim: int, act_dim: int) -> torch.Tensor:
    """The env's action bound (symmetric Box), checking the dataset's dimensions against it;
    ArgError naming the flag at fault (validate checks it before the run directory is made)."""
    obs_space, act_space = envs.spaces(env_id)
    if not hasattr(act_space, "low"):
        raise ArgError(f"--env-id {env_id}: iql needs continuous (Box) actions")
    if obs_space.shape != (obs_dim,) or act_space.shape != (act_dim,):
        raise ArgError(
            f"--dataset: observations x actions {obs_dim} x {act_dim} do not fit {env_id} "
            f"({obs_space.shape} x {act_space.shape})"
        )
    if not np.allclose(act_space.low, -act_space.high):
        raise ArgError(
            f"--env-id {env_id}: iql needs symmetric action bounds, "
            f"got {act_space.low}..{act_space.high}"
        )
    return torch.as_tensor(act_space.high, dtype=torch.float32)


if __name__ == "__main__":
    main(parse(Args))
