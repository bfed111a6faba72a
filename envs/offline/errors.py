"""The one error every dataset reader raises, naming the file and the key."""

from __future__ import annotations

from pathlib import Path


class DatasetError(ValueError):
    """A dataset file or directory is missing, unreadable or malformed.

    The message names the file (or directory) and, where one is at fault, the key inside it:
    `path [key]: problem`. CLI entry points print it as one line and exit 2."""

    def __init__(self, path: str | Path, key: str | None, problem: str) -> None:
        self.path = str(path)
        self.key = key
        where = f"{path} [{key}]" if key else str(path)
        super().__init__(f"{where}: {problem}")


def first_line(exc: BaseException, limit: int = 160) -> str:
    """An exception as one short line: 'TypeName: first line of its message'."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:limit] if text else ''}".rstrip(": ")
