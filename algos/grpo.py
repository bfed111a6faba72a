"""GRPO, Group Relative Policy Optimization (Shao et al. 2024, "DeepSeekMath", arXiv 2402.03300):
PPO's clipped surrogate with a critic-free, group-relative outcome advantage and a k3 KL penalty
to a frozen reference policy (the initial one).

    python algos/grpo.py --env-id bandit:bernoulli-10 --total-timesteps 100000 --num-envs 256
    python algos/grpo.py --env-id bandit:sequence-reverse-2-6 --group-size 16 --kl-coef 0
    python algos/grpo.py --env-id Hopper-v5 --num-envs 32 --group-size 8 --ratio kalman
    python algos/grpo.py --env-id bandit:bernoulli-10 --num-seeds 1000 --seed 0   # 1000 seeds

--num-seeds S trains seeds --seed .. --seed + S - 1 in one process, the seed a batch dimension
(bandit: ids; controlrl/population.py): one run directory, metrics.csv with a seed column,
aggregate.csv with the mean and 95% t-interval over seeds per iteration.

Groups (controlrl/group_rollout.py): G consecutive envs share a context (bandits: G pulls for
the same context, or G answers to the same prompt) or a start state (Gymnasium: G envs reset
from the same seed). Every iteration collects whole episodes: each env runs until its first
episode ends, so episodes of different lengths simply have different numbers of steps (masked
padding after the end) and no episode is ever cut by the rollout; an episode longer than
--max-episode-steps is cut there. The score of an episode is its summed raw reward; the
advantage is that score standardised over its group (controlrl/group.py) and the same A for
every step (token) of the episode. No value network, no GAE, no reward scaling.

The objective is made of parts (controlrl/objective.py), each chosen by a flag named as verl's
config names it: the advantage estimator (--adv-norm, --drop-negatives), score shaping
(--overlong-max: DAPO's soft overlong punishment), the per-step policy loss (--policy-loss:
clip, cispo, sapo, dpg, reinforce, clip-cov, kl-cov, gbpo, nft), its clip range (--clip-coef,
--eps-low, --eps-high, carried into clip_frac and ratio_dev_frac), the KL estimator and where
it enters (--kl-estimator, --kl-in loss | reward), the loss aggregation and the zero-variance
filter.
Recipes: DAPO's clip-higher --eps-high 0.28; CISPO --policy-loss cispo --eps-high 0.28; GPG
--policy-loss reinforce --adv-norm gpg --kl-coef 0 --update-epochs 1; RGRA --policy-loss
reinforce --update-epochs 1 (its ablation: --drop-negatives). Estimators of
controlrl/advantages.py (--adv-norm rloo, reinforce++, reinforce++-baseline, lite-ppo, bnpo,
gpg)
and controlrl/kl_estimators.py (--kl-estimator k1, k2, k3-unbiased); train-inference
mismatch (controlrl/mismatch.py): --rollout-mismatch temperature | bf16 | bf16-forward |
fp8-forward draws the rollout from a perturbed copy of the policy, --rollout-lag k from the
policy of k updates ago (asynchronous rollouts), --mismatch-correction none | tis | mis
reweights its loss.

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
    fail,
    parse,
    require,
    require_choice,
    require_finite,
    require_nonnegative,
    require_positive,
    require_ratio_flags,
    require_sizes,
)
from controlrl.group import zero_variance_mask
from controlrl.group_rollout import GroupRollout, require_group_flags
from controlrl.injection import SuccessInjection, injectable
from controlrl.mismatch import (
    PERTURBATIONS,
    RolloutLag,
    behaviour_sampler,
    mismatch_kl,
    rollout_weights,
    template_class,
)
from controlrl.nets import CategoricalPolicy
from controlrl.objective import (
    ADVANTAGES,
    CORRECTIONS,
    KL_ESTIMATORS,
    KL_PLACEMENTS,
    POLICY_LOSSES,
    SCORED_LOSSES,
    Objective,
    Tokens,
    drop_negatives,
    episode_kl,
    k3,
    loss_weights,
    overlong_penalty,
)
from controlrl.objective import group_objective as grpo_loss
from controlrl.population import PopulationArgs, group_run, require_population_flags
from controlrl.ratios import EpisodeRatios, episode_starts, filtered_log_ratio
from controlrl.update import adam, kalman_noises, minibatch_update

__all__ = ["Args", "grpo_loss", "k3", "loss_weights", "main", "update"]
UPDATE_STATS = ("loss", "policy_loss", "kl_penalty", "approx_kl", "clip_frac")


@dataclass
class Args(PopulationArgs, RatioArgs, CommonArgs):
    num_envs: int = 64
    """parallel environments: num_envs / group_size groups per iteration"""
    group_size: int = 8
    """G, outputs per context / episodes per start state (DeepSeekMath 64; TPO's sequence
    tasks 8)"""
    adv_norm: str = "mean-std"
    """advantage estimator over each group's scores (controlrl.objective.ADVANTAGES): mean-std
    (r - mean) / (std + 1e-4) (GRPO; TRL's unbiased std and epsilon) or mean, r - mean
    (Dr. GRPO); gpg, alpha (r - mean) with alpha = B / (B - M), M the outputs of groups with
    no spread (GPG, arXiv 2504.02546; AMAP-ML/GPG); rloo (leave-one-out mean, arXiv
    2402.14740), reinforce++ (rewards whitened over the batch, arXiv 2501.03262) and
    reinforce++-baseline (group mean off, then whitened; OpenRLHF / verl), lite-ppo (group
    mean, batch std, arXiv 2508.08221), bnpo (Beta normalisation, arXiv 2506.02864;
    changyi7231/BNPO), batch-mean (r - the batch's mean, groups ignored: the TPO reference's
    PG / PPO / DG baseline, JeanKaddour/tpo), all in controlrl/advantages.py"""
    drop_negatives: bool = False
    """advantages below 0 set to 0: RGRA's negatives-off ablation (REINFORCE with Group
    Relative Advantage: negative samples are essential)"""
    filter_zero_variance: bool = False
    """drop groups whose returns are all equal from the loss (their KL term too; Reinforce-Rej /
    DAPO dynamic sampling); the fraction is logged either way"""
    inject_demos: bool = False
    """HAPO's synthetic success injection (arXiv 2603.11321; controlrl/injection.py): a group
    whose members all fail gets its first member replaced by the teacher's success (the
    context's best arm) when a Thompson draw from the context's Beta posterior of the policy's
    own success is below --inject-threshold; one-step 0/1 bandits only"""
    inject_threshold: float = 0.5
    """--inject-demos: inject iff theta ~ Beta(1 + successes, 1 + failures) < this; 1 injects
    into every failed group (static teacher forcing, no gate)"""
    policy_loss: str = "clip"
    """per-step policy loss (controlrl.objective.POLICY_LOSSES; verl's policy_loss.loss_mode):
    clip (PPO / GRPO; DAPO with --eps-high 0.28), cispo (MiniMax-M1 arXiv 2506.13585: the
    stop-gradient ratio capped at 1 + eps_high, no lower bound, times A log pi; TRL cispo),
    sapo (soft gate (4 / tau) sigma(tau (r - 1)), arXiv 2511.20347), dpg (Delightful PG's gate
    sigma(A x surprisal / eta), arXiv 2603.14608), reinforce (-A log pi, no ratio or clip: GPG arXiv
    2504.02546 with --adv-norm gpg --kl-coef 0, RGRA with GRPO's advantage; verl gpg),
    clip-cov and kl-cov (the entropy mechanism, arXiv 2505.22617; verl clip_cov / kl_cov,
    reference PRIME-RL/Entropy-Mechanism-of-RL), gbpo (BPO's group variant, the ratio regressed
    onto the bounded-ratio target above / below the group's median score, arXiv 2604.18578;
    bounded-ratio-rl/bounded_ratio_rl's verl gbpo), nft (Negative-aware Fine-Tuning, arXiv
    2505.18116, controlrl/nft.py: GRPO's gradient at theta_old, with --adv-norm mean-std or
    mean)"""
    kl_coef: float = 0.04
    """beta of the KL penalty to the reference (the initial policy, frozen) (DeepSeekMath
    0.04; 0 disables it, as TRL's default)"""
    kl_estimator: str = "k3"
    """estimator of KL(pi_theta || pi_ref) per step (controlrl.objective.KL_ESTIMATORS; k3:
    Schulman 2020, DeepSeekMath's); k1, k2 and k3-unbiased (k3 times pi_theta / pi_old,
    DeepSeek-V3.2 arXiv 2512.02556 eq. 7) in controlrl/kl_estimators.py"""
    kl_in: str = "loss"
    """where the KL enters: loss (beta k per step, GRPO) or reward (beta sum_t k of the
    rollout policy off each episode's score before the advantage; verl's use_kl_in_reward)"""
    clip_coef: float = 0.2
    """ratio clip eps (DeepSeekMath 0.2): the range [1 - eps_low, 1 + eps_high] of clip and
    clip-cov and of every clip statistic; cispo's cap 1 + eps_high (no lower bound)"""
    eps_low: float | None = None
    """lower clip eps (None: --clip-coef; DAPO 0.2; verl clip_ratio_low)"""
    eps_high: float | None = None
    """upper clip eps (None: --clip-coef; DAPO's clip-higher 0.28, arXiv 2503.14476; verl
    clip_ratio_high)"""
    sapo_tau_pos: float = 1.0
    """--policy-loss sapo: gate temperature where A > 0 (SAPO 1.0)"""
    sapo_tau_neg: float = 1.05
    """--policy-loss sapo: gate temperature where A <= 0 (SAPO 1.05: negative tokens fade
    faster)"""
    dpg_eta: float = 1.0
    """--policy-loss dpg: temperature eta of the gate sigma(A x surprisal / eta) (the paper's
    value not checked here: 1)"""
    cov_frac: float = 2e-4
    """--policy-loss clip-cov / kl-cov: fraction of a minibatch's rows in the loss (padding
    and dropped groups not counted, as verl counts its loss mask) selected, at least one (verl
    clip_cov_ratio / kl_cov_ratio 2e-4)"""
    clip_cov_lb: float = 1.0
    """--policy-loss clip-cov: covariance lower bound of the rows it may cut (verl 1.0)"""
    clip_cov_ub: float = 5.0
    """--policy-loss clip-cov: covariance upper bound (verl 5.0)"""
    kl_cov_coef: float = 1.0
    """--policy-loss kl-cov: coefficient of |log r| on the selected rows (verl ppo_kl_coef 1.0)"""
    gbpo_temperature: float = 1.0
    """--policy-loss gbpo: temperature T of the target ratio's sigmoid (the reference's verl
    config gbpo_temperature 1.0; its TTRL scripts 1e-4 with clip 0.3); the target's score gap
    to the group median is divided by the group's std except with --adv-norm mean (the
    reference's norm_adv_by_std_in_grpo)"""
    overlong_max: int | None = None
    """DAPO's soft overlong punishment (arXiv 2503.14476, eq. 13): episodes longer than
    overlong_max - overlong_cache steps lose up to 1 from their score, linearly, 1 beyond
    overlong_max (DAPO 20480 tokens); None: off"""
    overlong_cache: int = 1
    """the punishment interval L_cache of --overlong-max (DAPO 4096 of 20480)"""
    rollout_mismatch: str = "none"
    """train-inference mismatch (controlrl/mismatch.py; categorical policies): the rollout is
    drawn from a perturbed copy of the policy, temperature (logits / --rollout-temperature),
    bf16 (logits rounded to bfloat16), bf16-forward (the network run in bfloat16, weights
    and activations, as an inference engine runs it) or fp8-forward (its GEMMs as FP8 W8A8 ones
    with per-tensor scales, vLLM's fp8 scheme), while the loss is the policy's; none:
    off. Logs train/mismatch_kl, the mean KL(sampler || policy) per step of the rollout"""
    rollout_lag: int = 0
    """asynchronous rollouts (controlrl.mismatch.RolloutLag): the rollout is drawn by the policy
    of this many updates ago (a stale inference engine; 1: the one-step-off pipeline), the loss
    is the current policy's, --mismatch-correction weighs by pi_old / mu; 0: off"""
    rollout_temperature: float = 1.25
    """--rollout-mismatch temperature: the sampler's logit temperature"""
    mismatch_correction: str | None = None
    """required with --rollout-mismatch: the policy loss times w = pi_old / mu per step, none
    (w = 1), tis (min(w, --tis-cap): truncated IS, Yao et al. 2025; verl rollout correction)
    or mis (w on [--mis-low, --mis-high], else 0: masked IS / IcePop, arXiv 2510.18855)"""
    tis_cap: float = 2.0
    """--mismatch-correction tis: the cap C (verl's rollout_is_threshold 2.0)"""
    mis_low: float = 0.5
    """--mismatch-correction mis: lowest weight kept (verl's default for a ratio threshold: its
    reciprocal, verl/trainer/ppo/rollout_corr_helper.py)"""
    mis_high: float = 2.0
    """--mismatch-correction mis: highest weight kept (verl's ratio threshold 2.0, the TIS cap)"""
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
        require_finite(self)  # then the parts, before the env id is checked (it builds one)
        require_objective_flags(self)
        super().validate()
        require_group_flags(self)
        require(
            not (self.filter_zero_variance and self.group_size == 1),
            "filter_zero_variance",
            "needs groups of >= 2 (a group of one has zero variance: every group would go)",
        )
        require_population_flags(self)
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
        if self.rollout_mismatch != "none" or self.rollout_lag:  # checked on the policy in main
            import envs

            act_space = envs.spaces(self.env_id, self.brax_pipeline)[1]
            require(
                hasattr(act_space, "n"),
                "rollout_mismatch",
                f"perturbs logits: it needs a discrete action space, {self.env_id} has {act_space}",
            )


def require_objective_flags(args: Args) -> None:
    """Every part's name in its registry; eps_low <= eps_high, both > 0; gate temperatures,
    eta and the covariance fraction > 0; the overlong interval inside --overlong-max."""
    require_choice(args, "adv_norm", ADVANTAGES)
    require_choice(args, "policy_loss", POLICY_LOSSES)
    require_choice(args, "kl_estimator", KL_ESTIMATORS)
    require_choice(args, "kl_in", KL_PLACEMENTS)
    require_mismatch_flags(args)
    low, high = clip_range(args)
    require_positive(args, "clip_coef")
    require(low > 0, "eps_low", f"must be > 0, got {low}")
    require(high >= low, "eps_high", f"must be >= --eps-low ({low}), got {high}")
    require_positive(args, "sapo_tau_pos", "sapo_tau_neg", "dpg_eta", "kl_cov_coef")
    require_positive(args, "gbpo_temperature")
    require(
        0 < args.inject_threshold <= 1,
        "inject_threshold",
        f"must be in (0, 1], got {args.inject_threshold}",
    )
    require(
        not args.inject_demos or injectable(args.env_id),
        "inject_demos",
        "needs a one-step bandit with 0/1 rewards and a best arm to teach (bandit:bernoulli-, "
        f"sparse-, onehot-, contextual-), got {args.env_id}",
    )
    require(
        args.policy_loss != "nft" or args.adv_norm in ("mean-std", "mean"),
        "policy_loss",
        f"nft weighs prompts as --adv-norm mean-std or mean, got --adv-norm {args.adv_norm}",
    )
    require(0 < args.cov_frac <= 1, "cov_frac", f"must be in (0, 1], got {args.cov_frac}")
    require(
        args.clip_cov_lb < args.clip_cov_ub,
        "clip_cov_ub",
        f"must be > --clip-cov-lb ({args.clip_cov_lb}), got {args.clip_cov_ub}",
    )
    if args.overlong_max is not None:
        require_positive(args, "overlong_max", "overlong_cache")
        require(
            args.overlong_cache <= args.overlong_max,
            "overlong_cache",
            f"must be <= --overlong-max ({args.overlong_max}), got {args.overlong_cache}",
        )


def require_mismatch_flags(args: Args) -> None:
    """A perturbed sampler needs a correction kind (and a correction, a sampler); BNPO's Beta
    needs scores in [0, 1]."""
    require_choice(args, "rollout_mismatch", PERTURBATIONS)
    require_nonnegative(args, "rollout_lag")
    kinds = ", ".join(sorted(CORRECTIONS))
    if args.rollout_mismatch == "none" and not args.rollout_lag:
        require(
            args.mismatch_correction is None,
            "mismatch_correction",
            "needs --rollout-mismatch or --rollout-lag (there is no mismatch to correct)",
        )
    else:
        require(
            args.mismatch_correction is not None,
            "mismatch_correction",
            "is required with --rollout-mismatch or --rollout-lag: one of " + kinds,
        )
        require_choice(args, "mismatch_correction", CORRECTIONS)
    require_positive(args, "rollout_temperature", "tis_cap", "mis_low")
    require(
        args.mis_high > args.mis_low,
        "mis_high",
        f"must be > --mis-low ({args.mis_low}), got {args.mis_high}",
    )
    shaped = args.overlong_max is not None or (args.kl_in == "reward" and args.kl_coef > 0)
    require(
        not (args.adv_norm == "bnpo" and shaped),
        "adv_norm",
        "bnpo needs scores in [0, 1]: not with --overlong-max or --kl-in reward",
    )
    require(
        not (args.policy_loss == "nft" and shaped),
        "policy_loss",
        "nft needs successes (scores 0 or 1): not with --overlong-max or --kl-in reward",
    )


def clip_range(args: Args) -> tuple[float, float]:
    """(eps_low, eps_high) of the flags, --clip-coef where one is not given."""
    low = args.clip_coef if args.eps_low is None else args.eps_low
    high = args.clip_coef if args.eps_high is None else args.eps_high
    return low, high


def advantage_of(args: Args):
    """The estimator of --adv-norm, scores [..., B, G] -> advantages [..., B, G] (an estimator
    with constants of its own gets them from its flags here, functools.partial)."""
    return ADVANTAGES[args.adv_norm]


def objective_of(args: Args) -> Objective:
    """The parts the flags choose."""
    low, high = clip_range(args)
    return Objective(
        policy_loss=args.policy_loss,
        eps_low=low,
        eps_high=high,
        kl=args.kl_estimator,
        kl_coef=args.kl_coef,
        kl_in=args.kl_in,
        sapo_tau_pos=args.sapo_tau_pos,
        sapo_tau_neg=args.sapo_tau_neg,
        dpg_eta=args.dpg_eta,
        cov_frac=args.cov_frac,
        clip_cov_lb=args.clip_cov_lb,
        clip_cov_ub=args.clip_cov_ub,
        kl_cov_coef=args.kl_cov_coef,
        gbpo_temperature=args.gbpo_temperature,
        gbpo_std=args.adv_norm != "mean",
        nft_scale="mean" if args.adv_norm == "mean" else "mean_std",
    )


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
    rollout: GroupRollout, old_logp: torch.Tensor, ref_policy, args: Args, generators=None
) -> tuple[dict[str, torch.Tensor], RolloutRatios, float]:
    """The rollout's rows [..., T * N] for the update (obs, actions, logprobs, ref_logprobs,
    advantages, weights; noise for clip-cov, drawn from each seed's generator where a
    population has them), its ratios and the fraction of groups kept in the loss [...]; the
    leading axes are a population's seeds (none for a single run)."""
    T, N = rollout.valid.shape
    scores = rollout.scores()  # [..., N / G, G]
    valid_steps = torch.from_numpy(rollout.valid)
    obs, actions = rollout.flat_obs(), rollout.flat_actions()
    with torch.no_grad():
        ref_logp = ref_policy.log_prob_at(ref_policy.dist_params(obs), actions)
    shaped = scores
    if args.overlong_max is not None:
        lengths = torch.from_numpy(rollout.lengths).reshape(scores.shape)
        shaped = shaped + overlong_penalty(lengths, args.overlong_max, args.overlong_cache)
    if args.kl_in == "reward" and args.kl_coef:
        kl = episode_kl(old_logp, ref_logp.reshape(old_logp.shape), valid_steps, args.kl_estimator)
        shaped = shaped - args.kl_coef * kl.double().reshape(scores.shape)
    adv = advantage_of(args)(shaped)
    if args.drop_negatives:
        adv = drop_negatives(adv)
    adv = adv.flatten(-2)  # [..., N]
    keep = torch.ones(scores.shape[:-1], dtype=torch.bool)
    if args.filter_zero_variance:
        keep = ~zero_variance_mask(scores)
    keep_steps = keep.repeat_interleave(args.group_size, -1).unsqueeze(-2)  # [..., 1, N]
    valid = valid_steps & keep_steps
    batch = {
        "obs": obs,
        "actions": actions,
        "logprobs": old_logp.flatten(-2),
        "ref_logprobs": ref_logp,
        "advantages": adv.to(torch.float32).unsqueeze(-2).expand(*adv.shape[:-1], T, N),
        "weights": loss_weights(valid, args.loss_agg, args.max_episode_steps).flatten(-2),
    }
    batch["advantages"] = batch["advantages"].flatten(-2)
    if args.policy_loss in SCORED_LOSSES:  # each row's score and its group's [..., T * N(, G)]
        per_env = shaped.to(torch.float32)
        batch["scores"] = per_env.flatten(-2).unsqueeze(-2).expand(*adv.shape[:-1], T, N)
        batch["scores"] = batch["scores"].flatten(-2)
        group = per_env.repeat_interleave(args.group_size, -2)  # [..., N, G]
        batch["group_scores"] = (
            group.unsqueeze(-3).expand(*adv.shape[:-1], T, N, -1).flatten(-3, -2)
        )
    if args.policy_loss == "clip-cov":  # its random choice of rows, fixed for the update
        rows = batch["logprobs"].shape[-1]
        batch["noise"] = (
            torch.stack([torch.rand(rows, generator=g) for g in generators])
            if generators
            else torch.rand(rows)
        )
    ratios = RolloutRatios(args.ratio, rollout.ended, **kalman_noises(args))
    return batch, ratios, keep.float().mean(-1)


def update(policy, optimizer, batch: dict[str, torch.Tensor], ratios, args: Args) -> dict:
    """update_epochs x num_minibatches Adam steps on the group objective of the flags (skipped,
    NaN statistics, when no group is left in the loss); each minibatch's weights are scaled by
    rows / minibatch rows, so that it is an unbiased estimate of the whole rollout's loss."""
    empty = ~(batch["weights"] > 0).any(-1)  # [] ([S]: per seed of a population)
    if bool(empty.all()):
        return {**{k: float("nan") for k in UPDATE_STATS}, "grad_steps": 0}
    rows = batch["weights"].shape[-1]
    objective = objective_of(args)

    def loss_fn(mb: dict[str, torch.Tensor], idx: torch.Tensor):
        logp, _ = policy.log_prob_entropy(mb["obs"], mb["actions"], False)
        tokens = Tokens(
            logp=logp,
            old_logp=mb["logprobs"],
            ratio=ratios(logp, mb["logprobs"], idx),
            adv=mb["advantages"],
            ref_logp=mb["ref_logprobs"],
            weight=mb["weights"] * (rows / idx.numel()),
            noise=mb.get("noise"),
            is_weight=mb.get("is_weights"),  # a train-inference mismatch correction's weights
            score=mb.get("scores"),
            group_scores=mb.get("group_scores"),
        )
        return grpo_loss(tokens, objective)

    return minibatch_update(
        optimizer, batch, loss_fn, args, after_epoch=ratios.after_epoch, skip=empty
    )


def main(args: Args) -> None:
    run = group_run(args)  # --num-seeds: a PopulationRun, every seed at once
    policy = run.make_policy(args.hidden_sizes)
    ref_policy = copy.deepcopy(policy).requires_grad_(False)  # before adam flattens policy's
    lag = RolloutLag(policy, args.rollout_lag) if args.rollout_lag else None
    behaviour = lag.behaviour if lag else policy  # the policy the rollout is drawn from
    optimizer = adam(policy, lr=args.learning_rate)
    generators = getattr(policy, "generators", None)  # a population's per-seed streams
    stateful = {}
    if args.inject_demos:
        seeds = getattr(run, "seeds", [args.seed])  # a population's, or the run's own
        stateful["injection"] = SuccessInjection(
            run.envs, seeds, args.group_size, args.inject_threshold
        )

    def update_fn(rollout: GroupRollout, old_logp: torch.Tensor) -> dict:
        extra = {}
        if "injection" in stateful:  # the logged rollout stays the policy's own
            rollout, old_logp, injected = stateful["injection"].inject(rollout, old_logp, policy)
            extra["inject_frac"] = injected.float().mean(-1)
        batch, ratios, kept = grpo_batch(rollout, old_logp, ref_policy, args, generators)
        valid = torch.from_numpy(rollout.valid).reshape(-1)
        if args.rollout_mismatch != "none" or lag:
            batch["is_weights"] = rollout_weights(behaviour, rollout, batch["logprobs"], args)
            kl = mismatch_kl(
                policy, rollout.flat_obs(), args.rollout_mismatch, args.rollout_temperature,
                behaviour,
            )  # fmt: skip
            extra["mismatch_kl"] = kl[..., valid].mean(-1)
        kl_ref = k3(batch["logprobs"], batch["ref_logprobs"])[..., valid].mean(-1)
        stats = update(policy, optimizer, batch, ratios, args)
        if lag:
            lag.step(policy)
        return {"kl_ref": kl_ref, "kept_frac": kept, **stats, **extra}

    sample = None  # the policy's own; a perturbed or lagged copy of it under a mismatch
    if args.rollout_mismatch != "none" or lag:
        if template_class(policy) is not CategoricalPolicy:
            fail("--rollout-mismatch perturbs logits: it needs a discrete action space")
        sample = behaviour_sampler(behaviour, args.rollout_mismatch, args.rollout_temperature)
    if lag:
        stateful["rollout_lag"] = lag
    run.train(
        update_fn,
        policy,
        ratio_eps=clip_range(args),
        sample=sample,
        ref_policy=ref_policy,
        optimizer=optimizer,
        **stateful,
    )


if __name__ == "__main__":
    main(parse(Args))
