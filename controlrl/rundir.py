"""What a run directory guarantees, whatever writes into it: one process at a time (an
exclusive lock held for the life of the run, the holder's pid in the lock file), files written
whole (temp file, fsync, rename), stale temporaries of a killed writer removed, and a disk fault
(full, read-only, no permission) reported in one line with what is on disk left as it was.

The lock is fcntl.flock on <run_dir>/run.lock: the kernel drops it when its holder dies, so the
lock of a killed run is taken over by the next one without any clean-up.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

LOCK_NAME = "run.lock"
_HELD: dict[str, int] = {}  # lock file (real path) -> fd, the locks this process holds
# lock file (real path) -> (run directory, the outermost directory lock() made for it), for the
# run directories this process made: discard_unused removes those still holding no run
_MADE: dict[str, tuple[Path, Path]] = {}


class RunDirBusy(Exception):
    """Another live process holds the run directory's lock."""


def take_flock(path: str | Path, payload: bytes | None = None, wait_s: float = 0.0) -> int | None:
    """Open `path` (created) and take its exclusive flock, waiting up to wait_s for a holder
    to let go; then write payload into it (when given). The fd, which holds the lock until it is
    closed, or None when another live process holds it. The one lock primitive of run
    directories and sweep directories."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    deadline = time.monotonic() + wait_s
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    os.close(fd)
                    return None
                time.sleep(0.1)
        if payload is not None:
            os.ftruncate(fd, 0)
            os.pwrite(fd, payload, 0)
    except BaseException:
        os.close(fd)
        raise
    return fd


def flock_holder(path: str | Path) -> str | None:
    """The text of lock file `path` while a live process holds its lock ('' if unreadable),
    None when nobody holds it; takes nothing."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        try:
            return os.pread(fd, 4096, 0).decode("utf-8", "replace")
        except OSError:
            return ""
    finally:
        os.close(fd)  # also drops a shared lock taken above
    return None


def _pid(text: str | None) -> str:
    """The pid a run lock file holds, or '?' when it cannot be read yet."""
    text = (text or "").strip()
    return text if text.isdigit() else "?"


def lock(run_dir: str | Path) -> None:
    """Take the exclusive lock of run_dir (created if needed) for this process, writing its pid
    into the lock file; RunDirBusy names the holder's pid. A lock this process already holds on
    the directory (a run of it that never finished) is taken over."""
    run_dir = Path(run_dir)
    made = None  # the outermost directory made here (run_dir or one of its parents)
    for directory in (run_dir.absolute(), *run_dir.absolute().parents):
        if directory.exists():
            break
        made = directory
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / LOCK_NAME
    key = os.path.realpath(path)
    if key in _HELD:
        os.close(_HELD.pop(key))
    fd = take_flock(path, f"{os.getpid()}\n".encode())
    if fd is None:
        raise RunDirBusy(
            f"{run_dir} is in use by another run (pid {_pid(flock_holder(path))}); wait for it "
            "to end or choose another directory"
        )
    _HELD[key] = fd
    if made is not None:
        _MADE[key] = (run_dir.absolute(), made)


def discard_unused() -> list[Path]:
    """Remove the run directories this process made that hold nothing but their lock file (a
    command refused after its directory was made leaves none behind), with the parents made for
    them; returns what was removed. Called on every one-line refusal (controlrl.cli.fail)."""
    removed = []
    for key, (run_dir, made) in list(_MADE.items()):
        del _MADE[key]
        try:
            if key not in _HELD or {p.name for p in run_dir.iterdir()} != {LOCK_NAME}:
                continue
            (run_dir / LOCK_NAME).unlink()
        except OSError:
            continue
        unlock(run_dir)
        directory = run_dir
        while True:
            try:
                directory.rmdir()  # only an empty one
            except OSError:
                break
            removed.append(directory)
            if directory == made:
                break
            directory = directory.parent
    return removed


def holder(run_dir: str | Path) -> str | None:
    """The pid of the live process holding run_dir's lock ('?' if unreadable), None when no
    process holds it; takes nothing."""
    text = flock_holder(Path(run_dir) / LOCK_NAME)
    return None if text is None else _pid(text)


def unlock(run_dir: str | Path) -> None:
    """Release this process's lock of run_dir (no-op when it holds none)."""
    fd = _HELD.pop(os.path.realpath(Path(run_dir) / LOCK_NAME), None)
    if fd is not None:
        os.close(fd)


def holds_lock(run_dir: str | Path) -> bool:
    """Whether this process holds run_dir's lock."""
    return os.path.realpath(Path(run_dir) / LOCK_NAME) in _HELD


def write_text_atomic(path: str | Path, text: str) -> None:
    """Write text to path whole or not at all: a temp file beside it, fsync, rename."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# what the atomic writers of a run leave behind when killed mid-write: <name>.<random>.tmp
STALE_PATTERNS = ("*.tmp", "checkpoints/*.tmp")


def remove_stale_temporaries(run_dir: str | Path) -> list[Path]:
    """Delete the temp files killed writers left in run_dir (call it holding the lock: a live
    writer's temp file would go too); returns what was removed."""
    removed = []
    for pattern in STALE_PATTERNS:
        for path in Path(run_dir).glob(pattern):
            if path.is_file() and path.name.count(".") >= 2:
                path.unlink(missing_ok=True)
                removed.append(path)
    return removed


def disk_fault(exc: OSError, run_dir: str | Path) -> str:
    """One line for a failed write into run_dir: what failed and why."""
    what = exc.strerror or type(exc).__name__
    where = f" ({exc.filename})" if exc.filename else ""
    return (
        f"cannot write to {run_dir}: {what}{where}; the last good checkpoint stays there "
        "(free space or make it writable, then --resume it)"
    )


@contextlib.contextmanager
def on_disk_fault(run_dir: str | Path, cleanup=None) -> Iterator[None]:
    """Turn an OSError raised by the block (a write into run_dir) into one line on stderr and
    exit status 1; cleanup() runs first (closing files whose buffers could not be flushed)."""
    try:
        yield
    except OSError as exc:
        if cleanup is not None:
            with contextlib.suppress(Exception):
                cleanup()
        print(f"error: {disk_fault(exc, run_dir)}", file=sys.stderr)
        raise SystemExit(1) from None
