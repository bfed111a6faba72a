"""SPO (Xie et al. 2024, "Simple Policy Optimization"; reference MyRepositories-hub/
Simple-Policy-Optimization mujoco/trainer.py): the quadratic objective's gradient and smoke runs
of the script."""

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from timeouts import scaled

from algos.spo import spo_loss
from controlrl.nets import GaussianPolicy

ROOT = Path(__file__).resolve().parents[2]
EPS = 0.2


def ratio_grads(r: torch.Tensor, adv: torch.Tensor, eps: float = EPS) -> torch.Tensor:
    """d loss / d r per sample, through logp = log r (old logp = 0)."""
    r = r.clone().double().requires_grad_(True)
    loss, _ = spo_loss(r.log(), torch.zeros_like(r), adv.double(), eps)
    (grad,) = torch.autograd.grad(loss, r)
    return grad


def test_per_sample_gradient_equals_formula_for_random_a_and_r():
    torch.manual_seed(0)
    adv, r = torch.randn(256).double(), torch.rand(256).double() * 2 + 0.05
    expected = -(adv - adv.abs() * (r - 1) / EPS) / len(r)
    torch.testing.assert_close(ratio_grads(r, adv), expected, rtol=1e-12, atol=1e-14)


def test_gradient_vanishes_on_the_boundary_and_pulls_back_beyond_it():
    adv = torch.tensor([2.0, -3.0, 0.5, -0.1]).double()
    boundary = 1 + adv.sign() * EPS
    assert ratio_grads(boundary, adv).abs().max() < 1e-14
    # beyond the boundary, descending the loss moves r back towards it
    beyond = 1 + adv.sign() * (EPS + 0.1)
    grad = ratio_grads(beyond, adv)
    assert torch.all(grad * adv.sign() > 0)  # d loss/d r has the sign of the overshoot
    torch.testing.assert_close(grad, adv * 0.1 / EPS / len(adv))  # restoring force |A| d / eps
    # inside, it pushes r outwards towards the boundary
    inside = 1 + adv.sign() * (EPS - 0.1)
    assert torch.all(ratio_grads(inside, adv) * adv.sign() < 0)


def test_gradient_at_r_equal_one_is_pg_and_concave_and_zero_advantage_is_inert():
    adv = torch.tensor([1.5, -0.7, 0.0]).double()
    grad = ratio_grads(torch.ones(3), adv)
    torch.testing.assert_close(grad, -adv / 3)
    assert grad[2] == 0 and ratio_grads(torch.tensor([1.7, 0.3, 2.0]), adv)[2] == 0
    r = torch.tensor([1.3]).double().requires_grad_(True)
    a = torch.tensor([-2.0]).double()
    loss, _ = spo_loss(r.log(), torch.zeros(1).double(), a, EPS)
    # d^2 f / dr^2 = -|A| / eps, so the minimised loss has curvature +|A| / eps in r
    (g,) = torch.autograd.grad(loss, r, create_graph=True)
    (h,) = torch.autograd.grad(g.sum(), r)
    assert h.item() == pytest.approx(2.0 / EPS)


def test_parameter_gradient_at_old_policy_is_vanilla_policy_gradient():
    torch.manual_seed(0)
    policy = GaussianPolicy(4, 2).double()
    obs, actions = torch.randn(32, 4).double(), torch.randn(32, 2).double()
    adv = torch.randn(32).double()
    logp, _ = policy.log_prob_entropy(obs, actions)
    loss, _ = spo_loss(logp, logp.detach(), adv, EPS)
    g_spo = torch.autograd.grad(loss, list(policy.parameters()))
    logp, _ = policy.log_prob_entropy(obs, actions)
    g_pg = torch.autograd.grad(-(adv * logp).mean(), list(policy.parameters()))
    for a, b in zip(g_spo, g_pg):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


def smoke(script: str, env_id: str, tmp_path: Path, *extra: str) -> Path:
    """A few hundred steps of an algorithm script; returns its run directory."""
    run = tmp_path / f"{Path(script).stem}_{env_id}"
    cmd = [sys.executable, script, "--env-id", env_id, "--num-envs", "2", "--num-steps", "128"]
    cmd += ["--total-timesteps", "512", "--num-minibatches", "4", "--update-epochs", "2"]
    cmd += ["--eval-episodes", "1", "--run-dir", str(run), "--no-progress", "--no-tensorboard"]
    out = subprocess.run(
        [*cmd, *extra], cwd=ROOT, capture_output=True, text=True, timeout=scaled(300)
    )
    assert out.returncode == 0, out.stderr[-2000:]
    header = (run / "metrics.csv").read_text().splitlines()[0].split(",")
    for column in ("kl_mean", "kl_max", "ratio_dev_frac", "ratio_dev_max", "grad_steps"):
        assert f"train/{column}" in header
    assert (run / "final_eval.json").exists()
    return run


@pytest.mark.parametrize("env_id", ["Hopper-v5", "CartPole-v1"])
def test_smoke(env_id, tmp_path):
    smoke("algos/spo.py", env_id, tmp_path, "--hidden-sizes", "32", "32", "32")
