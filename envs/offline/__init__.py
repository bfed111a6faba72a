"""Offline datasets: D4RL-layout HDF5 files and Minari datasets, loaded or generated.

    from envs.offline import load
    data = load("hopper-medium-v5-s0")          # a generated id, from $CONTROLRL_DATA
    data = load("~/d4rl/hopper_medium-v2.hdf5")  # a D4RL file; or a Minari dataset directory

Generate (trains the behaviour policy with algos/ppo.py in its own process):

    python -m envs.offline generate --env Hopper-v5 --kind medium
    python -m envs.offline info hopper-medium-v5-s0

d4rl.py: the HDF5 layout and D4RL's reference scores; minari_io.py: Minari directories;
store.py: the cache and load(); generate.py: the generator. h5py and minari come with the
'offline' extra (make setup installs it).
"""

from envs.offline.d4rl import D4RL_REF_SCORES, read_hdf5, write_hdf5
from envs.offline.dataset import Dataset
from envs.offline.errors import DatasetError
from envs.offline.minari_io import read_minari, write_minari
from envs.offline.store import KINDS, data_root, dataset_name, load

__all__ = [
    "D4RL_REF_SCORES",
    "KINDS",
    "Dataset",
    "DatasetError",
    "data_root",
    "dataset_name",
    "load",
    "read_hdf5",
    "read_minari",
    "write_hdf5",
    "write_minari",
]
