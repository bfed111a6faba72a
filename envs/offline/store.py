"""Where datasets live and how a path or a generated id becomes a Dataset. Nothing is ever
downloaded: a dataset is a local file or directory, or one the generator wrote into the cache.

    $CONTROLRL_DATA (default ~/.cache/controlrl/datasets)
        hopper-medium-v5-s0.hdf5                              D4RL layout
        minari/controlrl/hopper-medium-v5-s0-v0/data/...     the same as a Minari dataset
        behaviour/Hopper-v5-s0-b1000000/                      the PPO behaviour run:
            behaviour.json, ppo.log, ppo/ (its run dir; ppo/checkpoints/step_<step>.pt are
            the snapshots, one per iteration; runs of the earlier generator: snapshots/)

Generated ids read <env>-<kind>-v<env version>-s<seed> (hopper-medium-v5-s0), with -n<steps>,
-b<PPO budget> and -e<scoring episodes> appended when those differ from the defaults: everything
that changes a file's contents is in its id (the scoring episodes set the reference returns, and
through the expert return the medium snapshot), so one id names one file.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from envs.offline.d4rl import read_hdf5
from envs.offline.dataset import Dataset
from envs.offline.errors import DatasetError
from envs.offline.minari_io import read_minari

KINDS = ("random", "medium", "medium-replay", "expert", "medium-expert")
DEFAULT_STEPS = 1_000_000  # transitions per policy, as D4RL's medium and expert datasets
DEFAULT_PPO_BUDGET = 1_000_000
DEFAULT_SCORE_EPISODES = 100  # episodes behind the reference returns (minari's default count)
MINARI_NAMESPACE = "controlrl"
_ID = re.compile(
    r"^(?P<env>[a-z0-9]+)-(?P<kind>" + "|".join(KINDS) + r")-v(?P<version>\d+)-s(?P<seed>\d+)"
    r"(-n(?P<steps>\d+))?(-b(?P<budget>\d+))?(-e(?P<episodes>\d+))?$"
)


def data_root() -> Path:
    """$CONTROLRL_DATA, default ~/.cache/controlrl/datasets (XDG_CACHE_HOME honoured)."""
    env = os.environ.get("CONTROLRL_DATA")
    if env:
        return Path(env).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache) / "controlrl" / "datasets"


def dataset_name(
    env_id: str,
    kind: str,
    seed: int,
    steps: int = DEFAULT_STEPS,
    ppo_budget: int = DEFAULT_PPO_BUDGET,
    score_episodes: int = DEFAULT_SCORE_EPISODES,
) -> str:
    """The generated id: 'hopper-medium-v5-s0' for Hopper-v5 (suffixes for non-defaults)."""
    name, _, version = env_id.rpartition("-v")
    if not name or not version.isdigit():
        raise ValueError(f"env id {env_id!r} has no -v<version> suffix")
    out = f"{name.lower().replace('_', '')}-{kind}-v{version}-s{seed}"
    if steps != DEFAULT_STEPS:
        out += f"-n{steps}"
    if ppo_budget != DEFAULT_PPO_BUDGET and kind != "random":
        out += f"-b{ppo_budget}"
    if score_episodes != DEFAULT_SCORE_EPISODES and kind != "random":
        out += f"-e{score_episodes}"
    return out


def hdf5_path(root: Path, name: str) -> Path:
    """The D4RL-layout file of a generated dataset."""
    return root / f"{name}.hdf5"


def minari_path(root: Path, name: str) -> Path:
    """The Minari dataset directory of a generated dataset (minari's <root>/<id>/ layout, so
    MINARI_DATASETS_PATH=<root>/minari finds it as 'controlrl/<name>-v0')."""
    return root / "minari" / MINARI_NAMESPACE / f"{name}-v0"


def generate_hint(name: str) -> str:
    """'; generate it: python -m envs.offline generate ...' for a generated id, else ''."""
    match = _ID.match(name)
    if not match:
        return ""
    import gymnasium as gym

    wanted = f"{match['env']}-v{match['version']}"
    env_id = next((k for k in gym.registry if k.lower().replace("_", "") == wanted), wanted)
    cmd = f"python -m envs.offline generate --env {env_id} --kind {match['kind']}"
    cmd += f" --seed {match['seed']}"
    if match["steps"]:
        cmd += f" --steps {match['steps']}"
    if match["budget"]:
        cmd += f" --ppo-budget {match['budget']}"
    if match["episodes"]:
        cmd += f" --score-episodes {match['episodes']}"
    return f"; generate it: {cmd}"


def load(path_or_id: str | Path, env_id: str | None = None) -> Dataset:
    """A D4RL-layout HDF5 file, a Minari dataset directory, or a generated id looked up in
    data_root() (its HDF5 file first, else its Minari directory). DatasetError names the file
    and the key of anything wrong; nothing is unpickled or downloaded."""
    path = Path(path_or_id).expanduser()
    if path.is_file():
        return read_hdf5(path, env_id)
    if path.is_dir():
        if path.suffix in (".hdf5", ".h5"):
            raise DatasetError(path, None, "is a directory, expected a D4RL-layout HDF5 file")
        return read_minari(path, env_id)
    text = str(path_or_id)
    if os.sep not in text and "/" not in text and path.suffix not in (".hdf5", ".h5"):
        root = data_root()
        for candidate, reader in (
            (hdf5_path(root, text), read_hdf5),
            (minari_path(root, text), read_minari),
        ):
            if candidate.exists():
                return reader(candidate, env_id)
        hint = generate_hint(text)
        raise DatasetError(
            text, None, f"no such file, and no generated dataset of that id in {root}{hint}"
        )
    raise DatasetError(path, None, "no such file or directory")
