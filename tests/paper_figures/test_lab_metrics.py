"""The named metrics of paper_figures/lab/metrics.py that are ratios of two metrics.csv columns."""

import json
import math

from paper_figures.lab import metrics


def _run(tmp_path, rows: list[dict]):
    columns = list(rows[0])
    lines = [",".join(columns)] + [",".join(str(r[c]) for c in columns) for r in rows]
    (tmp_path / "metrics.csv").write_text("\n".join(lines) + "\n")
    (tmp_path / "final_eval.json").write_text(json.dumps({"eval_return_mean": 1.0}))
    (tmp_path / "config.json").write_text(json.dumps({"args": {"seed": 3}}))
    return tmp_path


def test_fixup_share_is_the_sum_of_fixup_steps_over_the_sum_of_grad_steps(tmp_path):
    run = _run(tmp_path, [
        {"step": 2048, "train/grad_steps": 320, "train/fixup_steps": 4},
        {"step": 4096, "train/grad_steps": 330, "train/fixup_steps": 9},
    ])  # fmt: skip
    got = metrics.extract(run, "Hopper-v5", ["fixup_share"], 1000)
    assert got == {3: {"fixup_share": 13 / 650}}


def test_fixup_share_is_nan_for_a_run_without_a_fixup_phase(tmp_path):
    run = _run(tmp_path, [{"step": 2048, "train/grad_steps": 320}])
    assert math.isnan(metrics.extract(run, "Hopper-v5", ["fixup_share"], 1000)[3]["fixup_share"])
    metrics.check_name("fixup_share")
