"""Reading a population's metrics.csv beside a single run's (tests of controlrl/population.py
and population_actor_critic.py)."""

from __future__ import annotations

import csv

import torch

from controlrl import checkpoint


def rows(path, seed=None):
    """metrics.csv's rows as lists of strings (one seed's, without the seed column)."""
    with path.open() as f:
        reader = csv.reader(f)
        header = next(reader)
        if "seed" not in header:
            return header, list(reader)
        col = header.index("seed")
        kept = [r for r in reader if seed is None or int(r[col]) == seed]
        return header[:col] + header[col + 1 :], [r[:col] + r[col + 1 :] for r in kept]


def without_seed(path) -> str:
    """A one-seed population's metrics.csv as the single run's text (seed column dropped)."""
    header, body = rows(path)
    return "\n".join(",".join(r) for r in [header, *body]) + "\n"


def assert_only_seed_zero_moved(a, b) -> None:
    """Runs a and b (directories) of seeds 0, 1, 2 that differ in seed 0's learning rate: seeds
    1 and 2 the same to the bit (rows and final parameters), seed 0 not."""
    for seed in (1, 2):
        assert rows(a / "metrics.csv", seed) == rows(b / "metrics.csv", seed)
    assert rows(a / "metrics.csv", 0) != rows(b / "metrics.csv", 0)
    pa, pb = (checkpoint.load(d / "checkpoints" / "latest.pt")["policy"] for d in (a, b))
    for name in pa:
        assert torch.equal(pa[name][1:], pb[name][1:])
        assert not torch.equal(pa[name][0], pb[name][0])
