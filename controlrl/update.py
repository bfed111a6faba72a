"""The one minibatch update loop of the on-policy algorithms, its optimiser and LR schedule.

An algorithm passes its per-minibatch loss, `loss_fn(mb, idx) -> (loss, stats)`; the loop owns
the rest: epochs x shuffled minibatches, advantage normalisation (per minibatch, as CleanRL's
ppo_continuous_action.py), zero_grad, backward, global grad-norm clip, the optimiser step,
target-KL early stopping, statistics and the finiteness check.

The ratio option (--ratio, controlrl.cli.RatioArgs): `rollout_ratios(args, buffer.ended)` once
per rollout gives the EpisodeRatios of the sequence and Kalman-filtered kinds (None for "step",
which keeps the loss's own exp(logp - old_logp), the numbers of before the option existed);
actor_critic_loss hands its minibatch ratio to the policy loss, minibatch_update refreshes it.

Statistics: every stat is averaged over the minibatches, except those whose name ends in
"_max", which take the maximum (the one declared reduction rule, see reduce_stats).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from controlrl.diagnostics import check_finite
from controlrl.losses import clipped_value_loss
from controlrl.nets import flatten_parameters
from controlrl.optim import FlatAdam
from controlrl.ratios import EpisodeRatios, episode_starts

LossFn = Callable[[dict[str, torch.Tensor], torch.Tensor], tuple[torch.Tensor, dict]]


def adam(*modules: torch.nn.Module, lr: float, eps: float = 1e-5, flat: bool = True):
    """Adam over the modules' parameters (eps 1e-5 as CleanRL/SB3 PPO). flat: every parameter
    becomes a view of one flat tensor and Adam is fused, so clipping and the step are one op
    each (~25% of a small-MLP update on CPU); the numbers are those of per-tensor Adam up to
    rounding. Use flat=False where a step must leave some parameters untouched (FixPO's fixup
    steps the actor alone: a fused flat Adam would move the critic with its momentum).
    The flat one is controlrl.optim.FlatAdam: torch's fused Adam without torch.optim's import
    of torch._dynamo (~1.4 s per process), bit-identical to torch.optim.Adam(fused=True).
    A population's policy (controlrl.population) gets its per-seed Adam."""
    population_adam = getattr(modules[0], "population_adam", None) if modules else None
    if population_adam is not None:
        return population_adam(lr=lr, eps=eps)
    if flat:
        return FlatAdam(flatten_parameters(*modules), lr=lr, eps=eps)
    return torch.optim.Adam([p for m in modules for p in m.parameters()], lr=lr, eps=eps)


def linear_lr(base_lr: float, iteration: int, num_iterations: int, anneal: bool) -> float:
    """The learning rate of iteration (1-based): base_lr * (1 - (i - 1) / I) with anneal
    (CleanRL's linear schedule to 0), else base_lr."""
    frac = 1.0 - (iteration - 1) / num_iterations if anneal else 1.0
    return base_lr * frac


def anneal_lr(optimizer, base_lr: float, iteration: int, num_iterations: int, anneal: bool):
    """Set the optimiser's learning rate to linear_lr(...) and return it."""
    lr = linear_lr(base_lr, iteration, num_iterations, anneal)
    for group in optimizer.param_groups:
        group["lr"] = lr
    return lr


def normalize_advantages(adv: torch.Tensor) -> torch.Tensor:
    """(A - mean) / (std + 1e-8), std unbiased (torch's default, as CleanRL)."""
    return (adv - adv.mean()) / (adv.std() + 1e-8)


def reduce_stats(log: dict[str, list[torch.Tensor]]) -> dict[str, float]:
    """Mean over minibatches; max for names ending in '_max'."""
    return {
        k: float(torch.stack(v).max() if k.endswith("_max") else torch.stack(v).mean())
        for k, v in log.items()
    }


@torch.no_grad()
def clip_grad_norm(params: list[torch.Tensor], max_norm: float) -> torch.Tensor:
    """torch.nn.utils.clip_grad_norm_ for CPU float tensors of one dtype (bit-identical: the same
    foreach norm, stack, clamp and foreach multiply) without its per-call grouping by device and
    dtype, ~0.1 ms of every small-MLP step (bandit GRPO: ~6% of a run). Returns the total norm."""
    grads = [p.grad for p in params if p.grad is not None]
    if not grads:
        return torch.tensor(0.0)
    total = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads)))
    torch._foreach_mul_(grads, torch.clamp(max_norm / (total + 1e-6), max=1.0))
    return total


def params_of(optimizer) -> list[torch.Tensor]:
    """Every parameter the optimiser steps."""
    return [p for group in optimizer.param_groups for p in group["params"]]


