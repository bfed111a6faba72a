"""The offline experiments' pieces of the engine: the final evaluation's normalised score as a
named metric, and the datasets an analysis.py prepares before any run starts."""

import json
import math

from paper_figures.lab import metrics, runner, spec


def _run_dir(tmp_path, final: dict):
    run = tmp_path / "run"
    run.mkdir()
    (run / "final_eval.json").write_text(json.dumps(final))
    (run / "config.json").write_text(json.dumps({"args": {"seed": 3}}))
    (run / "metrics.csv").write_text("step,train/v_loss\n100,0.5\n")
    return run


def test_final_eval_normalized_score_is_the_final_evaluations_and_nan_without_references(tmp_path):
    metrics.check_name("final_eval_normalized_score")
    run = _run_dir(tmp_path, {"eval_return_mean": 1800.0, "eval_normalized_score": 61.5})
    got = metrics.extract(run, "Hopper-v5", ["final_eval_normalized_score", "final_eval_return"], 1)
    assert got == {3: {"final_eval_normalized_score": 61.5, "final_eval_return": 1800.0}}
    (run / "final_eval.json").write_text(json.dumps({"eval_return_mean": 1800.0}))
    got = metrics.extract(run, "Hopper-v5", ["final_eval_normalized_score"], 1)
    assert math.isnan(got[3]["final_eval_normalized_score"])


def test_the_iql_experiment_prepares_each_dataset_it_lacks_once(monkeypatch, tmp_path):
    from paper_figures.lab import judge

    exp = spec.load(spec.FIGURES / "iql-100k")
    analysis = judge.analysis_module(exp)
    monkeypatch.setattr(analysis, "data_root", lambda: tmp_path)
    calls = []
    monkeypatch.setattr(analysis.subprocess, "run", lambda cmd, **kw: calls.append(cmd))
    monkeypatch.setattr(judge, "analysis_module", lambda e: analysis)  # runner.prepare's hook
    (tmp_path / "hopper-medium-v5-s0.hdf5").write_text("")  # present: not generated again
    runner.prepare(exp)
    made = sorted((c[c.index("--env") + 1], c[c.index("--kind") + 1]) for c in calls)
    assert made == [("HalfCheetah-v5", "medium-replay"), ("Hopper-v5", "medium-replay"),
                    ("Walker2d-v5", "medium-replay")]  # fmt: skip
