"""The control population benchmark (paper_figures/bench_control_population.py) end to end at
toy size: every contender runs, the rates and ratios are the ones its columns define."""

import csv
import subprocess
import sys
from pathlib import Path

import pytest
from timeouts import scaled

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_bench_toy_times_population_separate_and_floor(tmp_path):
    out = tmp_path / "out"
    done = subprocess.run(
        [
            sys.executable, "paper_figures/bench_control_population.py", "--toy",
            "--envs", "Hopper-v5", "--out", str(out), "--work-dir", str(tmp_path / "work"),
        ],
        cwd=ROOT, capture_output=True, text=True, timeout=scaled(600),
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    rows = list(csv.DictReader((out / "bench_control_population.csv").open()))
    assert [(r["contender"], r["status"]) for r in rows] == [
        (f"{kind}-{S}", "ok") for S in (1, 2) for kind in ("population", "separate", "floor")
    ]
    for r in rows:
        rate = int(r["seed_steps"]) / float(r["cpu_s"])
        assert float(r["seed_steps_per_cpu_s"]) == pytest.approx(rate)
        if r["contender"].startswith(("population", "separate")):  # timed iterations only
            assert 0 < float(r["cpu_s"]) < float(r["proc_cpu_s"])
    pop, sep, floor = rows[3:6]
    assert int(pop["seed_steps"]) == int(sep["seed_steps"]) == 2 * 64  # 2 seeds x 1 iteration
    speedup = float(pop["seed_steps_per_cpu_s"]) / float(sep["seed_steps_per_cpu_s"])
    assert float(pop["speedup"]) == pytest.approx(speedup)
    ratio = float(pop["us_per_seed_step"]) / float(floor["us_per_seed_step"])
    assert float(pop["floor_ratio"]) == pytest.approx(ratio)
    assert float(pop["peak_rss_mb"]) > 50 and (out / "bench_control_population.png").exists()
    modes = list(csv.DictReader((out / "bench_control_population_envs.csv").open()))
    assert [(r["vectorization"], r["status"]) for r in modes] == [("sync", "ok"), ("async", "ok")]
