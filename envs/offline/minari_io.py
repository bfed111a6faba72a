"""Minari datasets on local disk (minari 0.5 layout), read and written with the minari package.

A Minari dataset directory holds data/metadata.json (JSON: spaces, env spec, counts, ref
scores) and, for the hdf5 format, data/main_data.hdf5 with one group per episode:
episode_<i>/{observations [T+1, d], actions [T, a], rewards [T], terminations [T],
truncations [T], infos/...}. An episode keeps its final observation, so every transition has
its true s', timed-out ones included: nothing is dropped. Minari's own root for a dataset id
'controlrl/hopper-medium-v5-s0-v0' is <root>/controlrl/hopper-medium-v5-s0-v0/data/.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import gymnasium as gym
import numpy as np

from envs.offline.d4rl import (
    D4RL_REF_SCORES,
    check_fits,
    d4rl_env_name,
    dataset_node,
    json_default,
    open_hdf5,
    read_array,
    umask_mode,
)
from envs.offline.dataset import Dataset
from envs.offline.errors import DatasetError, first_line

EPISODE_KEYS = ("observations", "actions", "rewards", "terminations", "truncations")


def _minari(path: Path):
    try:
        import minari
    except ImportError:
        raise DatasetError(
            path,
            None,
            "Minari datasets need the 'offline' extra: pip install -e '.[offline]' (or make setup)",
        ) from None
    return minari


def data_dir(path: str | Path) -> Path:
    """The directory holding metadata.json: path/data (a dataset directory) or path itself."""
    path = Path(path)
    return path / "data" if (path / "data").is_dir() else path


def _check_layout(path: Path) -> tuple[Path, dict]:
    """(data directory, metadata) after checking that the files are where minari puts them."""
    if not path.is_dir():
        raise DatasetError(path, None, "is not a directory (a Minari dataset is a directory)")
    data = data_dir(path)
    meta_path = data / "metadata.json"
    if meta_path.is_dir():
        raise DatasetError(data, "metadata.json", "is a directory, expected a JSON file")
    if not meta_path.is_file():
        raise DatasetError(
            path,
            "data/metadata.json",
            "missing: neither a Minari dataset directory nor a D4RL HDF5 file",
        )
    try:
        meta = json.loads(meta_path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise DatasetError(meta_path, None, f"is not valid JSON ({first_line(exc)})") from None
    if not isinstance(meta, dict):
        raise DatasetError(meta_path, None, "does not hold a JSON object")
    fmt = meta.get("data_format")
    if fmt != "hdf5":
        raise DatasetError(meta_path, "data_format", f"{fmt!r}: only 'hdf5' datasets are read")
    main = data / "main_data.hdf5"
    if main.is_dir():
        raise DatasetError(main, None, "is a directory, expected an HDF5 file")
    if not main.is_file():
        raise DatasetError(data, "main_data.hdf5", "missing")
    return data, meta


def _refuse_links_out(h5file, main: Path) -> None:
    """Walk every link of the file without following any: external and soft links, and virtual
    datasets, are refused (minari reads whatever an episode holds, infos included)."""
    import h5py

    def visit(name: str, link) -> tuple[str, str] | None:  # not None: stop there
        if isinstance(link, h5py.ExternalLink):
            return name, "is an external link to another file: refused"
        if isinstance(link, h5py.SoftLink):
            return name, "is a soft link: refused"
        node = h5file[name]
        if isinstance(node, h5py.Dataset) and node.is_virtual:
            return name, "is a virtual dataset (data from other files): refused"
        return None

    found = h5file.visititems_links(visit)  # an exception raised in visit would be mangled
    if found is not None:
        raise DatasetError(main, *found)


def _prescan(main: Path, episodes: int) -> None:
    """Check every episode from metadata before anything is read (links, dtype: numeric or bool
    only, row counts: T + 1 observations for T actions, rewards and flags; the total size
    against memory), then read its five arrays with the same checks as a D4RL file, so a bad
    file fails naming the key, e.g. [episode_3/rewards], before minari reads it."""
    with open_hdf5(main) as h5file:
        _refuse_links_out(h5file, main)
        rows = columns = 0
        for i in range(episodes):
            nodes = {k: dataset_node(h5file, f"episode_{i}/{k}", main) for k in EPISODE_KEYS}
            t = nodes["actions"].shape[0] if nodes["actions"].shape else 0
            for key, node in nodes.items():
                want = t + 1 if key == "observations" else t
                got = node.shape[0] if node.shape else 0
                if got != want:
                    raise DatasetError(
                        main, f"episode_{i}/{key}", f"has {got} rows, expected {want}"
                    )
            rows += t
            columns = max(columns, sum(int(np.prod(n.shape[1:])) for n in nodes.values()))
        check_fits(rows, columns + 1, main, "episode_0/observations")
        if rows == 0:
            raise DatasetError(main, "episode_0/actions", "no usable transition: every episode "
                               "has 0 steps")  # fmt: skip
        for i in range(episodes):
            for key in EPISODE_KEYS:
                read_array(h5file, f"episode_{i}/{key}", main)


def _env_id(meta: dict) -> str:
    for key in ("env_spec", "eval_env_spec"):
        try:
            return str(json.loads(meta[key])["id"])
        except (KeyError, TypeError, ValueError):
            continue
    return ""


def read_minari(path: str | Path, env_id: str | None = None) -> Dataset:
    """Load a local Minari dataset directory (or its data/ subdirectory) as transitions.

    Box observations and actions only; every transition gets its true s' (obs[t + 1] of its
    episode). env_id: default the dataset's env spec id. Reference scores: the dataset's
    ref_min_score/ref_max_score, else D4RL's for a hopper/halfcheetah/walker2d/ant env."""
    path = Path(path)
    data, meta = _check_layout(path)
    minari = _minari(path)
    main = data / "main_data.hdf5"
    total = meta.get("total_episodes")
    if not isinstance(total, int) or total < 1:
        raise DatasetError(data / "metadata.json", "total_episodes", f"{total!r}: no episodes")
    _prescan(main, total)
    try:
        ds = minari.MinariDataset(data)
        episodes = list(ds.iterate_episodes())
    except Exception as exc:  # minari raises ValueError, KeyError, AssertionError, ...
        raise DatasetError(data, None, f"minari cannot read it: {first_line(exc)}") from None

    parts: dict[str, list[np.ndarray]] = {k: [] for k in Dataset.__dataclass_fields__}
    for ep in episodes:
        where = f"episode_{ep.id}"
        obs, act = ep.observations, ep.actions
        if not isinstance(obs, np.ndarray) or not isinstance(act, np.ndarray):
            raise DatasetError(main, where, "observations/actions are not arrays (Box spaces)")
        t = len(ep.rewards)
        shapes = {
            "observations": (obs.shape[0], t + 1),
            "actions": (act.shape[0], t),
            "terminations": (len(ep.terminations), t),
            "truncations": (len(ep.truncations), t),
        }
        for key, (got, want) in shapes.items():
            if got != want:
                raise DatasetError(main, f"{where}/{key}", f"has {got} rows, expected {want}")
        obs = obs.reshape(t + 1, -1).astype(np.float32)
        parts["observations"].append(obs[:-1])
        parts["next_observations"].append(obs[1:])
        parts["actions"].append(act.reshape(t, -1).astype(np.float32))
        parts["rewards"].append(np.asarray(ep.rewards, np.float32).reshape(t))
        parts["terminals"].append(np.asarray(ep.terminations).astype(np.bool_).reshape(t))
        parts["timeouts"].append(np.asarray(ep.truncations).astype(np.bool_).reshape(t))
    arrays = {k: np.concatenate(v) for k, v in parts.items() if v}
    for key in ("observations", "next_observations", "actions", "rewards"):
        if not np.isfinite(arrays[key]).all():
            raise DatasetError(main, key, "holds NaN or inf (or values beyond float32)")

    file_env = _env_id(meta)
    ref_min, ref_max = meta.get("ref_min_score"), meta.get("ref_max_score")
    name = d4rl_env_name(file_env)
    extra = dict(meta.get("controlrl", {})) if isinstance(meta.get("controlrl"), dict) else {}
    extra["minari_dataset_id"] = meta.get("dataset_id")
    if (ref_min is None or ref_max is None) and name is not None:
        ref_min, ref_max = D4RL_REF_SCORES[name]
        extra["ref_scores_from"] = "D4RL d4rl/infos.py"
    return Dataset(
        **arrays,
        env_id=file_env if env_id is None else env_id,
        ref_min_score=None if ref_min is None else float(ref_min),
        ref_max_score=None if ref_max is None else float(ref_max),
        metadata=extra,
        source=str(path),
    )


