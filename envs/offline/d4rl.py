"""D4RL-layout HDF5 files: read (validated, nothing unpickled), write, reference scores.

A D4RL file holds flat arrays, one row per step: observations [N, d], actions [N, a],
rewards [N], terminals [N], timeouts [N]; optionally next_observations [N, d], infos/* and
metadata/*. Rows of one episode are contiguous; an episode ends at a row whose terminal
(a true end: no bootstrap) or timeout (cut by the time limit: bootstrap) flag is set.

Without next_observations, s'[i] is observations[i + 1] inside an episode. The last row of a
timed-out episode has no successor in the file, so it is dropped, as d4rl.qlearning_dataset and
CORL do (Farama-Foundation/D4RL d4rl/__init__.py); so is a last file row that ends no episode.
A terminal row is kept (its reward and its end are real): its s' is not in the file either, and
since a terminal is never bootstrapped we store the row's own observation there. With
next_observations in the file, every row is kept as it is. infos/* (qpos, qvel, log-probs) are
not loaded; scalar metadata/* entries and root attributes go into Dataset.metadata.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path

import numpy as np

from envs.offline.dataset import Dataset
from envs.offline.errors import DatasetError, first_line

REQUIRED = ("observations", "actions", "rewards", "terminals", "timeouts")

# D4RL's published reference returns (normalised score 0 and 100), the same for every dataset of
# an env: Farama-Foundation/D4RL d4rl/infos.py, REF_MIN_SCORE / REF_MAX_SCORE (e.g.
# 'hopper-medium-v2'; the v1/v2 entries copy the '<env>-random-v0' ones).
D4RL_REF_SCORES = {
    "halfcheetah": (-280.178953, 12135.0),
    "hopper": (-20.272305, 3234.3),
    "walker2d": (1.629008, 4592.3),
    "ant": (-325.6, 3879.7),
}
# the Gymnasium env to evaluate on, and its observation size. D4RL's ant files have 111-dim
# observations (contact forces of gym's Ant-v2): they match no Gymnasium v5 env, so they load
# with env_id '' and are only usable with an env the user supplies.
D4RL_GYM_IDS = {
    "halfcheetah": ("HalfCheetah-v5", 17),
    "hopper": ("Hopper-v5", 11),
    "walker2d": ("Walker2d-v5", 17),
    "ant": ("Ant-v5", 105),
}
_D4RL_NAME = re.compile(r"^(halfcheetah|hopper|walker2d|ant)[-_]")


def d4rl_env_name(name: str) -> str | None:
    """'hopper' for 'hopper-medium-v2', 'hopper_medium-v2' or 'Hopper-v5'; None otherwise."""
    match = _D4RL_NAME.match(name.lower())
    return match.group(1) if match else None


def _h5py(path: Path):
    try:
        import h5py
    except ImportError:
        raise DatasetError(
            path, None, "reading HDF5 needs h5py: pip install -e '.[offline]' (or make setup)"
        ) from None
    return h5py


def open_hdf5(path: Path):
    """h5py.File(path, 'r'); DatasetError when h5py is missing or the file is not HDF5."""
    h5py = _h5py(path)
    try:
        return h5py.File(path, "r")
    except Exception as exc:
        raise DatasetError(
            path, None, f"not a readable HDF5 file (truncated or corrupt?): {first_line(exc)}"
        ) from None


def link_kind(group, name: str) -> str | None:
    """'hard', 'soft', 'external' or None (no such link) for group's member `name`, from the
    link alone: nothing it points to is opened (an external link to a FIFO would block)."""
    import h5py

    link = group.get(name, getlink=True)
    if link is None:
        return None
    if isinstance(link, h5py.ExternalLink):
        return "external"
    return "soft" if isinstance(link, h5py.SoftLink) else "hard"


def _refuse_link(kind: str, path: Path, key: str) -> None:
    if kind == "external":
        raise DatasetError(path, key, "is an external link to another file: refused (only data "
                           "stored in the file itself is read)")  # fmt: skip
    if kind == "soft":
        raise DatasetError(path, key, "is a soft link: refused (only plain datasets are read)")


def dataset_node(h5file, key: str, path: Path):
    """The h5py.Dataset at `key`, checked from metadata alone before any of it is read: every
    link on the way a plain (hard) link, no external or soft link, not a virtual dataset (its
    data would come from other files), a numeric or bool dtype (object, string, compound,
    opaque and reference data refused: h5py would hand back Python objects). DatasetError
    names the file and the key."""
    import h5py

    parts = key.split("/")
    node = h5file
    for i, part in enumerate(parts):
        where = "/".join(parts[: i + 1])
        if not isinstance(node, h5py.Group):
            raise DatasetError(path, where, "missing (its parent is not a group)")
        try:
            kind = link_kind(node, part)
            if kind is None:
                raise DatasetError(path, key, "missing")
            _refuse_link(kind, path, where)
            node = node[part]
        except DatasetError:
            raise
        except Exception as exc:  # a damaged object header: h5py raises KeyError, OSError, ...
            raise DatasetError(path, where, f"cannot be opened ({first_line(exc)})") from None
    if not isinstance(node, h5py.Dataset):
        raise DatasetError(path, key, "is a group, expected an array")
    if node.is_virtual:
        raise DatasetError(path, key, "is a virtual dataset (data mapped from other files): "
                           "refused")  # fmt: skip
    if node.dtype.kind not in "biuf":
        raise DatasetError(
            path,
            key,
            f"has dtype {node.dtype} (kind '{node.dtype.kind}'): only numeric and bool arrays "
            "are read; object, string and pickled data are refused",
        )
    return node


def read_node(node, key: str, path: Path) -> np.ndarray:
    """The whole array of a node dataset_node checked; DatasetError on a read failure."""
    try:
        return node[()]
    except Exception as exc:  # truncated or corrupt data blocks
        raise DatasetError(path, key, f"cannot be read ({first_line(exc)})") from None


def read_array(h5file, key: str, path: Path) -> np.ndarray:
    """The numeric or bool array at `key`, checked first as dataset_node does."""
    return read_node(dataset_node(h5file, key, path), key, path)


def memory_bytes() -> int:
    """This machine's physical memory in bytes (0 when unknown)."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, AttributeError):
        return 0


