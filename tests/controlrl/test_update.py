"""controlrl.update: the one minibatch loop, its optimiser and LR schedule."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from controlrl.diagnostics import NonFiniteError
from controlrl.losses import approx_kl
from controlrl.update import (
    adam,
    anneal_lr,
    clip_grad_norm,
    linear_lr,
    minibatch_update,
    reduce_stats,
)


def flags(**kw):
    base = dict(update_epochs=3, num_minibatches=4, max_grad_norm=1e9, norm_adv=False)
    return SimpleNamespace(**{**base, **kw})


def make_batch(n=16):
    torch.manual_seed(0)
    return {"obs": torch.randn(n, 3), "advantages": torch.randn(n) * 5 + 2}


def test_every_row_seen_once_per_epoch_and_advantages_normalised_per_minibatch():
    batch, seen, advs = make_batch(), [], []
    net = torch.nn.Linear(3, 1)

    def loss_fn(mb, idx):
        seen.append(idx.clone())
        advs.append(mb["advantages"])
        torch.testing.assert_close(mb["obs"], batch["obs"][idx])
        return net(mb["obs"]).mean(), {}

    out = minibatch_update(adam(net, lr=1e-3), batch, loss_fn, flags(norm_adv=True))
    assert out["grad_steps"] == 12
    for epoch in range(3):
        rows = torch.cat(seen[4 * epoch : 4 * epoch + 4]).sort().values
        assert torch.equal(rows, torch.arange(16))
    for a in advs:  # standardised within each minibatch of 4
        assert abs(float(a.mean())) < 1e-5 and abs(float(a.std()) - 1) < 1e-4


def test_target_kl_stops_after_the_epoch_that_exceeds_it():
    net = torch.nn.Linear(3, 1)

    def run(target_kl, kls):
        kls = iter(kls)

        def loss_fn(mb, idx):
            return net(mb["obs"]).mean(), {"approx_kl": torch.tensor(next(kls))}

        return minibatch_update(
            adam(net, lr=1e-3), make_batch(), loss_fn, flags(target_kl=target_kl)
        )

    # the last minibatch of epoch 1 exceeds; one inside an epoch does not count
    assert run(0.1, [0.0, 0.0, 0.0, 0.5] + [0.0] * 8)["grad_steps"] == 4
    assert run(0.1, [0.5, 0.0, 0.0, 0.0] + [0.0] * 8)["grad_steps"] == 12
    assert run(None, [0.0, 0.0, 0.0, 0.5] + [0.0] * 8)["grad_steps"] == 12


def test_statistics_are_means_except_max_names():
    log = {
        "loss": [torch.tensor(1.0), torch.tensor(3.0)],
        "kl_max": [torch.tensor(1.0), torch.tensor(3.0)],
    }
    assert reduce_stats(log) == {"loss": 2.0, "kl_max": 3.0}


def test_gradient_norm_is_clipped():
    net = torch.nn.Linear(3, 1, bias=False)
    opt = torch.optim.SGD(net.parameters(), lr=1.0)
    before = net.weight.detach().clone()

    def loss_fn(mb, idx):
        return 1e6 * net(mb["obs"]).sum(), {}

    minibatch_update(
        opt, make_batch(4), loss_fn, flags(update_epochs=1, num_minibatches=1, max_grad_norm=0.5)
    )
    assert float((net.weight - before).norm()) == pytest.approx(0.5, rel=1e-5)


@pytest.mark.parametrize("max_norm,scale", [(1e-3, 1.0), (0.7, 1.0), (1e9, 1.0), (1e-6, 1e-5)])
def test_clip_grad_norm_is_bit_identical_to_torchs(max_norm, scale):
    """Several tensors (one without a gradient), scaled down or left alone: the same total norm
    and the same gradients to the last bit as torch.nn.utils.clip_grad_norm_."""
    torch.manual_seed(1)
    ours = [torch.randn(s, requires_grad=True) for s in [(7, 5), (5,), (3, 7), (2,)]]
    theirs = [p.detach().clone().requires_grad_() for p in ours]
    for group in (ours, theirs):
        sum((p**3).sum() * (i + 1) * scale for i, p in enumerate(group[:3])).backward()
    total = clip_grad_norm(ours, max_norm)
    expected = torch.nn.utils.clip_grad_norm_(theirs, max_norm)
    assert torch.equal(total, expected)
    assert ours[3].grad is None
    for a, b in zip(ours[:3], theirs[:3]):
        assert torch.equal(a.grad, b.grad)
    clipped = torch.linalg.vector_norm(torch.cat([p.grad.ravel() for p in ours[:3]]))
    total = float(expected)
    assert float(clipped) == pytest.approx(total * min(1.0, max_norm / (total + 1e-6)), rel=1e-5)


def test_non_finite_loss_or_parameters_raise():
    net = torch.nn.Linear(3, 1)

    def loss_fn(mb, idx):
        return net(mb["obs"]).mean() * float("nan"), {"loss": torch.tensor(float("nan"))}

    with pytest.raises(NonFiniteError):
        minibatch_update(adam(net, lr=1e-3), make_batch(), loss_fn, flags())


def test_flat_adam_matches_per_tensor_adam_and_fixup_style_steps_leave_others_alone():
    torch.manual_seed(1)
    a, b = torch.nn.Linear(3, 2), torch.nn.Linear(2, 1)
    a2, b2 = torch.nn.Linear(3, 2), torch.nn.Linear(2, 1)
    a2.load_state_dict(a.state_dict()), b2.load_state_dict(b.state_dict())
    flat, plain = adam(a, b, lr=1e-2), adam(a2, b2, lr=1e-2, flat=False)
    x = torch.randn(8, 3)
    for _ in range(5):
        for opt, (m1, m2) in ((flat, (a, b)), (plain, (a2, b2))):
            opt.zero_grad(set_to_none=False)
            m2(torch.tanh(m1(x))).pow(2).mean().backward()
            opt.step()
    torch.testing.assert_close(a.weight, a2.weight, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(b.weight, b2.weight, rtol=1e-5, atol=1e-6)
    # per-tensor Adam with gradients set to None skips those tensors (FixPO's fixup needs it)
    before = b2.weight.detach().clone()
    plain.zero_grad(set_to_none=True)
    a2(x).pow(2).mean().backward()
    plain.step()
    assert torch.equal(b2.weight, before)


def test_linear_lr_anneals_to_zero_and_sets_every_group():
    assert linear_lr(1.0, 1, 4, True) == 1.0
    assert linear_lr(1.0, 4, 4, True) == 0.25
    assert linear_lr(1.0, 4, 4, False) == 1.0
    opt = torch.optim.Adam([{"params": [torch.zeros(1)]}, {"params": [torch.zeros(1)]}], lr=1)
    assert anneal_lr(opt, 2.0, 3, 4, True) == 1.0
    assert [g["lr"] for g in opt.param_groups] == [1.0, 1.0]


def test_k3_approx_kl_is_an_unbiased_nonnegative_kl_estimate():
    # samples from p = N(0, 1); q = N(0.5, 1): KL(p || q) = 0.125
    torch.manual_seed(0)
    x = torch.randn(400_000, dtype=torch.float64)
    log_ratio = -0.5 * (x - 0.5) ** 2 + 0.5 * x**2  # log q(x) - log p(x)
    kl = approx_kl(log_ratio.exp(), log_ratio)
    assert float(kl) == pytest.approx(0.125, rel=0.02)
    assert float(approx_kl(log_ratio[:10].exp(), log_ratio[:10])) >= 0
