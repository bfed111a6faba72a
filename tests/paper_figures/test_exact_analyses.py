"""The exact experiments' own rules (their analysis.py's judge), on tables made to hold or not:
grpo-recurrence counts agreeing rows, entropy-mechanism reads its rows at the smallest eta and
natural PG's single-sample rows, lpo-drift cannot run here."""

from __future__ import annotations

from paper_figures.lab import judge, protocol, spec

ROOT = spec.FIGURES


def verdicts(name: str, rows: list[dict]) -> dict[str, str]:
    exp = spec.load(ROOT / name)
    return {k: j.verdict for k, j in judge.analysis_module(exp).judge(exp, rows).items()}


def recurrence_row(setting: str, inside: bool, lo: float, pop: float) -> dict:
    return {"setting": setting, "seeds": "10", "final_lo": str(lo), "final_hi": str(lo + 0.02),
            "p_ref": "0.361", "final_inside": "1" if inside else "0",
            "fixed_point_population": str(pop)}  # fmt: skip


def test_grpo_recurrence_counts_agreeing_rows():
    rows = [recurrence_row("ref-kl", True, 0.40, 0.41),
            recurrence_row("mirror+ref", True, 0.5, 0.9),
            recurrence_row("no-population-fixed-point", False, 0.3, 0.5)]  # fmt: skip
    got = verdicts("grpo-recurrence", rows)
    assert got == {
        "GRPO-amplification": protocol.INCONCLUSIVE,  # 2 of 3 rows above p_ref
        "GRPO-recurrence-small-step": protocol.HOLDS,
        "GRPO-recurrence-large-step": protocol.FAILS,
        "GRPO-population-fixed-point": protocol.INCONCLUSIVE,  # 1 of 2
    }


def mechanism_row(update: str, B: int, eta: float, inside: bool, hi: float, pred: float) -> dict:
    return {"update": update, "B": str(B), "eta": str(eta), "batches": "100", "bandit": "b",
            "first_inside": "1" if inside else "0", "mean": str(hi - 0.01), "lo": str(hi - 0.02),
            "hi": str(hi), "pred_first": str(pred)}  # fmt: skip


def test_entropy_mechanism_rules():
    rows = [
        mechanism_row("natural", 1, 0.01, True, 0.01, 0.005),
        mechanism_row("natural", 1, 0.1, False, 0.02, 0.01),
        mechanism_row("natural", 1, 0.3, False, -0.01, -0.02),  # a fall where one is due
    ]
    assert verdicts("entropy-mechanism", rows) == {
        "Entropy-first-order": protocol.HOLDS,
        "Entropy-sampled-sign": protocol.HOLDS,
    }
    rows[1] = mechanism_row("natural", 1, 0.1, False, -0.001, 0.01)  # falls where a rise is due
    rows.append(mechanism_row("vanilla", 16, 0.01, False, 0.01, 0.0))  # outside at the smallest
    assert verdicts("entropy-mechanism", rows) == {
        "Entropy-first-order": protocol.FAILS,
        "Entropy-sampled-sign": protocol.FAILS,
    }


def test_lpo_drift_cannot_run_here_with_its_reason():
    exp = spec.load(ROOT / "lpo-drift")
    rows = [{"claim": "E16-LPO", "reason": exp.extra["E16-LPO"]}]
    (j,) = judge.analysis_module(exp).judge(exp, rows).values()
    assert j.verdict == protocol.CANNOT and "OpenES" in j.text
