"""The TPO reproduction script (paper_figures/tpo_repro.py): every method's exact tabular update
against Appendix B's closed form, the paper's quoted coefficients, a tabular toy run read into
results rows, and the single-sample cells as the declaration and the reference state them."""

import math

import pytest
import torch

from controlrl.cli import parse
from paper_figures import tpo_repro as fig
from paper_figures.lab import spec


@pytest.mark.parametrize("K", [4, 10])
@pytest.mark.parametrize("method", fig.TABULAR_METHODS["multi"])
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
    """Appendix B's quoted numbers (tpo-appendix-b's [analysis] quoted) to the paper's digits."""
    assert fig.tpo_lambda(10) == pytest.approx(math.exp(10 / 3), rel=1e-14)
    ours = {("lambda", "tpo"): fig.tpo_lambda(10)}
    ours |= {("beta(0.1)", m): fig.beta_at(m, 0.1) for m in ("tpo", "dg", "grpo")}
    quoted = spec.load(spec.FIGURES / "tpo-appendix-b").extra["quoted"]
    assert {(q["check"], q["method"]) for q in quoted} == set(ours)
    for q in quoted:
        assert round(ours[(q["check"], q["method"])], q["digits"]) == q["paper"], q


def test_tabular_toy_rows(tmp_path):
    """--part single at toy size: one row per method and seed, read into results rows; CE's
    direction is its own oracle (misalignment 0) in the multi-context bandit."""
    fig.main(["--part", "single", "--seeds", "2", "--steps", "5", "--out", str(tmp_path / "s")])
    exp = spec.load(spec.FIGURES / "tpo-tabular-single")
    rows = fig.table(exp, tmp_path / "s")
    assert {(r["arm"], r["seed"]) for r in rows} == {(m, s) for m in exp.arms for s in (0, 1)}
    assert all(set(exp.metrics) <= set(r) and 0 < r["final_error"] < 1 for r in rows)
    for r in rows:
        assert r["neg_log10_final_error"] == pytest.approx(-math.log10(r["final_error"]))
    fig.main(["--part", "multi", "--seeds", "2", "--steps", "5", "--out", str(tmp_path / "m")])
    multi = fig.table(spec.load(spec.FIGURES / "tpo-tabular-multi"), tmp_path / "m")
    ce = [r for r in multi if r["arm"] == "ce"]
    assert len(ce) == 2 and all(abs(r["mean_misalignment"]) < 1e-12 for r in ce)
    assert all(r["early_error"] >= r["final_error"] for r in ce)  # CE's error falls


def test_single_sample_cells_are_the_declared_arms_and_the_references_recipes():
    exp = spec.load(spec.FIGURES / "tpo-single-sample")
    args = fig.parse_args(["--part", "single-sample"])
    cells = fig.cells(args)
    declared = {(a.name, int(e.rsplit("-", 1)[1])) for a in exp.arms.values() for e in a.envs}
    assert {(c["method"], c["L"]) for c in cells} == declared
    by = {(c["method"], c["L"]): c for c in cells}
    # DG as the reference runs it: one answer for each of 100 prompts, one gradient step
    import algos.grpo

    dg = parse(algos.grpo.Args, fig.argv(args, by[("dg", 7)], fig.Path("unused")))
    assert (dg.num_envs, dg.group_size, dg.adv_norm, dg.update_epochs) == (100, 1, "batch-mean", 1)
    assert dg.total_timesteps == 100 * 7 * 60
    im = parse(algos.grpo.Args, fig.argv(args, by[("ppo-im", 8)], fig.Path("unused")))
    assert (im.num_envs, im.group_size) == (800, 1)
    assert im.learning_rate == pytest.approx(1e-3 * math.sqrt(8), rel=1e-5)
    assert fig.cells(fig.parse_args(["--part", "single-sample", "--lengths", "9", "--methods",
                                     "tpo,dg"])) == [by[("tpo", 9)], by[("dg", 9)]]  # fmt: skip
