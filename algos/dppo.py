"""DPPO, Diffusion Policy Policy Optimization (Ren, Lidard, Ankile, Simeonov, Agrawal, Majumdar,
Burchfiel, Dai, Simchowitz, arXiv 2409.00588): behaviour cloning of a DDPM policy on an offline
dataset, then PPO fine-tuning in the two-layer MDP of (env step, denoising step): every
denoising step k -> k-1 of the last K' steps is a Gaussian action with its own ratio and clip.
Defaults of irom-lab/dppo cfg/gym/finetune/hopper-v2/ft_ppo_diffusion_mlp.yaml and
cfg/gym/pretrain/hopper-medium-v2/pre_diffusion_mlp.yaml; the loss is model/diffusion/
diffusion_ppo.py, the loop agent/finetune/train_ppo_diffusion_agent.py.

    python algos/dppo.py --dataset hopper-medium-v5-s0 --num-envs 8 --total-timesteps 200000
    python algos/dppo.py --pretrained runs/dppo/.../pretrained.pt --num-envs 8    # skip BC
    python algos/dppo.py --dataset hopper-medium-v5-s0 --policy gaussian          # baseline

Pre-training (--pretrain-steps gradient steps, skipped with --pretrained; controlrl/pretrain.py):
the DDPM eps-prediction loss on the dataset (controlrl.generative.ddpm_loss), observations
standardised with the dataset's mean and std, an EMA of the weights kept; then
<run_dir>/pretrained.pt holds the EMA network and the normaliser, ready for --pretrained.
--policy gaussian pre-trains a Gaussian policy by maximum likelihood on the same data instead,
and fine-tunes it with the same loss (one "denoising step", no discount, the final clip; its
ratio is the likelihood ratio of the whole action, not clamped or averaged over dims) and the
same PPO settings: the baseline of the paper's Gaussian comparison (a state-independent learned
log-std, as ppo.py).

Fine-tuning: the frozen pre-trained network runs the first K - K' reverse steps, a trainable
copy the last K'; the rollout stores each transition's chain x_{K'} .. x_0 (the buffer's
"chain" extra) and the update recomputes the per-step log-probs of the stored chains. The
observation normaliser stays frozen at the dataset's statistics; rewards are scaled by a
running return std (reward_scale_running True). Evaluation: the deterministic chain (std 0 at
the last step, 1e-3 before).

Differences from the reference: one action per env step (act_steps = horizon_steps = 1; the Gym
configs denoise chunks of 4 actions and execute all 4), observations standardised rather than
min-max scaled to [-1, 1], constant learning rates (the reference's cosine schedules have min_lr
= lr after a 10-iteration warm-up), the EMA updated every pre-training step (the reference:
every 5 epochs from epoch 10), target_kl checked after each epoch (the reference: after each
minibatch), a plain Mish MLP critic (the reference's is residual). As in the reference, a
minibatch is a set of env steps, each with all K' of its denoising steps. Logs (metrics.csv):
the episode and evaluation returns, policy_loss, value_loss, approx_kl (k3, over all denoising
steps), clip_frac, ratio_mean, adv_clip_frac (and for --policy gaussian the policy shift:
kl_mean, kl_max, ratio_dev_*); pre-training writes pretrain.csv (step, bc_loss).
"""

from __future__ import annotations

import copy
import math
import types
from dataclasses import dataclass
from functools import partial
from typing import Literal

import numpy as np
import torch
from torch import nn

import envs
from controlrl.cli import (
    ArgError,
    CommonArgs,
    fail,
    forget_datasets,
    load_dataset,
    parse,
    require,
    require_batch,
    require_finite,
    require_minibatch_memory,
    require_nonnegative,
    require_positive,
    require_seed,
    require_sizes,
    require_unit_interval,
)
from controlrl.generative import (
    DDPMSchedule,
    DenoiserMLP,
    chain_log_probs,
    ddpm_loss,
    sample_chain,
)
from controlrl.losses import approx_kl
from controlrl.nets import GaussianPolicy, ValueNet
from controlrl.pretrain import load_pretrained, require_same_flags, start_from_clone
from controlrl.training import Run
from controlrl.update import detached, minibatch_update