def episode_bounds(dataset: Dataset) -> list[tuple[int, int]]:
    """[start, end) rows of each episode: an episode ends at a terminal or timeout row, or at
    the last row."""
    ends = np.flatnonzero(dataset.terminals | dataset.timeouts) + 1
    if len(ends) == 0 or ends[-1] != len(dataset):
        ends = np.append(ends, len(dataset))
    starts = np.concatenate([[0], ends[:-1]])
    return list(zip(starts.tolist(), ends.tolist()))


def _spaces(dataset: Dataset) -> tuple[gym.spaces.Box, gym.spaces.Box, object]:
    obs_dim, act_dim = dataset.observations.shape[1], dataset.actions.shape[1]
    obs_space = gym.spaces.Box(-np.inf, np.inf, (obs_dim,), np.float32)
    act_space = gym.spaces.Box(-np.inf, np.inf, (act_dim,), np.float32)
    spec = None
    try:
        spec = gym.spec(dataset.env_id)
        env_act = gym.make(dataset.env_id).action_space
        if isinstance(env_act, gym.spaces.Box) and env_act.shape == (act_dim,):
            act_space = gym.spaces.Box(env_act.low, env_act.high, (act_dim,), np.float32)
    except Exception:  # unknown or unbuildable env id: no spec, unbounded actions
        spec = None
    return obs_space, act_space, spec


