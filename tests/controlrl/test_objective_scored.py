"""The policy losses that read the scores of a step's group (controlrl/objective.py's
SCORED_LOSSES), against their closed forms on a K-armed softmax bandit (the rows are all K arms,
weighted by pi_old, as tests/controlrl/test_objective.py): GBPO's bounded-ratio regression
(target above 1 above the group's MEDIAN score, 1 at it, below it under; loss |r - target| |A|;
against the reference's code for groups of one and without the std) and NFT as a flag value
(its gradient at theta = theta_old is GRPO's for every group: T-G8); the scores reach the rows
through algos/grpo.py's batch in tests/algos/test_objectives.py."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest
import torch

from controlrl import objective
from controlrl.group import group_advantages
from controlrl.objective import Objective, Tokens, group_objective

K = 5
OLD = torch.tensor([0.3, -0.4, 1.1, 0.0, -1.2], dtype=torch.float64)
ARMS = torch.eye(K, dtype=torch.float64)
# one group of G = 8 binary scores: median 0 (five failures), mean 3/8; arms 0 and 2 succeeded
GROUP = torch.tensor([0, 0, 0, 0, 0, 1, 1, 1], dtype=torch.float64)
SCORE = torch.tensor([1, 0, 1, 0, 0], dtype=torch.float64)
SHIFT = torch.tensor([0.05, -0.1, 0.05, 0.1, 0.0], dtype=torch.float64)  # arm 1: r 0.87


def tokens(shift, score=SCORE, group=GROUP):
    """(logit leaf, Tokens of the K arms at OLD + shift): pi_old weights, GRPO's advantages."""
    z = (OLD + shift).clone().requires_grad_()
    logp, old = torch.log_softmax(z, 0), torch.log_softmax(OLD, 0)
    groups = group.expand(K, -1)
    adv = (score - group.mean()) / (group.std() + 1e-4)
    t = Tokens(logp, old, torch.exp(logp - old), adv, old, old.exp(), score=score)
    t.group_scores = groups  # [K, G]: every arm's row from the one group
    return z, t


def grad(shift, o: Objective, **kw) -> torch.Tensor:
    z, t = tokens(shift, **kw)
    (g,) = torch.autograd.grad(group_objective(t, o)[0], z)
    return g


def expected(coef, shift) -> torch.Tensor:
    """-sum_a pi_old(a) coef_a (e_a - pi): the logit gradient of -sum_a w_a coef_a log pi(a)."""
    pi = torch.softmax(OLD + shift, 0)
    return -((torch.softmax(OLD, 0) * coef)[:, None] * (ARMS - pi)).sum(0)


def gbpo_target(score, group, low, high, temperature):
    """The reference's r* with numpy's median (the mean of the two middle scores for even G)."""
    z = (score - float(np.median(group.numpy()))) / (float(group.std()) + 1e-4)
    return 1 - low + (low + high) * torch.sigmoid(z / temperature)


@pytest.mark.parametrize(
    "low, high, temperature", [(0.2, 0.2, 1.0), (0.3, 0.3, 1e-4), (0.2, 0.28, 0.5)]
)
def test_gbpo_regresses_the_ratio_onto_the_median_thresholded_target(low, high, temperature):
    o = Objective(policy_loss="gbpo", eps_low=low, eps_high=high, gbpo_temperature=temperature)
    z, t = tokens(SHIFT)
    target = gbpo_target(SCORE, GROUP, low, high, temperature)
    r = t.ratio.detach()
    # the loss is |r - r*| |A| per row; its logit gradient |A| sign(r - r*) r (e_a - pi) per arm
    per_row = group_objective(t, o)[1]["policy_loss"]
    want = (t.weight * (r - target).abs() * t.adv.abs()).sum()
    torch.testing.assert_close(per_row, want, rtol=1e-12, atol=0)
    coef = -t.adv.abs() * torch.sign(r - target) * r
    torch.testing.assert_close(grad(SHIFT, o), expected(coef, SHIFT), rtol=1e-12, atol=1e-15)
    # the targets: successes above the median score up to 1 + eps_high, failures AT the median
    # (five of eight) at the middle of the range, 1 for a symmetric one
    assert bool((target[SCORE == 1] > 1).all()) and bool((target[SCORE == 1] < 1 + high).all())
    torch.testing.assert_close(target[SCORE == 0], torch.full((3,), 1 + (high - low) / 2).double())


