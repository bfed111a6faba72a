"""FixPO (Zentner, Puri, Huang, Sukhatme 2023, "Guaranteed Trust Region Optimization via Two-Phase
KL Penalization"): an unclipped policy gradient with a Lagrangian KL penalty, then a fixup phase
that steps on the KL alone until max_s KL(old || new) <= eps_KL on every state of the batch.

    python algos/fixpo.py --env-id Hopper-v5 --total-timesteps 1000000 --seed 1

As uscresl/stabilized-rl `src/fixpo_tianshou.py`, defaults of `src/mujoco_fixpo_tianshou.py`:
tianshou's critic loss (no 0.5) and `rew_norm` (--value-norm), Adam eps 1e-8. Earlier behaviour
(CleanRL reward scaling): `--no-value-norm --norm-reward --adam-eps 1e-5 --vf-coef 0.05`. The
reference loops "until satisfied"; --fixup-max-passes caps the fixup (train/fixup_capped counts).
Logs ppo.py's metrics plus kl_loss, beta, primary and fixup gradient steps and the fixup share.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch

from controlrl.cli import (
    CommonArgs,
    parse,
    require,
    require_minibatch_flags,
    require_nonnegative,
    require_positive,
)
from controlrl.diagnostics import NonFiniteError, index_params, per_state_kl
from controlrl.losses import approx_kl, clipped_value_loss
from controlrl.nets import ValueNet, make_policy
from controlrl.normalize import RunningMeanStd
from controlrl.training import Run
from controlrl.update import adam, clip_grad_norm, detached, minibatch_update, params_of


@dataclass
class Args(CommonArgs):
    num_envs: int = 64
    """parallel environments in the vector env (FixPO MuJoCo launcher 64)"""
    learning_rate: float = 3e-4
    """Adam learning rate of actor and critic (FixPO 3e-4)"""
    anneal_lr: bool = True
    """anneal the learning rate linearly to 0; applies to fixup steps too (FixPO True)"""
    num_steps: int = 128
    """steps per env per rollout (FixPO step_per_collect 8192 = 64 envs x 128)"""
    gamma: float = 0.99
    """discount (FixPO 0.99)"""
    gae_lambda: float = 0.95
    """GAE lambda (FixPO 0.95)"""
    num_minibatches: int = 16
    """primary-phase minibatches per epoch (FixPO minibatch 512 of 8192)"""
    update_epochs: int = 10
    """primary-phase epochs over each rollout (FixPO repeat 10)"""
    norm_adv: bool = False
    """normalise advantages per minibatch (FixPO MuJoCo launcher False)"""
    eps_kl: float = 0.5
    """trust region: after every update max_s KL(old || new) <= eps_kl (FixPO launcher 0.5)"""
    c_beta: float = 3.0
    """the Lagrangian targets KL = eps_kl / c_beta so the fixup has little to do (FixPO 3.0)"""
    beta_init: float = 1.0
    """initial KL penalty coefficient beta (FixPO 1.0)"""
    beta_lr: float = 0.01
    """Adam learning rate of beta (FixPO 0.01)"""
    kl_target_stat: Literal["max", "mean"] = "max"
    """per-state KL statistic that drives beta and the fixup's test: max or mean (FixPO max)"""
    fixup_batchsize: int = 1024
    """minibatch size of the fixup phase (FixPO 1024)"""
    fixup_every_epoch: bool = True
    """run the fixup after every epoch, else only after the last (FixPO True)"""
    fixup_max_passes: int = 200
    """safety cap on fixup passes over the batch (the reference has none); logged when hit"""
    fixup_backtrack: bool = True
    """at the cap, shrink the actor's step until the region holds (testbed addition; logged)"""
    value_clip_eps: float = 0.2
    """clip the value loss around the old values with this eps (FixPO 0.2)"""
    clip_vloss: bool = True
    """clip the value loss (FixPO True)"""
    ent_coef: float = 0.0
    """entropy bonus coefficient (FixPO 0.0)"""
    vf_coef: float = 0.1
    """value loss coefficient (FixPO 0.1)"""
    max_grad_norm: float = 0.5
    """global gradient-norm clip, primary and fixup steps (FixPO 0.5)"""
    log_std_init: float = -0.5
    """initial log-std of the Gaussian policy (FixPO -0.5)"""
    ratio_eps: float = 0.2
    """eps of the logged ratio diagnostic |r - 1| > eps (PPO's 0.2; the update ignores it)"""
    norm_obs: bool = True
    """running observation normalisation, clipped to [-10, 10] (FixPO True)"""
    value_norm: bool = True
    """tianshou rew_norm: the critic learns returns / sqrt(Var + 1e-8), scaled back (FixPO True)"""
    norm_reward: bool = False
    """CleanRL/SB3 reward scaling, which rescales the advantages too (not the reference)"""
    adam_eps: float = 1e-8
    """Adam eps of actor and critic (FixPO: torch's default 1e-8)"""
    hidden_sizes: tuple[int, ...] = (64, 64)
    """hidden layers of the actor and of the critic (FixPO 64, 64 tanh)"""

    def validate(self) -> None:
        super().validate()
        require_minibatch_flags(self)
        require_positive(self, "eps_kl", "c_beta", "beta_lr", "fixup_batchsize", "adam_eps")
        require_positive(self, "fixup_max_passes", "value_clip_eps", "ratio_eps")
        require_nonnegative(self, "beta_init")
        both = self.value_norm and self.norm_reward  # two return normalisations
        require(not both, "norm_reward", "and --value-norm both normalise; add --no-value-norm")


