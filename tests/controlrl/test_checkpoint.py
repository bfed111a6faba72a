"""Atomic save, weights-only load, clear errors for missing or corrupt files."""

import os
import pickle

import pytest
import torch

from controlrl import checkpoint, rundir


def test_round_trip_and_no_temp_files(tmp_path):
    path = tmp_path / "ck" / "latest.pt"
    state = {"step": 5, "w": torch.arange(3.0), "nested": {"a": [1, 2]}}
    checkpoint.save(path, state)
    checkpoint.save(path, {**state, "step": 6})
    loaded = checkpoint.load(path, required=("step", "w"))
    assert loaded["step"] == 6 and torch.equal(loaded["w"], state["w"])
    assert os.listdir(path.parent) == ["latest.pt"]


def test_missing_corrupt_and_foreign_files(tmp_path):
    with pytest.raises(checkpoint.CheckpointError, match="not found"):
        checkpoint.load(tmp_path / "nope.pt")
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"\x00garbage" * 10)
    with pytest.raises(checkpoint.CheckpointError, match="corrupt"):
        checkpoint.load(bad)
    good = tmp_path / "good.pt"
    checkpoint.save(good, {"step": 1})
    truncated = tmp_path / "trunc.pt"
    truncated.write_bytes(good.read_bytes()[:40])
    with pytest.raises(checkpoint.CheckpointError, match="corrupt"):
        checkpoint.load(truncated)
    with pytest.raises(checkpoint.CheckpointError, match="lacks keys: policy"):
        checkpoint.load(good, required=("step", "policy"))


class Evil:
    def __reduce__(self):
        return (os.system, ("echo pwned",))


def test_never_unpickles_arbitrary_objects(tmp_path):
    path = tmp_path / "evil.pt"
    with path.open("wb") as f:
        pickle.dump({"x": Evil()}, f)
    with pytest.raises(checkpoint.CheckpointError):
        checkpoint.load(path)


def test_failed_save_leaves_previous_checkpoint(tmp_path):
    path = tmp_path / "latest.pt"
    checkpoint.save(path, {"step": 1})

    class Unsaveable:
        def __reduce__(self):
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        checkpoint.save(path, {"step": 2, "x": Unsaveable()})
    assert checkpoint.load(path)["step"] == 1
    assert os.listdir(tmp_path) == ["latest.pt"]


@pytest.mark.parametrize(
    "message",
    [
        "[enforce fail at inline_container.cc:672] . unexpected pos 704 vs 598",
        "PytorchStreamWriter failed writing file data/0: file write failed",
    ],
)
def test_a_full_disk_inside_torch_save_is_a_one_line_disk_fault(tmp_path, monkeypatch, capsys,
                                                                message):  # fmt: skip
    """torch.save's writer reports a failed write (a full disk) as RuntimeError: the save raises
    OSError instead, which a run reports in one line (exit 1), the last checkpoint kept."""
    path = tmp_path / "latest.pt"
    checkpoint.save(path, {"step": 1})

    def full_disk(state, f):
        f.write(b"PK")
        raise RuntimeError(message)

    monkeypatch.setattr(checkpoint.torch, "save", full_disk)
    with pytest.raises(SystemExit) as exc:
        with rundir.on_disk_fault(tmp_path):
            checkpoint.save(path, {"step": 2})
    assert exc.value.code == 1
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "writing the checkpoint failed" in err, err
    assert message.splitlines()[0] in err and "Traceback" not in err
    monkeypatch.undo()
    assert checkpoint.load(path)["step"] == 1 and os.listdir(tmp_path) == ["latest.pt"]
