"""The dataset generator under faults: killed, its behaviour run (PPO, a child process) dies
with it; a second generator on the same behaviour run is refused naming the first; a rerun
after a kill between the two outputs writes the missing Minari copy; temporaries of a killed
writer are removed and never make minari.list_local_datasets() raise."""

import fcntl
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("h5py")

from timeouts import scaled

from envs.offline import load  # noqa: E402
from envs.offline.generate import PARTIAL, generate  # noqa: E402
from envs.offline.store import minari_path  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
NAME = "pendulum-random-v1-s0-n300"


def small_random(out: Path) -> Path:
    return generate("Pendulum-v1", "random", out, steps=300, num_envs=2, progress=False)


def test_a_missing_minari_copy_is_written_by_the_rerun_and_temporaries_do_not_break_minari(
    tmp_path, monkeypatch
):
    minari = pytest.importorskip("minari")
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "minari"))
    path = small_random(tmp_path)
    copy = minari_path(tmp_path, NAME)
    first = load(copy)
    # killed after the HDF5 rename, in the Minari write: no copy, a half-built directory where
    # the earlier generator built it (inside Minari's root), another in .partial
    import shutil

    shutil.rmtree(copy)
    stale = copy.parent / f"{copy.name}.k2j3h4.tmp"
    (stale / "data").mkdir(parents=True)
    (tmp_path / PARTIAL / f"{copy.name}.x9y8z7.tmp" / "data").mkdir(parents=True)
    hdf5_tmp = tmp_path / f"{NAME}.hdf5.a1b2c3.tmp"
    hdf5_tmp.write_bytes(b"half")
    with pytest.raises(ValueError, match="Malformed"):  # what a leftover temporary did
        minari.list_local_datasets()
    mtime = path.stat().st_mtime_ns
    assert small_random(tmp_path) == path
    assert path.stat().st_mtime_ns == mtime  # the HDF5 was kept, not generated again
    again = load(copy)
    for key in ("observations", "actions", "rewards", "next_observations", "timeouts"):
        assert np.array_equal(getattr(again, key), getattr(first, key)), key
    assert not stale.exists() and not hdf5_tmp.exists()
    assert not list((tmp_path / PARTIAL).glob("*.tmp"))
    assert f"controlrl/{NAME}-v0" in minari.list_local_datasets()


def test_a_minari_copy_being_written_is_outside_minaris_root(tmp_path, monkeypatch):
    """A kill mid-write leaves the half-built copy where it is: minari must not see it."""
    minari = pytest.importorskip("minari")
    collector = pytest.importorskip("minari.data_collector")
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "minari"))
    seen = []
    real = collector.EpisodeBuffer

    def episode(**columns):  # an episode being written: what minari lists meanwhile
        seen.append(sorted(minari.list_local_datasets()))
        return real(**columns)

    monkeypatch.setattr(collector, "EpisodeBuffer", episode)
    small_random(tmp_path)
    assert seen and all(listed == [] for listed in seen)
    assert f"controlrl/{NAME}-v0" in minari.list_local_datasets()


def live(pid: int) -> bool:
    """pid runs (a zombie nobody reaped yet counts as dead)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


def holder_pid(lock: Path) -> int | None:
    try:
        text = lock.read_text().strip()
    except FileNotFoundError:
        return None
    return int(text) if text.isdigit() else None


@pytest.mark.slow  # two generator processes and a PPO process start
@pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="procfs and PR_SET_PDEATHSIG are Linux"
)
def test_a_killed_generator_leaves_no_behaviour_run_and_a_second_one_is_refused(tmp_path):
    cmd = [sys.executable, "-m", "envs.offline", "generate", "--env", "Pendulum-v1",
           "--kind", "expert", "--steps", "100", "--ppo-budget", "1000000", "--no-minari",
           "--no-progress", "--score-episodes", "1", "--out", str(tmp_path)]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    gen = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL)
    run_lock = tmp_path / "behaviour" / "Pendulum-v1-s0-b1000000" / "ppo" / "run.lock"
    try:
        deadline = time.monotonic() + scaled(120)
        ppo = None
        while ppo is None and time.monotonic() < deadline and gen.poll() is None:
            pid = holder_pid(run_lock)  # PPO writes its pid once it holds its run dir
            ppo = pid if pid and live(pid) else None
            time.sleep(0.1)
        assert ppo is not None and ppo != gen.pid, "the behaviour run never started"
        # another kind of the same behaviour run: only the behaviour run's lock stops it
        other = [*cmd[: cmd.index("expert")], "medium", *cmd[cmd.index("expert") + 1 :]]
        second = subprocess.run(other, cwd=REPO, env=env, capture_output=True, text=True,
                                timeout=scaled(120))  # fmt: skip
        assert second.returncode == 1 and "Traceback" not in second.stderr
        lines = second.stderr.strip().splitlines()
        assert len(lines) == 1 and f"pid {gen.pid}" in lines[0], second.stderr
        assert "Pendulum-v1-s0-b1000000" in lines[0]
        assert live(ppo)  # the refused one touched nothing
    finally:
        gen.send_signal(signal.SIGKILL)
        gen.wait()
    deadline = time.monotonic() + scaled(30)
    while live(ppo) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not live(ppo), "the behaviour run outlived its generator"
    fd = os.open(run_lock, os.O_RDWR)
    try:  # and its run directory is free
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            inode = f":{os.fstat(fd).st_ino} "
            held = [ln for ln in Path("/proc/locks").read_text().splitlines() if inode in ln]
            raise AssertionError(f"the behaviour run's directory is still locked: {held}") from None
    finally:
        os.close(fd)