def write_minari(
    dataset: Dataset,
    path: str | Path,
    dataset_id: str | None = None,
    tmp_parent: str | Path | None = None,
) -> Path:
    """Write `dataset` as a Minari hdf5 dataset directory `path` (path/data/...), built in a
    temp directory (in tmp_parent, default path's parent; same file system) and renamed into
    place. Needs s'[i] == s[i + 1] inside each episode (a
    Minari episode stores T + 1 observations); ValueError otherwise. Our metadata goes under
    the 'controlrl' key of metadata.json, the reference scores under minari's own keys."""
    given = Path(path)
    path = given.absolute()  # MinariStorage joins a relative data path onto itself
    minari = _minari(path)
    from minari.data_collector import EpisodeBuffer
    from minari.dataset.minari_storage import MinariStorage

    if path.exists():
        raise ValueError(f"{path} exists; remove it first")
    bounds = episode_bounds(dataset)
    obs, next_obs = dataset.observations, dataset.next_observations
    for start, end in bounds:
        if not np.array_equal(next_obs[start : end - 1], obs[start + 1 : end]):
            raise ValueError(
                f"rows {start}..{end - 1}: next_observations differ from the next row's "
                "observations inside an episode; Minari cannot store that"
            )
    obs_space, act_space, spec = _spaces(dataset)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp_dir = Path(tmp_parent).absolute() if tmp_parent is not None else path.parent
    tmp_dir.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=path.name + ".", suffix=".tmp", dir=tmp_dir))
    try:
        storage = MinariStorage.new(
            tmp / "data", observation_space=obs_space, action_space=act_space, env_spec=spec
        )
        meta = {
            "dataset_id": dataset_id or f"controlrl/{given.name}",
            "minari_version": minari.__version__,
            "algorithm_name": str(dataset.metadata.get("algorithm", "unknown")),
            "controlrl": json.loads(json.dumps(dataset.metadata, default=json_default)),
        }
        if dataset.ref_min_score is not None and dataset.ref_max_score is not None:
            meta["ref_min_score"] = float(dataset.ref_min_score)
            meta["ref_max_score"] = float(dataset.ref_max_score)
        storage.update_metadata(meta)
        storage.update_episodes(
            EpisodeBuffer(
                observations=np.concatenate([obs[s:e], next_obs[e - 1 : e]]),
                actions=dataset.actions[s:e],
                rewards=dataset.rewards[s:e],
                terminations=dataset.terminals[s:e],
                truncations=dataset.timeouts[s:e],
            )
            for s, e in bounds
        )
        os.chmod(tmp, umask_mode(0o777))
        tmp.rename(path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return given
