"""bench_generative.py (training env steps/s of fpo.py / dppo.py vs ppo.py): contenders at toy
size in their own processes, the CSV rows and the paired ratios of the summary, bad flags."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
from timeouts import scaled

from controlrl import bench

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "paper_figures" / "bench_generative.py"


def _module():
    spec = importlib.util.spec_from_file_location("bench_generative", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_generative"] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow  # the figure script end to end at toy size
def test_toy_times_ppo_and_fpo_side_by_side(tmp_path):
    out = tmp_path / "bench.csv"
    argv = [sys.executable, str(SCRIPT), "--toy", "--out", str(out), "--num-steps", "32"]
    argv += ["--iterations", "2", "--warmup", "1", "--repeats", "1", "--contenders", "ppo,fpo"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=scaled(300), cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = bench.read_csv(out)
    assert [(r["contender"], r["slot"], r["status"]) for r in rows] == [
        ("ppo", 0, "ok"),
        ("fpo", 1, "ok"),
    ]
    for r in rows:
        assert r["steps"] == 2 * 8 * 32  # the warm-up iteration dropped
        assert r["sps"] == pytest.approx(r["steps"] / (r["rollout_s"] + r["update_s"]))
        assert 0 < r["cpu_s"] and r["rollout_s"] + r["update_s"] < r["process_s"]
        assert r["command"].startswith("python paper_figures/bench_generative.py --toy")
    ratio = rows[1]["sps"] / rows[0]["sps"]
    assert f"| fpo | {rows[1]['sps']:,.0f} |" in proc.stdout
    assert f"| {ratio:.2f} |" in proc.stdout


def test_summary_pairs_ratios_within_a_repeat():
    fig = _module()

    def r(contender, repeat, sps, status="ok"):
        return dict(contender=contender, repeat=repeat, sps=sps, sps_cpu=sps / 2, status=status,
                    steps=100, num_envs=1, num_steps=50, rollout_s=1.0, update_s=1.0)  # fmt: skip

    rows = [r("ppo", 0, 100.0), r("fpo", 0, 50.0), r("fpo", 1, 10.0), r("ppo", 1, 50.0)]
    rows += [r("ppo", 2, 80.0), r("fpo", 2, 0.0, status="exit 1")]
    assert bench.row_ratios(rows, "fpo", "ppo", "sps") == [0.5, 0.2]
    text = fig.summarize(rows)
    row = (
        "| fpo | 30 (10-50) | 15 (5-25) | 0.50 (0.50-0.50) / 0.50 (0.50-0.50) | 0.35 (0.20-0.50) |"
    )
    assert row in text
    assert "FAILED fpo repeat 2: exit 1" in text


@pytest.mark.parametrize(
    "flags", [["--contenders", "fpo"], ["--contenders", "ppo,x"], ["--num-envs", "0"]]
)
def test_bad_flags_exit_2_naming_the_flag(flags):
    proc = subprocess.run([sys.executable, str(SCRIPT), *flags], capture_output=True, text=True)
    assert proc.returncode == 2 and f"error: {flags[0]}" in proc.stderr, proc.stderr
