"""Crafted dataset files: each is refused in one line naming the file and the key, from its
metadata alone (nothing read of a file whose shapes disagree), without following a link out of
the file (an external link to a FIFO would block the reader) and without showing an opaque
attribute's bytes."""

import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from timeouts import scaled

h5py = pytest.importorskip("h5py")

from envs.offline import DatasetError, load, write_minari  # noqa: E402
from envs.offline.dataset import Dataset  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
M = 10


def arrays(m: int = M) -> dict:
    rng = np.random.default_rng(0)
    timeouts = np.zeros(m, bool)
    timeouts[-1] = True
    return {
        "observations": rng.normal(size=(m, 4)).astype(np.float32),
        "actions": rng.normal(size=(m, 2)).astype(np.float32),
        "rewards": rng.normal(size=m).astype(np.float32),
        "terminals": np.zeros(m, bool),
        "timeouts": timeouts,
    }


def write(path: Path, data: dict, attrs: dict | None = None) -> Path:
    with h5py.File(path, "w") as f:
        for key, value in data.items():
            f.create_dataset(key, data=value)
        for key, value in (attrs or {}).items():
            f.attrs[key] = value
    return path


@pytest.fixture
def reads(monkeypatch) -> list:
    """Every h5py dataset read the loader makes, by name."""
    seen: list = []
    real = h5py.Dataset.__getitem__

    def spy(self, key):
        seen.append(self.name)
        return real(self, key)

    monkeypatch.setattr(h5py.Dataset, "__getitem__", spy)
    return seen


@pytest.fixture
def fifo(tmp_path) -> Path:
    """A FIFO nobody writes: a reader that opened it would block for ever, so the tests that
    link to it load in a child process with a timeout (see load_in_child)."""
    path = tmp_path / "fifo"
    os.mkfifo(path)
    return path


LOAD = """
import sys
from envs.offline import DatasetError, load
try:
    data = load(sys.argv[1])
except DatasetError as exc:
    print("refused", exc.key, "|", exc)
else:
    print("loaded", sorted(data.metadata))
"""


def load_in_child(path: Path) -> str:
    """What load(path) does, run in a child process that a blocked read cannot outlive: a
    TimeoutExpired here is a reader that followed a link into the FIFO."""
    out = subprocess.run(
        [sys.executable, "-c", LOAD, str(path)],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=scaled(60),
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.strip()


def refused(path, key: str, words: str) -> DatasetError:
    with pytest.raises(DatasetError) as info:
        load(path)
    err = info.value
    assert err.key == key and str(path) in str(err) and words in str(err), str(err)
    assert len(str(err).splitlines()) == 1
    return err


def test_declared_rows_that_disagree_are_refused_before_anything_is_read(tmp_path, reads):
    path = tmp_path / "huge.hdf5"
    data = arrays(2000)
    with h5py.File(path, "w") as f:
        # 25M rows declared, none written: a chunked dataset is allocated lazily (a small file)
        f.create_dataset("observations", shape=(25_000_000, 11), maxshape=(None, 11),
                         dtype=np.float32, chunks=(1024, 11))  # fmt: skip
        for key in ("actions", "rewards", "terminals", "timeouts"):
            f.create_dataset(key, data=data[key])
    assert path.stat().st_size < 1_000_000
    refused(path, "actions", "has 2000 rows, observations has 25000000")
    assert reads == []


def test_declared_arrays_larger_than_memory_are_refused_before_anything_is_read(tmp_path, reads):
    path = tmp_path / "vast.hdf5"
    rows = 10**9
    with h5py.File(path, "w") as f:
        for key, shape in {"observations": (rows, 10**4), "actions": (rows, 2)}.items():
            f.create_dataset(key, shape=shape, dtype=np.float32, chunks=(64, 2))
        for key in ("rewards", "terminals", "timeouts"):
            f.create_dataset(key, shape=(rows,), dtype=np.float32, chunks=(64,))
    refused(path, "observations", "memory")
    assert reads == []


def cli_info(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "envs.offline", "info", str(path)],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=scaled(120),  # a reader that followed the link into the FIFO would block here
    )


def test_an_external_link_to_a_fifo_is_refused_without_opening_it(tmp_path, fifo):
    path = tmp_path / "linked.hdf5"
    data = arrays()
    with h5py.File(path, "w") as f:
        for key in ("actions", "rewards", "terminals", "timeouts"):
            f.create_dataset(key, data=data[key])
        f["observations"] = h5py.ExternalLink(str(fifo), "/observations")
    out = cli_info(path)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "[observations]" in lines[0] and "external link" in lines[0]
    assert str(path) in lines[0]


