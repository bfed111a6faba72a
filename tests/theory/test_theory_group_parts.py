"""theory/group_parts.py: T-G4 extended to BNPO, exactly, on a batch of three 2-armed Bernoulli
contexts, one group of G = 4 each (every one of the 35^3 joint outcomes enumerated, since BNPO's
Beta parameters come from the whole batch). BNPO at alpha = beta = 1 is the group-mean
(REINFORCE-with-group-baseline) estimator, moment for moment. With the adaptive parameters its
total variance is below GRPO's (the paper's claim, which holds here) but only because its
gradient is smaller: at the scale of its own mean (noise-to-signal ratio) BNPO is noisier than
GRPO, RLOO and the constant baseline (a finding), and its mean is tilted off the true gradient
(cosine < 1) while REINFORCE and RLOO are unbiased."""

import numpy as np
import pytest

from theory import group_parts as parts

PIS = np.array([[0.7, 0.3], [0.5, 0.5], [0.2, 0.8]])
MUS = np.array([[0.9, 0.2], [0.5, 0.1], [0.3, 0.6]])
G = 4


def _moments(estimator, **kw):
    return parts.batch_moments(PIS, MUS, G, estimator, **kw)


def test_bnpo_exact_gradient_variance_against_reinforce_rloo_grpo():
    mean_b1, var_b1, true = _moments("bnpo", alpha=1.0, beta=1.0)
    mean_m, var_m, _ = _moments("mean")
    np.testing.assert_allclose(mean_b1, mean_m, atol=1e-15)
    assert var_b1 == pytest.approx(var_m, rel=1e-12)
    np.testing.assert_allclose(mean_m, (G - 1) / G * true, atol=1e-15)

    table = {e: _moments(e, eps=1e-4) if e == "mean_std" else _moments(e) for e in parts.ESTIMATORS}
    for unbiased in ("constant", "rloo"):
        np.testing.assert_allclose(table[unbiased][0], true, atol=1e-15)
    nsr = {e: parts.noise_to_signal(m, v) for e, (m, v, _) in table.items()}
    assert table["bnpo"][1] < table["mean_std"][1]  # the claim, in raw variance
    assert nsr["bnpo"] > max(nsr["mean_std"], nsr["rloo"], nsr["constant"])  # at equal scale
    assert nsr["bnpo"] == pytest.approx(1.4305, abs=1e-4)
    assert nsr["mean_std"] == pytest.approx(1.3433, abs=1e-4)
    assert parts.cosine(table["bnpo"][0], true) < 1 - 1e-7
    assert parts.cosine(table["rloo"][0], true) == pytest.approx(1.0, abs=1e-12)


def test_beta_parameters_and_weight():
    alpha, beta = parts.bnpo_parameters(np.array([0.25, 0.5, 0.75, 0.5]))
    assert alpha == pytest.approx(beta)  # a symmetric spread gives a symmetric Beta
    assert alpha > 1
    one = parts.bnpo_parameters(np.array([0.5, 0.5]))  # no spread: REINFORCE's (1, 1)
    assert one == (1.0, 1.0)
    assert parts.bnpo_weight(np.array([0.5]), 1.5, 1.5)[0] == pytest.approx(
        np.pi / 8 / 0.5
    )  # 1 / pdf = B(3/2, 3/2) / sqrt(p (1 - p))
    assert parts.bnpo_weight(np.array([0.0]), 2.0, 2.0)[0] == 1e6  # clamped at the reference's cap
