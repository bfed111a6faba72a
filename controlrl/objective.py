"""The group objective as parts: GRPO (Shao et al. 2024, arXiv 2402.03300) and the objectives
that change one part of it, as verl's core_algos.py and TRL's loss_type name them.

    advantage    scores [..., B, G] of B groups of G -> advantages [..., B, G]    ADVANTAGES
    score shape  DAPO's soft overlong penalty on the episode lengths             overlong_penalty
    policy loss  per-step loss from the ratio, advantage and log-probs (GBPO,    POLICY_LOSSES
                 NFT: and the scores of the step's group)
    clip bounds  eps_low / eps_high, carried into every clip statistic           Objective
    KL           estimator of KL(pi_theta || pi_ref) per step                   KL_ESTIMATORS
                 and where it enters: the loss (beta k(.) per step) or the
                 reward (beta sum_t k(.) off each episode's score)               KL_PLACEMENTS
    correction   train-inference mismatch weight per step                       CORRECTIONS
    aggregation  per-step weights over the rollout                              LOSS_AGGS
    filter       zero-variance groups out of the loss                           controlrl.group

A part is a plain function registered under its flag value (`@register(POLICY_LOSSES, "name")`);
algos/grpo.py picks each by its flag and validates the name against the registry, so a new idea
is one function, its registration and its test. Every function works on any leading axes (the
seeds of a population) and without data-dependent shapes, so that a population's vmapped loss
runs it as the single run does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from controlrl.group import group_advantages
from controlrl.losses import outside_clip
from controlrl.nft import grpo_equivalent_weight, nft_likelihood

ADVANTAGES: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {}
POLICY_LOSSES: dict[str, Callable[[Tokens, Objective], torch.Tensor]] = {}
KL_ESTIMATORS: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {}
CORRECTIONS: dict[str, Callable[..., torch.Tensor]] = {}
KL_PLACEMENTS = ("loss", "reward")
LOSS_AGGS = ("seq-mean-token-mean", "token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm")
SCORED_LOSSES = ("gbpo", "nft")  # policy losses that read Tokens.score and Tokens.group_scores


def register(registry: dict, name: str) -> Callable:
    """Decorator: registry[name] = the function (a name registered twice is an error)."""

    def add(fn: Callable) -> Callable:
        if name in registry:
            raise ValueError(f"{name!r} is registered twice")
        registry[name] = fn
        return fn

    return add


@dataclass(frozen=True)
class Objective:
    """The chosen parts and their constants (algos/grpo.py builds it from its flags)."""

    policy_loss: str = "clip"
    eps_low: float = 0.2  # ratio clip [1 - eps_low, 1 + eps_high]
    eps_high: float = 0.2
    kl: str = "k3"
    kl_coef: float = 0.0  # beta
    kl_in: str = "loss"
    sapo_tau_pos: float = 1.0
    sapo_tau_neg: float = 1.05
    dpg_eta: float = 1.0
    cov_frac: float = 2e-4  # Clip-Cov / KL-Cov: fraction of a minibatch's loss rows selected
    clip_cov_lb: float = 1.0
    clip_cov_ub: float = 5.0
    kl_cov_coef: float = 1.0
    gbpo_temperature: float = 1.0  # T of GBPO's target ratio
    gbpo_std: bool = True  # GBPO's target over the group's std (verl's norm_adv_by_std_in_grpo)
    nft_scale: str = "mean_std"  # NFT's prompt weight: GRPO's (mean_std) or Dr. GRPO's (mean)


@dataclass
class Tokens:
    """The rows [R] of one minibatch the loss sees (one seed's inside a population's vmap)."""

    logp: torch.Tensor  # log pi_theta(a|s), with gradient
    old_logp: torch.Tensor  # the rollout policy's
    ratio: torch.Tensor  # the --ratio kind's ratio (per step: exp(logp - old_logp))
    adv: torch.Tensor
    ref_logp: torch.Tensor
    weight: torch.Tensor  # loss aggregation: 0 on padding and dropped groups
    noise: torch.Tensor | None = None  # uniform [R], Clip-Cov's random choice
    is_weight: torch.Tensor | None = None  # mismatch correction per row (None: 1)
    score: torch.Tensor | None = None  # its episode's score, as the advantage saw it [R]
    group_scores: torch.Tensor | None = None  # the scores of its episode's group [R, G]


# -- advantage estimators: scores [..., B, G] -> advantages [..., B, G] ----------------------


@register(ADVANTAGES, "mean-std")
def grpo_advantage(scores: torch.Tensor) -> torch.Tensor:
    """(r - mean) / (std + 1e-4) over each group (GRPO; controlrl.group)."""
    return group_advantages(scores, "mean_std")


@register(ADVANTAGES, "mean")
def mean_advantage(scores: torch.Tensor) -> torch.Tensor:
    """r - mean over each group (Dr. GRPO; GPG's, times its alpha, is controlrl.advantages.gpg)."""
    return group_advantages(scores, "mean")


def drop_negatives(adv: torch.Tensor) -> torch.Tensor:
    """max(A, 0): the negatives-off ablation of RGRA (REINFORCE with Group Relative Advantage):
    only the better-than-average samples push."""
    return adv.clamp_min(0.0)


def overlong_penalty(lengths: torch.Tensor, max_len: int, cache: int) -> torch.Tensor:
    """DAPO's soft overlong punishment (arXiv 2503.14476, eq. 13) of episode lengths: 0 up to
    max_len - cache, then falling linearly to -1 at max_len, -1 beyond."""
    start = max_len - cache
    ramp = (start - lengths.to(torch.float64)) / cache
    return torch.where(lengths <= start, 0.0, torch.where(lengths <= max_len, ramp, -1.0))


# -- KL estimators of KL(pi_theta || pi_ref) at samples a ~ pi_theta --------------------------


@register(KL_ESTIMATORS, "k3")
def k3(logp: torch.Tensor, ref_logp: torch.Tensor, old_logp=None) -> torch.Tensor:
    """exp(d) - d - 1 with d = log pi_ref - log pi_theta, >= 0 and unbiased (Schulman 2020,
    "Approximating KL divergence"); d clamped to [-20, 20] as the TPO repo's grpo_loss."""
    d = (ref_logp - logp).clamp(-20.0, 20.0)
    return d.exp() - d - 1


def episode_kl(
    old_logp: torch.Tensor, ref_logp: torch.Tensor, valid: torch.Tensor, kind: str
) -> torch.Tensor:
    """sum_t k(old_logp, ref_logp) over each episode's valid steps: [..., T, N] -> [..., N], the
    KL taken off the score when it enters the reward (verl's apply_kl_penalty, summed)."""
    return torch.where(valid, KL_ESTIMATORS[kind](old_logp, ref_logp), 0.0).sum(-2)


# -- policy losses: per-step loss [R] (minimised) of Tokens ---------------------------------


@register(POLICY_LOSSES, "clip")
def clip_loss(t: Tokens, o: Objective) -> torch.Tensor:
    """-min(r A, clip(r, 1 - eps_low, 1 + eps_high) A): PPO / GRPO; DAPO's clip-higher with
    eps_high 0.28 (arXiv 2503.14476; verl clip_ratio_low / clip_ratio_high)."""
    return -torch.min(t.ratio * t.adv, t.ratio.clamp(1 - o.eps_low, 1 + o.eps_high) * t.adv)


@register(POLICY_LOSSES, "cispo")
def cispo_loss(t: Tokens, o: Objective) -> torch.Tensor:
    """-sg(min(r, 1 + eps_high)) A log pi: REINFORCE weighted by the stop-gradient ratio capped
    from above, every token keeps its gradient (MiniMax-M1, arXiv 2506.13585, eq. 4-5: no lower
    bound on the IS weight, eps_low^IS set large; huggingface/trl trl/trainer/grpo_trainer.py,
    GRPOTrainer._compute_loss, loss_type "cispo": clamp(coef_1, max=epsilon_high) only). verl's
    compute_policy_loss_cispo also clamps at 1 - clip_ratio_low; eps_low is not used here."""
    return -t.ratio.clamp_max(1 + o.eps_high).detach() * t.adv * t.logp


@register(POLICY_LOSSES, "sapo")
def sapo_loss(t: Tokens, o: Objective) -> torch.Tensor:
    """-(4 / tau) sigma(tau (r - 1)) A, tau = tau_pos where A > 0 else tau_neg: SAPO's soft
    gate (arXiv 2511.20347); its gradient is 4 sigma (1 - sigma) r A grad log pi, the policy
    gradient at r = 1, fading smoothly away from it."""
    tau = torch.full_like(t.adv, o.sapo_tau_neg).masked_fill(t.adv > 0, o.sapo_tau_pos)
    return -(4 / tau) * torch.sigmoid(tau * (t.ratio - 1)) * t.adv


@register(POLICY_LOSSES, "dpg")
def delightful_loss(t: Tokens, o: Objective) -> torch.Tensor:
    """-sg(sigma(A l / eta)) r A, l = -log pi_old(a) the surprisal: Delightful Policy
    Gradient's gate (arXiv 2603.14608): rare successes pass, rare failures are damped."""
    gate = torch.sigmoid(t.adv * -t.old_logp / o.dpg_eta).detach()
    return -gate * t.ratio * t.adv


@register(POLICY_LOSSES, "reinforce")
def reinforce_loss(t: Tokens, o: Objective) -> torch.Tensor:
    """-A log pi: no ratio, no clip (GPG, arXiv 2504.02546, verl's gpg, with --adv-norm gpg;
    RGRA, REINFORCE with GRPO's group-relative advantage)."""
    return -t.adv * t.logp


def covariance(t: Tokens) -> torch.Tensor:
    """(A - mean A)(log pi - mean log pi) per row, means over the rows in the loss, no
    gradient: the entropy mechanism's per-token covariance (arXiv 2505.22617, eq. 9)."""
    used = (t.weight > 0).to(t.logp.dtype)
    count = used.sum().clamp_min(1.0)
    adv, logp = t.adv.detach(), t.logp.detach()
    return (adv - (used * adv).sum() / count) * (logp - (used * logp).sum() / count)


def top_rows(score: torch.Tensor, frac: float, used: torch.Tensor) -> torch.Tensor:
    """The max(int(frac * n), 1) rows of largest score among those with score > -inf (bool
    [R]), n the rows in the loss (used, bool [R]): verl counts the tokens of the loss mask, not
    the padded rows (volcengine/verl verl/trainer/ppo/core_algos.py,
    compute_policy_loss_clip_cov's clip_num and compute_policy_loss_kl_cov's k_percent_nums).
    Ranks rather than topk: the count is data-dependent and this runs under vmap."""
    n = used.to(torch.float64).sum(-1, keepdim=True)
    k = (frac * n).floor().clamp_min(1.0)  # max(int(frac * n), 1) in Python's float64
    rank = score.argsort(dim=-1, descending=True, stable=True).argsort(dim=-1)
    return (rank < k) & (score > -torch.inf)


@register(POLICY_LOSSES, "clip-cov")
def clip_cov_loss(t: Tokens, o: Objective) -> torch.Tensor:
    """The clip loss with the gradient of a random cov_frac of the rows in the loss cut off,
    chosen among those whose covariance lies in (lb, ub) (and not already clipped) (Clip-Cov,
    arXiv 2505.22617; verl core_algos.py compute_policy_loss_clip_cov)."""
    unclipped, clipped = -t.adv * t.ratio, -t.adv * t.ratio.clamp(1 - o.eps_low, 1 + o.eps_high)
    cov = covariance(t)
    eligible = (
        (t.weight > 0) & (cov > o.clip_cov_lb) & (cov < o.clip_cov_ub) & ~(clipped > unclipped)
    )
    noise = t.noise if t.noise is not None else torch.zeros_like(cov)
    cut = top_rows(torch.where(eligible, noise, -torch.inf), o.cov_frac, t.weight > 0)
    return torch.where(cut, 0.0, torch.max(unclipped, clipped))


@register(POLICY_LOSSES, "kl-cov")
def kl_cov_loss(t: Tokens, o: Objective) -> torch.Tensor:
    """-r A, plus kl_cov_coef |log r| on the cov_frac of the rows in the loss of largest
    covariance (KL-Cov, arXiv 2505.22617; verl core_algos.py compute_policy_loss_kl_cov); no
    clip."""
    cov = torch.where(t.weight > 0, covariance(t), -torch.inf)
    penalty = o.kl_cov_coef * (t.logp - t.old_logp).abs()
    return -t.adv * t.ratio + torch.where(top_rows(cov, o.cov_frac, t.weight > 0), penalty, 0.0)


@register(POLICY_LOSSES, "gbpo")
def gbpo_loss(t: Tokens, o: Objective) -> torch.Tensor:
    """|r - sg(r*)| |A| with r* = 1 - eps_low + (eps_low + eps_high) sigmoid(z / T), z = (score -
    its group's median) / (the group's std + 1e-4) (gbpo_std; without it, --adv-norm mean, z is
    not divided): GBPO, BPO's group variant (Bounded Ratio Reinforcement Learning, arXiv
    2604.18578; bounded-ratio-rl/bounded_ratio_rl, src/verl/trainer/ppo/core_algos.py,
    compute_policy_loss_gbpo and compute_gbpo_outcome_advantage_and_target, which also takes
    median 0 and std 1 for a group of one): the ratio is regressed onto the bounded-ratio
    optimum, above 1 for scores above the group's MEDIAN, below it under, exactly 1 at the
    median (eps_low = eps_high)."""
    g = t.group_scores  # [R, G]
    s, G = g.sort(-1).values, g.shape[-1]
    if G > 1:
        median = (s[..., (G - 1) // 2] + s[..., G // 2]) / 2  # torch.quantile(., 0.5)'s
        std = g.std(-1)
    else:  # the reference's group of one: median 0, std 1
        median, std = torch.zeros_like(t.score), torch.ones_like(t.score)
    z = t.score - median
    if o.gbpo_std:
        z = z / (std + 1e-4)
    target = 1 - o.eps_low + (o.eps_low + o.eps_high) * torch.sigmoid(z / o.gbpo_temperature)
    return ((t.ratio - target.detach()) * t.adv).abs()


@register(POLICY_LOSSES, "nft")
def nft_policy_loss(t: Tokens, o: Objective) -> torch.Tensor:
    """-omega_q [r log R + (1 - r) log c((1 - r_q R) / (1 - r_q))], r the score (a success, 0
    or 1), r_q its group's mean, R the ratio, c the authors' clamp from below at 1 that keeps the
    gradient (NVlabs/NFT dp_actor.py, clamp_negative 1.0): NFT, Negative-aware Fine-Tuning (arXiv
    2505.18116; controlrl/nft.py), with the prompt weight omega_q = (1 - r_q) / std (GRPO's) or
    1 - r_q (Dr. GRPO's), so that at theta = theta_old its gradient is that GRPO's (T-G8)."""
    omega = grpo_equivalent_weight(t.group_scores, o.nft_scale).squeeze(-1)
    return -omega * nft_likelihood(t.ratio.log(), t.score, t.group_scores.mean(-1))


# -- the loss -------------------------------------------------------------------------------


def group_objective(t: Tokens, o: Objective) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """sum_rows weight * (policy_loss + beta k(pi_theta, pi_ref) where the KL enters the loss),
    minimised. Statistics over rows with weight > 0: policy_loss, kl_penalty (mean k), approx_kl
    (k3 of KL(old || new) from the per-step ratios), clip_frac (the ratio used outside
    [1 - eps_low, 1 + eps_high])."""
    policy = POLICY_LOSSES[o.policy_loss](t, o)
    if t.is_weight is not None:
        policy = t.is_weight * policy
    kl = KL_ESTIMATORS[o.kl](t.logp, t.ref_logp, old_logp=t.old_logp)
    beta = o.kl_coef if o.kl_in == "loss" else 0.0
    per_step = policy + beta * kl if beta else policy  # beta 0: no KL graph at all
    loss = (t.weight * per_step).sum()
    with torch.no_grad():
        used = (t.weight > 0).to(t.logp.dtype)
        count = used.sum().clamp_min(1.0)
        log_ratio = t.logp - t.old_logp
        clipped = outside_clip(t.ratio, (o.eps_low, o.eps_high)).to(t.logp.dtype)
        stats = {
            "loss": loss.detach(),
            "policy_loss": (t.weight * policy).sum(),
            "kl_penalty": (used * kl).sum() / count,
            "approx_kl": (used * (log_ratio.exp() - 1 - log_ratio)).sum() / count,
            "clip_frac": (used * clipped).sum() / count,
        }
    return loss, stats


def loss_weights(valid: torch.Tensor, agg: str, max_steps: int) -> torch.Tensor:
    """Per-step weights [..., T, N] of valid [..., T, N] (steps in the loss) for --loss-agg
    (verl's agg_loss names): weights sum to 1 (the means) or to the steps per sequence (the
    token-sum forms), over each [T, N] (each seed of a population)."""
    if agg not in LOSS_AGGS:
        raise ValueError(f"agg = {agg!r}, expected one of {LOSS_AGGS}")
    mask = valid.to(torch.float32)
    lengths = mask.sum(-2, keepdim=True)  # [..., 1, N] steps of each sequence in the loss
    sequences = (lengths > 0).sum(-1, keepdim=True).clamp_min(1)
    if agg == "token-mean":
        return mask / mask.sum((-2, -1), keepdim=True).clamp_min(1.0)
    if agg == "seq-mean-token-mean":
        return mask / (lengths.clamp_min(1.0) * sequences)
    if agg == "seq-mean-token-sum":
        return mask / sequences
    return mask / (sequences * max_steps)


from controlrl import advantages, kl_estimators, mismatch  # noqa: E402,F401  (registers)
