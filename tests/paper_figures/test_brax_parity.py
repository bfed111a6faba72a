"""paper_figures/brax_parity.py: epoch matching and ratios by hand; a toy run (slow tier)."""

import csv
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
from timeouts import scaled

SCRIPT = Path(__file__).resolve().parents[2] / "paper_figures" / "brax_parity.py"


def _parity():
    spec = importlib.util.spec_from_file_location("brax_parity", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_ours_iterations_are_grouped_into_brax_epochs_in_order():
    parity = _parity()
    assert parity.epoch_seconds([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], 2) == [3.0, 7.0, 11.0]
    assert parity.epoch_seconds([1.0, 2.0, 3.0], 3) == [6.0]
    with pytest.raises(ValueError, match="do not split"):
        parity.epoch_seconds([1.0, 2.0, 3.0], 2)  # a run that stopped mid-epoch


def test_brax_epochs_are_differences_of_its_cumulated_walltime():
    race = _parity().race
    walls = [0.0, 5.0, 5.5, 6.25]  # step-0 evaluation, then the end of each epoch
    assert race.brax_epochs([{"train_walltime": w, "step": 1} for w in walls]) == [5.0, 0.5, 0.75]
    assert race.compile_excess([5.0, 0.5, 0.75]) == 5.0 - 0.625
    assert race.compile_excess([0.5, 1.0, 2.0]) == 0.0 and race.compile_excess([9.0]) == 0.0


def test_round_ratio_drops_the_first_epoch_on_both_sides():
    parity = _parity()
    # brax's first epoch holds its compile; ours' first is dropped too, so that the same steps
    # are compared
    assert parity.round_ratio([9.0, 1.0, 1.0], [30.0, 2.0, 2.0]) == pytest.approx(0.5)
    assert parity.round_ratio([0.1, 3.0, 3.0], [0.1, 2.0, 2.0]) == pytest.approx(1.5)
    with pytest.raises(ValueError, match="do not match"):
        parity.round_ratio([1.0, 1.0, 1.0], [1.0, 1.0])
    with pytest.raises(ValueError, match="do not match"):
        parity.round_ratio([1.0], [1.0])


def test_flags_are_the_race_settings_plus_rounds(capsys):
    parity = _parity()
    args = parity.parse_args(["--seeds", "4,5,6", "--rounds", "2", "--num-envs", "32"])
    assert (args.rounds, args.seeds, args.num_envs) == (2, "4,5,6", 32)
    assert args.trainers == ("brax", "ours_jax")
    assert (args.total_timesteps, args.num_evals, args.cpu) == (122_880, 7, -2)
    for bad, message in (("--rounds=0", "--rounds"), ("--num-evals=2", "--num-evals")):
        with pytest.raises(SystemExit) as exc:
            parity.parse_args([bad])
        assert exc.value.code == 2 and message in capsys.readouterr().err


def test_pin_sets_one_cpu_for_the_process_or_none():
    """In a child process: pinning is process-wide and must not leak into the test runner."""
    code = (
        "import importlib.util, os, sys\n"
        f"spec = importlib.util.spec_from_file_location('p', {str(SCRIPT)!r})\n"
        "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
        "before = sorted(os.sched_getaffinity(0))\n"
        "print(m.pin(-1), sorted(os.sched_getaffinity(0)) == before)\n"
        "print(m.pin(-2), sorted(os.sched_getaffinity(0)) == before[-1:])\n"
        "try:\n    m.pin(10**6)\nexcept SystemExit as e:\n    print('refused', '--cpu' in str(e))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=scaled(60)
    )
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.splitlines()
    assert lines[0] == "not pinned True"
    assert lines[1].startswith("pinned to CPU ") and lines[1].endswith(" True")
    assert lines[2] == "refused True"


@pytest.mark.slow  # compiles brax's trainer and ours (about a minute on 2 cores)
def test_brax_parity_toy(tmp_path):
    pytest.importorskip("brax")
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--toy", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=scaled(900),
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    with (tmp_path / "brax_parity.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert sorted(r["trainer"] for r in rows) == ["brax", "ours_jax"]
    for row in rows:
        assert row["seed"] == "1" and row["epochs"] == "2" and row["timed_steps"] == "1024"
        epochs = [float(x) for x in row["epoch_s"].split()]
        assert float(row["train_s"]) == pytest.approx(epochs[1], abs=1e-4)
        assert float(row["train_sps"]) > 0
    ours, brax = (
        next(float(r["train_s"]) for r in rows if r["trainer"] == t) for t in ("ours_jax", "brax")
    )
    assert float(rows[0]["ours_over_brax"]) == pytest.approx(ours / brax, rel=1e-3)
    assert "ours/brax, per seed (median of rounds): {1: " in proc.stdout