PRETRAINED_KIND = "dppo-pretrained"  # the "kind" entry of a pretrained.pt
LOGP_MIN, LOGP_MAX = -5.0, 2.0  # the clamp of every per-element log-prob (diffusion_ppo.py)


@dataclass
class Args(CommonArgs):
    env_id: str | None = None
    """Gymnasium id to fine-tune in (default: the dataset's, or the pretrained file's)"""
    dataset: str | None = None
    """offline dataset to pre-train on: a D4RL-layout HDF5 file, a Minari directory or a
    generated dataset's id (envs.offline); required unless --pretrained"""
    pretrained: str | None = None
    """a pretrained.pt written by an earlier dppo.py run: start fine-tuning from it (no
    pre-training)"""
    policy: Literal["diffusion", "gaussian"] = "diffusion"
    """diffusion: DPPO; gaussian: the Gaussian PPO baseline from a Gaussian behaviour clone"""
    pretrain_steps: int = 20_000
    """behaviour-cloning gradient steps (the reference trains 3000 epochs of the dataset)"""
    pretrain_batch_size: int = 128
    """behaviour-cloning minibatch (reference 128)"""
    pretrain_lr: float = 1e-3
    """behaviour-cloning Adam learning rate, cosine-decayed to --pretrain-min-lr (reference
    1e-3)"""
    pretrain_min_lr: float = 1e-4
    """the learning rate at the end of pre-training (reference min_lr 1e-4)"""
    ema_decay: float = 0.995
    """decay of the EMA of the pre-trained weights that fine-tuning starts from (reference
    0.995)"""
    denoising_steps: int = 20
    """DDPM steps K (reference 20), cosine schedule"""
    ft_denoising_steps: int = 10
    """fine-tuned last steps K' (reference 10 for hopper-v2 fine-tuning)"""
    min_sampling_std: float = 0.1
    """floor of the std of every reverse step when sampling: exploration (reference
    min_sampling_denoising_std 0.1)"""
    min_logprob_std: float = 0.1
    """floor of the std in the per-step log-probs (reference min_logprob_denoising_std 0.1)"""
    denoised_clip: float = 1.0
    """the predicted clean action is clipped to +-this (reference denoised_clip_value 1.0)"""
    randn_clip: float = 3.0
    """the sampling noise is clipped to +-this (reference randn_clip_value 3)"""
    hidden_sizes: tuple[int, ...] = (512, 512, 512)
    """actor: residual MLP widths (reference DiffusionMLP mlp_dims [512, 512, 512], ReLU;
    gaussian: the mean MLP's hidden layers, ReLU)"""
    time_dim: int = 16
    """sinusoidal time-embedding size of the denoiser (reference 16)"""
    critic_hidden_sizes: tuple[int, ...] = (256, 256, 256)
    """value net hidden layers, Mish (reference CriticObs [256, 256, 256], Mish; not
    residual here)"""
    total_timesteps: int = 1_000_000
    """environment steps of fine-tuning, summed over all envs"""
    num_steps: int = 500
    """steps per env per rollout (reference n_steps 500, with 40 envs)"""
    gamma: float = 0.99
    """env discount (reference 0.99)"""
    gae_lambda: float = 0.95
    """GAE lambda (reference 0.95)"""
    gamma_denoising: float = 0.99
    """denoising discount: denoising step j of K' (0 the noisiest) weighs its advantage by
    gamma_denoising^(K'-1-j) (reference 0.99)"""
    clip_coef: float = 0.01
    """ratio clip at the final denoising step (reference clip_ploss_coef 0.01)"""
    clip_coef_base: float = 0.01
    """ratio clip at the noisiest fine-tuned step; the steps between interpolate exponentially
    (reference clip_ploss_coef_base: 0.01 for Gym, 0.001 for Robomimic)"""
    clip_coef_rate: float = 3.0
    """rate of the exponential interpolation of the clip (reference 3)"""
    adv_clip_lower_quantile: float = 0.0
    """normalised advantages below this quantile of the minibatch are raised to it (reference
    0: no clip)"""
    adv_clip_upper_quantile: float = 1.0
    """normalised advantages above this quantile are lowered to it (reference 1: no clip)"""
    actor_lr: float = 1e-4
    """Adam learning rate of the fine-tuned network (reference 1e-4)"""
    critic_lr: float = 1e-3
    """Adam learning rate of the value net (reference 1e-3)"""
    num_minibatches: int = 4
    """minibatches per epoch (reference batch_size 5000 of 40 x 500 steps: 4)"""
    update_epochs: int = 5
    """epochs over each rollout (reference 5)"""
    vf_coef: float = 0.5
    """weight of the value loss 0.5 * MSE (reference 0.5)"""
    max_grad_norm: float | None = None
    """global gradient-norm clip of actor and critic (reference: none for Gym)"""
    target_kl: float | None = 1.0
    """stop the epochs when approx-KL of an epoch's last minibatch exceeds it (reference 1)"""
    norm_adv: bool = True
    """normalise advantages per minibatch (reference True)"""
    norm_obs: bool = True
    """standardise observations with the DATASET's mean and std, frozen in fine-tuning (the
    reference scales them to [-1, 1] with the dataset's min and max)"""
    norm_reward: bool = True
    """scale rewards by the std of a running discounted return (reference
    reward_scale_running True)"""

    def validate(self) -> None:
        require_finite(self)
        require_seed(self)
        require(
            self.env_id is None or self.env_id.strip() != "",
            "env_id",
            f"must name an env, got {self.env_id!r} (leave it out to take the dataset's or "
            "--pretrained's)",
        )
        require_positive(self, "pretrain_batch_size", "pretrain_lr", "pretrain_min_lr")
        require_positive(self, "denoising_steps", "ft_denoising_steps", "time_dim")
        require_positive(self, "min_sampling_std", "min_logprob_std", "denoised_clip", "randn_clip")
        require_positive(self, "num_steps", "num_minibatches", "update_epochs")
        require_positive(self, "clip_coef", "clip_coef_base", "actor_lr", "critic_lr")
        require_nonnegative(self, "pretrain_steps", "clip_coef_rate", "vf_coef")
        require_unit_interval(self, "gamma", "gae_lambda", "gamma_denoising", "ema_decay")
        require_sizes(self, "hidden_sizes", "critic_hidden_sizes")
        if self.policy == "diffusion":  # DPPO's residual MLP: equal widths, an odd count
            sizes = self.hidden_sizes
            require(
                len(set(sizes)) == 1 and len(sizes) % 2 == 1,
                "hidden_sizes",
                f"must be equal widths, an odd count of them (diffusion), got {sizes}",
            )
            require(
                self.time_dim % 2 == 0 and self.time_dim >= 4,
                "time_dim",
                f"must be even and >= 4, got {self.time_dim}",
            )
        require(
            self.ft_denoising_steps <= self.denoising_steps,
            "ft_denoising_steps",
            f"must be <= --denoising-steps ({self.denoising_steps}), got {self.ft_denoising_steps}",
        )
        lo, hi = self.adv_clip_lower_quantile, self.adv_clip_upper_quantile
        require(
            0 <= lo < hi <= 1, "adv_clip_lower_quantile", f"and upper need 0 <= {lo} < {hi} <= 1"
        )
        for name in ("max_grad_norm", "target_kl"):
            value = getattr(self, name)
            require(value is None or value > 0, name, f"must be > 0, got {value}")
        require_batch(self, self.num_steps, self.num_minibatches)
        if self.pretrained is not None:
            saved = load_pretrained(self.pretrained, PRETRAINED_KIND)
            require(
                saved["policy"] == self.policy,
                "pretrained",
                f"{self.pretrained} holds a {saved['policy']} policy, not --policy {self.policy}",
            )
            require_same_flags(self, saved)
            self.env_id = self.env_id or saved["env_id"]
        else:
            require(self.dataset is not None, "dataset", "is required unless --pretrained")
            dataset = load_dataset(self.dataset)
            dims = dataset.observations.shape[1], dataset.actions.shape[1]
            hidden = self.hidden_sizes
            require_minibatch_memory("pretrain_batch_size", self.pretrain_batch_size, *dims, hidden)
            require(
                bool(self.env_id or dataset.env_id), "env_id", "is needed: the dataset names none"
            )
            self.env_id = self.env_id or dataset.env_id
        super().validate()
        obs_space, act_space = envs.spaces(self.env_id, self.brax_pipeline)
        action_space_error = bad_action_space(self.env_id, act_space)
        if action_space_error:
            raise ArgError(action_space_error)
        if self.pretrained is None and self.resume is None:  # what start_from_clone checks
            dataset = load_dataset(self.dataset)
            shape = (dataset.observations.shape[1:], dataset.actions.shape[1:])
            require(
                shape == (obs_space.shape, act_space.shape),
                "dataset",
                f"obs x action shapes {shape} do not fit {self.env_id}",
            )


