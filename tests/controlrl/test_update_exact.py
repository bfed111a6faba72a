"""controlrl.update and controlrl.losses, exactly: the flat fused Adam loop against a plain
per-tensor Adam replay, the optimiser's settings, the loss composition of the PPO family and the
shared loss terms, each on numbers chosen so that a one-token change shows."""

from __future__ import annotations

from types import SimpleNamespace

import torch

from controlrl.losses import approx_kl, clipped_value_loss, surrogate_stats
from controlrl.update import (
    actor_critic_loss,
    adam,
    anneal_lr,
    linear_lr,
    minibatch_update,
    normalize_advantages,
)


def _args(**kw):
    return SimpleNamespace(**{"update_epochs": 2, "num_minibatches": 2, "max_grad_norm": 0.1, **kw})


def _net(seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1))


def test_flat_fused_loop_equals_adam_written_out():
    torch.manual_seed(1)
    batch = {"obs": torch.randn(8, 3), "target": torch.randn(8)}
    net, seen = _net(), []

    def loss_fn(mb, idx):
        seen.append(idx.clone())
        return ((net(mb["obs"]).squeeze(-1) - mb["target"]) ** 2).mean(), {}

    minibatch_update(adam(net, lr=0.05), batch, loss_fn, _args())
    ref = _net()
    params = list(ref.parameters())
    m = [torch.zeros_like(p) for p in params]
    v = [torch.zeros_like(p) for p in params]
    for t, idx in enumerate(seen, start=1):  # the same minibatches, Adam written out, same clip
        loss = ((ref(batch["obs"][idx]).squeeze(-1) - batch["target"][idx]) ** 2).mean()
        grads = torch.autograd.grad(loss, params)
        norm = torch.sqrt(sum((g**2).sum() for g in grads))
        scale = min(1.0, 0.1 / (float(norm) + 1e-6))
        with torch.no_grad():
            for p, g, m_i, v_i in zip(params, grads, m, v):
                g = g * scale
                m_i.mul_(0.9).add_(0.1 * g)
                v_i.mul_(0.999).add_(0.001 * g * g)
                m_hat, v_hat = m_i / (1 - 0.9**t), v_i / (1 - 0.999**t)
                p -= 0.05 * m_hat / (v_hat.sqrt() + 1e-5)  # eps 1e-5 (CleanRL/SB3)
    assert len(seen) == 4
    for p, q in zip(net.parameters(), ref.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)


def test_adam_settings():
    net = _net()
    opt = adam(net, lr=0.1)
    (group,) = opt.param_groups
    assert group["eps"] == 1e-5 and group["fused"] is True
    assert len(group["params"]) == 1  # one flat parameter by default
    plain = adam(_net(), lr=0.1, flat=False)
    assert len(plain.param_groups[0]["params"]) == 4 and not plain.param_groups[0]["fused"]


def test_anneal_lr_sets_every_group():
    opt = adam(_net(), lr=0.3, flat=False)
    lr = anneal_lr(opt, 2.0, iteration=3, num_iterations=4, anneal=True)
    assert lr == linear_lr(2.0, 3, 4, True) == 1.0
    assert opt.param_groups[0]["lr"] == 1.0


def test_defaults_of_absent_flags_and_epoch_callback():
    batch = {"obs": torch.randn(4, 3), "advantages": torch.tensor([1.0, 2.0, 3.0, 10.0])}
    net, advs, epochs = _net(), [], []

    def loss_fn(mb, idx):
        advs.append(mb["advantages"].clone())
        return net(mb["obs"]).mean(), {"approx_kl": torch.tensor(0.5)}

    args = SimpleNamespace(update_epochs=3, num_minibatches=1, max_grad_norm=1.0)
    out = minibatch_update(adam(net, lr=0.01), batch, loss_fn, args, after_epoch=epochs.append)
    assert epochs == [0, 1, 2] and out["grad_steps"] == 3
    for a in advs:  # no norm_adv flag: advantages as given
        torch.testing.assert_close(a.sort().values, batch["advantages"])
    # approx_kl equal to target_kl does not stop (strictly above stops)
    at = minibatch_update(adam(net, lr=0.01), batch, loss_fn, _args(target_kl=0.5, update_epochs=3))
    assert at["grad_steps"] == 6
    above = minibatch_update(adam(net, lr=0.01), batch, loss_fn, _args(target_kl=0.4999))
    assert above["grad_steps"] == 2


def test_normalize_advantages_exact():
    adv = torch.tensor([0.0, 1e-8], dtype=torch.float64)
    std = adv.std()  # 7.07e-9: the 1e-8 in the denominator matters
    expected = torch.tensor([-0.5e-8, 0.5e-8], dtype=torch.float64) / (std + 1e-8)
    torch.testing.assert_close(normalize_advantages(adv), expected, rtol=1e-12, atol=0)


