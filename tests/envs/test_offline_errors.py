"""Bad dataset files: each one raises DatasetError naming the file and the key, the CLI prints
one line and exits 2, and nothing in a file is ever unpickled."""

import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

h5py = pytest.importorskip("h5py")

from envs.offline import (  # noqa: E402
    DatasetError,
    load,
    read_hdf5,
    read_minari,
    write_hdf5,
    write_minari,
)

REPO = Path(__file__).resolve().parents[2]
M = 10


def good_arrays() -> dict:
    rng = np.random.default_rng(0)
    timeouts = np.zeros(M, bool)
    timeouts[-1] = True
    return {
        "observations": rng.normal(size=(M, 4)).astype(np.float32),
        "actions": rng.normal(size=(M, 2)).astype(np.float32),
        "rewards": rng.normal(size=M).astype(np.float32),
        "terminals": np.zeros(M, bool),
        "timeouts": timeouts,
    }


def write(path: Path, arrays: dict) -> Path:
    with h5py.File(path, "w") as f:
        for key, value in arrays.items():
            if isinstance(value, str) and value == "group":
                f.create_group(key)
            else:
                f.create_dataset(key, data=value)
    return path


PICKLE_RAN = []


def record(event: str) -> None:
    PICKLE_RAN.append(event)


class Payload:
    """Unpickling this records it: any reader that unpickles would leave a trace."""

    def __reduce__(self):
        return (record, ("unpickled",))


def vlen_rows(blob: bytes) -> np.ndarray:
    """M rows, each the bytes of blob as a uint8 array: an h5py object (vlen) dataset."""
    rows = np.empty(M, dtype=object)
    for i in range(M):
        rows[i] = np.frombuffer(blob, np.uint8)
    return rows


def bad_cases() -> dict:
    pickled = np.frombuffer(pickle.dumps(Payload()), np.uint8)
    cases = {
        "missing key": ({"drop": "timeouts"}, "timeouts", "missing"),
        "wrong shape": ({"observations": np.zeros(M, np.float32)}, "observations", "2 dims"),
        "rows differ": ({"actions": np.zeros((M - 1, 2), np.float32)}, "actions", "9 rows"),
        "string dtype": ({"rewards": np.array(["1.0"] * M, "S3")}, "rewards", "dtype"),
        "object (vlen bytes) dtype": (
            {"rewards": (vlen_rows(pickled.tobytes()), h5py.vlen_dtype(np.uint8))},
            "rewards",
            "refused",
        ),
        "opaque pickled blob": (
            {"actions": np.array([np.void(pickled.tobytes())] * M)},
            "actions",
            "refused",
        ),
        "group for an array": ({"terminals": "group"}, "terminals", "is a group"),
        "flags not 0/1": ({"terminals": np.full(M, 2, np.int8)}, "terminals", "0/1"),
        "NaN": ({"rewards": np.full(M, np.nan, np.float32)}, "rewards", "NaN"),
        "next_observations shape": (
            {"next_observations": np.zeros((M, 3), np.float32)},
            "next_observations",
            "shape",
        ),
    }
    return cases


def make_case(tmp_path: Path, change: dict) -> Path:
    """A good file with one change: {"drop": key}, {key: array}, {key: (array, h5py dtype)}
    or {key: "group"}."""
    arrays = good_arrays()
    for key, value in change.items():
        if key == "drop":
            del arrays[value]
        else:
            arrays[key] = value
    path = tmp_path / "bad.hdf5"
    with h5py.File(path, "w") as f:
        for key, value in arrays.items():
            if isinstance(value, str):
                f.create_group(key)
            elif isinstance(value, tuple):
                f.create_dataset(key, data=value[0], dtype=value[1])
            else:
                f.create_dataset(key, data=value)
    return path


@pytest.mark.parametrize("case", list(bad_cases()))
def test_bad_hdf5_names_file_and_key(tmp_path, case):
    change, key, words = bad_cases()[case]
    path = make_case(tmp_path, change)
    with pytest.raises(DatasetError, match=words) as info:
        load(path)
    assert info.value.key == key
    assert str(path) in str(info.value) and f"[{key}]" in str(info.value)
    assert not PICKLE_RAN


def test_pickled_arrays_are_refused_not_loaded(tmp_path):
    """The pickle of an object whose unpickling leaves a trace, stored as h5py object (vlen)
    and opaque data: both refused by dtype before a byte is read; nothing unpickled."""
    blob = pickle.dumps(Payload())
    assert pickle.loads(blob) is None and PICKLE_RAN == ["unpickled"]  # the probe works
    PICKLE_RAN.clear()
    ascii_blob = pickle.dumps(Payload(), protocol=0)  # no NUL bytes: storable as a string
    for key, data, dtype in [
        ("rewards", vlen_rows(blob), h5py.vlen_dtype(np.uint8)),
        ("rewards", np.array([np.void(blob)] * M), None),
        ("observations", np.array([ascii_blob] * M, dtype=object), h5py.string_dtype("ascii")),
    ]:  # fmt: skip
        arrays = good_arrays()
        path = tmp_path / "pickled.hdf5"
        with h5py.File(path, "w") as f:
            for k, v in arrays.items():
                if k != key:
                    f.create_dataset(k, data=v)
            f.create_dataset(key, data=data, dtype=dtype)
        with pytest.raises(DatasetError, match="refused") as info:
            load(path)
        assert info.value.key == key
    assert PICKLE_RAN == []


