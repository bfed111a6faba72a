"""controlrl/kl_estimators.py, exactly on a 5-way categorical (expectations are sums over the
arms; gradients by autograd through the parts, against the softmax's closed forms in
theory/group_parts.py). Values under q = pi_theta: k1 and k3 unbiased for KL(q || p), k2 biased
(by a computed amount), k2 and k3 never negative, k1 negative at some arm, k3's variance below
k1's near p. In the loss (on-policy): k1's gradient has mean 0, k2's is the reverse-KL gradient,
k3's is the FORWARD KL's, q - p. In the reward (stop-gradient REINFORCE): k1's is the reverse-KL
gradient, k3's is not. From samples of pi_old: plain k3 is biased, k3-unbiased (DeepSeek-V3.2)
has value KL(q || p) and loss gradient grad KL(q || p) exactly."""

import numpy as np
import pytest
import torch

from controlrl import kl_estimators as kle
from controlrl.objective import KL_ESTIMATORS, episode_kl, k3
from theory import group_parts as parts

Z = torch.tensor([0.3, -0.8, 1.1, 0.0, -0.2], dtype=torch.float64)  # pi_theta's logits
REF = torch.log_softmax(torch.tensor([0.9, 0.1, -0.4, 0.2, -1.0], dtype=torch.float64), -1)
OLD = torch.log_softmax(torch.tensor([0.0, 0.4, 0.6, -0.5, 0.3], dtype=torch.float64), -1)
K = len(Z)


def _q():
    return torch.softmax(Z, -1).numpy()


def _per_arm(name, sampler_logp=None):
    """(estimate at each arm [K], gradient of the estimate w.r.t. the logits at each arm [K, K])."""
    values, grads = [], []
    for a in range(K):
        z = Z.clone().requires_grad_(True)
        logp = torch.log_softmax(z, -1)[a]
        old = sampler_logp[a] if sampler_logp is not None else logp.detach()
        est = KL_ESTIMATORS[name](logp, REF[a], old_logp=old)
        (g,) = torch.autograd.grad(est, z)
        values.append(float(est.detach()))
        grads.append(g.numpy())
    return np.array(values), np.array(grads)


def test_values_under_the_current_policy():
    q, p = _q(), REF.exp().numpy()
    true = parts.kl(q, p)
    v1, v2, v3 = (_per_arm(n)[0] for n in ("k1", "k2", "k3"))
    assert q @ v1 == pytest.approx(true, abs=1e-14)
    assert q @ v3 == pytest.approx(true, abs=1e-14)
    bias2 = q @ v2 - true
    assert bias2 == pytest.approx(q @ (0.5 * np.log(q / p) ** 2) - true, abs=1e-14)
    assert abs(bias2) > 1e-3  # k2 is biased
    assert (v2 >= 0).all() and (v3 >= 0).all() and (v1 < 0).any()
    d = torch.linspace(-30, 30, 601, dtype=torch.float64)
    assert (k3(torch.zeros_like(d), d) >= 0).all()
    # near p (q = p tilted slightly) k3 has the smaller variance (Schulman's point)
    near = torch.log_softmax(REF + 0.05 * Z, -1)
    qn = near.exp().numpy()
    e1, e3 = kle.k1(near, REF).numpy(), k3(near, REF).numpy()
    assert qn @ (e3 - qn @ e3) ** 2 < qn @ (e1 - qn @ e1) ** 2


def test_gradients_in_the_loss_and_in_the_reward():
    q, p = _q(), REF.exp().numpy()
    reverse, forward = parts.grad_reverse_kl(q, p), parts.grad_forward_kl(q, p)
    g1, g2, g3 = (q @ _per_arm(n)[1] for n in ("k1", "k2", "k3"))
    np.testing.assert_allclose(g1, 0.0, atol=1e-14)
    np.testing.assert_allclose(g2, reverse, atol=1e-14)
    np.testing.assert_allclose(g3, forward, atol=1e-14)
    assert np.abs(g3 - reverse).max() > 1e-2
    score = np.eye(K) - q  # grad log q(a) at each arm
    for name, unbiased in (("k1", True), ("k2", False), ("k3", False)):
        in_reward = (q * _per_arm(name)[0]) @ score
        assert np.allclose(in_reward, reverse, atol=1e-14) == unbiased, name


def test_k3_unbiased_from_old_samples():
    q, p, o = _q(), REF.exp().numpy(), OLD.exp().numpy()
    true, reverse = parts.kl(q, p), parts.grad_reverse_kl(q, p)
    values, grads = _per_arm("k3-unbiased", OLD)
    assert o @ values == pytest.approx(true, abs=1e-14)
    np.testing.assert_allclose(o @ grads, reverse, atol=1e-14)
    plain_values, plain_grads = _per_arm("k3", OLD)
    assert abs(o @ plain_values - true) > 1e-2
    assert np.abs(o @ plain_grads - reverse).max() > 1e-2
    # on-policy (old = theta) the weight is 1: the same value as k3
    torch.testing.assert_close(kle.k3_unbiased(OLD, REF, OLD), k3(OLD, REF))
    assert torch.equal(kle.k3_unbiased(OLD, REF), k3(OLD, REF))  # in the reward: theta_old


def test_k1_in_the_reward_sums_over_valid_steps():
    old = torch.log(torch.tensor([[0.5, 0.2], [0.4, 0.9], [0.1, 0.3]]))  # [T, N]
    ref = torch.log(torch.tensor([[0.25, 0.2], [0.8, 0.3], [0.2, 0.6]]))
    valid = torch.tensor([[True, True], [True, True], [False, True]])
    torch.testing.assert_close(episode_kl(old, ref, valid, "k1"), ((old - ref) * valid).sum(0))
    assert {"k1", "k2", "k3", "k3-unbiased"} == set(KL_ESTIMATORS)


def test_the_group_objective_passes_old_logp_to_k3_unbiased():
    """The loss of controlrl/objective.py with --kl-estimator k3-unbiased over every arm,
    weighted by pi_old (the exact expectation over old samples; zero advantages): its gradient
    is grad KL(q || p)."""
    from controlrl.objective import Objective, Tokens, group_objective

    q, p = _q(), REF.exp().numpy()
    z = Z.clone().requires_grad_(True)
    logp = torch.log_softmax(z, -1)
    zero = torch.zeros(K, dtype=torch.float64)
    t = Tokens(logp, OLD, (logp - OLD).exp(), zero, REF, OLD.exp())
    loss, _ = group_objective(t, Objective(policy_loss="reinforce", kl="k3-unbiased", kl_coef=1.0))
    (g,) = torch.autograd.grad(loss, z)
    np.testing.assert_allclose(g.numpy(), parts.grad_reverse_kl(q, p), atol=1e-14)
