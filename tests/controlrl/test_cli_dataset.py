"""controlrl.cli.load_dataset: --dataset loaded once per process (validate() and main() share
it), a bad one refused as an ArgError naming --dataset, forget_datasets drops the cache."""

from __future__ import annotations

import numpy as np
import pytest

from controlrl import cli
from controlrl.checkpoint import save
from envs.offline import Dataset
from envs.offline.d4rl import write_hdf5


def test_a_dataset_is_loaded_once_until_forgotten(tmp_path):
    m = 10
    flags = np.zeros(m, bool)
    obs = np.arange(3 * m, dtype=np.float32).reshape(m, 3)
    data = Dataset(obs, obs[:, :1], np.ones(m, np.float32), obs, flags, flags, "Pendulum-v1")
    path = str(write_hdf5(data, tmp_path / "d.hdf5"))
    first = cli.load_dataset(path)
    assert np.array_equal(first.observations, obs) and first.env_id == "Pendulum-v1"
    assert cli.load_dataset(path) is first  # validate() and main(): one load
    cli.forget_datasets()
    again = cli.load_dataset(path)
    assert again is not first and np.array_equal(again.observations, obs)
    cli.forget_datasets()


def test_a_bad_dataset_is_an_arg_error_naming_the_flag(tmp_path):
    with pytest.raises(cli.ArgError, match="^--dataset: .*none.hdf5"):
        cli.load_dataset(str(tmp_path / "none.hdf5"))
    save(tmp_path / "w.pt", {"step": 1})  # a checkpoint, not a dataset
    with pytest.raises(cli.ArgError, match="^--dataset: "):
        cli.load_dataset(str(tmp_path / "w.pt"))
    assert not cli._DATASETS  # nothing kept of a failed load
