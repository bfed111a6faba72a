"""controlrl.bench: rotation, isolation of failures, paired ratios, CSV round trip, portable
command lines."""

import math
import os
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

from controlrl import bench

HERE = f"{Path(__file__).resolve()}:"  # the workers below, loaded by file in each process


def append_name(name: str, log: str) -> dict:
    """Worker: append `name` to the file `log` (the order processes actually ran in)."""
    with open(log, "a") as f:
        f.write(name + "\n")
    return {"name": name, "pid_seen": True}


def crash(message: str) -> dict:
    """Worker that raises."""
    raise RuntimeError(message)


def hang(seconds: float) -> dict:
    """Worker that runs past any short timeout."""
    time.sleep(seconds)
    return {}


def test_rotation_puts_every_contender_in_every_slot():
    items = ["a", "b", "c"]
    orders = [bench.rotation(items, k) for k in range(3)]
    assert orders == [["a", "b", "c"], ["b", "c", "a"], ["c", "a", "b"]]
    assert bench.rotation(items, 4) == ["b", "c", "a"]


def test_run_executes_in_rotated_order_each_in_its_own_process(tmp_path):
    log = tmp_path / "order.txt"
    contenders = [
        bench.Contender(n, HERE + "append_name", {"name": n, "log": str(log)}) for n in "abc"
    ]
    runs = bench.run(contenders, repeats=3)
    executed = log.read_text().split()
    assert executed == ["a", "b", "c", "b", "c", "a", "c", "a", "b"]
    assert [(r.name, r.repeat, r.slot) for r in runs[3:6]] == [
        ("b", 1, 0),
        ("c", 1, 1),
        ("a", 1, 2),
    ]
    assert all(r.ok and r.result == {"name": r.name, "pid_seen": True} for r in runs)
    assert all(r.wall_s > 0 and r.launched > 0 for r in runs)


def test_crash_and_timeout_become_failed_runs_and_the_others_still_run(tmp_path):
    log = tmp_path / "order.txt"
    contenders = [
        bench.Contender("crash", HERE + "crash", {"message": "boom in worker"}),
        bench.Contender("hang", HERE + "hang", {"seconds": 60}, timeout=1.0),
        bench.Contender("cmd", [sys.executable, "-c", "import sys; sys.exit(3)"]),
        bench.Contender("fine", HERE + "append_name", {"name": "fine", "log": str(log)}),
    ]
    t0 = time.perf_counter()
    runs = {r.name: r for r in bench.run(contenders, repeats=1)}
    assert time.perf_counter() - t0 < 30  # the hanging worker was killed, not waited for
    assert runs["crash"].status == "exit 1" and "boom in worker" in runs["crash"].log
    assert runs["hang"].status == "timeout after 1 s" and 1.0 <= runs["hang"].wall_s < 10
    assert runs["cmd"].status == "exit 3"
    assert not any(runs[n].ok for n in ("crash", "hang", "cmd"))
    assert runs["fine"].ok and runs["fine"].result["name"] == "fine"
    assert log.read_text() == "fine\n"
    assert runs["hang"].row()["status"] == "timeout after 1 s"


def test_poll_is_called_while_a_command_runs():
    calls = []
    contender = bench.Contender(
        "sleep",
        [sys.executable, "-c", "import time; time.sleep(0.6)"],
        poll=lambda: calls.append(time.time()),
    )
    run = bench.run_one(contender)
    assert run.ok and run.result == {}
    assert len(calls) >= 3 and all(run.launched <= t for t in calls)


def _runs(seconds: dict[str, list[float | None]]) -> list[bench.Run]:
    """Runs with given seconds per repeat (None: failed, with a bogus partial result), listed in
    a rotated order."""
    runs = []
    for k in range(len(next(iter(seconds.values())))):
        for slot, name in enumerate(bench.rotation(sorted(seconds), k)):
            s = seconds[name][k]
            status = "ok" if s is not None else "exit 1"
            result = {"s": s if s is not None else 99.0}
            runs.append(bench.Run(bench.Contender(name, "m:f"), k, slot, status, 0.0, 1.0, result))
    return runs


