"""bench_iql.py (ours vs d3rlpy's IQL): the d3rlpy contender at toy size on a small D4RL-layout
file, flag errors, the paired ratio of the summary, and one set of settings for both sides."""

import csv
import importlib.util
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import numpy as np
import pytest
from timeouts import scaled

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "paper_figures" / "bench_iql.py"
PEER = ROOT / "paper_figures" / "peers" / "d3rlpy_iql.py"


def _module(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)  # not in a package
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


bench_iql = _module(SCRIPT, "bench_iql")
D3RLPY_PYTHON = Path(bench_iql.D3RLPY_VENV) / "bin" / "python"


def _tiny_file(path: Path) -> int:
    """A HalfCheetah-shaped file of 5 episodes: 10, 10 and 25 rows ending in a terminal, 30 in
    a timeout, 15 that end nowhere (the file stops). Returns the transitions d3rlpy should
    build: a terminal row is kept, the last row of a timed-out or unfinished episode is not (so
    terminals and timeouts swapped give 87, both read as terminals 89)."""
    h5py = pytest.importorskip("h5py")
    rng = np.random.default_rng(0)
    rows = 90
    terminals = np.zeros(rows, bool)
    timeouts = np.zeros(rows, bool)
    terminals[[9, 19, 44]] = True
    timeouts[74] = True
    with h5py.File(path, "w") as f:
        f["observations"] = rng.standard_normal((rows, 17)).astype(np.float32)
        f["next_observations"] = rng.standard_normal((rows, 17)).astype(np.float32)
        f["actions"] = rng.uniform(-1, 1, (rows, 6)).astype(np.float32)
        f["rewards"] = rng.standard_normal(rows).astype(np.float32)
        f["terminals"] = terminals
        f["timeouts"] = timeouts
        f.attrs["env_id"] = "HalfCheetah-v5"
    return 10 + 10 + 25 + 29 + 14


def _run(*flags, timeout=300, cwd=None):
    argv = [sys.executable, str(SCRIPT), "--toy", *flags]
    return subprocess.run(argv, capture_output=True, text=True, timeout=scaled(timeout), cwd=cwd)