def row_grad(o: Objective, shift=SHIFT, group=GROUP) -> torch.Tensor:
    """d loss / d log pi(a) of each arm's row at logits OLD + shift (the rows' own gradients)."""
    old = torch.log_softmax(OLD, 0)
    logp = torch.log_softmax(OLD + shift, 0).clone().requires_grad_()
    adv = (SCORE - group.mean()) / (group.std() + 1e-4)
    t = Tokens(logp, old, torch.exp(logp - old), adv, old, old.exp(), score=SCORE)
    t.group_scores = group.expand(K, -1)
    (g,) = torch.autograd.grad(group_objective(t, o)[0], logp)
    return g


def test_gbpo_leaves_a_failure_at_the_median_alone_where_grpo_lowers_it():
    """The group's median is a failure: at theta_old GRPO pushes every failure down, GBPO does
    not move them (their target ratio is 1, the ratio is 1); below 1 (arm 1) GBPO lifts the
    ratio back while GRPO lowers it further. With an even split (median 1/2) GBPO's targets
    are mirror images (successes up, failures down as GRPO) and it lowers failures at theta_old."""
    gbpo, zero = Objective(policy_loss="gbpo"), torch.zeros(K, dtype=torch.float64)
    failed = SCORE == 0
    assert bool((row_grad(Objective(), zero)[failed] > 0).all())  # GRPO: descent lowers them
    assert bool((row_grad(gbpo, zero)[failed] == 0).all())
    assert bool((row_grad(gbpo, zero)[~failed] < 0).all())  # successes are lifted by both
    r = torch.exp(torch.log_softmax(OLD + SHIFT, 0) - torch.log_softmax(OLD, 0))
    assert 0.8 < r[1] < 1
    assert float(row_grad(gbpo)[1]) < 0 < float(row_grad(Objective())[1])
    split = torch.tensor([0, 0, 0, 0, 1, 1, 1, 1], dtype=torch.float64)  # median 1/2
    target = gbpo_target(SCORE, split, 0.2, 0.2, 1.0)
    torch.testing.assert_close(target[0] - 1, 1 - target[1])  # a success, a failure
    assert bool((target[failed] < 1).all())
    assert bool((row_grad(gbpo, zero, split)[failed] > 0).all())
    z, t = tokens(SHIFT, group=split)
    coef = -t.adv.abs() * torch.sign(t.ratio.detach() - target) * t.ratio.detach()
    torch.testing.assert_close(
        grad(SHIFT, gbpo, group=split), expected(coef, SHIFT), rtol=1e-12, atol=1e-15
    )


