"""Offline datasets: D4RL-layout HDF5 files and Minari datasets, loaded or generated."""

from envs.offline.dataset import Dataset

__all__ = ["Dataset"]