def pretrained_shape_flags(policy: str) -> tuple[str, ...]:
    """The flags a pretrained network's shape and schedule depend on: they must match."""
    if policy == "gaussian":
        return ("hidden_sizes", "norm_obs")
    return ("hidden_sizes", "time_dim", "denoising_steps", "norm_obs")


# -- the policies ------------------------------------------------------------------------------


class DiffusionPolicy(nn.Module):
    """DDPM policy: `base` (pre-trained, frozen in fine-tuning) runs the first K - K' reverse
    steps, `ft` (its fine-tuned copy) the last K'. sample -> (actions, {"chain": [B, K'+1, A]})."""

    def __init__(self, obs_dim: int, act_dim: int, args: Args) -> None:
        super().__init__()
        self.act_dim, self.args = act_dim, args
        # DPPO's DiffusionMLP as the hopper configs set it: residual, ReLU, 16-dim time embedding
        self.base = DenoiserMLP(
            obs_dim, act_dim, args.hidden_sizes, args.time_dim, "sinusoidal", True, nn.ReLU, True
        )
        self.ft = copy.deepcopy(self.base)
        self.sched = DDPMSchedule.make(args.denoising_steps, "cosine")

    def start_finetuning(self) -> None:
        """ft <- base; base frozen."""
        self.ft.load_state_dict(self.base.state_dict())
        self.base.requires_grad_(False)

    def _chain(self, obs: torch.Tensor, deterministic: bool):
        a = self.args
        return sample_chain(
            self.base,
            self.sched,
            obs,
            self.act_dim,
            a.ft_denoising_steps,
            ft_net=self.ft,
            min_sampling_std=a.min_sampling_std,
            denoised_clip=a.denoised_clip,
            randn_clip=a.randn_clip,
            deterministic=deterministic,
        )

    def sample(self, obs: torch.Tensor):
        """Actions [B, A] and the chain of the fine-tuned steps, for the rollout buffer."""
        actions, chain = self._chain(obs, deterministic=False)
        return actions, {"chain": chain}

    def mode(self, obs: torch.Tensor) -> torch.Tensor:
        """The deterministic chain's action (evaluation)."""
        return self._chain(obs, deterministic=True)[0]

    def step_log_probs(self, obs: torch.Tensor, chain: torch.Tensor) -> torch.Tensor:
        """logp_j [B, K'] of the chain's fine-tuned steps under ft: per element clamped to
        [-5, 2], then averaged over the action dims (diffusion_ppo.py loss)."""
        a = self.args
        logp = chain_log_probs(
            self.ft, self.sched, chain, obs, a.min_logprob_std, a.denoised_clip
        )  # [B, K', A]
        return logp.clamp(LOGP_MIN, LOGP_MAX).mean(-1)