def fixpo_loss(
    logp: torch.Tensor, old_logp: torch.Tensor, adv: torch.Tensor, kl: torch.Tensor, beta
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Primary-phase policy loss, minimised: -mean(r A) + sg(beta) mean_s KL(old || new)_s.

    No clipping: the KL penalty (and the fixup phase after it) is the whole trust region.
    """
    log_ratio = logp - old_logp
    ratio = log_ratio.exp()
    pg_loss = -(ratio * adv).mean()
    kl_loss = beta.detach() * kl.mean()
    with torch.no_grad():
        stats = {
            "approx_kl": approx_kl(ratio, log_ratio),
            "policy_loss": pg_loss.detach(),
            "kl_loss": kl_loss.detach(),
        }
    return pg_loss + kl_loss, stats


def value_loss(v_new, v_old, returns, eps: float, clip: bool) -> torch.Tensor:
    """tianshou's critic loss, as the reference: mean(max((V - R)^2, (V_clip - R)^2)) with
    V_clip = V_old + clip(V - V_old, -eps, eps), or mean((V - R)^2) unclipped. No 0.5 factor:
    twice controlrl.losses.clipped_value_loss (CleanRL's), so vf_coef 0.1 weighs it 0.1."""
    return 2.0 * clipped_value_loss(v_new, v_old, returns, eps, clip)


def value_scale(return_rms: RunningMeanStd | None) -> float:
    """sqrt(Var + 1e-8) of the running lambda-returns (tianshou rew_norm; 1 without it): the
    critic predicts V / scale."""
    return 1.0 if return_rms is None else math.sqrt(float(return_rms.var) + 1e-8)


def normalize_value_targets(batch: dict, return_rms: RunningMeanStd | None) -> dict:
    """tianshou rew_norm on a batch collected with V = critic * value_scale: returns and old
    values divided by the scale (the critic's targets and clipping anchors), advantages left in
    reward units; then the running statistics take the batch's returns. Without return_rms the
    batch is returned as is."""
    if return_rms is None:
        return batch
    scale = value_scale(return_rms)
    return_rms.update(batch["returns"].double().numpy())
    return {**batch, "returns": batch["returns"] / scale, "values": batch["values"] / scale}


def beta_loss(beta: torch.Tensor, kl_stat: torch.Tensor, eps_kl: float, c_beta: float):
    """Lagrangian of the constraint c_beta KL <= eps_kl in beta: beta (eps_kl - c_beta sg(KL));
    descending it raises beta exactly while c_beta KL > eps_kl."""
    return beta * (eps_kl - c_beta * kl_stat.detach())


def beta_step(beta: torch.Tensor, beta_opt, kl_stat: torch.Tensor, args: Args) -> None:
    """One Adam step on the Lagrangian in beta, then clamp beta >= 0."""
    beta_opt.zero_grad(set_to_none=True)
    beta_loss(beta, kl_stat, args.eps_kl, args.c_beta).backward()
    beta_opt.step()
    with torch.no_grad():
        beta.clamp_(min=0.0)


def kl_statistic(kl: torch.Tensor, args: Args) -> torch.Tensor:
    """The --kl-target-stat of a minibatch's per-state KL [B]: its max or its mean."""
    return kl.max() if args.kl_target_stat == "max" else kl.mean()


def region_holds(policy, obs: torch.Tensor, old_params, splits, args: Args) -> bool:
    """Whether no fixup minibatch (the index sets `splits`) violates the region, i.e. whether
    a fixup pass over them would take no step: kl_statistic <= eps_kl on each, one batched
    forward pass. Raises NonFiniteError on a NaN or inf KL (the NaN guard then stops the run)."""
    with torch.no_grad():
        kl = per_state_kl(old_params, policy.dist_params(obs))
    if not torch.isfinite(kl).all():  # a NaN KL is never <= eps_KL: stop as the NaN guard does
        raise NonFiniteError("non-finite KL in the fixup phase")
    if args.kl_target_stat == "max":
        return kl.max().item() <= args.eps_kl
    return all(kl[idx].mean().item() <= args.eps_kl for idx in splits)


def backtrack(policy, anchor: list[torch.Tensor], obs, old_params, splits, args: Args) -> None:
    """Move the actor to anchor + 2^-k (theta - anchor) for the smallest k where the region
    holds (k = 30 falls back to the anchor itself, the pre-update policy, where KL = 0)."""
    current = [p.detach().clone() for p in policy.parameters()]
    with torch.no_grad():
        for k in range(1, 31):
            alpha = 0.0 if k == 30 else 0.5**k
            for p, a, c in zip(policy.parameters(), anchor, current):
                p.copy_(a + alpha * (c - a))
            if region_holds(policy, obs, old_params, splits, args):
                return


def fixup(
    policy, optimizer, beta, beta_opt, obs, old_params, args: Args, anchor=None
) -> dict[str, int]:
    """Step on sg(beta) mean KL alone, on every fixup minibatch whose kl_statistic exceeds
    eps_kl (then one beta step on that statistic), until a pass would find none (or
    fixup_max_passes is hit; then, with fixup_backtrack and the pre-update actor parameters
    `anchor`, backtrack towards them). The reference reshuffles every pass, as here.

    Only the actor receives gradients (set_to_none), so Adam leaves the critic untouched.
    """
    params = params_of(optimizer)
    steps = passes = 0
    while True:
        splits = torch.randperm(obs.shape[0]).split(args.fixup_batchsize)
        if region_holds(policy, obs, old_params, splits, args):
            return {"fixup_steps": steps, "fixup_passes": passes, "fixup_capped": 0}
        if passes == args.fixup_max_passes:
            if args.fixup_backtrack and anchor is not None:
                backtrack(policy, anchor, obs, old_params, splits, args)
            return {"fixup_steps": steps, "fixup_passes": passes, "fixup_capped": 1}
        passes += 1
        for idx in splits:
            kl = per_state_kl(index_params(old_params, idx), policy.dist_params(obs[idx]))
            if kl_statistic(kl, args) <= args.eps_kl:
                continue
            optimizer.zero_grad(set_to_none=True)
            (beta.detach() * kl.mean()).backward()
            clip_grad_norm(params, args.max_grad_norm)
            optimizer.step()
            beta_step(beta, beta_opt, kl_statistic(kl, args), args)
            steps += 1


def update(
    policy,
    value_net,
    optimizer,
    beta,
    beta_opt,
    batch: dict,
    old_params,
    args: Args,
    return_rms: RunningMeanStd | None = None,
) -> dict:
    """Primary phase (update_epochs x num_minibatches steps, a beta step after each) with a fixup
    phase after every epoch (or only the last); returns mean statistics and step counts. With
    return_rms (tianshou rew_norm) the critic's targets are normalised first."""
    batch = normalize_value_targets(batch, return_rms)
    anchor = [p.detach().clone() for p in policy.parameters()]  # the pre-update actor
    fix = {"fixup_steps": 0, "fixup_passes": 0, "fixup_capped": 0}
    kl_stat = torch.zeros(())

    def loss_fn(mb, idx):
        nonlocal kl_stat
        logp, entropy = policy.log_prob_entropy(mb["obs"], mb["actions"], args.ent_coef != 0)
        kl = per_state_kl(index_params(old_params, idx), policy.dist_params(mb["obs"]))
        pi_loss, stats = fixpo_loss(logp, mb["logprobs"], mb["advantages"], kl, beta)
        v_loss = value_loss(
            value_net(mb["obs"]), mb["values"], mb["returns"], args.value_clip_eps, args.clip_vloss
        )
        ent = entropy.mean()
        loss = pi_loss - args.ent_coef * ent + args.vf_coef * v_loss
        kl_stat = kl_statistic(kl, args).detach()
        return loss, {**stats, **detached(loss=loss, value_loss=v_loss, entropy=ent)}

    def after_epoch(epoch: int) -> None:
        if args.fixup_every_epoch or epoch == args.update_epochs - 1:
            result = fixup(
                policy, optimizer, beta, beta_opt, batch["obs"], old_params, args, anchor
            )
            for k, v in result.items():
                fix[k] += v

    out = minibatch_update(
        optimizer,
        batch,
        loss_fn,
        args,
        after_step=lambda: beta_step(beta, beta_opt, kl_stat, args),
        after_epoch=after_epoch,
    )
    primary = out.pop("grad_steps")
    total = primary + fix["fixup_steps"]
    out.update(
        beta=beta.item(),
        grad_steps=total,
        primary_steps=primary,
        fixup_share=fix["fixup_steps"] / total,
        **fix,
    )
    return out


def main(args: Args) -> None:
    run = Run(args)
    policy = make_policy(
        run.obs_space, run.act_space, args.hidden_sizes, log_std_init=args.log_std_init
    )
    value_net = ValueNet(run.obs_dim, args.hidden_sizes)
    # one Adam over actor and critic (as the reference), per tensor: fixup steps leave the
    # critic's gradients None, so Adam skips it
    optimizer = adam(policy, value_net, lr=args.learning_rate, eps=args.adam_eps, flat=False)
    lagrange = torch.nn.ParameterDict({"beta": torch.nn.Parameter(torch.tensor(args.beta_init))})
    beta = lagrange["beta"]
    beta_opt = torch.optim.Adam([beta], lr=args.beta_lr)
    # tianshou's ret_rms: mean 0, var 1, count 0, so the first batch sets it exactly
    return_rms = RunningMeanStd(epsilon=0.0) if args.value_norm else None
    stateful = {"beta": lagrange, "beta_optimizer": beta_opt}
    if return_rms is not None:
        stateful["return_rms"] = return_rms

    def update_fn(batch: dict) -> dict:
        old_params = run.old_params  # the collecting policy's, on batch["obs"]
        return update(
            policy, value_net, optimizer, beta, beta_opt, batch, old_params, args, return_rms
        )

    run.train(
        update_fn,
        policy,
        value_net,
        ratio_eps=args.ratio_eps,
        optimizer=optimizer,
        # the rollout's V in reward units for GAE (tianshou rew_norm)
        values=lambda obs: value_net(obs) * value_scale(return_rms),
        **stateful,
    )


if __name__ == "__main__":
    main(parse(Args))