def check_fits(rows: int, columns: int, path: Path, key: str) -> None:
    """Refuse a dataset whose declared arrays (rows x columns values, read and then copied as
    float32) would not fit in this machine's memory, before any of it is read."""
    need, have = 2 * 4 * rows * columns, memory_bytes()
    if have and need > have:
        raise DatasetError(
            path,
            key,
            f"declares {rows} rows ({need / 2**30:.1f} GiB to load), more than this machine's "
            f"{have / 2**30:.1f} GiB of memory",
        )


def _declared(node, path: Path, key: str, ndim: int) -> tuple[int, ...]:
    """node's shape as the loader will use it ([N, 1] flags and rewards as [N]), checked to
    have ndim dims, from metadata alone."""
    shape = tuple(node.shape or ())
    if ndim == 1 and len(shape) == 2 and shape[1] == 1:
        shape = shape[:1]
    if len(shape) != ndim:
        raise DatasetError(path, key, f"must have {ndim} dims, got shape {tuple(node.shape)}")
    return shape


def _as_float32(arr: np.ndarray, path: Path, key: str, ndim: int) -> np.ndarray:
    if ndim == 1 and arr.ndim == 2 and arr.shape[1] == 1:  # [N, 1] rewards or flags
        arr = arr[:, 0]
    if arr.ndim != ndim:
        raise DatasetError(path, key, f"must have {ndim} dims, got shape {arr.shape}")
    out = arr.astype(np.float32)
    if not np.isfinite(out).all():
        raise DatasetError(path, key, "holds NaN or inf (or values beyond float32)")
    return out


def _as_flags(arr: np.ndarray, path: Path, key: str) -> np.ndarray:
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    if arr.ndim != 1:
        raise DatasetError(path, key, f"must have 1 dim, got shape {arr.shape}")
    if arr.dtype != np.bool_ and not np.isin(arr, (0, 1)).all():
        raise DatasetError(path, key, "must hold only 0/1 (or bool) values")
    return arr.astype(np.bool_)