def minibatch_update(
    optimizer,
    batch: dict[str, torch.Tensor],
    loss_fn: LossFn,
    args,
    after_step: Callable[[], None] | None = None,
    after_epoch: Callable[[int], None] | None = None,
    ratios: EpisodeRatios | None = None,
    skip: torch.Tensor | None = None,
    shuffle: bool = True,
) -> dict[str, float]:
    """args.update_epochs x args.num_minibatches optimiser steps on loss_fn (minibatches of
    shuffled rows; in row order without shuffle); returns the reduced
    statistics and grad_steps. mb holds the rows idx of every batch entry, with
    mb["advantages"] normalised when args.norm_adv (absent: False). Gradients are clipped to
    global norm args.max_grad_norm. args.target_kl (absent or None: off) stops after an epoch
    whose last minibatch has approx_kl above it (CleanRL). after_step() runs after every step,
    after_epoch(epoch) after every epoch, after ratios.refresh() (the rollout_ratios the loss
    uses: the next epoch's reference log-ratios). Raises NonFiniteError if a statistic or a
    parameter is NaN or inf.

    A population's optimiser (controlrl.population) runs the same loop for every seed at once,
    loss_fn vmapped over the seeds; skip [S] marks seeds that take no step this update (a
    single run skips before calling)."""
    population_update = getattr(optimizer, "population_update", None)
    if population_update is not None:
        return population_update(
            batch, loss_fn, args, after_step, after_epoch, ratios, skip, shuffle
        )
    size = batch["obs"].shape[0]
    mb_size = size // args.num_minibatches
    norm_adv = getattr(args, "norm_adv", False)
    target_kl = getattr(args, "target_kl", None)
    params = params_of(optimizer)
    log: dict[str, list[torch.Tensor]] = {}
    steps = 0
    for epoch in range(args.update_epochs):
        order = torch.randperm(size) if shuffle else torch.arange(size)
        for idx in order.split(mb_size):
            mb = {k: v[idx] for k, v in batch.items()}
            if norm_adv:
                mb["advantages"] = normalize_advantages(mb["advantages"])
            loss, stats = loss_fn(mb, idx)
            optimizer.zero_grad(set_to_none=False)  # in place: keeps flat-parameter views
            loss.backward()
            clip_grad_norm(params, args.max_grad_norm)
            optimizer.step()
            steps += 1
            if after_step is not None:
                after_step()
            for k, v in stats.items():
                log.setdefault(k, []).append(v)
        if ratios is not None:
            ratios.refresh()
        if after_epoch is not None:
            after_epoch(epoch)
        if target_kl is not None and stats["approx_kl"] > target_kl:
            break
    out = reduce_stats(log)
    check_finite(out, params)
    out["grad_steps"] = steps
    return out


@dataclass(frozen=True)
class _OneStep:
    max_grad_norm: float
    update_epochs: int = 1
    num_minibatches: int = 1


def gradient_step(
    optimizer,
    batch: dict[str, torch.Tensor],
    loss_fn: LossFn,
    max_grad_norm: float,
    skip: torch.Tensor | None = None,
) -> dict[str, float]:
    """One optimiser step on loss_fn over the whole batch (rows in order, idx = all of them),
    for an algorithm without epochs or minibatches (REINFORCE-style): the gradient zeroed in
    place (the flat parameters' views), backward, the global grad-norm clip, the step, the
    finiteness check; a population's optimiser steps every seed at once (skip [S]: seeds that
    take no step). Returns loss_fn's statistics and grad_steps."""
    return minibatch_update(
        optimizer, batch, loss_fn, _OneStep(max_grad_norm), skip=skip, shuffle=False
    )


def detached(**tensors: torch.Tensor) -> dict[str, torch.Tensor]:
    """The named loss terms without their graphs, for the statistics."""
    return {k: v.detach() for k, v in tensors.items()}


def rollout_ratios(args, ended: np.ndarray | torch.Tensor | None) -> EpisodeRatios | None:
    """The ratio of args.ratio (absent: "step") for one rollout: None for "step", else
    EpisodeRatios over the episodes of ended [T, N] (the buffer's terminated-or-truncated flags,
    rows t * N + n as RolloutBuffer.flat) with args.kalman_q, _v, _p0 for "kalman"."""
    kind = getattr(args, "ratio", "step")
    if kind == "step":
        return None
    if ended is None:
        raise ValueError(f"ended is required for ratio {kind!r} (the rollout's episode ends)")
    return EpisodeRatios(kind, episode_starts(ended), **kalman_noises(args))


def kalman_noises(args) -> dict[str, float]:
    """The Kalman flags of args (controlrl.cli.RatioArgs) as the keyword arguments q, v, p0 of
    controlrl.ratios' filters."""
    return {"q": args.kalman_q, "v": args.kalman_v, "p0": args.kalman_p0}


def actor_critic_loss(
    policy,
    value_net,
    policy_loss: Callable,
    value_clip_eps: float,
    args,
    ratios: EpisodeRatios | None = None,
):
    """The per-minibatch loss of the PPO family (CleanRL's composition): the algorithm's
    policy_loss(logp, old_logp, adv) -> (loss, stats), minus args.ent_coef times the entropy,
    plus args.vf_coef times the value loss, clipped at value_clip_eps if args.clip_vloss
    (controlrl.losses.clipped_value_loss). With ratios (rollout_ratios), the policy loss is
    called as policy_loss(logp, old_logp, adv, ratio) with the minibatch's ratio from them."""
    clip_vloss, ent_coef, vf_coef = args.clip_vloss, args.ent_coef, args.vf_coef

    def loss_fn(mb: dict[str, torch.Tensor], idx: torch.Tensor):
        logp, entropy = policy.log_prob_entropy(mb["obs"], mb["actions"], ent_coef != 0)
        old_logp, adv = mb["logprobs"], mb["advantages"]
        if ratios is None:
            pg_loss, stats = policy_loss(logp, old_logp, adv)
        else:
            pg_loss, stats = policy_loss(logp, old_logp, adv, ratios(logp, old_logp, idx))
        v_new = value_net(mb["obs"])
        v_loss = clipped_value_loss(v_new, mb["values"], mb["returns"], value_clip_eps, clip_vloss)
        ent = entropy.mean()
        # without a bonus the term is an exact 0 (same loss, same gradient): not computed
        loss = (pg_loss - ent_coef * ent if ent_coef else pg_loss) + vf_coef * v_loss
        terms = detached(loss=loss, policy_loss=pg_loss, value_loss=v_loss, entropy=ent)
        return loss, {**stats, **terms}

    return loss_fn