def test_ratios_are_paired_per_repeat_and_skip_failed_repeats():
    # machine noise moves both contenders of a repeat together: paired a/b is 1 in every good
    # repeat, while the ratio of medians (or pairing by position) says otherwise
    a = [1.0, 10.0, None, 2.0, 3.0]
    b = [1.0, 10.0, 7.0, 2.0, 3.0]
    runs = _runs({"a": a, "b": b})
    ratios = bench.paired_ratios(runs, "a", "b", lambda r: r.result["s"])
    assert ratios == [1.0, 1.0, 1.0, 1.0]
    unpaired = statistics.median([x for x in a if x]) / statistics.median(b)
    assert unpaired != pytest.approx(1.0)
    assert bench.median_range(ratios) == "1.00 (1.00-1.00)"
    b2 = [2.0, 5.0, 1.0, 8.0, 6.0]
    ratios2 = bench.paired_ratios(_runs({"a": a, "b": b2}), "a", "b", lambda r: r.result["s"])
    assert ratios2 == [0.5, 2.0, 0.25, 0.5]
    assert bench.median_range(ratios2) == "0.50 (0.25-2.00)"
    assert bench.median_range([]) == "n/a" and bench.median_range([3.0], ".1f") == "3.0"


def test_csv_keeps_a_kept_rows_command_only_when_asked(tmp_path):
    rows = [{"seed": 1, "command": "python old.py --seeds 1"}, {"seed": 4}]
    bench.write_csv(tmp_path / "a.csv", rows, "python new.py --seeds 4", keep_commands=True)
    back = bench.read_csv(tmp_path / "a.csv")
    assert [r["command"] for r in back] == ["python old.py --seeds 1", "python new.py --seeds 4"]
    assert list(back[0]) == ["seed", "command"]
    bench.write_csv(tmp_path / "b.csv", rows, "python new.py")
    assert {r["command"] for r in bench.read_csv(tmp_path / "b.csv")} == {"python new.py"}


def test_csv_round_trip(tmp_path):
    rows = [
        {"contender": "a, with comma", "repeat": 0, "wall_s": 0.1 + 0.2, "note": 'say "hi"'},
        {"contender": "b", "repeat": 1, "wall_s": 1e-7, "status": "exit 1", "seed": "1_000"},
        {"contender": "c", "repeat": 2, "wall_s": float("nan"), "sps": ""},
    ]
    path = tmp_path / "sub" / "bench.csv"
    command = bench.command_line("paper_figures/x.py", ["--out", "a b.csv"])
    assert command == "python paper_figures/x.py --out 'a b.csv'"
    bench.write_csv(path, rows, command)
    back = bench.read_csv(path)
    assert list(back[0]) == ["contender", "repeat", "wall_s", "note", "status", "seed", "sps"] + [
        "command"
    ]
    for row, got in zip(rows, back):
        assert got["command"] == command
        for key in back[0]:
            want = row.get(key, command if key == "command" else "")
            if isinstance(want, float) and math.isnan(want):
                assert math.isnan(got[key])
            else:
                assert got[key] == want and type(got[key]) is type(want), key


def test_cpu_timer_adds_each_laps_cpu_seconds():
    class Timer:  # the algorithms' Timer shape: lap(name) writes time/<name>_s into laps
        def __init__(self) -> None:
            self.laps = {}

        def lap(self, name: str) -> None:
            self.laps[f"time/{name}_s"] = 0.0

    timer = bench.cpu_timer(Timer)()
    t0 = time.process_time()
    while time.process_time() - t0 < 0.05:  # burn ~50 ms of CPU
        pass
    timer.lap("update")
    timer.lap("rollout")  # an immediate second lap: its CPU time starts where the first ended
    assert timer.laps["time/update_s"] == 0.0
    assert 0.04 <= timer.laps["time/update_cpu"] < 5.0
    assert 0.0 <= timer.laps["time/rollout_cpu"] < 0.04


