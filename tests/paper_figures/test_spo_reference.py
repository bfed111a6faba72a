"""The SPO-reference declarations: every run's gradient steps are what its declared flags make
(updates x epochs x minibatches), so the minibatch count each page states is the runs' own."""

import pytest

from paper_figures.lab import results, spec

FOLDERS = [p for p in spec.discover() if p.name.startswith("spo-reference-")]


def _last(flags: list[str], name: str) -> int:
    """The value of the last `name` in `flags` (a later flag overrides an earlier one)."""
    return int(flags[len(flags) - 1 - flags[::-1].index(name) + 1])


def grad_steps(flags: list[str], steps: int) -> int:
    batch = _last(flags, "--num-envs") * _last(flags, "--num-steps")
    return steps // batch * _last(flags, "--update-epochs") * _last(flags, "--num-minibatches")


def test_the_declared_flags_give_the_gradient_steps_of_a_batch():
    ref = ["--num-envs", "8", "--num-steps", "256", "--num-minibatches", "4"]
    ref += ["--update-epochs", "10"]
    assert grad_steps(ref, 1_000_000) == 488 * 40
    assert grad_steps([*ref, "--num-minibatches", "32"], 1_000_000) == 488 * 320
    assert grad_steps([*ref, "--num-envs", "1", "--num-steps", "2048"], 300_000) == 146 * 40


@pytest.mark.parametrize("folder", FOLDERS, ids=[p.name for p in FOLDERS])
def test_each_runs_gradient_steps_are_what_its_flags_make(folder):
    exp = spec.load(folder)
    rows = results.rows_of(exp)
    # every run, or none where the declaration came before its runs (a line "not run yet")
    assert len(rows) in (0, len(exp.runs())) and exp.runs()
    for r in rows:
        assert r["sum:train/grad_steps"] == grad_steps(r["flags"].split(), int(r["steps"])), r
