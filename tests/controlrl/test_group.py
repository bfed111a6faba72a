"""controlrl/group.py: GRPO's group advantages against a per-group Python loop, their moments,
exact zeros (and an exactly zero policy gradient) for zero-variance groups, batching over any
leading axes, one 1-D group with the default eps, and the argument errors."""

import math
import re
import statistics

import pytest
import torch

from controlrl import group


def _reference(rows, scale, eps):
    """One group at a time in Python floats (statistics.stdev is the unbiased std)."""
    out = []
    for r in rows:
        if len(set(r)) == 1:
            out.append([0.0] * len(r))
            continue
        m = statistics.fmean(r)
        d = statistics.stdev(r) + eps if scale == "mean_std" else 1.0
        out.append([(x - m) / d for x in r])
    return out


@pytest.mark.parametrize("scale", group.SCALES)
def test_matches_a_per_group_loop(scale):
    gen = torch.Generator().manual_seed(0)
    rewards = torch.randn(50, 6, generator=gen, dtype=torch.float64)
    rewards[3] = 0.25  # one flat group among them
    rewards[7] = torch.tensor([0.0, 1.0, 0.0, 0.0, 0.0, 0.0], dtype=torch.float64)
    got = group.group_advantages(rewards, scale, eps=1e-4)
    want = torch.tensor(_reference(rewards.tolist(), scale, 1e-4), dtype=torch.float64)
    torch.testing.assert_close(got, want, rtol=0, atol=1e-12)
    # the one-success group: (1 - 1/6) / (stdev + 1e-4), stdev = sqrt(1/6)
    assert got[7, 1].item() == pytest.approx(
        (5 / 6) / (math.sqrt(1 / 6) + 1e-4) if scale == "mean_std" else 5 / 6, abs=1e-12
    )


def test_moments_within_groups():
    gen = torch.Generator().manual_seed(1)
    rewards = torch.rand(200, 8, generator=gen, dtype=torch.float64) * 5
    adv = group.group_advantages(rewards, "mean_std", eps=0.0)
    torch.testing.assert_close(
        adv.mean(-1), torch.zeros(200, dtype=torch.float64), atol=1e-12, rtol=0
    )
    torch.testing.assert_close(
        adv.std(-1), torch.ones(200, dtype=torch.float64), atol=1e-12, rtol=0
    )
    # eps shrinks every group by std / (std + eps)
    adv_eps = group.group_advantages(rewards, "mean_std", eps=0.5)
    std = rewards.std(-1)
    torch.testing.assert_close(adv_eps.std(-1), std / (std + 0.5), atol=1e-12, rtol=0)


def test_zero_variance_groups_are_exactly_zero_and_give_zero_gradient():
    # 0.7 repeated 3 times: the float mean is off by 1.1e-16 and so is the std, so without the
    # explicit zeroing (r - mean) / std is about -0.8, not 0
    rewards = torch.tensor([[0.7, 0.7, 0.7], [1.0, 1.0, 1.0], [0.0, 1.0, 1.0]], dtype=torch.float64)
    for scale in group.SCALES:
        adv = group.group_advantages(rewards, scale, eps=0.0)
        assert torch.equal(adv[:2], torch.zeros(2, 3, dtype=torch.float64))
        assert adv[2].abs().min() > 0.1
    assert group.zero_variance_mask(rewards).tolist() == [True, True, False]
    assert group.zero_variance_fraction(rewards) == pytest.approx(2 / 3)
    # REINFORCE-style loss on a 4-armed softmax per context: the flat contexts get no gradient
    logits = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    actions = torch.tensor([[0, 1, 2], [3, 3, 1], [2, 0, 1]])
    logp = torch.log_softmax(logits, -1).gather(-1, actions)
    adv = group.group_advantages(rewards, "mean_std", eps=0.0)
    (-(adv * logp).sum()).backward()
    assert torch.equal(logits.grad[:2], torch.zeros(2, 4, dtype=torch.float64))
    assert logits.grad[2].abs().max() > 0.1


def test_batched_over_leading_axes():
    gen = torch.Generator().manual_seed(2)
    rewards = (torch.rand(4, 5, 8, generator=gen) < 0.3).float()  # binary: many flat groups
    adv = group.group_advantages(rewards)
    torch.testing.assert_close(adv.reshape(20, 8), group.group_advantages(rewards.reshape(20, 8)))
    assert group.zero_variance_mask(rewards).shape == (4, 5)


def test_one_group_of_two_and_the_default_eps():
    """A 1-D reward vector is one group; G = 2 is the smallest with a std (TRL's 1e-4 added)."""
    adv = group.group_advantages(torch.tensor([0.0, 1.0], dtype=torch.float64))
    want = 0.5 / (math.sqrt(0.5) + 1e-4)
    torch.testing.assert_close(adv, torch.tensor([-want, want], dtype=torch.float64))
    assert group.zero_variance_mask(torch.ones(4)).item() is True


def test_single_sample_groups_have_no_signal():
    rewards = torch.tensor([[3.0], [-1.0]])
    for scale in group.SCALES:
        assert torch.equal(group.group_advantages(rewards, scale), torch.zeros(2, 1))


def test_argument_errors():
    r = torch.zeros(2, 3)
    with pytest.raises(ValueError, match=re.escape("scale = 'std', expected one of")):
        group.group_advantages(r, "std")
    with pytest.raises(ValueError, match=r"^eps = -1.0 must be >= 0$"):
        group.group_advantages(r, eps=-1.0)
    with pytest.raises(ValueError, match=r"^rewards has shape \(2, 0\), expected"):
        group.group_advantages(torch.zeros(2, 0))
    with pytest.raises(ValueError, match=r"^rewards has shape \(\), expected"):
        group.zero_variance_mask(torch.tensor(1.0))


@pytest.mark.parametrize("scale", ["mean", "mean_std"])
def test_masked_groups_equal_each_group_alone(scale):
    """Padded groups of sizes 1..6: each group's advantages are group_advantages of its
    members alone, padding is 0, and binary groups that are flat are exactly 0."""
    gen = torch.Generator().manual_seed(3)
    sizes = [1, 2, 3, 6, 4, 5, 2]
    width = max(sizes)
    rewards = torch.randint(0, 2, (len(sizes), width), generator=gen).double()
    rewards[3] = torch.rand(width, generator=gen, dtype=torch.float64)  # non-binary group
    rewards[4, :4] = 1.0  # a flat group with non-flat padding behind it
    rewards[4, 4:] = 0.0
    rewards[2, :3] = 0.1  # flat, but its mean is not exactly 0.1 in floating point
    mask = torch.arange(width)[None, :] < torch.tensor(sizes)[:, None]
    got = group.masked_group_advantages(rewards, mask, scale)
    for i, n in enumerate(sizes):
        want = group.group_advantages(rewards[i, :n], scale)
        torch.testing.assert_close(got[i, :n], want, rtol=1e-12, atol=1e-12)
        assert torch.all(got[i, n:] == 0)
    assert torch.all(got[0] == 0) and torch.all(got[4] == 0) and torch.all(got[2] == 0)


def test_masked_groups_reject_a_mask_of_another_shape():
    with pytest.raises(ValueError, match="mask"):
        group.masked_group_advantages(torch.zeros(2, 3), torch.ones(2, 2, dtype=torch.bool))
