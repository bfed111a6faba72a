"""controlrl/advantages.py: each estimator's defining property, exactly. RLOO's baseline leaves
the pull out (per-group loop) and its policy gradient is unbiased over every ordered group of a
two-armed bandit; REINFORCE++ whitens over the batch (mean 0, std 1, one group's advantages move
with another group's rewards, unlike GRPO's); LitePPO is Dr. GRPO over one batch-level std; BNPO
is Dr. GRPO at alpha = beta = 1 and GRPO's (r - p) / sqrt(p (1 - p)) times B(3/2, 3/2) at 3/2,
its Beta parameters match the batch's success-rate moments, and the numpy twin agrees."""

import itertools
import math

import numpy as np
import pytest
import torch

from controlrl import advantages as adv
from controlrl.group import group_advantages
from controlrl.objective import ADVANTAGES
from theory import group_parts as parts
from theory import group_po as gp


def _batch(seed=0, n=5, G=6):
    gen = torch.Generator().manual_seed(seed)
    r = torch.bernoulli(torch.full((3, n, G), 0.4, dtype=torch.float64), generator=gen)
    r[0, 0] = 1.0  # a flat group
    return r


def test_rloo_leaves_the_sample_out():
    r = _batch()
    got = adv.rloo(r)
    G = r.shape[-1]
    for idx in itertools.product(range(3), range(5), range(G)):
        others = [float(r[idx[0], idx[1], j]) for j in range(G) if j != idx[2]]
        assert float(got[idx]) == pytest.approx(float(r[idx]) - sum(others) / (G - 1), abs=1e-12)
    assert torch.equal(adv.rloo(r[..., :1]), torch.zeros_like(r[..., :1]))


@pytest.mark.parametrize("G", [2, 3, 4])
def test_rloo_policy_gradient_is_unbiased_over_every_group(G):
    """All (2K)^G ordered groups of (arm, reward) on a 2-armed Bernoulli bandit."""
    pi, mu = np.array([0.65, 0.35]), np.array([0.8, 0.3])
    seqs = np.array(list(itertools.product(range(4), repeat=G)))
    arms, r = seqs // 2, (seqs % 2).astype(float)
    prob = np.prod(pi[arms] * np.where(r == 1, mu[arms], 1 - mu[arms]), axis=1)
    score = np.eye(2)[arms] - pi  # [M, G, K]
    for name, scale in (("rloo", 1.0), ("mean", (G - 1) / G)):
        a = ADVANTAGES[name](torch.from_numpy(r)[:, None, :])[:, 0].numpy()
        mean = prob @ np.einsum("mg,mgk->mk", a, score) / G
        np.testing.assert_allclose(mean, scale * gp.true_gradient(pi, mu), atol=1e-14)


def test_reinforce_pp_whitens_over_the_batch():
    r = _batch()
    a = ADVANTAGES["reinforce++"](r)
    flat = a.flatten(-2)
    torch.testing.assert_close(flat.mean(-1), torch.zeros(3, dtype=r.dtype), atol=1e-12, rtol=0)
    std = r.flatten(-2).std(-1)
    torch.testing.assert_close(flat.std(-1), std / (std + 1e-4))
    # global: another group's rewards move this group's advantages (not so for GRPO's)
    r2 = r.clone()
    r2[1, 4] = 1 - r2[1, 4]
    assert not torch.equal(adv.reinforce_pp(r2)[1, 0], adv.reinforce_pp(r)[1, 0])
    assert torch.equal(group_advantages(r2)[1, 0], group_advantages(r)[1, 0])
    base = ADVANTAGES["reinforce++-baseline"](r).flatten(-2)
    torch.testing.assert_close(base.mean(-1), torch.zeros(3, dtype=r.dtype), atol=1e-12, rtol=0)
    assert torch.equal(adv.reinforce_pp(torch.ones(2, 3, 4)), torch.zeros(2, 3, 4))


def test_batch_mean_is_one_baseline_for_the_whole_batch():
    r = _batch()
    a = ADVANTAGES["batch-mean"](r)
    for k in range(3):  # every output minus the mean of the batch, whatever its group
        torch.testing.assert_close(a[k], r[k] - r[k].mean())
    # one answer per prompt (groups of 1), as the TPO reference's PG, PPO and DG run it
    single = r.reshape(3, -1, 1)
    torch.testing.assert_close(
        adv.batch_mean(single), (r - r.mean((-2, -1), True)).reshape(3, -1, 1)
    )
    r2 = r.clone()  # another group's reward moves every advantage; other batches stay
    r2[1, 4, 0] = 1 - r2[1, 4, 0]
    assert not torch.equal(adv.batch_mean(r2)[1, 0], a[1, 0])
    assert torch.equal(adv.batch_mean(r2)[[0, 2]], a[[0, 2]])


