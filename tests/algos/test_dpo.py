"""DPO (Lu et al. 2022, "Discovered Policy Optimisation"; reference luchris429/
discovered-policy-optimisation): the drift's defining properties, the objective's gradient in
closed form, and a smoke run of the script."""

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from timeouts import scaled

from algos.dpo import dpo_drift, dpo_loss
from controlrl.nets import GaussianPolicy

ROOT = Path(__file__).resolve().parents[2]
ALPHA, BETA = 2.0, 0.6


def ratio_grads(r: torch.Tensor, adv: torch.Tensor) -> torch.Tensor:
    """d loss / d r per sample, through logp = log r (old logp = 0)."""
    r = r.clone().double().requires_grad_(True)
    loss, _ = dpo_loss(r.log(), torch.zeros_like(r), adv.double(), ALPHA, BETA, 0.2)
    (grad,) = torch.autograd.grad(loss, r)
    return grad


def test_gradient_equals_the_closed_form_on_both_sides_of_both_signs():
    torch.manual_seed(0)
    adv = torch.randn(512).double() * 3
    r = torch.rand(512).double() * 2.5 + 0.05
    x, y = (r - 1) * adv, r.log() * adv
    sech2 = lambda z: 1 / torch.cosh(z).square()  # noqa: E731
    # d(r A - D)/dr: A sech^2(x / alpha) where x > 0 (A >= 0), A - (A / r)(1 - sech^2(y / beta))
    # where y > 0 (A < 0), A where the drift is zero
    d_objective = torch.where(
        adv >= 0,
        torch.where(x > 0, adv * sech2(x / ALPHA), adv),
        torch.where(y > 0, adv - adv / r * (1 - sech2(y / BETA)), adv),
    )
    torch.testing.assert_close(ratio_grads(r, adv), -d_objective / len(r), rtol=1e-10, atol=1e-14)


def test_drift_is_nonnegative_and_vanishes_with_its_gradient_at_r_equal_one():
    adv = torch.linspace(-4, 4, 81).double()
    for r in torch.linspace(0.05, 3, 60).double():
        assert bool((dpo_drift(r.expand_as(adv), adv, ALPHA, BETA) >= 0).all())
    r = torch.ones_like(adv).requires_grad_(True)
    drift = dpo_drift(r, adv, ALPHA, BETA)
    assert drift.abs().max() == 0
    (grad,) = torch.autograd.grad(drift.sum(), r)
    assert grad.abs().max() < 1e-12


def test_drift_is_zero_where_the_ratio_moved_against_the_advantage():
    # the drift only penalises moves in the advantage's direction
    adv = torch.tensor([1.0, 2.0, -1.0, -0.5]).double()
    r = torch.tensor([0.5, 0.9, 1.4, 2.0]).double()
    assert dpo_drift(r, adv, ALPHA, BETA).abs().max() == 0
    r = torch.tensor([1.5, 1.1, 0.7, 0.5]).double()
    assert bool((dpo_drift(r, adv, ALPHA, BETA) > 0).all())


def test_objective_saturates_for_positive_and_turns_back_for_negative_advantages():
    # A >= 0: d objective / dr = A sech^2((r - 1) A / alpha) > 0, vanishing far out (a soft clip)
    grad = ratio_grads(torch.tensor([20.0]).double(), torch.tensor([1.0]).double())
    assert 0 > grad.item() > -1e-7
    # A < 0: the drift grows linearly in log(r) A, so below some r* < 1 the loss pulls r back up
    adv = torch.tensor([-1.0]).double()
    assert ratio_grads(torch.tensor([0.9]).double(), adv).item() > 0  # loss falls as r falls
    assert ratio_grads(torch.tensor([0.01]).double(), adv).item() < 0  # and rises below r*


def test_parameter_gradient_at_old_policy_is_vanilla_policy_gradient():
    torch.manual_seed(0)
    policy = GaussianPolicy(4, 2).double()
    obs, actions = torch.randn(32, 4).double(), torch.randn(32, 2).double()
    adv = torch.randn(32).double()
    logp, _ = policy.log_prob_entropy(obs, actions)
    loss, _ = dpo_loss(logp, logp.detach(), adv, ALPHA, BETA, 0.2)
    g_dpo = torch.autograd.grad(loss, list(policy.parameters()))
    logp, _ = policy.log_prob_entropy(obs, actions)
    g_pg = torch.autograd.grad(-(adv * logp).mean(), list(policy.parameters()))
    for a, b in zip(g_dpo, g_pg):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("env_id", ["Hopper-v5", "CartPole-v1"])
def test_smoke(env_id, tmp_path):
    run = tmp_path / env_id
    cmd = [sys.executable, "algos/dpo.py", "--env-id", env_id, "--num-envs", "2"]
    cmd += ["--num-steps", "128", "--total-timesteps", "512", "--num-minibatches", "4"]
    cmd += ["--update-epochs", "2", "--eval-episodes", "1", "--run-dir", str(run)]
    cmd += ["--no-progress", "--no-tensorboard"]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=scaled(300))
    assert out.returncode == 0, out.stderr[-2000:]
    header = (run / "metrics.csv").read_text().splitlines()[0].split(",")
    assert "train/clip_frac" in header and "train/kl_max" in header
    assert (run / "final_eval.json").exists()


def test_bad_drift_scale_is_refused(tmp_path):
    cmd = [sys.executable, "algos/dpo.py", "--beta", "0", "--run-dir", str(tmp_path / "x")]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=scaled(120))
    assert out.returncode == 2 and "--beta" in out.stderr


def test_num_seeds_trains_the_population_with_the_dpo_loss(tmp_path):
    """--num-seeds S trains S seeds (it trained one while config.json recorded S): seed k's rows
    are those of the run --seed s + k alone (the same actions, the same returns), and a one-seed
    population is the single dpo run to the byte."""
    from algos import dpo
    from controlrl.cli import parse

    def rows(path, seed=None):
        """metrics.csv's header and rows without the seed column (only seed's rows if given)."""
        with path.open() as f:
            header, *body = list(csv.reader(f))
        if "seed" not in header:
            return header, body
        col = header.index("seed")
        kept = [r[:col] + r[col + 1 :] for r in body if seed is None or int(r[col]) == seed]
        return header[:col] + header[col + 1 :], kept

    argv = ["--env-id", "bandit:bernoulli-10", "--num-steps", "2", "--num-envs", "8"]
    argv += ["--num-minibatches", "2", "--update-epochs", "2", "--total-timesteps", "64"]
    argv += ["--hidden-sizes", "8", "--eval-every", "0", "--eval-episodes", "2", "--alpha", "0.3"]
    argv += ["--no-progress", "--no-tensorboard"]

    def train(name, *extra):
        dpo.main(parse(dpo.Args, [*argv, *extra, "--run-dir", str(tmp_path / name)]))
        return tmp_path / name

    pop = train("pop", "--seed", "5", "--num-seeds", "3")
    final = json.loads((pop / "final_eval.json").read_text())
    assert len(final["eval_return_per_seed"]) == 3
    header, alone = rows(train("seed6", "--seed", "6") / "metrics.csv")
    _, mine = rows(pop / "metrics.csv", seed=6)
    ret = header.index("train/episode_return")
    assert len(mine) == len(alone) == 4 and [r[ret] for r in mine] == [r[ret] for r in alone]
    one = rows(train("one", "--seed", "5", "--num-seeds", "1") / "metrics.csv")
    assert one == rows(train("single", "--seed", "5") / "metrics.csv")
