"""Robust adversarial RL (Pinto et al. 2017, "Robust Adversarial Reinforcement Learning", arXiv
1703.02702) with PPO-clip as each player's learner (the paper uses TRPO).

    python algos/rarl.py --env-id InvertedPendulum-v5 --total-timesteps 40960 --seed 1
    python algos/rarl.py --adversary-force 0   # the adversary pushes nothing: PPO, twice the data

Two policies play a zero-sum game on one MuJoCo task (envs/adversarial.py): the protagonist
drives the env's actuators, the adversary applies planar forces of at most --adversary-force
newtons to --adversary-bodies (data.xfrc_applied) and is rewarded minus the protagonist's
reward. Each iteration alternates (the paper's N_pro = N_adv = 1): the protagonist collects
--num-steps steps against the adversary's sampled actions and takes a PPO update, then the
adversary collects --num-steps steps on its own envs against the protagonist's sampled actions
and takes a PPO update on -r. --total-timesteps counts the protagonist's env steps; the
adversary's rollouts add as many again. Evaluation (and final_eval.json, and the checkpoint's
"policy") is the protagonist's mode on the plain env, without the adversary. Logs PPO's
metrics for the protagonist and the same under adversary/ for the adversary (its episode
return is minus the protagonist's return in its rollouts).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import gymnasium as gym
import numpy as np
import torch

import envs
from algos.ppo import ppo_loss
from controlrl.buffers import RolloutBuffer
from controlrl.cli import (
    ArgError,
    CommonArgs,
    parse,
    require,
    require_minibatch_flags,
    require_nonnegative,
    require_positive,
)
from controlrl.nets import ValueNet, make_policy
from controlrl.normalize import ObsNormalizer, RewardScaler
from controlrl.rollout import Collector
from controlrl.seeding import reset_seed
from controlrl.training import Run, collect_batch, episode_metrics
from controlrl.update import actor_critic_loss, adam, anneal_lr, minibatch_update
from envs.adversarial import AdversarialForces, body_ids


@dataclass
class Args(CommonArgs):
    env_id: str = "InvertedPendulum-v5"
    """a Gymnasium MuJoCo id whose model has the --adversary-bodies (the paper's tasks include
    InvertedPendulum)"""
    adversary_force: float = 5.0
    """the adversary's force limit in newtons, per component (x and z) and body; 0: no
    adversary (InvertedPendulum's pole weighs 5.0 kg: a steady 5 N tilts it ~0.1 rad of the
    0.2 rad at which the episode ends)"""
    adversary_bodies: tuple[str, ...] = ("pole",)
    """the bodies the adversary pushes (the paper's InvertedPendulum: the pole)"""
    learning_rate: float = 3e-4
    """Adam learning rate of both players (CleanRL 3e-4)"""
    anneal_lr: bool = True
    """anneal both learning rates linearly to 0 (CleanRL True)"""
    num_steps: int = 2048
    """steps per env per rollout, of each player (CleanRL 2048)"""
    gamma: float = 0.99
    """discount (CleanRL 0.99)"""
    gae_lambda: float = 0.95
    """GAE lambda (CleanRL 0.95)"""
    num_minibatches: int = 32
    """minibatches per epoch (CleanRL 32)"""
    update_epochs: int = 10
    """epochs over each rollout (CleanRL 10)"""
    norm_adv: bool = True
    """normalise advantages per minibatch (CleanRL True)"""
    clip_coef: float = 0.2
    """ratio clip eps (CleanRL 0.2)"""
    clip_vloss: bool = True
    """clip the value loss around the old values with the same eps (CleanRL True)"""
    ent_coef: float = 0.0
    """entropy bonus coefficient (CleanRL 0.0)"""
    vf_coef: float = 0.5
    """value loss coefficient (CleanRL 0.5; the value loss is 0.5 * MSE)"""
    max_grad_norm: float = 0.5
    """global gradient-norm clip (CleanRL 0.5)"""
    target_kl: float | None = None
    """stop the epochs when approx-KL of the last minibatch exceeds this (CleanRL None)"""
    norm_obs: bool = True
    """running observation normalisation of each player, clipped to [-10, 10] (CleanRL)"""
    norm_reward: bool = True
    """scale each player's rewards by the std of its running discounted return (CleanRL)"""
    hidden_sizes: tuple[int, ...] = (64, 64)
    """hidden layers of both players' actors and critics (CleanRL 64, 64 tanh)"""

    def validate(self) -> None:
        # before the common checks, which import the id's backend (brax: prints as it loads)
        require(
            envs.split_id(self.env_id)[0] == "gym",
            "env_id",
            f"must be a Gymnasium MuJoCo id for rarl (the adversary pushes MuJoCo bodies), got "
            f"{self.env_id}",
        )
        super().validate()
        require_minibatch_flags(self)
        require_positive(self, "clip_coef")
        require(self.target_kl is None or self.target_kl > 0, "target_kl", "must be > 0")
        require_nonnegative(self, "adversary_force")
        require(len(self.adversary_bodies) > 0, "adversary_bodies", "must name a body")
        require(self.vectorization == "sync", "vectorization", "must be sync (the adversary)")
        env = gym.make(self.env_id)
        model = getattr(env.unwrapped, "model", None)
        env.close()
        require(model is not None, "env_id", f"must be a MuJoCo env, got {self.env_id}")
        try:
            body_ids(model, self.adversary_bodies)
        except ValueError as exc:
            raise ArgError(f"--adversary-bodies: {exc}") from None


def update(policy, value_net, optimizer, batch: dict[str, torch.Tensor], args: Args) -> dict:
    """update_epochs x num_minibatches Adam steps on PPO's loss (either player)."""

    def policy_loss(logp, old_logp, adv):
        return ppo_loss(logp, old_logp, adv, args.clip_coef)

    loss_fn = actor_critic_loss(policy, value_net, policy_loss, args.clip_coef, args)
    return minibatch_update(optimizer, batch, loss_fn, args)


def sampler(policy, obs_normalizer: ObsNormalizer | None) -> Callable[[np.ndarray], np.ndarray]:
    """raw obs [d] -> one action sampled from policy, normaliser frozen: a frozen opponent."""

    def act(obs: np.ndarray) -> np.ndarray:
        x = obs.astype(np.float32)[None]
        if obs_normalizer is not None:
            x = obs_normalizer(x, update=False)
        with torch.inference_mode():
            return policy.sample(torch.from_numpy(x))[0].numpy()

    return act


def main(args: Args) -> None:
    opponents: dict[str, Callable] = {}  # role -> how that player acts in the other's envs

    def as_player(role: str, other: str):
        return functools.partial(
            AdversarialForces,
            force_limit=args.adversary_force,
            bodies=args.adversary_bodies,
            role=role,
            opponent=lambda obs: opponents[other](obs),
        )

    # the protagonist's envs, normalisers, buffer and session (evaluation: the plain env)
    run = Run(args, wrap=as_player("protagonist", "adversary"))
    # the adversary's own envs, normalisers, collector and buffer
    adv_envs = envs.make(
        args.env_id, args.num_envs, args.seed, wrap=as_player("adversary", "protagonist")
    )
    adv_space = adv_envs.single_action_space
    adv_obs_normalizer = ObsNormalizer(run.obs_space.shape) if args.norm_obs else None
    adv_reward_scaler = RewardScaler(args.num_envs, args.gamma) if args.norm_reward else None
    adv_collector = Collector(
        adv_envs, adv_obs_normalizer, adv_reward_scaler, args.truncation_as_terminal
    )
    adv_buffer = RolloutBuffer(
        args.num_steps, args.num_envs, run.obs_space.shape, adv_space.shape, False
    )

    protagonist = make_policy(run.obs_space, run.act_space, args.hidden_sizes)
    value_net = ValueNet(run.obs_dim, args.hidden_sizes)
    adversary = make_policy(run.obs_space, adv_space, args.hidden_sizes)
    adv_value_net = ValueNet(run.obs_dim, args.hidden_sizes)
    optimizer = adam(protagonist, value_net, lr=args.learning_rate)
    adv_optimizer = adam(adversary, adv_value_net, lr=args.learning_rate)
    opponents["adversary"] = sampler(adversary, adv_obs_normalizer)
    opponents["protagonist"] = sampler(protagonist, run.obs_normalizer)

    adv_state = {"adversary_obs_normalizer": adv_obs_normalizer}
    adv_state["adversary_reward_scaler"] = adv_reward_scaler
    # the adversary's envs mid-episode (as training.Run keeps the protagonist's); a checkpoint
    # written before they were saved resumes them with fresh episodes
    if run.resume_state is None or "adversary_collector" in run.resume_state:
        adv_state["adversary_collector"] = adv_collector
    iterations = run.start(
        policy=protagonist,
        value=value_net,
        optimizer=optimizer,
        adversary=adversary,
        adversary_value=adv_value_net,
        adversary_optimizer=adv_optimizer,
        **{k: v for k, v in adv_state.items() if v is not None},
    )
    run.stateful["adversary_collector"] = adv_collector
    if not adv_collector.restored:
        # env i of the protagonist resets with seed + i: the adversary's envs take the next seeds
        adv_collector.reset(seed=reset_seed(args.seed, run.start_iteration) + args.num_envs)
    adv_collector.global_step = run.step
    for iteration in iterations:
        for opt in (optimizer, adv_optimizer):
            lr = anneal_lr(opt, args.learning_rate, iteration, run.num_iterations, args.anneal_lr)
        # the protagonist learns against the adversary as it stands
        batch, episodes = run.collect(protagonist, value_net)
        with run.update(protagonist, batch, args.clip_coef) as stats:
            stats.update(update(protagonist, value_net, optimizer, batch, args))
        # then the adversary learns against the protagonist as it now stands, on reward -r
        adv_batch, adv_episodes, _, _ = collect_batch(
            adv_collector, adv_buffer, adversary, adv_value_net, args.gamma, args.gae_lambda
        )
        with run.guard():
            adv_stats = update(adversary, adv_value_net, adv_optimizer, adv_batch, args)
        stats["learning_rate"] = lr
        stats.update({f"adversary/{k}": v for k, v in adv_stats.items()})
        stats["adversary/episode_return"] = episode_metrics(adv_episodes)["train/episode_return"]
        run.end_iteration(iteration, stats, episodes, act=protagonist.mode)
    run.finish(protagonist.mode)
    adv_envs.close()


if __name__ == "__main__":
    main(parse(Args))
