"""bench_brax.py at toy size: raw and adapter rows per pipeline, host backends, compile times."""

import csv
import subprocess
import sys
from pathlib import Path

import pytest
from timeouts import scaled

SCRIPT = Path(__file__).resolve().parents[2] / "paper_figures" / "bench_brax.py"


@pytest.mark.slow
def test_bench_brax_toy(tmp_path):
    pytest.importorskip("brax")
    out = tmp_path / "b.csv"
    argv = [sys.executable, str(SCRIPT), "--out", str(out), "--envs", "halfcheetah"]
    argv += ["--pipelines", "spring", "--num-envs", "2", "--host-envs", "2"]
    argv += ["--chunk", "0.1", "--chunks", "1"]
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path, timeout=scaled(600))
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = {r["backend"]: r for r in csv.DictReader(out.open())}
    assert {"brax raw", "brax raw+autoreset", "brax adapter", "gymnasium"} <= set(rows)
    for backend in ("brax raw", "brax raw+autoreset", "brax adapter"):
        assert rows[backend]["pipeline"] == "spring" and float(rows[backend]["compile_s"]) > 0
    assert all(float(r["steps_per_s"]) > 0 and r["status"] == "ok" for r in rows.values())
    assert float(rows["brax raw"]["ratio_to_raw"]) == 1.0
    assert out.with_suffix(".png").stat().st_size > 5000
    assert "command: python paper_figures/bench_brax.py" in proc.stdout
    assert rows["brax raw"]["command"].startswith("python paper_figures/bench_brax.py --out")


def test_bench_brax_workers_past_their_timeout_leave_failed_rows(tmp_path):
    out = tmp_path / "b.csv"
    argv = [sys.executable, str(SCRIPT), "--out", str(out), "--envs", "halfcheetah"]
    argv += ["--pipelines", "spring", "--num-envs", "2", "--host-envs", "2", "--timeout", "0.3"]
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path, timeout=scaled(120))
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = list(csv.DictReader(out.open()))
    assert sorted(r["backend"] for r in rows) == [
        "brax adapter",
        "brax raw",
        "brax raw+autoreset",
        "gymnasium",
    ]
    assert all(r["status"] == "timeout after 0.3 s" and r["steps_per_s"] == "" for r in rows)
    assert {r["num_envs"] for r in rows} == {"2"}


@pytest.mark.slow
def test_pipeline_check_balances_on_positional(tmp_path):
    pytest.importorskip("brax")
    script = SCRIPT.parent / "brax_pipeline_check.py"
    out = tmp_path / "c.csv"
    argv = [sys.executable, str(script), "--out", str(out), "--pipelines", "positional"]
    proc = subprocess.run(
        argv + ["--num-envs", "2"], capture_output=True, text=True, timeout=scaled(600)
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = {r["controller"]: r for r in csv.DictReader(out.open())}
    assert int(rows["pd"]["min_length"]) == 1000  # the PD controller holds the pole
    assert int(rows["zero"]["max_length"]) < 200  # doing nothing lets it fall
