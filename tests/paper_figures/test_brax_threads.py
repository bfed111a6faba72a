"""paper_figures/brax_threads.py at toy size: both modes run, the pinned worker sees one CPU."""

import csv
import subprocess
import sys
from pathlib import Path

import pytest
from timeouts import scaled

SCRIPT = Path(__file__).resolve().parents[2] / "paper_figures" / "brax_threads.py"


@pytest.mark.slow  # two processes that compile ppo_brax (~30 s on 2 cores)
def test_brax_threads_toy(tmp_path):
    pytest.importorskip("brax")
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--toy", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=scaled(600),
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    with (tmp_path / "brax_threads_race.csv").open() as f:
        rows = {r["mode"]: r for r in csv.DictReader(f)}
    assert set(rows) == {"pinned", "unpinned"}
    assert rows["pinned"]["cpus"] == "1" and all(r["status"] == "ok" for r in rows.values())
    for r in rows.values():
        assert 0 < float(r["wall_min_ms"]) <= float(r["wall_ms"])
        assert float(r["cpu_ms"]) > 0
    assert "unpinned / pinned (paired)" in proc.stdout