def test_command_line_writes_no_machine_path(tmp_path, monkeypatch):
    """Absolute paths inside the repository come out relative to its root, those in the home
    directory from ~ ($HOME after '--flag='); the shell reads the same words back."""
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    root = bench.REPO_ROOT
    argv = [
        "--out",
        str(root / "paper_figures" / "out" / "a b.csv"),
        f"--work-dir={root / 'runs' / 'x'}",
        "--d3rlpy-python",
        str(home / ".cache" / "venv" / "bin" / "python"),
        f"--data={home / 'd e.hdf5'}",
        str(tmp_path / "elsewhere"),
        "--seeds",
        "1,2",
    ]
    command = bench.command_line("paper_figures/x.py", argv)
    assert command == (
        "python paper_figures/x.py --out 'paper_figures/out/a b.csv' --work-dir=runs/x"
        " --d3rlpy-python ~/.cache/venv/bin/python --data=\"$HOME\"/'d e.hdf5' "
        f"{tmp_path / 'elsewhere'} --seeds 1,2"
    )
    echoed = subprocess.run(
        ["bash", "-c", 'printf "%s\\n" ' + command.removeprefix("python ")],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "HOME": str(home)},
    ).stdout.splitlines()
    expected = ["paper_figures/x.py", *argv]
    expected[2:4] = ["paper_figures/out/a b.csv", "--work-dir=runs/x"]  # the repository's paths
    assert echoed == expected
    assert shlex.split(bench.command_line("x.py", ["--out", str(root)]))[-1] == "."


def test_row_ratios_pair_csv_rows_per_repeat_and_failures_name_the_failed():
    rows = [
        {"contender": c, "repeat": k, "status": s, "x": x}
        for c, k, s, x in (("a", 0, "ok", 4.0), ("b", 0, "ok", 2.0), ("a", 1, "ok", 9.0),
                           ("b", 1, "exit 1", ""), ("b", 2, "ok", 5.0), ("a", 2, "ok", 5.0),
                           ("a", 3, "ok", ""), ("b", 3, "ok", 1.0))
    ]  # fmt: skip
    assert bench.row_ratios(rows, "a", "b", "x") == [2.0, 1.0]  # repeat 1 failed, 3 has no value
    assert bench.row_ratios(rows, "b", "a", "x") == [0.5, 1.0]
    assert bench.failures(rows) == ["FAILED b repeat 1: exit 1"]


def test_recorder_writes_every_row_as_its_run_ends_and_prints_a_line(tmp_path, capsys):
    out = tmp_path / "bench.csv"
    kept = {"contender": "a", "repeat": 0, "status": "ok", "x": 1.0, "command": "python old"}
    report = bench.Recorder(out, "python new", lambda run: {"contender": run.name, **run.result},
                            lambda r: f"x={r['x']}", rows=[kept], keep_commands=True)  # fmt: skip
    ok = bench.Run(bench.Contender("b", "m:f"), 1, 0, "ok", 0.0, 1.0, {"x": 2.0})
    report(ok)
    assert [r["command"] for r in bench.read_csv(out)] == ["python old", "python new"]
    failed = bench.Run(bench.Contender("c", "m:f"), 1, 1, "exit 3", 0.0, 1.0, {}, "Traceback")
    report(failed)
    assert [r["contender"] for r in bench.read_csv(out)] == ["a", "b", "c"]
    assert report.runs == [ok, failed] and len(report.rows) == 3
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].endswith("repeat 1 b x=2.0") and lines[1].endswith("repeat 1 c exit 3")
    assert lines[2] == "Traceback"