def test_truncated_and_foreign_files(tmp_path):
    good = write(tmp_path / "good.hdf5", good_arrays())
    data = good.read_bytes()
    cut = tmp_path / "cut.hdf5"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(DatasetError, match="truncated or corrupt") as info:
        load(cut)
    assert str(cut) in str(info.value)
    text = tmp_path / "notes.hdf5"
    text.write_text("not hdf5\n")
    with pytest.raises(DatasetError, match="not a readable HDF5 file"):
        load(text)
    empty = tmp_path / "empty.hdf5"
    empty.write_bytes(b"")
    with pytest.raises(DatasetError, match="not a readable HDF5 file"):
        load(empty)


def test_directory_where_a_file_is_expected_and_vice_versa(tmp_path):
    (tmp_path / "d4rl.hdf5").mkdir()
    with pytest.raises(DatasetError, match="is a directory, expected a D4RL-layout HDF5 file"):
        load(tmp_path / "d4rl.hdf5")
    (tmp_path / "plain_dir").mkdir()
    with pytest.raises(DatasetError, match="data/metadata.json.*missing"):
        load(tmp_path / "plain_dir")
    with pytest.raises(DatasetError, match="no such file"):
        load(tmp_path / "absent.hdf5")
    # the readers themselves, called with the wrong kind of path
    with pytest.raises(DatasetError, match="is a directory, expected a D4RL-layout HDF5 file"):
        read_hdf5(tmp_path / "plain_dir")
    good = write(tmp_path / "good.hdf5", good_arrays())
    with pytest.raises(DatasetError, match="is not a directory") as info:
        read_minari(good)
    assert info.value.path == str(good)


@pytest.fixture
def minari_dir(tmp_path):
    pytest.importorskip("minari")
    from envs.offline import Dataset

    arrays = good_arrays()
    nxt = np.roll(arrays["observations"], -1, axis=0)
    data = Dataset(**arrays, next_observations=nxt, env_id="Hopper-v5")
    return write_minari(data, tmp_path / "ds")


def test_minari_directory_errors(minari_dir):
    main = minari_dir / "data" / "main_data.hdf5"
    with h5py.File(main, "a") as f:  # a string array where rewards belong
        del f["episode_0/rewards"]
        f.create_dataset("episode_0/rewards", data=np.array(["x"] * M, dtype=object),
                         dtype=h5py.string_dtype())  # fmt: skip
    with pytest.raises(DatasetError, match="refused") as info:
        load(minari_dir)
    assert info.value.key == "episode_0/rewards" and str(main) in str(info.value)
    with h5py.File(main, "a") as f:
        del f["episode_0/rewards"], f["episode_0/terminations"]
        f.create_dataset("episode_0/rewards", data=np.zeros(M, np.float32))
    with pytest.raises(DatasetError, match="missing") as info:
        load(minari_dir)
    assert info.value.key == "episode_0/terminations"


def test_minari_file_where_a_directory_is_expected(minari_dir):
    main = minari_dir / "data" / "main_data.hdf5"
    main.unlink()
    main.mkdir()
    with pytest.raises(DatasetError, match="is a directory, expected an HDF5 file"):
        load(minari_dir)
    meta = minari_dir / "data" / "metadata.json"
    meta.write_text("{not json")
    with pytest.raises(DatasetError, match="not valid JSON") as info:
        load(minari_dir)
    assert str(meta) in str(info.value)


def test_cli_prints_one_line_and_exits_2(tmp_path):
    path = make_case(tmp_path, {"drop": "rewards"})
    proc = subprocess.run(
        [sys.executable, "-m", "envs.offline", "info", str(path)],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and str(path) in lines[0] and "[rewards]" in lines[0], proc.stderr
    assert proc.stdout == ""


def test_writer_then_reader_accepts_its_own_file(tmp_path):
    """The good case the bad ones differ from: it loads."""
    from envs.offline import Dataset

    arrays = good_arrays()
    data = Dataset(**arrays, next_observations=arrays["observations"].copy(), env_id="x-v0")
    assert len(load(write_hdf5(data, tmp_path / "ok.hdf5"))) == M
    assert len(load(write(tmp_path / "ok_raw.hdf5", good_arrays()))) == M - 1  # timeout dropped


@pytest.mark.parametrize(
    "env_id, obs_dim, act_dim, status",
    [
        ("Pendulum-v1", 4, 2, 2),  # Pendulum: 3 x 1
        ("Pendulum-v1", 3, 2, 2),
        ("CartPole-v1", 4, 2, 2),  # Discrete: one index a row
        ("Pendulum-v1", 3, 1, 0),
        ("CartPole-v1", 4, 1, 0),
        ("x-v0", 4, 2, 0),  # an env this install cannot make: not checked
    ],
)
def test_info_refuses_a_file_that_does_not_fit_its_env(tmp_path, capsys, env_id, obs_dim,
                                                       act_dim, status):  # fmt: skip
    """info exits 2 in one line for a file whose observation or action dimension is not its
    env's (the training scripts refuse it; info said nothing and exited 0)."""
    from envs.offline import Dataset
    from envs.offline.__main__ import main

    arrays = good_arrays()
    arrays["observations"] = arrays["observations"][:, :obs_dim].copy()
    arrays["actions"] = np.zeros((M, act_dim), np.float32)
    data = Dataset(**arrays, next_observations=arrays["observations"].copy(), env_id=env_id)
    path = write_hdf5(data, tmp_path / "d.hdf5")
    assert main(["info", str(path)]) == status
    out = capsys.readouterr()
    if status:
        lines = out.err.strip().splitlines()
        assert len(lines) == 1 and str(path) in lines[0], out.err
        assert f"{obs_dim},) x ({act_dim},) do not fit its env {env_id}" in lines[0], out.err
        assert out.out == ""
    else:
        assert f"obs / action dim  {obs_dim} / {act_dim}" in out.out
