"""The parts of the group objective (controlrl/objective.py), each against its closed form on a
K-armed softmax bandit: the rows of a minibatch are all K arms, weighted by pi_old, so that the
loss is the exact expectation over one sample and its gradient in the logits is a sum over arms
that can be written out. Covered: DAPO's clip-higher (asymmetric bounds in the loss and in the
clip statistics), DAPO's soft overlong punishment, CISPO, SAPO's soft gate, Delightful PG's
gate, GPG / RGRA's REINFORCE term (E[g] = (1 - 1/G) grad J by enumerating all K^G groups) and
its negatives-off ablation, Clip-Cov and KL-Cov (the entropy mechanism's covariance, and the
first-order entropy change of theory.group_po), the registries."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from controlrl import diagnostics, objective
from controlrl.group import group_advantages
from controlrl.losses import surrogate_stats
from controlrl.objective import Objective, Tokens, group_objective
from theory.group_po import entropy, entropy_change_first_order

K = 5
OLD = torch.tensor([0.3, -0.4, 1.1, 0.0, -1.2], dtype=torch.float64)  # pi_old's logits
ADV = torch.tensor([1.5, -0.7, 0.4, -1.1, 0.9], dtype=torch.float64)  # one advantage per arm
ARMS = torch.eye(K, dtype=torch.float64)


def bandit_tokens(shift: torch.Tensor, adv: torch.Tensor = ADV, **kw):
    """Tokens of the K arms at logits OLD + shift (the leaf returned), weights pi_old."""
    z = (OLD + shift).clone().requires_grad_()
    logp, old = torch.log_softmax(z, 0), torch.log_softmax(OLD, 0)
    t = Tokens(logp, old, torch.exp(logp - old), adv, old, old.exp(), **kw)
    return z, t


def logit_grad(shift, o: Objective, adv=ADV, **kw) -> torch.Tensor:
    z, t = bandit_tokens(shift, adv, **kw)
    loss, _ = group_objective(t, o)
    (g,) = torch.autograd.grad(loss, z)
    return g


def expected(coef: torch.Tensor, shift) -> torch.Tensor:
    """-sum_a pi_old(a) coef_a (e_a - pi): the logit gradient of -sum_a w_a coef_a log pi(a)
    with the coefficients held constant."""
    pi = torch.softmax(OLD + shift, 0)
    w = torch.softmax(OLD, 0)
    return -((w * coef)[:, None] * (ARMS - pi)).sum(0)


def ratios_of(shift) -> torch.Tensor:
    return torch.exp(torch.log_softmax(OLD + shift, 0) - torch.log_softmax(OLD, 0))


# a move of the logits that puts arm 0's ratio (A > 0) in (1.2, 1.28) and arm 3's (A < 0) in
# (0.72, 0.8): clip-higher keeps arm 0's gradient, both clips cut arm 3's
SHIFT = torch.tensor([0.25, 0.0, 0.0, -0.2, 0.0], dtype=torch.float64)


def test_shift_places_the_ratios_between_the_bounds():
    r = ratios_of(SHIFT)
    assert 1.2 < r[0] < 1.28 and 0.72 < r[3] < 0.8


@pytest.mark.parametrize("low, high", [(0.2, 0.2), (0.2, 0.28), (0.3, 0.28)])
def test_clip_higher_gradient_is_the_unclipped_arms_ratio_gradient(low, high):
    r = ratios_of(SHIFT)
    # d/dz of -min(r A, clip(r) A): -r A (e_a - pi) where the min takes r A, else 0
    live = torch.where(ADV > 0, r < 1 + high, r > 1 - low).double()
    got = logit_grad(SHIFT, Objective(eps_low=low, eps_high=high))
    torch.testing.assert_close(got, expected(live * r * ADV, SHIFT), rtol=1e-12, atol=1e-14)


def test_clip_statistics_count_the_asymmetric_range():
    ratio = torch.tensor([0.7, 0.79, 0.81, 1.0, 1.21, 1.27, 1.29, 1.5])
    o = Objective(eps_low=0.2, eps_high=0.28)
    zero = torch.zeros(8)
    t = Tokens(zero, zero, ratio, torch.ones(8), zero, torch.ones(8))
    _, stats = group_objective(t, o)
    assert float(stats["clip_frac"]) == 4 / 8  # 0.7, 0.79 below 0.8; 1.29, 1.5 above 1.28
    log = ratio.log()
    assert float(surrogate_stats(ratio, log, (0.2, 0.28))["clip_frac"]) == 4 / 8
    assert float(surrogate_stats(ratio, log, 0.2)["clip_frac"]) == 6 / 8  # 1.21, 1.27 too
    assert diagnostics.ratio_stats(ratio, (0.2, 0.28))["ratio_dev_frac"] == 4 / 8
    assert "ratio_dev_frac" not in diagnostics.ratio_stats(ratio, None)  # no ratio range


def test_overlong_penalty_is_daposs_piecewise_linear_punishment():
    lengths = torch.arange(0, 12)
    got = objective.overlong_penalty(lengths, max_len=8, cache=4)
    # 0 up to 8 - 4 = 4, then (4 - L) / 4 down to -1 at L = 8, -1 beyond
    want = [0, 0, 0, 0, 0, -0.25, -0.5, -0.75, -1, -1, -1, -1]
    assert got.tolist() == want


def test_cispo_keeps_every_arms_gradient_weighted_by_the_ratio_capped_from_above():
    """MiniMax-M1's IS weight has no lower bound (eps_low^IS large), as TRL's cispo
    (grpo_trainer.py: clamp(coef_1, max=epsilon_high)): arm 3's ratio, below 1 - eps_low,
    weighs its gradient as it is."""
    shift = 3 * SHIFT  # ratios far outside [0.8, 1.28]: the clip loss cuts these arms
    r = ratios_of(shift)
    assert float(r[3]) < 0.6 and float(r[0]) > 1.5
    o = Objective(policy_loss="cispo", eps_low=0.2, eps_high=0.28)
    got = logit_grad(shift, o)
    torch.testing.assert_close(got, expected(r.clamp_max(1.28) * ADV, shift), rtol=1e-12, atol=0)
    assert (got - logit_grad(shift, Objective(eps_low=0.2, eps_high=0.28))).abs().max() > 0.05


def test_sapo_gate_gradient_is_4_sigma_one_minus_sigma_with_the_signs_temperature():
    o = Objective(policy_loss="sapo", sapo_tau_pos=1.0, sapo_tau_neg=3.0)
    shift = 4 * SHIFT
    r = ratios_of(shift)
    tau = torch.where(ADV > 0, 1.0, 3.0).double()
    s = torch.sigmoid(tau * (r - 1))
    got = logit_grad(shift, o)
    torch.testing.assert_close(got, expected(4 * s * (1 - s) * r * ADV, shift), rtol=1e-12, atol=0)
    # at theta_old the gate passes the policy gradient unchanged, whatever the temperatures
    zero = torch.zeros(K, dtype=torch.float64)
    torch.testing.assert_close(logit_grad(zero, o), expected(ADV, zero), rtol=1e-12, atol=0)


def test_delightful_gate_is_sigma_of_advantage_times_old_surprisal():
    o = Objective(policy_loss="dpg", dpg_eta=0.5)
    surprisal = -torch.log_softmax(OLD, 0)
    gate = torch.sigmoid(ADV * surprisal / 0.5)
    r = ratios_of(SHIFT)
    got = logit_grad(SHIFT, o)
    torch.testing.assert_close(got, expected(gate * r * ADV, SHIFT), rtol=1e-12, atol=0)
    # a rare failure is damped, a rare success passes
    assert gate[4] > 0.99 and gate[3] < 0.06


def test_reinforce_term_has_no_ratio():
    o = Objective(policy_loss="reinforce")
    got = logit_grad(3 * SHIFT, o)
    torch.testing.assert_close(got, expected(ADV, 3 * SHIFT), rtol=1e-12, atol=0)


@pytest.mark.parametrize("G", [2, 3])
def test_group_reinforce_expected_gradient_is_one_minus_one_over_g_of_grad_j(G):
    """GPG / RGRA with r - mean: E over all K^G groups of the loss's logit gradient is
    -(1 - 1/G) grad J (each sample's own reward leaks into its baseline)."""
    k = 3
    z = torch.tensor([0.2, -0.5, 0.9], dtype=torch.float64, requires_grad=True)
    reward = torch.tensor([1.0, 0.0, 0.5], dtype=torch.float64)
    pi = torch.softmax(z.detach(), 0)
    o = Objective(policy_loss="reinforce")
    total = torch.zeros(k, dtype=torch.float64)
    for arms in itertools.product(range(k), repeat=G):
        a = torch.tensor(arms)
        adv = group_advantages(reward[a][None], "mean")[0]
        logp = torch.log_softmax(z, 0)[a]
        one, weight = (
            torch.ones(G, dtype=torch.float64),
            torch.full((G,), 1 / G, dtype=torch.float64),
        )
        t = Tokens(logp, logp.detach(), one, adv, logp.detach(), weight)
        (g,) = torch.autograd.grad(group_objective(t, o)[0], z)
        total += float(pi[a].prod()) * g
    grad_j = pi * (reward - pi @ reward)  # d/dz E_pi[r]
    torch.testing.assert_close(total, -(1 - 1 / G) * grad_j, rtol=1e-12, atol=1e-15)


def test_negatives_off_keeps_only_the_positive_advantages_gradient():
    adv = objective.drop_negatives(ADV)
    assert adv.tolist() == [1.5, 0.0, 0.4, 0.0, 0.9]
    zero = torch.zeros(K, dtype=torch.float64)
    got = logit_grad(zero, Objective(policy_loss="reinforce"), adv=adv)
    torch.testing.assert_close(got, expected(ADV.clamp_min(0), zero), rtol=1e-12, atol=0)


def test_covariance_is_the_entropy_mechanisms_centred_product():
    _, t = bandit_tokens(torch.zeros(K))
    w = t.weight > 0
    logp = t.logp.detach()
    want = (ADV - ADV[w].mean()) * (logp - logp[w].mean())
    torch.testing.assert_close(objective.covariance(t), want, rtol=1e-12, atol=0)


def test_clip_cov_cuts_the_chosen_eligible_arm_only():
    """cov_frac 1/K: one arm; among arms with lb < cov < ub (and not clipped) the one of
    largest noise loses its whole gradient; the others keep the clip loss's."""
    zero = torch.zeros(K, dtype=torch.float64)
    _, t = bandit_tokens(zero)
    cov = objective.covariance(t)
    lb, ub = sorted(cov.tolist())[1], sorted(cov.tolist())[4]  # the middle three are eligible
    eligible = (cov > lb) & (cov < ub)
    noise = torch.tensor([0.1, 0.2, 0.3, 0.4, 0.5], dtype=torch.float64)
    noise[~eligible] = 0.99  # the largest noise on an ineligible arm: never chosen
    cut = int(torch.where(eligible, noise, -1.0).argmax())
    o = Objective(policy_loss="clip-cov", cov_frac=1 / K, clip_cov_lb=lb, clip_cov_ub=ub)
    got = logit_grad(zero, o, noise=noise)
    keep = torch.ones(K, dtype=torch.float64)
    keep[cut] = 0.0
    torch.testing.assert_close(got, expected(keep * ADV, zero), rtol=1e-12, atol=0)
    # T-E1: the first-order entropy change of the step is the plain step's minus the cut arm's
    z = OLD.numpy()
    eta = 1e-4
    plain, one = expected(ADV, zero), expected(ARMS[cut] * ADV, zero)
    dh = entropy_change_first_order(z, -eta * got.numpy())
    parts = entropy_change_first_order(z, -eta * plain.numpy()) - entropy_change_first_order(
        z, -eta * one.numpy()
    )
    assert dh == pytest.approx(parts, rel=1e-9)
    assert entropy(z - eta * got.numpy()) - entropy(z) == pytest.approx(dh, rel=1e-3)


@pytest.mark.parametrize("sign", [1, -1])  # the top arm's log-ratio above and below 0
def test_kl_cov_penalises_the_largest_covariance_arm_by_abs_log_ratio(sign):
    o = Objective(policy_loss="kl-cov", cov_frac=1 / K, kl_cov_coef=0.7)
    lower = torch.tensor([0.0, 0.0, 0.3, 0.0, 0.0], dtype=torch.float64)  # top arm 1 falls
    shift = SHIFT if sign > 0 else lower
    _, t = bandit_tokens(shift)
    top = int(objective.covariance(t).argmax())
    r = ratios_of(shift)
    log_r = r.log()
    # -r A everywhere (no clip), plus 0.7 sign(log r) on the top arm
    coef = r * ADV - 0.7 * torch.sign(log_r) * ARMS[top]
    torch.testing.assert_close(logit_grad(shift, o), expected(coef, shift), rtol=1e-12, atol=0)
    assert sign * float(log_r[top]) > 0.01  # the penalty acts, with the sign of the case


def test_kl_in_reward_leaves_no_kl_in_the_loss():
    zero = torch.zeros(K, dtype=torch.float64)
    shift = torch.tensor([0.0, 0.3, 0.0, 0.0, -0.3], dtype=torch.float64)  # ref != pi
    z, t = bandit_tokens(zero)
    t.ref_logp = torch.log_softmax(OLD + shift, 0)
    in_loss, stats = group_objective(t, Objective(kl_coef=0.5))
    in_reward, _ = group_objective(t, Objective(kl_coef=0.5, kl_in="reward"))
    kl = objective.k3(t.logp, t.ref_logp)
    assert float(in_loss - in_reward) == pytest.approx(float(0.5 * (t.weight * kl).sum()))
    valid = torch.ones(1, K, dtype=torch.bool)
    per_episode = objective.episode_kl(t.old_logp[None], t.ref_logp[None], valid, "k3")
    torch.testing.assert_close(per_episode, objective.k3(t.old_logp, t.ref_logp))
    assert float(stats["kl_penalty"]) > 0


def test_registries_name_every_flag_value_once():
    assert set(objective.POLICY_LOSSES) >= {
        "clip",
        "cispo",
        "sapo",
        "dpg",
        "reinforce",
        "clip-cov",
        "kl-cov",
        "gbpo",
        "nft",
    }
    assert {"mean", "mean-std"} <= set(objective.ADVANTAGES)
    assert "k3" in objective.KL_ESTIMATORS
    with pytest.raises(ValueError, match="registered twice"):
        objective.register(objective.POLICY_LOSSES, "clip")(lambda t, o: t.adv)


def test_parts_run_under_a_population_vmap():
    """Every policy loss on [S, R] rows through torch.func.vmap gives each seed's own loss."""
    gen = torch.Generator().manual_seed(0)
    S, R = 3, 7
    logp = torch.randn(S, R, generator=gen, dtype=torch.float64) - 2
    old = logp + 0.1 * torch.randn(S, R, generator=gen, dtype=torch.float64)
    adv = torch.randn(S, R, generator=gen, dtype=torch.float64)
    weight = torch.full((S, R), 1 / R, dtype=torch.float64)
    noise = torch.rand(S, R, generator=gen, dtype=torch.float64)
    groups = (torch.rand(S, R, 4, generator=gen) < 0.5).double()  # the scored losses' groups
    score = groups[..., 0]
    for name in objective.POLICY_LOSSES:
        o = Objective(policy_loss=name, cov_frac=0.3, clip_cov_lb=-math.inf, clip_cov_ub=math.inf)

        def one(lp, ol, a, w, n, s, g, o=o):
            t = Tokens(lp, ol, torch.exp(lp - ol), a, ol, w, noise=n, score=s, group_scores=g)
            return group_objective(t, o)[0]

        batched = torch.func.vmap(one)(logp, old, adv, weight, noise, score, groups)
        alone = torch.stack(
            [one(*(x[k] for x in (logp, old, adv, weight, noise, score, groups))) for k in range(S)]
        )
        np.testing.assert_allclose(batched.numpy(), alone.numpy(), rtol=1e-12, err_msg=name)


def masked_mean(x, mask):
    return (x * mask).sum() / mask.sum()


def verl_clip_cov(old, logp, adv, mask, noise, lo, hi, frac, lb, ub):
    """volcengine/verl verl/trainer/ppo/core_algos.py, compute_policy_loss_clip_cov on [B, T],
    token-mean, transliterated; its random permutation of the eligible tokens is drawn from the
    noise (largest first), as controlrl's choice is."""
    ratio = torch.exp(logp - old)
    pg_losses1 = -adv * ratio
    corr = torch.ones_like(adv)
    pg_losses2 = -adv * torch.clamp(ratio, 1 - lo, 1 + hi)
    clip_by_origin = (pg_losses2 > pg_losses1) & (mask > 0)
    cov_all = (adv - masked_mean(adv, mask)) * (logp - masked_mean(logp.detach(), mask))
    cov_all[mask == 0] = -torch.inf
    cov_all[clip_by_origin] = -torch.inf
    clip_num = max(int(frac * mask.sum().item()), 1)
    top_k_idx = torch.nonzero((cov_all < ub) & (cov_all > lb) & (mask > 0))
    if len(top_k_idx) > 0:
        perm = noise[top_k_idx[:, 0], top_k_idx[:, 1]].argsort(descending=True, stable=True)
        top_k_idx = top_k_idx[perm[: min(clip_num, len(top_k_idx))]]
    corr[top_k_idx[:, 0], top_k_idx[:, 1]] = 0
    return masked_mean(torch.maximum(pg_losses1, pg_losses2) * corr, mask)


def verl_kl_cov(old, logp, adv, mask, frac, coef):
    """volcengine/verl verl/trainer/ppo/core_algos.py, compute_policy_loss_kl_cov on [B, T],
    token-mean, transliterated."""
    negative_approx_kl = logp - old
    ratio = torch.exp(negative_approx_kl)
    pg_losses = -adv * ratio
    pg_losses_kl = -adv * ratio + coef * negative_approx_kl.abs()
    all_valid = mask > 0
    all_valid_idx = torch.nonzero(all_valid.reshape(-1), as_tuple=True)[0]
    all_valid_adv = adv[all_valid].detach().reshape(-1)
    all_valid_logp = logp[all_valid].detach().reshape(-1)
    cov = (all_valid_adv - all_valid_adv.mean()) * (all_valid_logp - all_valid_logp.mean())
    k_percent_nums = max(1, int(len(cov) * frac))
    large = all_valid_idx[torch.topk(cov, k_percent_nums, largest=True).indices]
    T = adv.shape[1]
    pg_losses[large // T, large % T] = pg_losses_kl[large // T, large % T]
    return masked_mean(pg_losses, mask)


def test_clip_cov_and_kl_cov_count_the_rows_in_the_loss_as_verl():
    """Clip-Cov cuts max(int(frac * n), 1) of the eligible tokens and KL-Cov penalises as many,
    n the tokens in the loss mask (verl), not the rows with padding: 400 random padded batches,
    each loss equal to verl's (and in many of them the padded count would pick another k)."""
    gen = torch.Generator().manual_seed(0)
    differs = 0
    for case in range(400):
        B, T = (int(x) for x in torch.randint(2, 9, (2,), generator=gen))
        lengths = torch.randint(1, T + 1, (B,), generator=gen)
        mask = (torch.arange(T)[None] < lengths[:, None]).double()
        old = -torch.rand(B, T, generator=gen, dtype=torch.float64) * 3
        logp = old + 0.3 * torch.randn(B, T, generator=gen, dtype=torch.float64)
        adv = torch.randn(B, 1, generator=gen, dtype=torch.float64).expand(B, T).clone()
        noise = torch.rand(B, T, generator=gen, dtype=torch.float64)
        frac = float(torch.empty(1).uniform_(0.05, 0.6, generator=gen))
        differs += max(int(frac * B * T), 1) != max(int(frac * mask.sum().item()), 1)
        lp = logp.reshape(-1).clone().requires_grad_()
        rows = (old.reshape(-1), torch.exp(lp - old.reshape(-1)), adv.reshape(-1), old.reshape(-1))
        weight = (mask / mask.sum()).reshape(-1)
        t = Tokens(lp, rows[0], rows[1], rows[2], rows[3], weight, noise=noise.reshape(-1))
        o = Objective(policy_loss="clip-cov", cov_frac=frac, clip_cov_lb=-0.5, clip_cov_ub=0.5)
        got = group_objective(t, o)[0]
        want = verl_clip_cov(old, logp, adv, mask, noise, 0.2, 0.2, frac, -0.5, 0.5)
        assert float(got) == pytest.approx(float(want), rel=1e-12, abs=1e-15), case
        o = Objective(policy_loss="kl-cov", cov_frac=frac, kl_cov_coef=0.7)
        got = group_objective(t, o)[0]
        want = verl_kl_cov(old, logp, adv, mask, frac, 0.7)
        assert float(got) == pytest.approx(float(want), rel=1e-12, abs=1e-15), case
    assert differs > 100
