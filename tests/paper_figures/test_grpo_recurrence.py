"""The GRPO recurrence figure (paper_figures/grpo_recurrence.py): the group advantage table, the
sampled step's mean against c_G, the sampled runs against the recurrence where many groups make
the step nearly deterministic, and the toy run end to end."""

import csv
import importlib.util
import math
import sys
from pathlib import Path

import numpy as np
import pytest

from theory import group_po as gp

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location(
    "grpo_recurrence", ROOT / "paper_figures/grpo_recurrence.py"
)
fig = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = fig  # dataclasses look their module up
spec.loader.exec_module(fig)


def test_success_advantage_is_grpos_closed_form():
    """A(1 | s) = (1 - s/G) / (sqrt(m (1 - m) G / (G - 1)) + eps), m = s / G; 0 in flat groups."""
    for G in (2, 5, 16):
        adv = fig.success_advantage(G, 1e-4)
        assert adv[0] == 0.0 and adv[G] == 0.0
        for s in range(1, G):
            m = s / G
            want = (1 - m) / (math.sqrt(m * (1 - m) * G / (G - 1)) + 1e-4)
            assert adv[s] == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("p_ref, G", [(0.2, 4), (0.7, 8)])
def test_one_sampled_step_has_mean_c_g(p_ref, G):
    """E[L_1 - L_ref] = c_G(p_ref) / (beta1 + beta2) (within 4 standard errors of 40k seeds), and
    the population weight a(p_ref) is outside that band: the test tells G apart from G -> inf."""
    rng = np.random.default_rng(0)
    logits = fig.sampled_grpo(p_ref, 1.0, 2.0, G, 1, 1, 40_000, rng)
    step = logits[1] - logits[0]
    se = step.std(ddof=1) / math.sqrt(step.size)
    c_g = gp.grpo_group_weight(float(gp.logit(p_ref)), G, "mean_std", fig.EPS)[0]
    assert abs(step.mean() - c_g / 3.0) < 4 * se
    assert abs(step.mean() - gp.grpo_advantage_weight(p_ref, "mean_std") / 3.0) > 8 * se


def test_many_groups_follow_the_recurrence():
    """With 4000 groups per iteration the step is nearly its mean: 30 seeds track the finite-G
    recurrence (mirror + reference KL) to 2e-3 over 8 iterations, and its fixed point is
    where the recurrence goes."""
    rng = np.random.default_rng(1)
    pos = fig.sigmoid(fig.sampled_grpo(0.361, 1.0, 3.0, 8, 4000, 8, 30, rng))
    rec = gp.grpo_pos_recurrence(0.361, 1.0, 3.0, "mean_std", 8, 8, fig.EPS)
    np.testing.assert_allclose(pos.mean(axis=1), rec, atol=2e-3)
    assert np.ptp(pos[-1]) < 0.01 and abs(rec[-1] - rec[0]) > 0.1


FIELDS = (
    "setting", "p_ref", "beta1", "beta2", "G", "groups", "seeds", "steps",
    "one_step_pred", "one_step_mean", "one_step_sd", "one_step_lo", "one_step_hi",
    "one_step_inside",
    "final_pred", "final_mean", "final_sd", "final_lo", "final_hi", "final_inside",
    "fixed_point_G", "multiplier_G", "fixed_point_population", "multiplier_population",
    "stationary_mean", "stationary_sd", "stationary_lo", "stationary_hi", "stationary_inside",
    "logit_pred", "logit_mean", "logit_sd", "logit_lo", "logit_hi", "logit_inside",
)  # fmt: skip


def test_toy_run_writes_the_table_and_the_figure(tmp_path):
    fig.main(fig.Args(toy=True, out=str(tmp_path)))
    assert (tmp_path / "grpo_recurrence.png").stat().st_size > 0
    with (tmp_path / "grpo_recurrence.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [(r["setting"], r["G"], r["groups"], r["seeds"]) for r in rows] == [
        ("ref-kl", "2", "1", "20"), ("ref-kl", "4", "1", "20")]  # fmt: skip
    assert list(rows[0]) == list(FIELDS)  # the columns, in order
    for r in rows:
        G = int(r["G"])
        c_g = gp.grpo_group_weight(float(gp.logit(0.361)), G, "mean_std", fig.EPS)[0]
        assert float(r["one_step_pred"]) == pytest.approx(c_g / 3.0, rel=1e-5)
        rec = gp.grpo_pos_recurrence(0.361, 0.0, 3.0, "mean_std", 10, G, fig.EPS)
        assert float(r["final_pred"]) == pytest.approx(rec[-1], rel=1e-5)
        (p_star,) = gp.grpo_pos_fixed_points(0.361, 3.0, "mean_std", G, fig.EPS)
        assert float(r["fixed_point_G"]) == pytest.approx(p_star, rel=1e-5)
        assert float(r["fixed_point_population"]) == pytest.approx(0.524085, rel=1e-5)
        assert float(r["logit_pred"]) == pytest.approx(gp.logit(p_star), rel=1e-5)
        for key in ("one_step", "final", "stationary", "logit"):
            lo, mean, hi = (float(r[f"{key}_{s}"]) for s in ("lo", "mean", "hi"))
            assert lo < mean < hi and float(r[f"{key}_sd"]) > 0
        assert r["one_step_inside"] == str(int(float(r["one_step_lo"]) <= float(r["one_step_pred"])
                                               <= float(r["one_step_hi"])))  # fmt: skip
