"""The success-conditioning figure (paper_figures/success_conditioning.py): exact conditioning's
improvement equals its chi2 change and the action influence, filtered BC with many samples tends
to it, PPO's step moves toward the successful arm, and the toy run writes the CSV."""

import argparse
import csv
import importlib.util
import sys
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location(
    "success_conditioning", ROOT / "paper_figures/success_conditioning.py"
)
fig = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = fig
spec.loader.exec_module(fig)


def args(**kw):
    base = dict(seeds=20, arms=6, samples=64, iterations=4, ppo_epochs=5, ppo_lr=0.1, rng_seed=0)
    return argparse.Namespace(**{**base, **kw})


def test_filtered_bc_is_the_empirical_distribution_of_successes():
    pi = np.full((2, 3), 1 / 3)
    actions = np.array([[0, 1, 1, 2], [2, 2, 0, 1]])
    success = np.array([[1, 1, 0, 1], [0, 0, 0, 0]])
    out = fig.filtered_bc(pi, actions, success)
    np.testing.assert_allclose(out, [[1 / 3, 1 / 3, 1 / 3], [1 / 3, 1 / 3, 1 / 3]])
    success[0] = [1, 1, 1, 0]
    np.testing.assert_allclose(fig.filtered_bc(pi, actions, success)[0], [1 / 3, 2 / 3, 0])


def test_exact_conditioning_improves_by_its_chi2_and_never_degrades():
    rows = [r for r in fig.run(args()) if r["method"] == "sc_exact"]
    for r in rows:
        assert abs(r["rel_improvement"] - r["chi2"]) < 1e-12
        assert abs(r["chi2"] - r["action_influence"]) < 1e-12
        assert r["eta_after"] >= r["eta_before"] - 1e-15
    assert max(r["chi2"] for r in rows) > 0.05  # not 0 = 0


def test_filtered_bc_with_many_samples_tends_to_exact_conditioning():
    rows = fig.run(args(samples=20_000, iterations=1, seeds=10))
    exact = {r["seed"]: r for r in rows if r["method"] == "sc_exact"}
    for r in rows:
        if r["method"] == "sc_sampled":
            e = exact[r["seed"]]
            assert abs(r["rel_improvement"] - e["rel_improvement"]) < 0.02
            assert abs(r["chi2"] - e["chi2"]) < 0.02


def test_ppo_step_moves_toward_the_successful_arm():
    logits = torch.zeros(1, 3, dtype=torch.float64)
    actions = np.array([[0, 1, 2, 0, 1, 2]])
    success = np.array([[1.0, 0, 0, 1, 0, 0]])
    new = torch.softmax(fig.ppo_step(logits, actions, success, 0.2, 5, 0.1), -1)[0]
    assert new[0] > 0.4 and new[1] < 1 / 3 and new[2] < 1 / 3


def test_toy_run(tmp_path):
    fig.main(["--toy", "--out", str(tmp_path)])
    with open(tmp_path / "success_conditioning.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 8 * 3 * 3
