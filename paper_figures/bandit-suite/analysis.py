"""The bandit suite's exact claim: GRPO's policy entropy falls monotonically on bernoulli-10
when no update of any seed raises it (rise:train/entropy, the fraction of a run's updates that
raise the entropy, is 0 on every seed)."""

from __future__ import annotations

import numpy as np

from paper_figures.lab import protocol

ENV, ARM, METRIC = "bandit:bernoulli-10", "grpo", "rise:train/entropy"


def judge(exp, rows: list[dict]) -> dict[str, protocol.Judgement]:
    rises = np.array([r[METRIC] for r in rows if r["env"] == ENV and r["arm"] == ARM])
    if rises.size == 0:
        raise ValueError(f"{exp.id}: no {ARM} runs on {ENV} for E11-entropy")
    rose = int(np.sum(rises > 0))
    verdict = protocol.HOLDS if rose == 0 else protocol.FAILS
    text = (f"fraction of updates that raise the entropy: mean {rises.mean():.3g}, max "
            f"{rises.max():.3g} over {rises.size} seeds; {rose} of {rises.size} seeds have a "
            "rise")  # fmt: skip
    j = protocol.Judgement("exact", effect=float(rises.mean()), n=f"{rises.size} runs")
    j.verdict, j.text, j.method = verdict, text, "exact: every seed's fraction against 0"
    return {"E11-entropy": j}