def test_parser_subset_and_fill_give_the_flags_and_their_defaults(capsys):
    p = bench.parser("First paragraph.\n\nRest.", "out.csv", 60.0, ("a", "b"))
    p.add_argument("--repeats", type=int)
    args = p.parse_args(["--toy"])
    assert (args.out, args.threads, args.timeout, args.contenders) == ("out.csv", 1, 60.0, "a,b")
    bench.fill(args, {"repeats": 3}, {"repeats": 1})
    assert args.repeats == 1
    args.toy, args.repeats = False, None
    bench.fill(args, {"repeats": 3}, {"repeats": 1})
    assert args.repeats == 3
    assert bench.subset(p, " b, a,", ("a", "b"), "--contenders") == ["b", "a"]
    assert bench.ints(p, "3, 0,", "--seeds") == [3, 0] and bench.ints(p, "2", "--n", 2) == [2]
    for text, least in (("1,x", 0), ("", 0), ("0,4", 1)):
        with pytest.raises(SystemExit):
            bench.ints(p, text, "--sizes", least)
        assert f"--sizes must be comma-separated integers >= {least}" in capsys.readouterr().err
    for text in ("a,c", ""):
        with pytest.raises(SystemExit):
            bench.subset(p, text, ("a", "b"), "--contenders")
        assert "--contenders must be a subset of a,b" in capsys.readouterr().err


def test_trained_runs_main_quietly_in_a_run_dir_and_reads_its_timing(tmp_path):
    import dataclasses
    import types

    @dataclasses.dataclass
    class Args:
        run_dir: str
        eval_every: int
        eval_episodes: int
        checkpoint_every: int
        tensorboard: bool
        progress: bool
        seed: int = 0

        def validate(self) -> None:
            assert self.seed >= 0

    def main(args: Args) -> float:
        Path(args.run_dir).mkdir(parents=True)
        (Path(args.run_dir) / "timing.csv").write_text("time/update_s\n0.5\n0.25\n")
        return 7.0 + args.eval_episodes + args.eval_every

    module = types.SimpleNamespace(Args=Args, main=main)
    with bench.trained(module, seed=3, eval_episodes=2) as (run_dir, rows, returned):
        assert run_dir.is_dir() and (run_dir / "timing.csv").exists()
    assert not run_dir.exists()
    assert rows == [{"time/update_s": "0.5"}, {"time/update_s": "0.25"}] and returned == 9.0


def test_per_contender_table_has_a_line_per_contender_of_its_ok_rows():
    cells = [("a", 0, "ok", 1.0), ("b", 0, "ok", 4.0), ("a", 1, "ok", 3.0), ("b", 1, "exit 1", "")]
    rows = [dict(contender=c, repeat=k, status=s, x=x) for c, k, s, x in cells]
    names = lambda name, mine: f"{name}:{len(mine)}"  # noqa: E731
    lines = bench.per_contender(rows, {"x": bench.median_of("x", ".1f"), "n": names})
    assert lines[:2] == ["| contender | x | n |", "| --- | --- | --- |"]
    assert lines[2:] == ["| a | 2.0 (1.0-3.0) | a:2 |", "| b | 4.0 | b:1 |"]


def test_csv_without_a_command_column(tmp_path):
    bench.write_csv(tmp_path / "t.csv", [{"a": 1, "b": 0.5}, {"a": 2, "b": "x"}], None)
    assert (tmp_path / "t.csv").read_text().splitlines() == ["a,b", "1,0.5", "2,x"]


def test_repeats_rotates_records_every_run_and_prints_the_summary(tmp_path, capsys):
    import types

    log = str(tmp_path / "order.log")
    args = types.SimpleNamespace(out=tmp_path / "b.csv", repeats=2)

    def contenders(_, repeat: int) -> list[bench.Contender]:
        return [bench.Contender(n, HERE + "append_name", {"name": n, "log": log}) for n in "ab"]

    def summarize(rows: list[dict]) -> str:
        return "summary of " + ",".join(r["contender"] for r in rows)

    rows = bench.repeats(args, "s.py", ["--x"], contenders, bench.Run.row, str, summarize)
    assert [(r["contender"], r["repeat"]) for r in rows] == [("a", 0), ("b", 0), ("b", 1), ("a", 1)]
    assert open(log).read().split() == ["a", "b", "b", "a"]  # each in its own process
    assert [r["contender"] for r in bench.read_csv(args.out)] == ["a", "b", "b", "a"]
    out = capsys.readouterr().out
    assert "summary of a,b,b,a" in out and "command: python s.py --x" in out
