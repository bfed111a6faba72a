"""`make bench` script at toy size: every contender yields a row with positive rates."""

import csv
import importlib.util
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import pytest
from timeouts import scaled

SCRIPT = Path(__file__).resolve().parents[2] / "paper_figures" / "bench_ppo.py"


def _run(tmp_path, *flags, timeout=300):
    out = tmp_path / "b.csv"
    argv = [sys.executable, str(SCRIPT), "--toy", "--out", str(out), *flags]
    proc = subprocess.run(
        argv, capture_output=True, text=True, cwd=tmp_path, timeout=scaled(timeout)
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    with out.open() as f:
        return proc, list(csv.DictReader(f))


@pytest.mark.slow  # the figure script end to end at toy size
def test_bench_ppo_toy_ppo_spo_bpo_sb3_floor(tmp_path):
    pytest.importorskip("stable_baselines3")
    proc, rows = _run(tmp_path)
    by = {(r["algo"], r["contender"]): r for r in rows}
    expected = {("ppo", "ours"), ("ppo", "sb3"), ("ppo", "floor"), ("spo", "ours"), ("bpo", "ours")}
    assert set(by) == expected and len(rows) == 5
    assert sorted(int(r["slot"]) for r in rows) == [0, 1, 2, 3, 4]
    for row in rows:
        assert row["status"] == "ok" and row["command"].startswith("python paper_figures/")
        assert row["num_envs"] == "1" and row["steps_per_iter"] == "256"
        assert row["iterations"] == "1"  # the warm-up iteration is dropped
        assert float(row["sps"]) > 0 and float(row["iter_s"]) > 0
        assert float(row["rollout_s"]) > 0 and float(row["update_s"]) > 0
        assert float(row["process_s"]) > float(row["iter_s"])
    for key in ("env_step_s", "actor_fwd_s", "batched_fwd_s", "train_s"):
        assert float(by["ppo", "floor"][key]) > 0, key
    table = proc.stdout[proc.stdout.index("| envs | algo |") :]
    assert "| time vs ppo |" in table and "| speed ours/SB3 |" in table
    assert "\n| 1 | spo | " in table and "\n| 1 | bpo | " in table
    assert "FAILED" not in proc.stdout and "command: python " in proc.stdout


def test_spo_and_bpo_get_ppos_settings():
    spec = importlib.util.spec_from_file_location("bench_ppo", SCRIPT)  # not in a package
    bench_ppo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench_ppo)
    from algos import bpo, ppo, spo

    kw = {a: bench_ppo.ours_kwargs(a, 32, 10) for a in ("ppo", "spo", "bpo")}
    shared = set(kw["ppo"]) & set(kw["spo"]) & set(kw["bpo"])
    assert {"num_minibatches", "update_epochs", "hidden_sizes", "norm_obs", "anneal_lr"} <= shared
    assert all(kw["ppo"][k] == kw["spo"][k] == kw["bpo"][k] for k in shared)
    assert kw["spo"]["critic_hidden_sizes"] == kw["ppo"]["hidden_sizes"] == (64, 64)
    assert kw["bpo"]["activation"] == "tanh" and kw["bpo"]["norm_reward"] is True
    for module in (ppo, spo, bpo):  # every setting is a flag of that algorithm
        name = module.__name__.split(".")[-1]
        assert set(kw[name]) <= {f.name for f in fields(module.Args)}, name


def test_bench_ppo_rejects_bad_flags(tmp_path, capsys):
    argv = [sys.executable, str(SCRIPT), "--toy", "--out", str(tmp_path / "b.csv")]
    proc = subprocess.run(
        [*argv, "--algos", "ppo,sac"], capture_output=True, text=True, timeout=scaled(60)
    )
    assert proc.returncode == 2 and "--algos must be a subset of ppo,spo,bpo,trpo" in proc.stderr
    assert not (tmp_path / "b.csv").exists()
    spec = importlib.util.spec_from_file_location("bench_ppo", SCRIPT)  # not in a package
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for flags, message in (  # the same parse, in this process
        (["--num-minibatches", "7"], "--num-minibatches 7 must divide 256"),
        (["--contenders", "ours,gpu"], "--contenders must be a subset of ours,sb3,floor"),
    ):
        with pytest.raises(SystemExit) as exc:
            module.parse_args(["--toy", "--out", str(tmp_path / "b.csv"), *flags])
        assert exc.value.code == 2 and message in capsys.readouterr().err, flags


@pytest.mark.slow  # the figure script end to end at toy size
def test_trpo_toy_benchmark_runs_both_contenders(tmp_path):
    pytest.importorskip("sb3_contrib")
    _, rows = _run(tmp_path, "--algo", "trpo")
    assert sorted(r["contender"] for r in rows) == ["ours", "sb3"]
    assert all(r["algo"] == "trpo" and r["status"] == "ok" and float(r["sps"]) > 0 for r in rows)
    assert all(r["num_envs"] == "2" for r in rows)