def make_policy(obs_dim: int, act_dim: int, args: Args) -> nn.Module:
    """The diffusion policy, or the Gaussian baseline (ReLU mean MLP, learned log-std)."""
    if args.policy == "gaussian":
        return GaussianPolicy(obs_dim, act_dim, args.hidden_sizes, nn.ReLU)
    return DiffusionPolicy(obs_dim, act_dim, args)


def cloned_net(policy: nn.Module) -> nn.Module:
    """The network behaviour cloning trains and pretrained.pt holds: the diffusion policy's
    base, or the whole Gaussian policy."""
    return policy.base if isinstance(policy, DiffusionPolicy) else policy


def bc_loss(policy: nn.Module, obs: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
    """Behaviour-cloning loss: DDPM eps-MSE, or the Gaussian's negative log-likelihood."""
    if isinstance(policy, DiffusionPolicy):  # of the base network, the one pre-trained
        return ddpm_loss(policy.base, policy.sched, actions, obs)
    return -policy.log_prob_entropy(obs, actions, False)[0].mean()


# -- the loss ----------------------------------------------------------------------------------


def denoising_discount(gamma_denoising: float, ft_steps: int) -> torch.Tensor:
    """[g^(K'-1), ..., g, 1]: the weight of each fine-tuned denoising step's advantage, the
    noisiest first (diffusion_ppo.py)."""
    return torch.tensor([gamma_denoising**i for i in reversed(range(ft_steps))])


def clip_schedule(clip: float, base: float, rate: float, ft_steps: int) -> torch.Tensor:
    """eps_j = base + (clip - base) (exp(rate t_j) - 1) / (exp(rate) - 1), t_j = j / (K'-1):
    base at the noisiest fine-tuned step, clip at the final one; [clip] for K' = 1."""
    if ft_steps == 1:
        return torch.tensor([clip])
    t = torch.arange(ft_steps, dtype=torch.float64) / (ft_steps - 1)
    frac = (torch.exp(rate * t) - 1) / math.expm1(rate) if rate > 0 else t
    return (base + (clip - base) * frac).float()


def clip_advantages(adv: torch.Tensor, lower: float, upper: float) -> torch.Tensor:
    """Advantages clamped to their own [lower, upper] quantiles (identity at 0 and 1)."""
    if lower == 0.0 and upper == 1.0:
        return adv
    return adv.clamp(torch.quantile(adv, lower), torch.quantile(adv, upper))


def dppo_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    adv: torch.Tensor,
    eps: torch.Tensor,
    discount: torch.Tensor,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """PPO-clip over (env step, denoising step) pairs, minimised: logp, old_logp [B, K'] per
    denoising step, adv [B] per env step, eps and discount [K'];
    A_j = adv * discount_j, ratio_j = exp(logp_j - old_logp_j),
    L = mean over B x K' of max(-A_j ratio_j, -A_j clip(ratio_j, 1 - eps_j, 1 + eps_j))."""
    log_ratio = logp - old_logp
    ratio = log_ratio.exp()
    adv_j = adv[:, None] * discount  # [B, K']
    clipped = torch.minimum(torch.maximum(ratio, 1 - eps), 1 + eps)
    loss = torch.max(-adv_j * ratio, -adv_j * clipped).mean()
    with torch.no_grad():
        stats = {
            "approx_kl": approx_kl(ratio, log_ratio),
            "clip_frac": ((ratio - 1).abs() > eps).float().mean(),
            "ratio_mean": ratio.mean(),
        }
    return loss, stats


def old_step_log_probs(policy: nn.Module, batch: dict[str, torch.Tensor], chunk: int = 4096):
    """The rollout policy's logp_j [B, K'] of the batch, before any update (in chunks of env
    steps, one batched forward each): the stored chains' (diffusion) or the actions'
    (Gaussian, K' = 1, from Run.collect)."""
    if not isinstance(policy, DiffusionPolicy):
        return batch["logprobs"][:, None]
    with torch.no_grad():
        parts = [
            policy.step_log_probs(obs, chain)
            for obs, chain in zip(batch["obs"].split(chunk), batch["chain"].split(chunk))
        ]
    return torch.cat(parts)


def update(policy, value_net, optimizer, batch: dict[str, torch.Tensor], args: Args) -> dict:
    """update_epochs x num_minibatches Adam steps of dppo_loss + vf_coef * 0.5 MSE(V, returns)
    on the shared minibatch loop (advantages normalised there, then quantile-clipped here)."""
    diffusion = isinstance(policy, DiffusionPolicy)
    ft = args.ft_denoising_steps if diffusion else 1  # K' = 1: discount [1], clip [clip_coef]
    discount = denoising_discount(args.gamma_denoising, ft)
    eps = clip_schedule(args.clip_coef, args.clip_coef_base, args.clip_coef_rate, ft)
    batch = {**batch, "old_logp": old_step_log_probs(policy, batch)}
    lower, upper = args.adv_clip_lower_quantile, args.adv_clip_upper_quantile

    def loss_fn(mb: dict[str, torch.Tensor], idx: torch.Tensor):
        if diffusion:
            logp = policy.step_log_probs(mb["obs"], mb["chain"])
        else:
            logp = policy.log_prob_entropy(mb["obs"], mb["actions"], False)[0][:, None]
        adv = clip_advantages(mb["advantages"], lower, upper)
        pg_loss, stats = dppo_loss(logp, mb["old_logp"], adv, eps, discount)
        v_loss = 0.5 * (value_net(mb["obs"]) - mb["returns"]).square().mean()
        loss = pg_loss + args.vf_coef * v_loss
        stats["adv_clip_frac"] = (adv != mb["advantages"]).float().mean()
        return loss, {**stats, **detached(loss=loss, policy_loss=pg_loss, value_loss=v_loss)}

    return minibatch_update(optimizer, batch, loss_fn, loop_settings(args))


def loop_settings(args: Args):
    """What controlrl.update.minibatch_update reads (no clip: an infinite norm)."""
    return types.SimpleNamespace(
        update_epochs=args.update_epochs,
        num_minibatches=args.num_minibatches,
        norm_adv=args.norm_adv,
        target_kl=args.target_kl,
        max_grad_norm=math.inf if args.max_grad_norm is None else args.max_grad_norm,
    )


def make_optimizer(policy: nn.Module, value_net: nn.Module, args: Args) -> torch.optim.Adam:
    """Adam with one parameter group per network (the reference's separate actor and critic
    Adams: Adam's state is per parameter, so the groups are two Adams); the actor group holds
    only what is fine-tuned (ft, or the whole Gaussian)."""
    actor = policy.ft if isinstance(policy, DiffusionPolicy) else policy
    return torch.optim.Adam(
        [
            {"params": list(actor.parameters()), "lr": args.actor_lr},
            {"params": list(value_net.parameters()), "lr": args.critic_lr},
        ],
        eps=1e-8,
    )


def bad_action_space(env_id: str, space) -> str | None:
    """Why DPPO cannot act in space (its actions live in [-1, 1], the denoised clip: the env's
    bounds must be those), or None."""
    if not hasattr(space, "low") or not (np.all(space.low == -1) and np.all(space.high == 1)):
        return f"--env-id {env_id}: dppo needs Box actions in [-1, 1], got {space}"
    return None


def check_action_space(run: Run) -> None:
    """bad_action_space of the run's env, exiting 2 in one line (validate checked it first)."""
    error = bad_action_space(run.args.env_id, run.act_space)
    if error:
        fail(error)


def main(args: Args, dataset=None) -> float:
    """Pre-train (or load --pretrained), then fine-tune; returns the final evaluation's mean
    return. dataset: an envs.offline.Dataset instead of loading args.dataset (tests)."""
    if args.pretrained is None and dataset is None:
        dataset = load_dataset(args.dataset)
    forget_datasets()
    run = Run(args)
    check_action_space(run)
    obs_dim, act_dim = run.obs_dim, run.act_space.shape[0]
    policy = make_policy(obs_dim, act_dim, args)
    flags = pretrained_shape_flags(args.policy)  # the config of pretrained.pt
    bc = partial(bc_loss, policy)  # trains cloned_net(policy)
    start_from_clone(
        run, cloned_net(policy), bc, dataset, args, PRETRAINED_KIND, flags, policy=args.policy
    )
    del dataset
    if isinstance(policy, DiffusionPolicy):
        policy.start_finetuning()
        run.buffer.add_extra("chain", (args.ft_denoising_steps + 1, act_dim))
    value_net = ValueNet(obs_dim, args.critic_hidden_sizes, nn.Mish)
    optimizer = make_optimizer(policy, value_net, args)
    return run.train(
        lambda batch: update(policy, value_net, optimizer, batch, args),
        policy,
        value_net,
        ratio_eps=args.clip_coef,
        actor_critic_optimizer=optimizer,
    )


if __name__ == "__main__":
    main(parse(Args))
