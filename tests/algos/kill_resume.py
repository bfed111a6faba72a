"""Kill a run with SIGKILL at a chosen checkpoint, resume it, and compare it with the uninterrupted
run (tests/algos/test_kill_resume.py).

The run to kill is the algorithm's own script in a child process whose Session.save_checkpoint
sends the process SIGKILL at an exact moment, so that the test does not race the run's speed:

    before   as the first checkpoint is about to be written: config.json and the first
             iterations' rows on disk, no checkpoint (the resume starts again from step 0)
    first    right after the first checkpoint has landed on disk
    late     right after a later checkpoint (the n-th) has landed
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from timeouts import scaled

ROOT = Path(__file__).resolve().parents[2]
# the files a resumed run must reproduce byte for byte (those the run writes)
COMPARED = ("metrics.csv", "aggregate.csv", "final_eval.json")

# the child: the script as __main__, its checkpoints wrapped to SIGKILL the process
_KILLER = """
import os, runpy, signal, sys
from controlrl import session
script, moment, nth = sys.argv[1], sys.argv[2], int(sys.argv[3])
save, calls = session.Session.save_checkpoint, []
def save_then_kill(self, iteration):
    calls.append(iteration)
    if moment == "before":
        os.kill(os.getpid(), signal.SIGKILL)
    save(self, iteration)
    if len(calls) == nth:
        self.wait_checkpoint()  # a background write (population runs) lands first
        os.kill(os.getpid(), signal.SIGKILL)
session.Session.save_checkpoint = save_then_kill
sys.argv = [script, *sys.argv[4:]]
runpy.run_path(script, run_name="__main__")
"""

MOMENTS = {"before": 1, "first": 1, "late": 2}


def env() -> dict:
    return {**os.environ, "MUJOCO_GL": "egl", "PYTHONPATH": str(ROOT)}


def run(script: str, *argv: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """The script to its end (exit 0 asserted)."""
    out = subprocess.run(
        [sys.executable, script, *argv],
        cwd=ROOT,
        env=env(),
        capture_output=True,
        text=True,
        timeout=scaled(timeout),
    )
    assert out.returncode == 0, f"{script} {' '.join(argv)}: {out.stderr[-2000:]}"
    return out


def kill_at(
    script: str, moment: str, *argv: str, nth: int | None = None, timeout: float = 300
) -> None:
    """Run the script until the moment (MOMENTS; late: after the nth checkpoint), SIGKILLed."""
    nth = MOMENTS[moment] if nth is None else nth
    out = subprocess.run(
        [sys.executable, "-c", _KILLER, script, moment, str(nth), *argv],
        cwd=ROOT,
        env=env(),
        capture_output=True,
        text=True,
        timeout=scaled(timeout),
    )
    assert out.returncode == -9, f"{script} was not killed ({out.returncode}): {out.stderr[-2000:]}"


def same_files(a: Path, b: Path) -> list[str]:
    """The COMPARED files that a and b do not hold byte for byte alike (one missing: differs)."""
    differ = []
    for name in COMPARED:
        pa, pb = a / name, b / name
        if not pa.exists() and not pb.exists():
            continue
        if not (pa.exists() and pb.exists()) or pa.read_bytes() != pb.read_bytes():
            differ.append(name)
    return differ


def first_difference(a: Path, b: Path, name: str) -> str:
    """Where two runs' file first differs (a line number), for the failure message."""
    la, lb = (p.read_text().splitlines() if p.exists() else [] for p in (a / name, b / name))
    for i, (x, y) in enumerate(zip(la, lb)):
        if x != y:
            return f"{name} line {i + 1}: {x[:120]!r} vs {y[:120]!r}"
    return f"{name}: {len(la)} vs {len(lb)} lines"
