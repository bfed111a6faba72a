"""The backend/layout bench: layouts parse, share one batch, and the speed ratio is paired per
repeat against the first layout; end to end at toy size in the slow tier."""

import csv
import subprocess
import sys
from pathlib import Path

import pytest
from timeouts import scaled

from controlrl import bench
from paper_figures import bench_backends as bb

SCRIPT = Path(bb.__file__)


def test_layouts_parse_and_name_their_backend():
    assert bb.parse_layout("envpool:Hopper-v5:8x256") == ("envpool:Hopper-v5", 8, 256)
    assert bb.parse_layout(" Hopper-v5:1x2048") == ("Hopper-v5", 1, 2048)
    assert bb.backend("envpool:Hopper-v5") == "envpool" and bb.backend("Hopper-v5") == "gymnasium"
    for bad in ("Hopper-v5", "Hopper-v5:8", "Hopper-v5:8x", "Hopper-v5:0x256", ":8x256"):
        with pytest.raises(ValueError, match="layout"):
            bb.parse_layout(bad)


def test_layouts_must_share_one_batch_and_be_distinct(capsys):
    with pytest.raises(SystemExit):
        bb.parse_args(["--layouts", "Hopper-v5:1x2048,Hopper-v5:8x128"])
    assert "one batch" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        bb.parse_args(["--layouts", "Hopper-v5:1x2048,Hopper-v5:1x2048"])
    assert "distinct" in capsys.readouterr().err
    args = bb.parse_args([])
    assert args.layouts == bb.DEFAULT_LAYOUTS.split(",") and args.repeats == 5


def _run(name, repeat, rollout, update=1.0, ok=True):
    env_id, envs, steps = bb.parse_layout(name)
    cfg = dict(algo="ppo", contender="ours", env_id=env_id, num_envs=envs, num_steps=steps)
    cfg |= dict(num_minibatches=32, epochs=10, threads=1)
    result = {"rollout_s": [9.0, rollout], "update_s": [9.0, update]}  # the first is warm-up
    return bench.Run(bench.Contender(name, "m:f", cfg), repeat, 0, "ok" if ok else "exit 1", 0.0,
                     5.0, result if ok else {})  # fmt: skip


def test_speed_is_paired_per_repeat_against_the_first_layout():
    a, b = "Hopper-v5:1x2048", "envpool:Hopper-v5:8x256"
    # repeat 0: a 2,048/(1+1) = 1,024 steps/s, b 2,048/(0.6+1) = 1,280: 1.25x
    # repeat 1: a 2,048/(3+1) = 512, b 2,048/(1+1) = 1,024: 2.00x; repeat 2: b failed
    runs = [_run(a, 0, 1.0), _run(b, 0, 0.6), _run(a, 1, 3.0), _run(b, 1, 1.0),
            _run(a, 2, 1.0), _run(b, 2, 1.0, ok=False)]  # fmt: skip
    table = bb.summarize(runs, [a, b], warmup=1)
    line = next(s for s in table.splitlines() if s.startswith(f"| {b} |"))
    assert line.endswith("| 1.62 (1.25-2.00) |"), line  # unpaired medians would give 1.26
    assert f"| {a} | gymnasium | 1,024 (512-1,024) |" in table
    assert "FAILED envpool:Hopper-v5:8x256, repeat 2: exit 1" in table
    row = bb.row(runs[1], warmup=1)
    assert (row["layout"], row["backend"], row["steps_per_iter"]) == (b, "envpool", 2048)
    assert row["sps"] == pytest.approx(1280.0)


@pytest.mark.slow  # two PPO processes end to end at toy size
def test_bench_backends_toy(tmp_path):
    out = tmp_path / "b.csv"
    argv = [sys.executable, str(SCRIPT), "--toy", "--out", str(out)]
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path, timeout=scaled(600))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    with out.open() as f:
        rows = list(csv.DictReader(f))
    assert [r["layout"] for r in rows] == bb.TOY_LAYOUTS.split(",")
    for r in rows:
        assert r["status"] == "ok" and r["steps_per_iter"] == "256" and float(r["sps"]) > 0
        assert r["command"].startswith("python paper_figures/bench_backends.py --toy")
    assert "| Hopper-v5:2x128 | gymnasium |" in proc.stdout and "FAILED" not in proc.stdout