def test_links_out_of_metadata_and_soft_links_are_refused_or_skipped(tmp_path, fifo):
    path = write(tmp_path / "meta.hdf5", arrays())
    with h5py.File(path, "a") as f:  # D4RL's metadata/: a link there is skipped, not followed
        f.create_group("metadata")
        f["metadata/algorithm"] = h5py.ExternalLink(str(fifo), "/x")
        f["metadata/policy"] = np.bytes_("sac")
    assert "'d4rl/policy'" in load_in_child(path)
    with h5py.File(path, "a") as f:
        del f["metadata/algorithm"]
        f["real_rewards"] = f["rewards"][()]
        del f["rewards"]
        f["rewards"] = h5py.SoftLink("/real_rewards")
    refused(path, "rewards", "soft link")


def test_a_virtual_dataset_is_refused(tmp_path):
    source = write(tmp_path / "source.hdf5", {"obs": arrays()["observations"]})
    path = tmp_path / "virtual.hdf5"
    data = arrays()
    layout = h5py.VirtualLayout(shape=(M, 4), dtype=np.float32)
    layout[:] = h5py.VirtualSource(str(source), "obs", shape=(M, 4))
    with h5py.File(path, "w") as f:
        f.create_virtual_dataset("observations", layout)
        for key in ("actions", "rewards", "terminals", "timeouts"):
            f.create_dataset(key, data=data[key])
    refused(path, "observations", "virtual dataset")


def test_a_file_of_timeouts_only_has_no_usable_transition(tmp_path):
    data = arrays()
    data["timeouts"][:] = True  # no next_observations: every row's successor is missing
    path = write(tmp_path / "timeouts.hdf5", data, {"env_id": "Pendulum-v1"})
    refused(path, "timeouts", "no usable transition")
    out = cli_info(path)  # was an IndexError in np.add.reduceat
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and "no usable transition" in out.stderr


PICKLE_RAN: list = []


def record(event: str) -> None:
    PICKLE_RAN.append(event)


class Payload:
    def __reduce__(self):
        return (record, ("unpickled",))


@pytest.mark.parametrize(
    "name, value",
    [
        ("env_id", np.void(pickle.dumps(Payload()))),  # opaque: the bytes of a pickle
        ("env_id", np.bytes_(pickle.dumps(Payload(), protocol=0))),  # text, lines of it
        ("env_id", np.bytes_(bytes(b for b in pickle.dumps(Payload()) if b))),  # not UTF-8
        ("env_id", np.array([1, 2], np.int64)),
        ("ref_max_score", "high"),
        ("ref_min_score", np.void(b"\x00\x01")),
    ],
    ids=["opaque pickle", "protocol-0 pickle", "not utf-8", "an array", "text score", "opaque"],
)
def test_an_opaque_or_mistyped_attribute_is_named_invalid_without_its_bytes(tmp_path, name, value):
    path = write(tmp_path / "attr.hdf5", arrays(), {name: value})
    err = refused(path, name, "attribute is invalid")
    assert "\\x" not in str(err) and "b'" not in str(err)
    assert PICKLE_RAN == []


def test_other_opaque_attributes_are_ignored_and_good_ones_kept(tmp_path):
    attrs = {"env_id": "Pendulum-v1", "blob": np.void(pickle.dumps(Payload())), "note": "ok"}
    data = load(write(tmp_path / "ok.hdf5", arrays(), attrs))
    assert data.env_id == "Pendulum-v1" and data.metadata["note"] == "ok"
    assert "blob" not in data.metadata and PICKLE_RAN == []


def test_a_minari_file_linking_out_is_refused(tmp_path, fifo):
    pytest.importorskip("minari")
    data = arrays()
    nxt = np.roll(data["observations"], -1, axis=0)
    ds = write_minari(Dataset(**data, next_observations=nxt, env_id="Hopper-v5"), tmp_path / "ds")
    main = ds / "data" / "main_data.hdf5"
    with h5py.File(main, "a") as f:
        f["episode_0/infos/extra"] = h5py.ExternalLink(str(fifo), "/x")
    out = load_in_child(ds)
    assert out.startswith("refused episode_0/infos/extra |") and "external link" in out, out
