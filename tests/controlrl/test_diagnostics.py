"""controlrl.diagnostics: per-state KL and entropy against torch.distributions, ratio
statistics, the entropy change and the covariance law it obeys for a plain step."""

import math

import numpy as np
import pytest
import torch

from controlrl.diagnostics import (
    NonFiniteError,
    check_finite,
    covariance,
    dist_params,
    entropy_of,
    explained_variance,
    index_params,
    per_state_kl,
    policy_shift,
    ratio_stats,
)
from controlrl.nets import CategoricalPolicy, GaussianPolicy

D = torch.distributions


def test_gaussian_kl_matches_torch_distributions():
    torch.manual_seed(0)
    mu0, mu1 = torch.randn(7, 3, dtype=torch.float64), torch.randn(7, 3, dtype=torch.float64)
    ls0, ls1 = torch.randn(7, 3, dtype=torch.float64), torch.randn(7, 3, dtype=torch.float64)
    ours = per_state_kl((mu0, ls0), (mu1, ls1))
    ref = D.kl_divergence(D.Normal(mu0, ls0.exp()), D.Normal(mu1, ls1.exp())).sum(-1)
    torch.testing.assert_close(ours, ref, rtol=1e-10, atol=1e-12)
    assert per_state_kl((mu0, ls0), (mu0, ls0)).abs().max() < 1e-12


def test_categorical_kl_matches_torch_distributions():
    torch.manual_seed(1)
    lp0 = torch.log_softmax(torch.randn(5, 4, dtype=torch.float64), -1)
    lp1 = torch.log_softmax(torch.randn(5, 4, dtype=torch.float64), -1)
    ref = D.kl_divergence(D.Categorical(logits=lp0), D.Categorical(logits=lp1))
    torch.testing.assert_close(per_state_kl(lp0, lp1), ref, rtol=1e-10, atol=1e-12)


def test_ratio_stats():
    ratio = torch.tensor([1.0, 1.1, 0.7, 1.5])
    s = ratio_stats(ratio, 0.2)
    assert s["ratio_dev_frac"] == 0.5
    assert s["ratio_dev_max"] == pytest.approx(0.5)
    assert s["ratio_dev_mean"] == pytest.approx((0 + 0.1 + 0.3 + 0.5) / 4)


@pytest.mark.parametrize("policy_cls, act", [(GaussianPolicy, "box"), (CategoricalPolicy, "disc")])
def test_policy_shift_zero_before_and_positive_after_a_change(policy_cls, act):
    torch.manual_seed(2)
    policy = policy_cls(3, 2)
    obs = torch.randn(50, 3)
    actions = torch.randn(50, 2) if act == "box" else torch.randint(0, 2, (50,))
    old = dist_params(policy, obs)
    old_logp = policy.log_prob_entropy(obs, actions)[0].detach()
    s = policy_shift(policy, obs, actions, old_logp, old, 0.2)
    assert s["kl_max"] == pytest.approx(0, abs=1e-7) and s["ratio_dev_max"] < 1e-6
    with torch.no_grad():
        for p in policy.parameters():
            p.add_(0.5 * torch.randn_like(p))
    s = policy_shift(policy, obs, actions, old_logp, old, 0.2)
    assert 0 < s["kl_mean"] <= s["kl_max"] and s["ratio_dev_max"] > 0
    assert isinstance(index_params(old, torch.tensor([0, 2])), type(old))


def test_explained_variance_and_finite_check():
    r = np.array([1.0, 2.0, 3.0])
    assert explained_variance(r, r) == 1.0
    assert math.isnan(explained_variance(r, np.ones(3)))
    check_finite({"a": 1.0}, [torch.zeros(2)])
    with pytest.raises(NonFiniteError):
        check_finite({"a": float("nan")}, [torch.zeros(2)])
    with pytest.raises(NonFiniteError):
        check_finite({"a": 1.0}, [torch.tensor([float("inf")])])


def test_entropy_of_matches_torch_distributions():
    torch.manual_seed(3)
    mu, ls = torch.randn(6, 3, dtype=torch.float64), torch.randn(6, 3, dtype=torch.float64)
    ref = D.Normal(mu, ls.exp()).entropy().sum(-1)
    torch.testing.assert_close(entropy_of((mu, ls)), ref, rtol=1e-12, atol=1e-12)
    lp = torch.log_softmax(torch.randn(6, 4, dtype=torch.float64), -1)
    torch.testing.assert_close(entropy_of(lp), D.Categorical(logits=lp).entropy())


def test_covariance_is_numpy_cov_with_bias():
    x, y = torch.randn(2, 40, dtype=torch.float64)
    ref = np.cov(x.numpy(), y.numpy(), bias=True)[0, 1]
    assert float(covariance(x, y)) == pytest.approx(ref, rel=1e-12)
    both = covariance(torch.stack([x, 2 * x]), torch.stack([y, y]))  # leading axes kept
    torch.testing.assert_close(both, torch.stack([covariance(x, y), 2 * covariance(x, y)]))


def test_entropy_change_is_minus_2_eta_cov_for_a_gradient_step_on_log_std():
    """The covariance law for a Gaussian with a state-independent std, exactly: one plain step
    of size eta on mean(A log pi) (A centred) over the log std moves the entropy by
    -2 eta Cov(log pi, A) (the entropy is linear in the log std, so no higher-order term)."""
    torch.manual_seed(4)
    policy = GaussianPolicy(3, 2).double()
    obs = torch.randn(200, 3, dtype=torch.float64)
    with torch.no_grad():
        actions = policy.sample(obs)
    adv = torch.randn(200, dtype=torch.float64)
    adv = adv - adv.mean() + 0.8 * actions[:, 0].abs()  # correlated with the sample's size
    adv = adv - adv.mean()
    old = dist_params(policy, obs)
    old_logp = policy.log_prob_entropy(obs, actions)[0].detach()
    logp = policy.log_prob_entropy(obs, actions)[0]
    (grad,) = torch.autograd.grad((adv * logp).mean(), policy.log_std)
    eta = 1e-3
    with torch.no_grad():
        policy.log_std.add_(eta * grad)  # ascent on J = E[A log pi]
    s = policy_shift(policy, obs, actions, old_logp, old, 0.2, adv)
    assert s["logp_adv_cov"] == pytest.approx(float(covariance(old_logp, adv)), rel=1e-12)
    assert abs(s["logp_adv_cov"]) > 1e-2  # the check below is not 0 = 0
    assert s["entropy_change"] == pytest.approx(-2 * eta * s["logp_adv_cov"], rel=1e-9)
    assert "logp_adv_cov" not in policy_shift(policy, obs, actions, old_logp, old, 0.2)
