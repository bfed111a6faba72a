"""TPO, Target Policy Optimization (Kaddour 2026; reference github.com/JeanKaddour/tpo,
src/tpo/algorithms.py): build a target distribution over each scored group, q proportional to
p_old exp(u / eta), once at rollout time, then fit the policy to it by cross-entropy for several
epochs. No ratios, no clipping, no critic, no KL penalty.

    python algos/tpo.py --env-id bandit:bernoulli-10 --total-timesteps 100000 --num-envs 256
    python algos/tpo.py --env-id bandit:sequence-reverse-2-6 --group-size 16
    python algos/tpo.py --env-id bandit:bimodal              # continuous actions
    python algos/tpo.py --env-id bandit:bernoulli-10 --num-seeds 1000 --seed 0   # 1000 seeds

--num-seeds S trains seeds --seed .. --seed + S - 1 in one process, the seed a batch dimension
(bandit: ids; controlrl/population.py): one run directory, metrics.csv with a seed column,
aggregate.csv with the mean and 95% t-interval over seeds per iteration.

Groups and episodes are GRPO's (controlrl/group_rollout.py: G envs share a context or a start
state, whole episodes, score = summed raw reward). Over a group of G outputs:
u = (s - mean(s)) / std(s), std the POPULATION std, u = 0 where std < 1e-6 (the reference
returns the centred scores there, which are ~0 anyway); the group's policy is
p_i = softmax_i(l_i) with l_i = log pi(o_i | context): the sum of the token (step) log-probs of
an episode, the log-density for continuous actions, in log space throughout (densities of a
narrow Gaussian overflow). The target q = softmax(log_softmax(l_old) + u / eta) is built from the
rollout's log-probs and held fixed across epochs; the loss is -mean_groups sum_i q_i log p_i,
whose gradient on the group logits is p - q.

Logs per iteration: train/episode_return, train/entropy, train/zero_variance_frac (groups with
u = 0: their target is p_old), the update's loss, target_kl (KL(q || p) over the groups, 0 when
the policy matches its target), approx_kl (k3 of KL(old || new) per step), grad_steps, and the
policy shift over the rollout (kl_mean, kl_max, ratio_dev_*).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from controlrl.cli import CommonArgs, parse, require, require_positive, require_sizes
from controlrl.group_rollout import GroupRollout, require_group_flags
from controlrl.population import (
    PopulationArgs,
    group_run,
    masked_mean,
    require_population_flags,
)
from controlrl.update import adam, minibatch_update

STD_FLOOR = 1e-6  # below it a group's scores count as equal (reference's tpo_skill)


@dataclass
class Args(PopulationArgs, CommonArgs):
    num_envs: int = 64
    """parallel environments: num_envs / group_size groups per iteration"""
    group_size: int = 8
    """K, outputs per context / episodes per start state (TPO sequence tasks 8)"""
    eta: float = 1.0
    """temperature of the target: q proportional to p_old exp(u / eta) (TPO 1; robust in
    [0.25, 2])"""
    learning_rate: float = 1e-3
    """Adam learning rate (TPO bandits and sequence tasks 1e-3)"""
    update_epochs: int = 4
    """epochs fitting each rollout's targets (TPO 4)"""
    num_minibatches: int = 1
    """minibatches of groups per epoch"""
    max_grad_norm: float = 1.0
    """global gradient-norm clip (not in the reference; TRL's 1.0, the same as grpo.py)"""
    norm_obs: bool = True
    """running observation normalisation, clipped to [-10, 10] (CleanRL wrappers)"""
    hidden_sizes: tuple[int, ...] = (64, 64)
    """hidden layers of the policy (CleanRL 64, 64 tanh)"""
    max_episode_steps: int = 1000
    """a Gymnasium episode still running after this many steps is cut (its return so far is
    its score); bandit episodes have their fixed length"""

    def validate(self) -> None:
        super().validate()
        require_group_flags(self)
        require_population_flags(self)
        require_positive(
            self,
            "eta",
            "learning_rate",
            "update_epochs",
            "num_minibatches",
            "max_grad_norm",
            "max_episode_steps",
        )
        require_sizes(self, "hidden_sizes")
        groups = self.num_envs // self.group_size
        require(
            self.num_minibatches <= groups,
            "num_minibatches",
            f"must be <= the groups per iteration (--num-envs / --group-size = {groups}), "
            f"got {self.num_minibatches}",
        )
        require(
            self.total_timesteps >= self.num_envs,
            "total_timesteps",
            f"must be >= --num-envs ({self.num_envs}, one episode per env), "
            f"got {self.total_timesteps}",
        )