@pytest.mark.parametrize("scale, adv_norm", [("mean_std", "mean_std"), ("mean", "mean")])
def test_nft_flag_value_is_grpo_at_theta_old_for_every_group(scale, adv_norm):
    """T-G8 through the registered part: for every ordered group of G = 3 (arm, reward)
    outcomes on 3 arms, the logit gradient of --policy-loss nft (prompt weight of --adv-norm)
    equals that of GRPO's clip loss at theta = theta_old; away from it they part."""
    z_old = torch.tensor([0.4, -0.3, 0.9], dtype=torch.float64)
    G, parted = 3, 0

    def logit_grad(name, actions, rewards, z):
        zz = z.clone().requires_grad_(True)
        logp = torch.log_softmax(zz, -1)[actions]
        old = torch.log_softmax(z_old, -1)[actions]
        adv = group_advantages(rewards[None], adv_norm)[0]
        t = Tokens(logp, old, (logp - old).exp(), adv, old, torch.full((G,), 1 / G).double())
        t.score, t.group_scores = rewards, rewards.expand(G, -1)
        o = Objective(policy_loss=name, kl_coef=0.0, nft_scale=scale)
        (g,) = torch.autograd.grad(group_objective(t, o)[0], zz)
        return g

    for seq in itertools.product(range(6), repeat=G):
        actions = torch.tensor([s // 2 for s in seq])
        rewards = torch.tensor([float(s % 2) for s in seq], dtype=torch.float64)
        nft = logit_grad("nft", actions, rewards, z_old)
        torch.testing.assert_close(
            nft, logit_grad("clip", actions, rewards, z_old), atol=1e-15, rtol=1e-12
        )
        moved = z_old + torch.tensor([0.3, -0.2, 0.1], dtype=torch.float64)
        parted += not torch.allclose(
            *(logit_grad(n, actions, rewards, moved) for n in ("nft", "clip"))
        )
    assert parted > 100


def reference_gbpo_rows(scores, index, ratio, adv, o: Objective, norm: bool, eps: float):
    """bounded-ratio-rl/bounded_ratio_rl src/verl/trainer/ppo/core_algos.py, transliterated:
    compute_gbpo_outcome_advantage_and_target's target_adv (a group of one: mean 0, std 1,
    median 0; norm_adv_by_std_in_grpo divides by std + epsilon, the function's argument) and
    compute_policy_loss_gbpo's per-token |ratio - target_ratio| |A|."""
    groups: dict[int, list] = {}
    for i in range(len(scores)):
        groups.setdefault(int(index[i]), []).append(scores[i])
    median, std = {}, {}
    for k, g in groups.items():
        if len(g) == 1:
            median[k], std[k] = torch.tensor(0.0).double(), torch.tensor(1.0).double()
        else:
            stacked = torch.stack(g)
            median[k], std[k] = torch.quantile(stacked, 0.5), torch.std(stacked)
    target_adv = torch.empty_like(scores)
    for i in range(len(scores)):
        z = scores[i] - median[int(index[i])]
        if norm:
            z = z / (std[int(index[i])] + eps)
        target_adv[i] = z / o.gbpo_temperature
    target = 1.0 - o.eps_low + (o.eps_high + o.eps_low) * torch.sigmoid(target_adv)
    return torch.abs((ratio - target) * adv)


def gbpo_rows(scores, G, ratio, adv, o: Objective) -> torch.Tensor:
    """--policy-loss gbpo's per-row loss on rows of consecutive groups of G."""
    groups = scores.reshape(-1, G).repeat_interleave(G, 0)
    t = Tokens(ratio.log(), torch.zeros_like(ratio), ratio, adv, ratio, torch.ones_like(ratio))
    t.score, t.group_scores = scores, groups
    return objective.POLICY_LOSSES["gbpo"](t, o)


@pytest.mark.parametrize("G, std", [(1, True), (1, False), (4, False), (8, False), (4, True)])
def test_gbpo_matches_the_reference_for_groups_of_one_and_without_the_std(G, std):
    """A group of one (--group-size 1, e.g. with --adv-norm batch-mean) takes the reference's
    median 0 and std 1 (a finite loss, where the unbiased std of one score is NaN); with
    gbpo_std off (--adv-norm mean, the reference's norm_adv_by_std_in_grpo False) the target
    is not divided by the group's std."""
    gen = torch.Generator().manual_seed(G)
    n = 16
    scores = torch.bernoulli(torch.full((n,), 0.4, dtype=torch.float64), generator=gen)
    scores[:G] = 1.0  # a flat group
    ratio = torch.exp(0.3 * torch.randn(n, generator=gen, dtype=torch.float64))
    adv = torch.randn(n, generator=gen, dtype=torch.float64)
    for temperature, clip in ((1.0, (0.2, 0.28)), (1e-4, (0.3, 0.3))):
        o = Objective(policy_loss="gbpo", eps_low=clip[0], eps_high=clip[1], gbpo_std=std)
        o = dataclasses.replace(o, gbpo_temperature=temperature)
        got = gbpo_rows(scores, G, ratio, adv, o)
        index = torch.arange(n) // G
        want = reference_gbpo_rows(scores, index, ratio, adv, o, norm=std, eps=1e-4)
        assert bool(torch.isfinite(got).all())
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-15)
