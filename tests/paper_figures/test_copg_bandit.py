"""The CoPG offline-bandit figure (paper_figures/copg_bandit.py): the regularised optimum and
objective against their definitions, the importance weight's unbiasedness, and the toy run."""

import csv
import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("copg_bandit", ROOT / "paper_figures/copg_bandit.py")
fig = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = fig  # dataclasses look their module up
spec.loader.exec_module(fig)


def test_the_optimum_maximises_the_objective_and_the_gap_is_beta_kl():
    rng = np.random.default_rng(0)
    ref, means = rng.normal(size=(1, fig.K)), rng.uniform(size=(1, fig.K))
    star = fig.regularised_optimum(ref, means)
    best = fig.objective(star, ref, means)
    for _ in range(20):
        pi = rng.dirichlet(np.ones(fig.K))[None]
        gap = best - fig.objective(pi, ref, means)
        np.testing.assert_allclose(gap, fig.BETA * fig.kl(pi, star), rtol=1e-10)


def test_weighted_pg_is_the_on_policy_gradient_in_expectation_and_unweighted_is_not():
    """Summing the per-arm losses with weights mu (the expectation over the behaviour's pulls):
    'is' gives the exact gradient of -J at pi, 'pg' does not."""
    rng = np.random.default_rng(1)
    ref = torch.tensor(rng.normal(size=(1, fig.K)))
    means = torch.tensor(rng.uniform(size=(1, fig.K)))
    mu = torch.tensor(rng.dirichlet(np.ones(fig.K))[None])
    z0 = torch.tensor(rng.normal(size=(1, fig.K)))
    arms = torch.arange(fig.K)[None]
    grads = {}
    for method in ("is", "pg"):
        z = z0.clone().requires_grad_(True)
        # one pull of each arm with its mean reward, weighted by mu: E_mu[per-pull loss]
        per_arm = [fig.loss(method, z, ref, mu, arms[:, [a]], means[:, [a]]) for a in range(fig.K)]
        (grads[method],) = torch.autograd.grad(sum(mu[0, a] * per_arm[a] for a in range(fig.K)), z)
    z = z0.clone().requires_grad_(True)
    pi, log_ref = torch.softmax(z, -1), torch.log_softmax(ref, -1)
    logp = torch.log_softmax(z, -1)
    J = (pi * (means - fig.BETA * (logp - log_ref))).sum()
    (exact,) = torch.autograd.grad(-J, z)
    torch.testing.assert_close(grads["is"], exact)
    assert (grads["pg"] - exact).abs().max() > 1e-2
    with pytest.raises(ValueError, match="expected one of"):
        fig.loss("nope", z, ref, mu, arms, means)


def test_toy_run_writes_its_csvs_and_copg_beats_the_unweighted_pg(tmp_path):
    fig.main(["--out", str(tmp_path), "--toy"])
    assert torch.get_default_dtype() == torch.float32  # float64 inside, not leaked to other code
    with (tmp_path / "copg_bandit.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert {r["method"] for r in rows} == set(fig.METHODS) and len(rows) == 8 * 3
    gap = {m: np.mean([float(r["gap"]) for r in rows if r["method"] == m]) for m in fig.METHODS}
    assert gap["copg"] < gap["pg"]
    with pytest.raises(SystemExit, match="even"):
        fig.main(["--out", str(tmp_path), "--toy", "--batch", "3"])
