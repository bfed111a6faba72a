"""The GAE paper's algorithm: the trust-region value step and the order of the two steps."""

import copy

import pytest
import torch

from algos import gae as gae_algo
from algos.gae import Args, gauss_newton_product, value_trust_region_step
from controlrl.cli import parse
from controlrl.nets import ValueNet
from controlrl.returns import gae
from controlrl.training import Run
from controlrl.trust_region import get_flat
from controlrl.update import normalize_advantages


def linear_problem(n=200, d=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=g, dtype=torch.float64)
    w = torch.randn(d, generator=g, dtype=torch.float64)
    targets = x @ w + 0.1 * torch.randn(n, generator=g, dtype=torch.float64)
    net = ValueNet(d, hidden=()).double()  # V = w^T x + b: a linear value function
    return net, x, targets


def test_gauss_newton_of_linear_value_function_is_x_t_x():
    net, x, targets = linear_problem()
    with torch.no_grad():
        v_old = net(x)
    sigma2 = 2.5
    hvp = gauss_newton_product(net, x, v_old, sigma2)
    features = torch.cat([x, torch.ones(x.shape[0], 1, dtype=x.dtype)], 1)  # [w, b] order
    exact = features.T @ features / (x.shape[0] * sigma2)
    for seed in range(3):
        v = torch.randn(5, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
        torch.testing.assert_close(hvp(v), exact @ v, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("eps_v", [1e-3, 1e-2])
def test_value_step_meets_its_constraint(eps_v):
    net, x, targets = linear_problem()
    stats = value_trust_region_step(net, x, targets, eps_v, cg_steps=10)
    assert stats["vf_alpha"] < 1  # the Gauss-Newton step left the region and was rescaled
    assert stats["vf_quad"] == pytest.approx(eps_v, rel=1e-9)
    # for a linear V the constraint is exactly quadratic: the measured value equals the model
    assert stats["vf_constraint"] == pytest.approx(eps_v, rel=1e-6)
    assert stats["vf_loss_after"] < stats["vf_loss_before"]
    # a nonlinear value net: the measured constraint stays close to the model's eps_V
    torch.manual_seed(0)
    mlp = ValueNet(4, (16,)).double()
    stats = value_trust_region_step(mlp, x, targets, eps_v, cg_steps=20)
    assert stats["vf_constraint"] == pytest.approx(eps_v, rel=0.2)


def test_large_region_gives_least_squares():
    net, x, targets = linear_problem()
    value_trust_region_step(net, x, targets, eps_v=1e6, cg_steps=10)
    features = torch.cat([x, torch.ones(x.shape[0], 1, dtype=x.dtype)], 1)
    lstsq = torch.linalg.lstsq(features, targets.unsqueeze(1)).solution.squeeze(1)
    torch.testing.assert_close(get_flat(list(net.parameters())), lstsq, rtol=1e-6, atol=1e-8)


def test_policy_step_uses_advantages_from_the_value_function_before_its_update(
    monkeypatch, tmp_path
):
    """Through main()'s real collect-then-update path: the advantages the policy step receives
    are GAE with V as it was when the batch was collected, i.e. before this batch's value step,
    and not GAE with the V that the value step produced (which 'value step first' would give)."""
    seen = {}
    collect, real_policy_step = Run.collect, gae_algo.policy_step

    def recording_collect(self, policy, value_fn):
        out = collect(self, policy, value_fn)
        seen["run"] = self
        seen["v_at_collect"] = copy.deepcopy(self.stateful["value"])
        return out

    def recording_policy_step(policy, obs, actions, old_logp, old_params, adv, args):
        seen["adv"] = adv.clone()
        seen["vf_steps_before"] = seen.get("vf_steps", 0)
        return real_policy_step(policy, obs, actions, old_logp, old_params, adv, args)

    def counting_value_step(*args, **kwargs):
        seen["vf_steps"] = seen.get("vf_steps", 0) + 1
        return real_value_step(*args, **kwargs)

    real_value_step = gae_algo.value_trust_region_step
    monkeypatch.setattr(Run, "collect", recording_collect)
    monkeypatch.setattr(gae_algo, "policy_step", recording_policy_step)
    monkeypatch.setattr(gae_algo, "value_trust_region_step", counting_value_step)
    argv = ["--env-id", "Pendulum-v1", "--num-envs", "2", "--num-steps", "64"]
    argv += ["--total-timesteps", "128", "--eval-every", "0", "--eval-episodes", "1"]
    argv += ["--cg-max-steps", "3", "--no-progress", "--no-tensorboard"]
    args = parse(Args, [*argv, "--run-dir", str(tmp_path / "run")])
    gae_algo.main(args)
    assert seen["vf_steps_before"] == 0 and seen["vf_steps"] == 1  # policy step, then V's
    run, buf = seen["run"], seen["run"].buffer

    def advantages(value_net):  # normalised GAE of the collected batch with value_net
        buf.fill_values(value_net)
        lam, gamma = args.gae_lambda, args.gamma
        adv = gae(buf.rewards, buf.values, buf.next_values, buf.terminated, buf.ended, gamma, lam)
        return normalize_advantages(torch.as_tensor(adv, dtype=torch.float32).reshape(-1))

    before, after = advantages(seen["v_at_collect"]), advantages(run.stateful["value"])
    torch.testing.assert_close(seen["adv"], before, rtol=1e-5, atol=1e-5)
    assert (seen["adv"] - after).abs().max() > 1e-3  # the value step did change V's GAE
