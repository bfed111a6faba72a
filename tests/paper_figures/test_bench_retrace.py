"""bench_retrace.py (retrace.py vs SB3's SAC updates/s): both contenders at toy size in their
own processes, the paired ratios of the summary, flag errors before anything runs."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
from timeouts import scaled

from controlrl import bench

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "paper_figures" / "bench_retrace.py"


def _module(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)  # not in a package
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


bench_retrace = _module(SCRIPT, "bench_retrace")


def _run(*flags, timeout=300):
    argv = [sys.executable, str(SCRIPT), "--toy", *flags]
    return subprocess.run(argv, capture_output=True, text=True, timeout=scaled(timeout), cwd=ROOT)


@pytest.mark.slow  # the figure script end to end at toy size
def test_toy_times_both_contenders_side_by_side(tmp_path):
    out = tmp_path / "bench.csv"
    proc = _run("--out", str(out), "--updates", "20", "--warmup", "10", "--learning-starts", "20")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = bench.read_csv(out)
    assert [(r["contender"], r["slot"], r["status"]) for r in rows] == [
        ("ours", 0, "ok"),
        ("sb3", 1, "ok"),
    ]
    ours, sb3 = rows
    assert ours["timed_updates"] == 10 and sb3["timed_updates"] == 11  # see _sb3
    # the same networks: obs 17, act 6, 32-32; actor 17-32-32-(6 mean, 6 log std), Q 23-32-32-1
    actor = 17 * 32 + 32 + 32 * 32 + 32 + 32 * 12 + 12
    assert ours["params"] == sb3["params"] == actor + 2 * (23 * 32 + 32 + 32 * 32 + 32 + 33)
    for r in rows:
        assert r["hidden"] == "32-32" and r["batch_size"] == 256
        assert r["updates_per_s"] == pytest.approx(r["timed_updates"] / r["train_s"])
        assert 0 < r["cpu_s"] and 0 < r["train_s"] < r["process_s"]
        assert r["command"].startswith("python paper_figures/bench_retrace.py --toy")
    ratio = ours["updates_per_s"] / sb3["updates_per_s"]
    assert f"speed ours/sb3 (paired per repeat): {ratio:.2f}" in proc.stdout


def test_summary_pairs_ratios_within_a_repeat():
    def r(contender, repeat, ups, cpu, status="ok"):
        return dict(
            contender=contender,
            repeat=repeat,
            updates_per_s=ups,
            updates_per_cpu_s=cpu,
            process_s=1.0,
            status=status,
        )

    rows = [
        r("ours", 0, 300.0, 400.0),
        r("sb3", 0, 100.0, 100.0),
        r("sb3", 1, 50.0, 100.0),
        r("ours", 1, 100.0, 300.0),
        r("ours", 2, 900.0, 900.0),
        r("sb3", 2, 0.0, 0.0, status="exit 1"),  # unpaired: left out
    ]
    assert bench.row_ratios(rows, "ours", "sb3", "updates_per_s") == [3.0, 2.0]
    text = bench_retrace.summarize(rows)
    assert "speed ours/sb3 (paired per repeat): 2.50 (2.00-3.00)" in text
    assert "speed ours/sb3 by CPU time: 3.50 (3.00-4.00)" in text
    assert "FAILED sb3 repeat 2: exit 1" in text


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--contenders", "ours,td3"], "--contenders"),
        (["--warmup", "40", "--updates", "40"], "--warmup"),
        (["--updates", "45"], "--log-every"),
        (["--segment-length", "7"], "--segment-length"),
        (["--hidden", "32,x"], "--hidden"),
    ],
)
def test_bad_flags_exit_2_before_anything_runs(tmp_path, flags, message):
    proc = _run("--out", str(tmp_path / "b.csv"), *flags, timeout=60)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    assert not (tmp_path / "b.csv").exists()