@pytest.mark.skipif(not D3RLPY_PYTHON.is_file(), reason="d3rlpy's venv: make bench-iql")
def test_d3rlpy_contender_times_updates_and_evaluates(tmp_path):
    expected_transitions = _tiny_file(tmp_path / "tiny.hdf5")
    out = tmp_path / "b.csv"
    flags = ["--dataset", str(tmp_path / "tiny.hdf5"), "--out", str(out), "--contenders", "d3rlpy"]
    proc = _run(*flags, "--eval", "--eval-episodes", "1", "--seeds", "3", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    with out.open() as f:
        (row,) = list(csv.DictReader(f))
    assert row["status"] == "ok" and row["contender"] == "d3rlpy" and row["seed"] == "3"
    assert row["env_id"] == "HalfCheetah-v5"  # from the file's env_id attribute
    # timeouts are not terminals: swapping the two, or reading both as terminals, fails here
    assert int(row["transitions"]) == expected_transitions
    assert int(row["updates"]) == 40 and int(row["timed_updates"]) == 40 - 20
    update_s = float(row["update_s"])
    assert 0 < update_s < float(row["process_s"])
    assert float(row["updates_per_s"]) == pytest.approx(20 / update_s)
    assert float(row["cpu_s"]) > 0  # process CPU seconds over the same timed updates
    assert float(row["updates_per_cpu_s"]) == pytest.approx(20 / float(row["cpu_s"]))
    assert np.isfinite(float(row["eval_return"])) and row["eval_episodes"] == "1"
    assert row["command"].startswith("python paper_figures/bench_iql.py --toy")
    table = proc.stdout[proc.stdout.index("| contender |") :]
    assert "\n| d3rlpy | " in table and "FAILED" not in proc.stdout
    assert "speed ours/d3rlpy (paired per repeat): n/a" in table  # no ours: no ratio


def _has_ours() -> bool:
    return importlib.util.find_spec("algos.iql") is not None


@pytest.mark.skipif(not _has_ours(), reason="algos/iql.py is not there")
def test_ours_contender_reads_its_timing_csv(tmp_path):
    _tiny_file(tmp_path / "tiny.hdf5")
    out = tmp_path / "b.csv"
    flags = ["--dataset", str(tmp_path / "tiny.hdf5"), "--out", str(out), "--contenders", "ours"]
    proc = _run(*flags, "--eval", "--eval-episodes", "1", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    with out.open() as f:
        (row,) = list(csv.DictReader(f))
    assert row["status"] == "ok" and row["contender"] == "ours"
    # 4 timing rows of --log-every 10 updates; the first 2 (--warmup 20) are not timed
    assert int(row["timed_updates"]) == 20 and int(row["updates"]) == 40
    update_s = float(row["update_s"])
    assert 0 < update_s < float(row["process_s"])
    assert float(row["updates_per_s"]) == pytest.approx(20 / update_s)
    # CPU seconds of the same timed iterations: one thread, so never above their wall clock
    cpu_s = float(row["cpu_s"])
    assert 0 < cpu_s <= update_s * 1.05 and float(row["updates_per_cpu_s"]) == 20 / cpu_s
    assert np.isfinite(float(row["eval_return"]))
    assert row["dataset"] == "tiny.hdf5" and str(tmp_path) not in row["command"]


@pytest.mark.skipif(not _has_ours(), reason="algos/iql.py is not there")
def test_resume_keeps_finished_runs_and_workers_run_side_by_side(tmp_path, capsys):
    _tiny_file(tmp_path / "tiny.hdf5")
    out = tmp_path / "b.csv"
    flags = ["--dataset", str(tmp_path / "tiny.hdf5"), "--out", str(out), "--contenders", "ours",
             "--eval", "--eval-episodes", "1", "--workers", "2"]  # fmt: skip
    proc = _run(*flags, "--seeds", "1,2", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    with out.open() as f:
        first = list(csv.DictReader(f))
    assert [(r["seed"], r["repeat"], r["status"]) for r in first] == [("1", "0", "ok"),
                                                                     ("2", "1", "ok")]  # fmt: skip
    with out.open("w", newline="") as f:  # seed 2's run is lost: only seed 1 is kept
        writer = csv.DictWriter(f, fieldnames=list(first[0]))
        writer.writeheader()
        writer.writerow(first[0])
    proc = _run(*flags, "--seeds", "1,2,3", "--resume", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "--resume: kept 1 finished runs" in proc.stdout and "2 to run" in proc.stdout
    with out.open() as f:
        rows = list(csv.DictReader(f))
    assert [r["seed"] for r in rows] == ["1", "2", "3"]
    assert rows[0] == first[0]  # kept as written, its command too
    assert "--resume" in rows[1]["command"] and "--resume" not in rows[0]["command"]
    assert rows[1]["eval_return"] == first[1]["eval_return"]  # a seed reproduces
    proc = _run(*flags, "--seeds", "1", "--resume", "--updates", "60", cwd=tmp_path)
    assert proc.returncode != 0 and "holds a run of ours seed 1 at {'updates': 40}" in proc.stderr
    with pytest.raises(SystemExit):
        bench_iql.parse_args(["--toy", "--contenders", "ours", "--workers", "2"])
    assert "would measure the sharing, not the speed" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.skipif(not (_has_ours() and D3RLPY_PYTHON.is_file()), reason="ours and d3rlpy")
def test_side_by_side_toy_gives_paired_ratios(tmp_path):
    _tiny_file(tmp_path / "tiny.hdf5")
    out = tmp_path / "b.csv"
    proc = _run("--dataset", str(tmp_path / "tiny.hdf5"), "--out", str(out), "--repeats", "2")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    with out.open() as f:
        rows = list(csv.DictReader(f))
    assert [(r["repeat"], r["slot"], r["contender"]) for r in rows] == [
        ("0", "0", "ours"),
        ("0", "1", "d3rlpy"),
        ("1", "0", "d3rlpy"),  # the order rotates
        ("1", "1", "ours"),
    ]
    assert all(r["status"] == "ok" and float(r["updates_per_s"]) > 0 for r in rows)
    line = next(x for x in proc.stdout.splitlines() if x.startswith("speed ours/d3rlpy"))
    assert "n/a" not in line and "(" in line  # a median (min-max) of two paired ratios


def test_bad_flags_exit_2_before_anything_runs(tmp_path, capsys):
    """The script exits 2 before it writes anything (one process); the other checks are the same
    parse_args, run in this process (a process per flag costs seconds)."""
    missing = str(tmp_path / "no_python")
    proc = _run("--out", str(tmp_path / "b.csv"), "--updates", "45", timeout=60)
    assert proc.returncode == 2 and "--log-every 10 must divide --updates 45" in proc.stderr
    assert not (tmp_path / "b.csv").exists()
    for flags, message in (
        (["--contenders", "ours,gpu"], "--contenders must be a subset of ours,d3rlpy"),
        (["--updates", "40", "--warmup", "40"], "--warmup must be in [0, --updates 40)"),
        (["--seeds", "1,x"], "--seeds must be comma-separated integers"),
        (["--d3rlpy-python", missing], "does not exist: `make bench-iql` builds"),
        (["--contenders", "ours", "--dataset", missing], "no such file"),
    ):
        with pytest.raises(SystemExit) as exc:
            bench_iql.parse_args(["--toy", "--out", str(tmp_path / "b.csv"), *flags])
        assert exc.value.code == 2 and message in capsys.readouterr().err, flags


def test_peer_rejects_warmup_past_updates_without_d3rlpy(tmp_path):
    argv = [sys.executable, str(PEER), "--dataset", str(SCRIPT), "--updates", "5", "--warmup", "5"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=scaled(60))
    assert proc.returncode == 2 and "--warmup must be in [0, --updates)" in proc.stderr


def _fake_rows(rates: dict[tuple[str, int], float]) -> list[dict]:
    rows = []
    for (name, repeat), rate in rates.items():
        rows.append(
            {k: "" for k in bench_iql.FIELDS}
            | dict(contender=name, repeat=repeat, seed=repeat + 1, status="ok")
            | dict(updates_per_s=rate, updates_per_cpu_s=2 * rate, process_s=10.0)
            | dict(eval_return=100.0 * rate)
        )
    return rows


def test_summary_pairs_ratios_within_a_repeat():
    # repeat 0: 300/100 = 3, repeat 1: 400/200 = 2; repeat 2: ours failed, repeat 3: d3rlpy
    # failed -> neither is paired
    rows = _fake_rows({("ours", 0): 300.0, ("d3rlpy", 0): 100.0, ("ours", 1): 400.0})
    rows += _fake_rows({("d3rlpy", 1): 200.0, ("d3rlpy", 2): 50.0, ("ours", 3): 350.0})
    rows.append(rows[0] | dict(repeat=2, status="exit 1", updates_per_s=""))
    rows.append(rows[1] | dict(repeat=3, status="timeout after 9 s", updates_per_s=""))
    rows[2]["updates_per_cpu_s"] = 1600.0  # ours, repeat 1: by CPU time 1600 / 400 = 4
    text = bench_iql.summarize(rows)
    assert "speed ours/d3rlpy (paired per repeat): 2.50 (2.00-3.00)" in text
    assert "speed ours/d3rlpy by CPU time: 3.50 (3.00-4.00)" in text
    assert "| ours | 350.0 (300.0-400.0) | 700.0 (600.0-1,600.0) | 10 (10-10) |" in text
    assert "| d3rlpy | 100.0 (50.0-200.0) | 200.0 (100.0-400.0) | 10 (10-10) |" in text
    assert "eval return ours vs d3rlpy per seed: seed 1: 30000.0 vs 10000.0" in text
    assert "FAILED ours repeat 2: exit 1" in text
    assert "FAILED d3rlpy repeat 3: timeout after 9 s" in text


def test_ours_gets_the_peer_settings():
    settings = dict(bench_iql.SETTINGS)
    assert settings["hidden_sizes"] == (256, 256) and settings["batch_size"] == 256
    assert (settings["expectile"], settings["beta"], settings["max_weight"]) == (0.7, 3.0, 100.0)
    kw = bench_iql.ours_kwargs(settings)
    assert kw["tau"] == 0.7 and kw["polyak"] == 0.005 and kw["value_lr"] == kw["critic_lr"]
    iql = pytest.importorskip("algos.iql")
    assert set(kw) <= {f.name for f in fields(iql.Args)}  # every setting is a flag of iql.py
    assert iql.EXP_ADV_MAX == settings["max_weight"]
    args = iql.Args(**kw)
    assert all(getattr(args, k) == v for k, v in kw.items())


def test_synthetic_file_has_d4rl_layout(tmp_path):
    h5py = pytest.importorskip("h5py")
    path = bench_iql.write_synthetic(tmp_path / "s.hdf5", rows=25, obs_dim=3, act_dim=2, episode=10)
    with h5py.File(path, "r") as f:
        data = {k: f[k][()] for k in f}
        assert f.attrs["env_id"] == "HalfCheetah-v5"
    assert data["observations"].shape == data["next_observations"].shape == (25, 3)
    assert data["actions"].shape == (25, 2) and data["rewards"].shape == (25,)
    assert not data["terminals"].any() and np.flatnonzero(data["timeouts"]).tolist() == [9, 19]
    inside = ~data["timeouts"][:-1]  # s' is the next row inside an episode, not across one
    np.testing.assert_array_equal(
        data["next_observations"][:-1][inside], data["observations"][1:][inside]
    )
    assert not np.allclose(data["next_observations"][9], data["observations"][10])


def test_csv_cells_name_no_absolute_path(tmp_path):
    """The command column says $D3RLPY_VENV/bin/python for d3rlpy's python and repository-relative
    paths (or file names outside the repository) for --dataset and --out, either flag form."""
    out = ROOT / "paper_figures" / "out" / "b.csv"
    argv = ["--d3rlpy-python", str(tmp_path / "venv" / "bin" / "python"), "--updates", "5000",
            f"--dataset={tmp_path / 'h.hdf5'}", "--out", str(out)]  # fmt: skip
    assert bench_iql.public_command(argv) == (
        "python paper_figures/bench_iql.py --d3rlpy-python $D3RLPY_VENV/bin/python --updates 5000"
        " --dataset=h.hdf5 --out paper_figures/out/b.csv"
    )
    assert bench_iql.portable(ROOT / "runs" / "x.hdf5") == "runs/x.hdf5"
    assert bench_iql.portable("hopper-medium-v5-s0") == "hopper-medium-v5-s0"  # an id: kept


def test_dataset_may_be_a_generated_id(tmp_path, monkeypatch):
    """--dataset hopper-medium-v5-s0 (the docstring's score command) names the generated file in
    $CONTROLRL_DATA; an id with no file there is refused with both places named."""
    monkeypatch.setenv("CONTROLRL_DATA", str(tmp_path))
    _tiny_file(tmp_path / "tiny-medium-v5-s0.hdf5")
    args = bench_iql.parse_args(["--toy", "--contenders", "ours", "--dataset", "tiny-medium-v5-s0"])
    assert args.dataset == tmp_path / "tiny-medium-v5-s0.hdf5"
    with pytest.raises(SystemExit) as exc:
        bench_iql.parse_args(["--toy", "--contenders", "ours", "--dataset", "other-v5-s0"])
    assert exc.value.code == 2