def successors(
    observations: np.ndarray, terminals: np.ndarray, timeouts: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(next_observations, keep) for a file without next_observations (see the module doc):
    s'[i] = s[i + 1] inside an episode, a terminal row's own s at a terminal, and keep[i] False
    for a timed-out row and for a last row that ends no episode (no successor in the file)."""
    next_obs = np.empty_like(observations)
    next_obs[:-1] = observations[1:]
    next_obs[-1:] = observations[-1:]
    next_obs[terminals] = observations[terminals]
    keep = terminals | ~timeouts
    if len(keep) and not terminals[-1]:
        keep[-1] = False
    return next_obs, keep


SPECIAL_ATTRS = ("env_id", "ref_min_score", "ref_max_score")


def _attr_text_or_number(h5file, name: str, h5py):
    """A root attribute's value when it is a scalar string or number, read only after its
    dtype and shape say so; None for anything else (opaque, pickled, compound, arrays)."""
    aid = h5file.attrs.get_id(name)
    dtype = aid.dtype
    if aid.shape not in ((), None) or (
        dtype.kind not in "biufS" and h5py.check_string_dtype(dtype) is None
    ):
        return None
    return h5file.attrs[name]


def _special(h5file, h5py, path: Path) -> dict:
    """The env_id (text) and ref_min_score / ref_max_score (finite numbers) attributes; one of
    another type (opaque or pickled bytes, an array) is named invalid, its bytes not shown."""
    special = {}
    for name in SPECIAL_ATTRS:
        if name not in h5file.attrs:
            continue
        value = _attr_text_or_number(h5file, name, h5py)
        dtype = h5file.attrs.get_id(name).dtype
        if name == "env_id":
            if isinstance(value, bytes):
                try:
                    value = value.decode("utf-8")
                except UnicodeDecodeError:
                    value = None
            if not isinstance(value, str) or not value.isprintable():
                raise DatasetError(
                    path, name, f"attribute is invalid (dtype {dtype}): expected printable text"
                )
        else:
            ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(
                value, (bool, np.bool_)
            )
            if not ok or not np.isfinite(float(value)):
                raise DatasetError(
                    path, name, f"attribute is invalid (dtype {dtype}): expected a finite number"
                )
        special[name] = value
    return special


def _metadata(h5file, h5py, path: Path) -> tuple[dict, dict]:
    """(metadata, special): metadata_json and the other scalar root attributes, plus D4RL's
    scalar metadata/* entries (e.g. metadata/algorithm; arrays there, policy weights, and
    links out of the file are skipped); special: the env_id / ref score attributes, checked."""
    meta: dict = {}
    special = _special(h5file, h5py, path)
    for name in h5file.attrs:
        if name in SPECIAL_ATTRS:
            continue
        value = _attr_text_or_number(h5file, name, h5py)
        if value is None:
            continue
        if name == "metadata_json":
            try:
                meta.update(json.loads(value))
            except (TypeError, ValueError):
                pass
        else:
            meta[name] = value.decode(errors="replace") if isinstance(value, bytes) else value
    if link_kind(h5file, "metadata") != "hard":
        return meta, special
    group = h5file["metadata"]
    if isinstance(group, h5py.Group):
        for name in group:
            if link_kind(group, name) != "hard":
                continue
            node = group[name]
            if (
                isinstance(node, h5py.Dataset)
                and not node.is_virtual
                and node.shape == ()
                and node.dtype.kind in "biufS"
            ):
                value = node[()]
                meta[f"d4rl/{name}"] = (
                    value.decode(errors="replace") if isinstance(value, bytes) else value.item()
                )
    return meta, special


def read_hdf5(path: str | Path, env_id: str | None = None) -> Dataset:
    """Load a D4RL-layout HDF5 file (see the module doc for the transitions built).

    env_id: the Gymnasium id to evaluate on; default the file's env_id attribute, else the
    D4RL env named by the file ('hopper-medium-v2.hdf5' -> Hopper-v5), else ''. Reference
    scores: the file's ref_min_score/ref_max_score attributes, else D4RL's for that env."""
    path = Path(path)
    if path.is_dir():
        raise DatasetError(path, None, "is a directory, expected a D4RL-layout HDF5 file")
    if not path.is_file():
        raise DatasetError(path, None, "no such file")
    h5py = _h5py(path)
    with open_hdf5(path) as h5file:
        has_next = link_kind(h5file, "next_observations") is not None
        keys = (*REQUIRED, "next_observations") if has_next else REQUIRED
        nodes = {key: dataset_node(h5file, key, path) for key in keys}
        ndims = {"observations": 2, "actions": 2, "next_observations": 2}
        shapes = {key: _declared(node, path, key, ndims.get(key, 1)) for key, node in nodes.items()}
        m = shapes["observations"][0]
        for key, shape in shapes.items():  # from metadata, before any array is read
            if shape[0] != m:
                raise DatasetError(path, key, f"has {shape[0]} rows, observations has {m}")
        if has_next and shapes["next_observations"] != shapes["observations"]:
            raise DatasetError(
                path,
                "next_observations",
                f"shape {shapes['next_observations']} != {shapes['observations']}",
            )
        if m == 0:
            raise DatasetError(path, "observations", "has no rows")
        columns = sum(int(np.prod(shape[1:])) for shape in shapes.values())
        check_fits(m, columns, path, "observations")
        raw = {key: read_node(node, key, path) for key, node in nodes.items()}
        meta, special = _metadata(h5file, h5py, path)

    obs = _as_float32(raw["observations"], path, "observations", 2)
    arrays = {
        "observations": obs,
        "actions": _as_float32(raw["actions"], path, "actions", 2),
        "rewards": _as_float32(raw["rewards"], path, "rewards", 1),
        "terminals": _as_flags(raw["terminals"], path, "terminals"),
        "timeouts": _as_flags(raw["timeouts"], path, "timeouts"),
    }
    if has_next:
        arrays["next_observations"] = _as_float32(
            raw["next_observations"], path, "next_observations", 2
        )
    if not has_next:
        next_obs, keep = successors(obs, arrays["terminals"], arrays["timeouts"])
        if not keep.any():
            raise DatasetError(
                path,
                "timeouts",
                f"no usable transition: each of the {m} rows ends a timed-out episode (or the "
                "file) and the file has no next_observations to bootstrap from",
            )
        arrays["next_observations"] = next_obs
        arrays = {key: arr[keep] for key, arr in arrays.items()}
        meta["dropped_rows"] = int(m - keep.sum())

    file_env = special.get("env_id", "")
    name = d4rl_env_name(path.stem) or d4rl_env_name(file_env)
    if env_id is None:
        env_id = file_env
        if not env_id and name is not None:
            gym_id, obs_dim = D4RL_GYM_IDS[name]
            env_id = gym_id if obs.shape[1] == obs_dim else ""
    ref_min, ref_max = special.get("ref_min_score"), special.get("ref_max_score")
    if (ref_min is None or ref_max is None) and name is not None:
        ref_min, ref_max = D4RL_REF_SCORES[name]
        meta["ref_scores_from"] = "D4RL d4rl/infos.py"
    return Dataset(
        **arrays,
        env_id=env_id,
        ref_min_score=None if ref_min is None else float(ref_min),
        ref_max_score=None if ref_max is None else float(ref_max),
        metadata=meta,
        source=str(path),
    )


def json_default(value):
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (np.ndarray, set, tuple)):
        return list(value.tolist() if isinstance(value, np.ndarray) else value)
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"metadata value {value!r} is not JSON")


def umask_mode(base: int) -> int:
    """`base` (0o666 files, 0o777 dirs) less the process umask: mkstemp/mkdtemp create private
    (0600/0700) entries, which a dataset renamed into a shared cache must not keep."""
    mask = os.umask(0)
    os.umask(mask)
    return base & ~mask


def write_hdf5(dataset: Dataset, path: str | Path) -> Path:
    """Write the D4RL layout (with next_observations; flags as bool) atomically: a temp file
    beside `path`, then a rename, so a killed writer never leaves a half file under its name.
    Root attributes: env_id, ref_min_score, ref_max_score (when known), metadata_json."""
    path = Path(path)
    h5py = _h5py(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        with h5py.File(tmp, "w") as f:
            for key in ("observations", "actions", "rewards", "next_observations"):
                f.create_dataset(key, data=getattr(dataset, key))
            for key in ("terminals", "timeouts"):
                f.create_dataset(key, data=getattr(dataset, key))
            f.attrs["env_id"] = dataset.env_id
            for key in ("ref_min_score", "ref_max_score"):
                if getattr(dataset, key) is not None:
                    f.attrs[key] = float(getattr(dataset, key))
            f.attrs["metadata_json"] = json.dumps(dataset.metadata, default=json_default)
        os.chmod(tmp, umask_mode(0o666))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