class _Policy:
    entropy_grad: list[bool] = []

    def log_prob_entropy(self, obs, actions, entropy_grad=True):
        self.entropy_grad.append(entropy_grad)
        return obs[:, 0] * 2 + actions, obs[:, 1] + actions * 0.5


def test_actor_critic_loss_composition():
    obs = torch.tensor([[1.0, 2.0], [3.0, 5.0]])
    mb = {
        "obs": obs,
        "actions": torch.tensor([0.5, -1.0]),
        "logprobs": torch.tensor([0.25, 0.75]),
        "advantages": torch.tensor([2.0, -3.0]),
        "values": torch.tensor([0.0, 10.0]),
        "returns": torch.tensor([4.0, 1.0]),
    }

    def policy_loss(logp, old_logp, adv):
        return (logp + 10 * old_logp + 100 * adv).sum(), {"probe": logp.sum()}

    def value_net(x):
        return x.sum(-1)  # [3, 8]

    args = SimpleNamespace(clip_vloss=True, ent_coef=0.1, vf_coef=0.5)
    loss_fn = actor_critic_loss(_Policy(), value_net, policy_loss, value_clip_eps=2.0, args=args)
    loss, stats = loss_fn(mb, torch.arange(2))
    logp = torch.tensor([2.5, 5.0])
    pg = (logp + 10 * mb["logprobs"] + 100 * mb["advantages"]).sum()
    ent = torch.tensor([2.25, 4.5]).mean()
    # clipped: V_old + clip(V_new - V_old, -2, 2) = [2, 8]; errors max([1, 49], [4, 49])
    v_loss = 0.5 * torch.tensor([4.0, 49.0]).mean()
    torch.testing.assert_close(loss, pg - 0.1 * ent + 0.5 * v_loss)
    torch.testing.assert_close(stats["policy_loss"], pg)
    torch.testing.assert_close(stats["value_loss"], v_loss)
    torch.testing.assert_close(stats["entropy"], ent)
    torch.testing.assert_close(stats["loss"], loss)
    torch.testing.assert_close(stats["probe"], logp.sum())
    assert not stats["loss"].requires_grad
    # the entropy's graph is asked for only where the loss uses it
    policy = _Policy()
    policy.entropy_grad = []
    for ent_coef in (0.1, 0.0):
        args.ent_coef = ent_coef
        actor_critic_loss(policy, value_net, policy_loss, 2.0, args)(mb, torch.arange(2))
    assert policy.entropy_grad == [True, False]


def test_clipped_value_loss_exact():
    v_old = torch.tensor([0.0, 0.0])
    v_new = torch.tensor([3.0, -3.0])
    returns = torch.tensor([1.0, -1.0])
    # unclipped: 0.5 * mean([4, 4]); a cubed error would give mean([8, -8])
    assert float(clipped_value_loss(v_new, v_old, returns, 1.0, clip=False)) == 2.0
    # clipped to [-1, 1] on both sides: errors max([4, 4], [0, 0]) -> same 2.0; with v_new moving
    # towards the return the clipped error is the larger one, on each side
    v_new = torch.tensor([0.5, -0.5])
    returns = torch.tensor([3.0, -3.0])
    v_old = torch.tensor([2.0, -2.0])  # v_new - v_old = [-1.5, 1.5] clipped to [-1, 1]
    # clipped values [1, -1]: errors [4, 4] vs plain [6.25, 6.25] -> max is plain
    assert float(clipped_value_loss(v_new, v_old, returns, 1.0, clip=True)) == 3.125
    v_old = torch.tensor([-2.0, 2.0])  # v_new - v_old = [2.5, -2.5] clipped to [1, -1]
    # clipped values [-1, 1]: errors [16, 16] > plain [6.25, 6.25]
    assert float(clipped_value_loss(v_new, v_old, returns, 1.0, clip=True)) == 8.0


def test_surrogate_stats_exact():
    ratio = torch.tensor([0.5, 0.875, 1.25, 1.5])  # exact in float32
    log_ratio = ratio.log()
    stats = surrogate_stats(ratio, log_ratio, eps=0.25)
    assert set(stats) == {"approx_kl", "clip_frac"}
    torch.testing.assert_close(stats["approx_kl"], ((ratio - 1) - log_ratio).mean())
    torch.testing.assert_close(stats["approx_kl"], approx_kl(ratio, log_ratio))
    # |r - 1| = [0.5, 0.125, 0.25, 0.5] > 0.25: two of four (1.25 sits on the edge: not counted)
    assert float(stats["clip_frac"]) == 0.5
