"""GRPO, Group Relative Policy Optimization (Shao et al. 2024, "DeepSeekMath", arXiv 2402.03300):
PPO's clipped surrogate with a critic-free, group-relative outcome advantage and a k3 KL penalty
to a frozen reference policy (the initial one).

    python algos/grpo.py --env-id bandit:bernoulli-10 --total-timesteps 100000 --num-envs 256
    python algos/grpo.py --env-id bandit:sequence-reverse-2-6 --group-size 16 --kl-coef 0
    python algos/grpo.py --env-id Hopper-v5 --num-envs 32 --group-size 8 --ratio kalman

Groups (controlrl/group_rollout.py): G consecutive envs share a context (bandits: G pulls for
the same context, or G answers to the same prompt) or a start state (Gymnasium: G envs reset
from the same seed). Every iteration collects whole episodes: each env runs until its first
episode ends, so episodes of different lengths simply have different numbers of steps (masked
padding after the end) and no episode is ever cut by the rollout; an episode longer than
--max-episode-steps is cut there. The score of an episode is its summed raw reward; the
advantage is that score standardised over its group (controlrl/group.py) and the same A for
every step (token) of the episode. No value network, no GAE, no reward scaling.

Ratios (--ratio, controlrl/ratios.py): per step (token, PPO), per episode (sequence: the
product, or GSPO's geometric mean), or KPO's causal Kalman-filtered log-ratio along the episode.
Loss aggregation (--loss-agg, names as verl's core_algos.agg_loss): seq-mean-token-mean is the
paper's (1/G) sum_i (1/|o_i|) sum_t; token-mean averages every step of the batch (DAPO);
seq-mean-token-sum sums the steps of an episode; seq-mean-token-sum-norm divides that by
--max-episode-steps (Dr. GRPO's constant).

Logs per iteration (metrics.csv): train/episode_return (mean reward = success rate on binary
bandits), train/entropy, train/zero_variance_frac, train/kl_ref (mean k3 KL of the rollout
policy to the reference over the rollout), train/kept_frac (groups in the loss), the update's
loss, policy_loss, kl_penalty, approx_kl, clip_frac, grad_steps, and the policy shift over the
rollout (kl_mean, kl_max, ratio_dev_*).

Speed: every env of a rollout (all arms, all groups) goes through one batched forward pass per
step, so a bandit run costs process start plus the 64-64 MLP's forward and backward passes.
Process start is mostly torch's import: the optimiser is controlrl.optim.FlatAdam, which does not
import torch._dynamo as torch.optim does, and gradients are clipped by
controlrl.update.clip_grad_norm, without clip_grad_norm_'s per-call grouping.

Reference: the group advantage and the clipped, k3-penalised loss as the GRPO baseline of
JeanKaddour/tpo (src/tpo/algorithms.py, grpo_loss); loss-aggregation modes as
volcengine/verl (verl/trainer/ppo/core_algos.py, agg_loss).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Literal

import torch

from controlrl.cli import (
    CommonArgs,
    RatioArgs,
    parse,
    require,
    require_nonnegative,
    require_positive,
    require_ratio_flags,
    require_sizes,
)
from controlrl.group import group_advantages, zero_variance_mask
from controlrl.group_rollout import GroupRollout, require_group_flags
from controlrl.group_training import GroupRun
from controlrl.nets import make_policy
from controlrl.ratios import EpisodeRatios, episode_starts, filtered_log_ratio
from controlrl.update import adam, kalman_noises, minibatch_update

ADV_SCALES = {"mean": "mean", "mean-std": "mean_std"}  # flag value -> controlrl.group scale
LOSS_AGGS = ("seq-mean-token-mean", "token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm")
UPDATE_STATS = ("loss", "policy_loss", "kl_penalty", "approx_kl", "clip_frac")


@dataclass
class Args(RatioArgs, CommonArgs):
    num_envs: int = 64
    """parallel environments: num_envs / group_size groups per iteration"""
    group_size: int = 8
    """G, outputs per context / episodes per start state (DeepSeekMath 64; TPO's sequence
    tasks 8)"""
    adv_norm: Literal["mean", "mean-std"] = "mean-std"
    """group advantage: r - mean (Dr. GRPO) or (r - mean) / (std + 1e-4) (GRPO; TRL's unbiased
    std and epsilon)"""
    filter_zero_variance: bool = False
    """drop groups whose returns are all equal from the loss (their KL term too; Reinforce-Rej /
    DAPO dynamic sampling); the fraction is logged either way"""
    kl_coef: float = 0.04
    """beta of the k3 KL penalty to the reference (the initial policy, frozen) (DeepSeekMath
    0.04; 0 disables it, as TRL's default)"""
    clip_coef: float = 0.2
    """ratio clip eps (DeepSeekMath 0.2)"""
    loss_agg: Literal[
        "seq-mean-token-mean", "token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm"
    ] = "seq-mean-token-mean"
    """how step losses are averaged (DeepSeekMath: seq-mean-token-mean; see the docstring)"""
    learning_rate: float = 1e-3
    """Adam learning rate (TPO repo's bandit experiments 1e-3; DeepSeekMath's LLM 1e-6)"""
    update_epochs: int = 4
    """epochs over each rollout (TPO repo's GRPO baseline 4; DeepSeekMath 1)"""
    num_minibatches: int = 1
    """minibatches per epoch; 1 is the whole rollout (sequence and Kalman ratios then filter
    in O(steps); more minibatches cost O(minibatch^2) each, controlrl.ratios.EpisodeRatios)"""
    max_grad_norm: float = 1.0
    """global gradient-norm clip (TRL 1.0)"""
    norm_obs: bool = True
    """running observation normalisation, clipped to [-10, 10] (CleanRL wrappers)"""
    hidden_sizes: tuple[int, ...] = (64, 64)
    """hidden layers of the policy (CleanRL 64, 64 tanh)"""
    max_episode_steps: int = 1000
    """a Gymnasium episode still running after this many steps is cut (its return so far is
    its score; MuJoCo v5's own limit is 1000); bandit episodes have their fixed length"""

    def validate(self) -> None:
        super().validate()
        require_group_flags(self)
        require_positive(
            self,
            "learning_rate",
            "update_epochs",
            "num_minibatches",
            "max_grad_norm",
            "clip_coef",
            "max_episode_steps",
        )
        require_nonnegative(self, "kl_coef")
        require_ratio_flags(self)
        require_sizes(self, "hidden_sizes")
        require(
            self.num_minibatches <= self.num_envs,
            "num_minibatches",
            f"must be <= --num-envs ({self.num_envs}), got {self.num_minibatches}",
        )
        require(
            self.total_timesteps >= self.num_envs,
            "total_timesteps",
            f"must be >= --num-envs ({self.num_envs}, one episode per env), "
            f"got {self.total_timesteps}",
        )


def k3(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """k3 estimate of KL(pi_theta || pi_ref) at actions drawn from pi_theta: exp(d) - d - 1 with
    d = log pi_ref - log pi_theta, >= 0 and unbiased (Schulman 2020, "Approximating KL
    divergence"); d clamped to [-20, 20] as the TPO repo's grpo_loss."""
    d = (ref_logp - logp).clamp(-20.0, 20.0)
    return d.exp() - d - 1


def grpo_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    ratio: torch.Tensor,
    adv: torch.Tensor,
    ref_logp: torch.Tensor,
    weight: torch.Tensor,
    eps: float,
    beta: float,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """GRPO objective, minimised: sum_rows weight * (-min(r A, clip(r, 1 - eps, 1 + eps) A)
    + beta k3(pi_theta, pi_ref)); the weights carry the loss aggregation (they sum to the mean
    over sequences and steps), 0 on padding and dropped groups. Statistics over rows with
    weight > 0: kl_penalty (mean k3), approx_kl (k3 of KL(old || new) from the per-step
    ratios) and clip_frac (|r - 1| > eps for the ratio used)."""
    surrogate = torch.min(ratio * adv, ratio.clamp(1 - eps, 1 + eps) * adv)
    kl = k3(logp, ref_logp)
    per_step = -surrogate + beta * kl if beta else -surrogate  # beta 0: no KL graph at all
    loss = (weight * per_step).sum()
    with torch.no_grad():
        used = (weight > 0).to(logp.dtype)
        count = used.sum().clamp_min(1.0)
        log_ratio = logp - old_logp
        stats = {
            "loss": loss.detach(),
            "policy_loss": -(weight * surrogate).sum(),
            "kl_penalty": (used * kl).sum() / count,
            "approx_kl": (used * (log_ratio.exp() - 1 - log_ratio)).sum() / count,
            "clip_frac": (used * ((ratio - 1).abs() > eps).to(logp.dtype)).sum() / count,
        }
    return loss, stats


def loss_weights(valid: torch.Tensor, agg: str, max_steps: int) -> torch.Tensor:
    """Per-step weights [T, N] of valid [T, N] (steps in the loss) for --loss-agg: weights sum
    to 1 (the means) or to the steps per sequence (the token-sum forms)."""
    if agg not in LOSS_AGGS:
        raise ValueError(f"agg = {agg!r}, expected one of {LOSS_AGGS}")
    mask = valid.to(torch.float32)
    lengths = mask.sum(0)  # [N] steps of each sequence in the loss
    sequences = (lengths > 0).sum().clamp_min(1)
    if agg == "token-mean":
        return mask / mask.sum().clamp_min(1.0)
    if agg == "seq-mean-token-mean":
        return mask / (lengths.clamp_min(1.0) * sequences)
    if agg == "seq-mean-token-sum":
        return mask / sequences
    return mask / (sequences * max_steps)


class RolloutRatios:
    """--ratio on minibatches of one rollout's rows (row t * N + n): a minibatch holding every
    row is filtered directly along time (O(T N)); smaller ones through EpisodeRatios."""

    def __init__(self, kind: str, ended, **kalman: float) -> None:
        self.kind, self.kalman = kind, kalman
        self.starts = episode_starts(ended)
        self.episodes = EpisodeRatios(kind, self.starts, **kalman)

    def __call__(self, logp: torch.Tensor, old_logp: torch.Tensor, idx: torch.Tensor):
        z = logp - old_logp
        if self.kind == "step" or z.numel() < self.starts.numel():
            return self.episodes(logp, old_logp, idx)
        full = torch.zeros(self.starts.numel(), dtype=z.dtype).index_put((idx,), z)
        x = filtered_log_ratio(
            full.reshape(self.starts.shape), self.starts, self.kind, **self.kalman
        )
        return x.reshape(-1)[idx].exp()

    def after_epoch(self, epoch: int) -> None:
        self.episodes.refresh()


def grpo_batch(
    rollout: GroupRollout, old_logp: torch.Tensor, ref_policy, args: Args
) -> tuple[dict[str, torch.Tensor], RolloutRatios, float]:
    """The rollout's rows [T * N] for the update (obs, actions, logprobs, ref_logprobs,
    advantages, weights), its ratios and the fraction of groups kept in the loss."""
    T, N = rollout.valid.shape
    scores = rollout.scores()  # [N / G, G]
    adv = group_advantages(scores, ADV_SCALES[args.adv_norm]).reshape(-1)  # [N]
    keep = torch.ones(scores.shape[0], dtype=torch.bool)
    if args.filter_zero_variance:
        keep = ~zero_variance_mask(scores)
    valid = torch.from_numpy(rollout.valid) & keep.repeat_interleave(args.group_size)
    obs, actions = rollout.flat_obs(), rollout.flat_actions()
    with torch.no_grad():
        ref_logp = ref_policy.log_prob_at(ref_policy.dist_params(obs), actions)
    batch = {
        "obs": obs,
        "actions": actions,
        "logprobs": old_logp.reshape(-1),
        "ref_logprobs": ref_logp,
        "advantages": adv.to(torch.float32).expand(T, N).reshape(-1),
        "weights": loss_weights(valid, args.loss_agg, args.max_episode_steps).reshape(-1),
    }
    ratios = RolloutRatios(args.ratio, rollout.ended, **kalman_noises(args))
    return batch, ratios, float(keep.float().mean())


def update(policy, optimizer, batch: dict[str, torch.Tensor], ratios, args: Args) -> dict:
    """update_epochs x num_minibatches Adam steps on the GRPO loss (skipped, NaN statistics,
    when no group is left in the loss); each minibatch's weights are scaled by rows / minibatch
    rows, so that it is an unbiased estimate of the whole rollout's loss."""
    if not bool((batch["weights"] > 0).any()):
        return {**{k: float("nan") for k in UPDATE_STATS}, "grad_steps": 0}
    rows = batch["obs"].shape[0]
    eps, beta = args.clip_coef, args.kl_coef

    def loss_fn(mb: dict[str, torch.Tensor], idx: torch.Tensor):
        logp, _ = policy.log_prob_entropy(mb["obs"], mb["actions"], False)
        ratio = ratios(logp, mb["logprobs"], idx)
        weight = mb["weights"] * (rows / idx.numel())
        return grpo_loss(
            logp, mb["logprobs"], ratio, mb["advantages"], mb["ref_logprobs"], weight, eps, beta
        )

    return minibatch_update(optimizer, batch, loss_fn, args, after_epoch=ratios.after_epoch)


def main(args: Args) -> None:
    run = GroupRun(args)
    policy = make_policy(run.obs_space, run.act_space, args.hidden_sizes)
    ref_policy = copy.deepcopy(policy).requires_grad_(False)  # before adam flattens policy's
    optimizer = adam(policy, lr=args.learning_rate)

    def update_fn(rollout: GroupRollout, old_logp: torch.Tensor) -> dict:
        batch, ratios, kept = grpo_batch(rollout, old_logp, ref_policy, args)
        valid = torch.from_numpy(rollout.valid).reshape(-1)
        kl_ref = k3(batch["logprobs"], batch["ref_logprobs"])[valid].mean()
        stats = update(policy, optimizer, batch, ratios, args)
        return {"kl_ref": float(kl_ref), "kept_frac": kept, **stats}

    run.train(
        update_fn, policy, ratio_eps=args.clip_coef, ref_policy=ref_policy, optimizer=optimizer
    )


if __name__ == "__main__":
    main(parse(Args))
