"""Atomic checkpoint save and safe (weights-only) load; a run checkpoint's identity (the
algorithm that wrote it) and counters checked before it is resumed."""

from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path

import torch

# what torch.save's zip writer (caffe2 inline_container) raises, as RuntimeError, when a write
# into the file fails: "PytorchStreamWriter failed writing file data/0: file write failed",
# "[enforce fail at inline_container.cc:...] . unexpected pos 704 vs 598"
WRITER_FAILURES = ("PytorchStreamWriter", "inline_container")


class CheckpointError(Exception):
    """A checkpoint is missing, unreadable or not ours."""


def save(path: str | Path, state: dict) -> None:
    """Write state to path atomically: temp file in the same dir, fsync, rename. A failed write
    (a full disk) raises OSError, what rundir.on_disk_fault reports in one line."""
    commit(write_temp(path, state), path)


def write_temp(path: str | Path, state: dict) -> Path:
    """state serialised into a temp file beside path (not yet synced nor renamed); the state's
    tensors may change as soon as this returns."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            try:
                torch.save(state, f)
            except RuntimeError as exc:
                if not any(w in str(exc) for w in WRITER_FAILURES):
                    raise
                # torch's zip writer on a failed write (a full disk): a disk fault
                lines = str(exc).strip().splitlines()
                raise OSError(
                    errno.EIO, f"writing the checkpoint failed ({lines[0][:160]})", str(path)
                ) from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return Path(tmp)


def commit(tmp: str | Path, path: str | Path) -> None:
    """fsync the temp file of write_temp and rename it over path (the atomic step)."""
    try:
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load(path: str | Path, required: tuple[str, ...] = ()) -> dict:
    """Load a checkpoint with weights_only=True; CheckpointError names the file and the problem."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint not found: {path}")
    if path.stat().st_size == 0:
        raise CheckpointError(f"checkpoint {path} is empty (0 bytes): not a controlrl checkpoint")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises many types for truncated or foreign files
        lines = str(exc).strip().splitlines()  # some carry no message at all
        detail = f"{type(exc).__name__}: {lines[0][:120]}" if lines else type(exc).__name__
        raise CheckpointError(
            f"checkpoint {path} is corrupt, truncated or not a controlrl checkpoint ({detail})"
        ) from None
    if not isinstance(state, dict):
        raise CheckpointError(f"checkpoint {path} does not hold a dict")
    missing = [k for k in required if k not in state]
    if missing:
        raise CheckpointError(f"checkpoint {path} lacks keys: {', '.join(missing)}")
    return state


def check_run_state(state: dict, path: str | Path, algo: str) -> None:
    """A run checkpoint (controlrl.session's) that `algo` may resume: its 'algo' is algo (a
    checkpoint written before the name was stored carries none: config.json's check stands
    alone), its 'step' and 'iteration' integers >= 0. CheckpointError naming the key."""
    saved = state.get("algo")
    if saved is not None and saved != algo:
        raise CheckpointError(
            f"checkpoint {path} [algo]: written by {str(saved)[:40]!r}, not {algo!r} (a "
            "checkpoint resumes only the algorithm that wrote it)"
        )
    for key in ("step", "iteration"):
        if key not in state:
            continue
        value = state[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise CheckpointError(
                f"checkpoint {path} [{key}] is {repr(value)[:40]}, expected an integer >= 0"
            )