def standardized_scores(scores: torch.Tensor) -> torch.Tensor:
    """u = (s - mean) / std over the group (last axis), population std; 0 where std < 1e-6."""
    centred = scores - scores.mean(-1, keepdim=True)
    std = centred.pow(2).mean(-1, keepdim=True).sqrt()
    flat = std < STD_FLOOR
    return torch.where(flat, torch.zeros_like(centred), centred / torch.where(flat, 1.0, std))


def tpo_target(old_logits: torch.Tensor, scores: torch.Tensor, eta: float) -> torch.Tensor:
    """q = softmax(log p_old + u / eta) over the group (last axis), p_old = softmax(old_logits):
    the maximiser of q.u - eta KL(q || p_old) on the simplex."""
    log_p_old = torch.log_softmax(old_logits, -1)
    return torch.softmax(log_p_old + standardized_scores(scores) / eta, -1)


def tpo_loss(group_logits: torch.Tensor, q: torch.Tensor) -> tuple[torch.Tensor, dict]:
    """Cross-entropy to the target, minimised: -mean_groups sum_i q_i log softmax(l)_i, l the
    group logits [B, G] (sequence log-probs under pi_theta); gradient on l: (p - q) / B."""
    log_p = torch.log_softmax(group_logits, -1)
    loss = -(q * log_p).sum(-1).mean()
    with torch.no_grad():
        target_kl = (torch.xlogy(q, q) - q * log_p).sum(-1).mean()
    return loss, {"loss": loss.detach(), "target_kl": target_kl}


def group_major(x: torch.Tensor, group_size: int, lead: int = 0) -> torch.Tensor:
    """[*L, T, N, ...] -> [*L, N / G, T, G, ...] (L: `lead` leading axes, a population's
    seeds): a group's steps together, for minibatches of groups."""
    T, N = x.shape[lead : lead + 2]
    x = x.reshape(*x.shape[:lead], T, N // group_size, group_size, *x.shape[lead + 2 :])
    return x.transpose(lead, lead + 1)


def tpo_batch(rollout: GroupRollout, old_logp: torch.Tensor, args: Args) -> dict:
    """Group-major tensors for the update: obs, actions, logprobs (old), valid [..., N/G, T, G,
    ...] and the targets q [..., N/G, G], built here once from the rollout's log-probs (the
    leading axes are a population's seeds, none for a single run)."""
    valid = torch.from_numpy(rollout.valid).expand(old_logp.shape)  # [..., T, N]
    G, lead = args.group_size, old_logp.ndim - 2
    old_seq = torch.where(valid, old_logp, 0.0).sum(-2).unflatten(-1, (-1, G))  # [..., N/G, G]
    return {
        "obs": group_major(torch.from_numpy(rollout.obs), G, lead),
        "actions": group_major(torch.from_numpy(rollout.actions), G, lead),
        "logprobs": group_major(old_logp, G, lead),
        "valid": group_major(valid, G, lead),
        "q": tpo_target(old_seq.double(), rollout.scores(), args.eta).to(torch.float32),
    }


def update(policy, optimizer, batch: dict[str, torch.Tensor], args: Args) -> dict:
    """update_epochs x num_minibatches (of groups) Adam steps on the cross-entropy to q."""
    lead = batch["valid"].ndim  # [..., N/G, T, G]: the feature axes come after
    obs_shape, act_shape = batch["obs"].shape[lead:], batch["actions"].shape[lead:]

    def loss_fn(mb: dict[str, torch.Tensor], idx: torch.Tensor):
        B, T, G = mb["valid"].shape
        logp, _ = policy.log_prob_entropy(
            mb["obs"].reshape(-1, *obs_shape), mb["actions"].reshape(-1, *act_shape), False
        )
        logp = logp.reshape(B, T, G)
        valid = mb["valid"]
        seq_logp = torch.where(valid, logp, 0.0).sum(1)  # [B, G] sequence log-probs
        loss, stats = tpo_loss(seq_logp, mb["q"])
        with torch.no_grad():
            log_ratio = logp - mb["logprobs"]
            stats["approx_kl"] = masked_mean(log_ratio.exp() - 1 - log_ratio, valid)
        return loss, stats

    return minibatch_update(optimizer, batch, loss_fn, args)


def main(args: Args) -> None:
    run = group_run(args)  # --num-seeds: a PopulationRun, every seed at once
    policy = run.make_policy(args.hidden_sizes)
    optimizer = adam(policy, lr=args.learning_rate)
    run.train(
        lambda rollout, old_logp: update(
            policy, optimizer, tpo_batch(rollout, old_logp, args), args
        ),
        policy,
        ratio_eps=0.2,  # only for the logged ratio_dev_frac (|r - 1| > 0.2), as PPO's
        optimizer=optimizer,
    )


if __name__ == "__main__":
    main(parse(Args))
