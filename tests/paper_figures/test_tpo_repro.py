"""The TPO reproduction figure (paper_figures/tpo_repro.py): every method's exact tabular update
against Appendix B's closed form, and the toy run end to end (CSV schema, exact checks)."""

import csv
import importlib.util
import json
import math
import shutil
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("tpo_repro", ROOT / "paper_figures/tpo_repro.py")
fig = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = fig  # dataclasses look their module up
spec.loader.exec_module(fig)


@pytest.mark.parametrize("K", [4, 10])
@pytest.mark.parametrize("method", fig.MULTI_METHODS)
def test_exact_update_is_the_closed_form(method, K):
    """-d loss / d logits = beta(p)(e_y - pi) to 1e-10 on random contexts: autograd through
    algos/tpo.py's target and loss (TPO), the exact population losses of the others."""
    gen = torch.Generator().manual_seed(K)
    logits = (2 * torch.randn(3, 7, K, generator=gen, dtype=torch.float64)).requires_grad_()
    (grad,) = torch.autograd.grad(fig.multi_loss(method, logits), logits)
    pi = torch.softmax(logits.detach(), -1)
    v = -pi
    v[..., 0] += 1
    closed = fig.closed_form_beta(method, pi[..., 0], K)[..., None] * v
    assert float((-grad - closed).abs().max()) < 1e-10
    assert float(closed.abs().max()) > 1e-3  # not a comparison of zeros


def test_paper_coefficients_at_p_one_tenth():
    """Appendix B: lam = exp(10/3) ~ 28; at p = 0.1, beta_TPO 0.73, beta_DG 0.09, beta_GRPO 0.33."""
    assert fig.tpo_lambda(10) == pytest.approx(math.exp(10 / 3), rel=1e-14)
    for m, paper in (("tpo", 0.73), ("dg", 0.09), ("grpo", 0.33)):
        assert round(fig.beta_at(m, 0.1), 2) == paper


def test_toy_run_writes_every_csv(tmp_path):
    args = fig.Args(out=str(tmp_path / "out"), run_root=str(tmp_path / "runs"), toy=True)
    args.train = True
    fig.main(args)
    out = tmp_path / "out"

    def rows(name):
        with open(out / name, newline="") as f:
            return list(csv.DictReader(f))

    tab = rows("tpo_repro_tabular.csv")
    assert tuple(tab[0]) == fig.TAB_FIELDS
    assert len(tab) == 3 * (len(fig.SINGLE_METHODS) + len(fig.MULTI_METHODS))
    assert all(0 <= float(r["final_error"]) <= 1 for r in tab)
    # CE's direction is its own oracle: misalignment 0; the tabular TPO step lowers the error
    ce = [r for r in tab if r["method"] == "ce"]
    assert all(abs(float(r["mean_misalignment"])) < 1e-12 for r in ce)
    exact = rows("tpo_repro_exact.csv")
    lam = next(r for r in exact if r["check"].startswith("lambda"))
    assert float(lam["ours"]) == pytest.approx(float(lam["closed_form"]), rel=1e-5)
    devs = [r for r in exact if r["check"].startswith("max")]
    assert {r["method"] for r in devs} == set(fig.MULTI_METHODS)
    assert all(float(r["ours"]) < 1e-10 for r in devs)
    runs = rows("tpo_repro_runs.csv")
    assert tuple(runs[0]) == fig.RUN_FIELDS
    assert {(r["task"], r["method"]) for r in runs} == {
        ("sparse-100", "tpo"),
        ("onehot-100-10", "grpo"),
        ("sequence-reverse-2-3", "pg"),
        ("sequence-reverse-2-3", "dg"),
    }
    assert len(runs) == 4 * 2 and all(r["updates"] == "3" for r in runs)
    # DG as the reference runs it: one answer per prompt, one gradient step an update
    dg = [r for r in runs if r["method"] == "dg"]
    assert {r["samples_per_update"] for r in dg} == {"2"}
    with open(tmp_path / "runs" / "seq-3" / "dg" / "config.json") as f:
        config = json.load(f)["args"]
    assert (config["group_size"], config["adv_norm"], config["update_epochs"]) == (
        1, "batch-mean", 1)  # fmt: skip
    assert (out / "tpo_repro.png").stat().st_size > 0
    assert rows("tpo_repro_runs_curves.csv") and rows("tpo_repro_tabular_curves.csv")
    # a cell without its runs keeps its committed rows and curve
    curves = rows("tpo_repro_runs_curves.csv")
    shutil.rmtree(tmp_path / "runs" / "sparse-100")
    args.train, args.reuse_tabular = False, True
    fig.main(args)
    assert sorted(map(tuple, (r.values() for r in rows("tpo_repro_runs.csv")))) == sorted(
        map(tuple, (r.values() for r in runs)))  # fmt: skip
    assert sorted(map(tuple, (r.values() for r in rows("tpo_repro_runs_curves.csv")))) == sorted(
        map(tuple, (r.values() for r in curves)))  # fmt: skip


def test_only_picks_cells_by_method_or_directory():
    def names(only):
        return [fig.cell_name(c) for c in fig.cells(fig.Args(toy=True, only=only))]

    assert names("dg") == names("seq-3/dg") == ["seq-3/dg"]
    assert names("pg,sparse-100/tpo") == ["sparse-100/tpo", "seq-3/pg"]
    full = [fig.cell_name(c) for c in fig.cells(fig.Args(only="seq-9/tpo,ppo"))]
    assert full == ["seq-7/ppo", "seq-8/ppo", "seq-9/tpo", "seq-9/ppo", "seq-10/ppo"]
    with pytest.raises(SystemExit, match="no such cell or method"):
        fig.cells(fig.Args(toy=True, only="seq-11/tpo"))
