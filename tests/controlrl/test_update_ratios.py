"""controlrl.update's hook of the ratio option: rollout_ratios builds the EpisodeRatios of
args.ratio from the rollout's ended flags (None for step or without the flag), actor_critic_loss
hands the minibatch's ratio to the policy loss (and calls a ratio-less policy loss as before),
minibatch_update refreshes the ratios after every epoch, before after_epoch; surrogate_stats
takes approx_kl from the per-step ratio and clip_frac from the ratio used."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from controlrl.losses import surrogate_stats
from controlrl.ratios import EpisodeRatios, episode_starts
from controlrl.update import actor_critic_loss, minibatch_update, rollout_ratios


def _ended(T=6, N=2):
    ended = np.zeros((T, N), bool)
    ended[[1, 4], 0] = True
    ended[2, 1] = True
    return ended


def _ratio_args(kind, q=0.25, v=0.5, p0=2.0):
    return SimpleNamespace(ratio=kind, kalman_q=q, kalman_v=v, kalman_p0=p0)


@pytest.mark.parametrize("kind", ["sequence", "sequence_mean", "kalman"])
def test_rollout_ratios_of_each_kind(kind):
    ratios = rollout_ratios(_ratio_args(kind), _ended())
    assert isinstance(ratios, EpisodeRatios) and ratios.kind == kind
    assert ratios.kalman == {"q": 0.25, "v": 0.5, "p0": 2.0}
    assert torch.equal(ratios.starts, episode_starts(_ended()))


def test_rollout_ratios_step_absent_and_missing_ends():
    assert rollout_ratios(_ratio_args("step"), _ended()) is None
    assert rollout_ratios(SimpleNamespace(), None) is None  # an algorithm without the flag
    with pytest.raises(ValueError, match="^ended is required for ratio 'kalman'"):
        rollout_ratios(_ratio_args("kalman"), None)


class _Policy:
    def log_prob_entropy(self, obs, actions, entropy_grad=True):
        return obs[:, 0] * actions, obs[:, 1]


def _mb():
    return {
        "obs": torch.tensor([[0.5, 1.0], [1.0, 2.0], [-0.5, 1.5]]),
        "actions": torch.tensor([1.0, 0.25, 2.0]),
        "logprobs": torch.tensor([0.0, 0.5, -0.5]),
        "advantages": torch.tensor([1.0, -2.0, 0.5]),
        "values": torch.zeros(3),
        "returns": torch.zeros(3),
    }


def test_actor_critic_loss_hands_the_ratio_to_the_policy_loss():
    seen = []

    def policy_loss(*terms):
        seen.append(terms)
        return terms[0].sum(), {}

    args = SimpleNamespace(clip_vloss=False, ent_coef=0.0, vf_coef=0.0)
    mb, idx = _mb(), torch.tensor([0, 1, 2])  # rows (t, n) = (0, 0), (0, 1), (1, 0)
    starts = episode_starts(np.array([[False, False], [True, False]]))
    ratios = EpisodeRatios("sequence", starts)
    actor_critic_loss(_Policy(), lambda x: x.sum(-1), policy_loss, 1.0, args, ratios)(mb, idx)
    actor_critic_loss(_Policy(), lambda x: x.sum(-1), policy_loss, 1.0, args)(mb, idx)
    (logp, old, adv, ratio), plain = seen
    torch.testing.assert_close(logp, torch.tensor([0.5, 0.25, -1.0]))
    assert torch.equal(old, mb["logprobs"]) and torch.equal(adv, mb["advantages"])
    z = logp - old  # rows 0 and 2 are one episode of env 0; row 1 is env 1's
    torch.testing.assert_close(ratio, torch.stack([z[0] + z[2], z[1], z[0] + z[2]]).exp())
    assert len(plain) == 3  # no ratio: the policy loss's own per-step ratio


def test_minibatch_update_refreshes_the_ratios_after_every_epoch():
    log = []
    ratios = SimpleNamespace(refresh=lambda: log.append("refresh"))
    weight = torch.nn.Parameter(torch.ones(1))
    batch = {"obs": torch.ones(4, 1)}
    args = SimpleNamespace(update_epochs=2, num_minibatches=2, max_grad_norm=1.0)

    def loss_fn(mb, idx):
        log.append("step")
        return (weight * mb["obs"]).sum(), {}

    optimizer = torch.optim.SGD([weight], lr=0.1)
    after_epoch = log.append
    minibatch_update(optimizer, batch, loss_fn, args, after_epoch=after_epoch, ratios=ratios)
    assert log == ["step", "step", "refresh", 0, "step", "step", "refresh", 1]


def test_surrogate_stats_of_a_filtered_ratio():
    log_ratio = torch.tensor([0.5, -0.25, 0.0, 0.125])
    used = torch.tensor([1.0, 1.5, 0.5, 1.1])  # 2 of 4 beyond eps 0.3; the per-step: 1 of 4
    stats = surrogate_stats(log_ratio.exp(), log_ratio, 0.3, used=used)
    assert float(stats["clip_frac"]) == 0.5
    assert float(surrogate_stats(log_ratio.exp(), log_ratio, 0.3)["clip_frac"]) == 0.25
    torch.testing.assert_close(stats["approx_kl"], (log_ratio.exp() - 1 - log_ratio).mean())
