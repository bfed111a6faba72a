"""The population benchmark (paper_figures/bench_population.py) end to end at toy size."""

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest
from timeouts import scaled

ROOT = Path(__file__).resolve().parents[2]


def _run(*argv):
    done = subprocess.run(
        [sys.executable, *argv], cwd=ROOT, capture_output=True, text=True, timeout=scaled(600)
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return done.stdout


@pytest.mark.slow
def test_bench_toy_times_populations_and_separate_runs(tmp_path):
    out = _run(
        "paper_figures/bench_population.py", "--toy", "--algos", "grpo",
        "--bandits", "bandit:bernoulli-10", "--out", str(tmp_path / "out"),
        "--work-dir", str(tmp_path / "work"), "--population-threads", "2",
    )  # fmt: skip
    assert "command: python paper_figures/bench_population.py --toy" in out
    rows = list(csv.DictReader((tmp_path / "out" / "bench_population.csv").open()))
    assert [(r["contender"], r["seeds"], r["status"]) for r in rows] == [
        ("population-1", "1", "ok"),
        ("population-4", "4", "ok"),
        ("separate-2", "2", "ok"),
    ]
    assert [r["threads"] for r in rows] == ["2", "2", "1"]
    config = json.loads((tmp_path / "work/grpo/bernoulli-10/population4/config.json").read_text())
    assert config["args"]["torch_threads"] == 2
    for r in rows:
        assert float(r["per_seed_s"]) == pytest.approx(float(r["wall_s"]) / int(r["seeds"]))
        assert float(r["peak_rss_mb"]) > 50
    sep = float(rows[2]["per_seed_s"])
    assert float(rows[1]["speedup"]) == pytest.approx(sep / float(rows[1]["per_seed_s"]))
    pop = tmp_path / "work" / "grpo" / "bernoulli-10" / "population4" / "metrics.csv"
    assert sum(1 for _ in pop.open()) == 1 + 4 * 2  # header, 4 seeds x 2 iterations of 256
    # ppo's cell beside it: grpo's rows kept with their command, ppo at the suite's flags
    _run(
        "paper_figures/bench_population.py", "--toy", "--algos", "ppo",
        "--bandits", "bandit:bernoulli-10", "--out", str(tmp_path / "out"),
        "--work-dir", str(tmp_path / "work"),
    )  # fmt: skip
    both = list(csv.DictReader((tmp_path / "out" / "bench_population.csv").open()))
    assert both[:3] == rows and [r["algo"] for r in both[3:]] == ["ppo"] * 3
    assert all(r["status"] == "ok" for r in both) and "--algos ppo" in both[3]["command"]
    config = json.loads((tmp_path / "work/ppo/bernoulli-10/population4/config.json").read_text())
    assert config["args"]["num_steps"] == 1 and config["args"]["num_seeds"] == 4
