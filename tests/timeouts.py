"""Time limits of the tests that start processes, scaled for a loaded machine.

Each test states the seconds its process needs with room on an idle two-core machine; scaled()
multiplies them by SCALE, so that the fast tier passes on a machine loaded several times over
(load 6 on two cores runs a process about three times slower). CONTROLRL_TEST_TIMEOUT_SCALE
overrides the factor (e.g. 1 to find a hung process sooner, 10 on a crowded runner).
"""

from __future__ import annotations

import os

DEFAULT_SCALE = 4.0


def scale() -> float:
    """The factor: CONTROLRL_TEST_TIMEOUT_SCALE when set (a number > 0), else DEFAULT_SCALE."""
    raw = os.environ.get("CONTROLRL_TEST_TIMEOUT_SCALE")
    if raw is None:
        return DEFAULT_SCALE
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"CONTROLRL_TEST_TIMEOUT_SCALE={raw!r} is not a number") from None
    if not value > 0:
        raise ValueError(f"CONTROLRL_TEST_TIMEOUT_SCALE={raw!r} must be > 0")
    return value


def scaled(seconds: float) -> float:
    """A subprocess's time limit: seconds on an idle machine times scale()."""
    return seconds * scale()
