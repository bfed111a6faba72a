"""The sweep launch benchmark (paper_figures/bench_sweep_launch.py) end to end at toy size."""

import csv
import subprocess
import sys
from pathlib import Path

import pytest
from timeouts import scaled

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_bench_toy_times_both_launchers_and_names_no_machine_path(tmp_path):
    out = tmp_path / "bench.csv"
    argv = ["paper_figures/bench_sweep_launch.py", "--toy", "--out", str(out)]
    argv += ["--work-dir", str(tmp_path / "work")]
    done = subprocess.run(
        [sys.executable, *argv], cwd=ROOT, capture_output=True, text=True, timeout=scaled(300)
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert "exec/fork cpu_s: " in done.stdout
    rows = list(csv.DictReader(out.open()))
    assert [(r["contender"], r["status"], r["runs"]) for r in rows] == [
        ("fork", "ok", "2"),
        ("exec", "ok", "2"),
    ]
    # the fork side counts its server's imports: at least one torch import's CPU
    assert all(float(r["cpu_s"]) > 0.5 for r in rows), rows
    assert str(ROOT) not in out.read_text()
