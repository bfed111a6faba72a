"""Errors raised by env construction, and the id check every backend shares."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable


class UnknownEnvError(ValueError):
    """The env id names no environment of its backend (or its library is not installed)."""


def check_known(
    name: str, known: Callable[[], Iterable[str]], backend: str, extra: str = "", form: str = ""
) -> None:
    """Raise UnknownEnvError unless `name` is among known(); the message names the backend, the
    closest ids, and, when known() cannot import its library, the pip extra that installs it."""
    try:
        ids = list(known())
    except ImportError as exc:
        raise UnknownEnvError(
            f"backend '{backend}' needs the '{extra}' extra: pip install -e '.[{extra}]' ({exc})"
        ) from None
    if name in ids:
        return
    close = difflib.get_close_matches(name, ids, n=3, cutoff=0.5)
    hint = f"; closest: {', '.join(close)}" if close else ""
    raise UnknownEnvError(f"unknown env id '{name}' for backend '{backend}'{form}{hint}")
