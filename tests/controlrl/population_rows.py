"""Reading a population's metrics.csv beside a single run's (tests of controlrl/population.py
and population_actor_critic.py)."""

from __future__ import annotations

import csv


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