def test_lite_ppo_is_group_mean_over_batch_std():
    r = _batch()
    ratio = ADVANTAGES["lite-ppo"](r) / group_advantages(r, "mean")
    want = 1 / (r.flatten(-2).std(-1) + 1e-4)
    for b in range(3):
        vals = ratio[b][group_advantages(r, "mean")[b] != 0]
        torch.testing.assert_close(vals, want[b].expand_as(vals))


def test_bnpo_special_cases_and_parameters():
    r = _batch()
    p = r.mean(-1, keepdim=True)
    torch.testing.assert_close(adv.bnpo(r, 1.0, 1.0), group_advantages(r, "mean"))
    grpo_pop = torch.where(p * (1 - p) > 0, (r - p) / (p * (1 - p)).sqrt(), torch.zeros_like(r))
    torch.testing.assert_close(adv.bnpo(r, 1.5, 1.5), math.pi / 8 * grpo_pop)  # B(3/2, 3/2)
    # alpha, beta: Beta(a, b) with the batch's mean and (unbiased) variance of p, then 1 + a/3
    q = torch.tensor([[0.2, 0.5, 0.4, 0.1, 0.3]], dtype=torch.float64)
    alpha, beta = adv.beta_parameters(q)
    a, b = 3 * (float(alpha) - 1), 3 * (float(beta) - 1)
    assert a / (a + b) == pytest.approx(float(q.mean()))
    assert a * b / ((a + b) ** 2 * (a + b + 1)) == pytest.approx(float(q.var()))
    # the numpy twin (the exact-moment module's) on random batches
    want = (r - p).numpy() * parts.bnpo_weight(p.numpy(), *parts_parameters(p))
    np.testing.assert_allclose(ADVANTAGES["bnpo"](r).numpy(), want, atol=1e-12)
    assert torch.equal(adv.bnpo(r[:, :1]), group_advantages(r[:, :1], "mean"))  # one group: 1, 1
    with pytest.raises(ValueError, match=r"^bnpo needs rewards in \[0, 1\]"):
        adv.bnpo(r * 2)


def parts_parameters(p):
    alpha, beta = parts.bnpo_parameters(p.squeeze(-1).numpy())
    return alpha[..., None, None], beta[..., None, None]


def test_registered_under_their_flag_names():
    names = {"rloo", "reinforce++", "reinforce++-baseline", "lite-ppo", "bnpo", "batch-mean"}
    names |= {"gpg"}
    assert names | {"mean", "mean-std"} == set(ADVANTAGES)
    assert ADVANTAGES["rloo"] is adv.rloo and ADVANTAGES["bnpo"] is adv.bnpo


def authors_gpg_advantages(rewards: torch.Tensor, G: int) -> torch.Tensor:
    """AMAP-ML/GPG open-r1/src/open_r1/gpg_trainer.py (scale_rewards false, adjust_gd: the
    loss divided by inverse_alpha, here the advantage), transliterated on one flat batch."""
    stds = rewards.view(-1, G).std(dim=1)
    num_identical_reward_groups = (stds == 0).sum().item()
    num_samples = stds.numel()
    n_valid_samples = num_samples - num_identical_reward_groups
    mean_grouped_rewards = rewards.view(-1, G).mean(dim=1).repeat_interleave(G, dim=0)
    advantages = rewards - mean_grouped_rewards
    inverse_alpha = min(1.0, n_valid_samples / num_samples)
    return advantages / inverse_alpha


def test_gpg_is_the_group_mean_advantage_times_the_authors_alpha():
    """alpha = B / (B - M), M the outputs of zero-variance groups (GPG, arXiv 2504.02546):
    4 groups of 4 with one flat group give 4/3; every seed of a batch has its own alpha, equal to
    the authors' code's."""
    r = torch.tensor([[1, 0, 0, 0], [1, 1, 1, 1], [0, 1, 1, 0], [0, 0, 1, 0]]).double()
    got = ADVANTAGES["gpg"](r)
    torch.testing.assert_close(got, 4 / 3 * group_advantages(r, "mean"), rtol=1e-15, atol=0)
    for G in (2, 4, 8):
        gen = torch.Generator().manual_seed(G)
        r = torch.bernoulli(torch.full((5, 6, G), 0.3, dtype=torch.float64), generator=gen)
        r[0, :3] = 1.0  # seed 0: at least half of its groups flat
        got = ADVANTAGES["gpg"](r)
        for k in range(r.shape[0]):
            want = authors_gpg_advantages(r[k].reshape(-1), G).reshape(r[k].shape)
            torch.testing.assert_close(got[k], want, rtol=1e-14, atol=1e-15)
    flat = torch.ones(2, 3, 4, dtype=torch.float64)
    assert torch.equal(ADVANTAGES["gpg"](flat), torch.zeros_like(flat))  # alpha 1, A = 0
