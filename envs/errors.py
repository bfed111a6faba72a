"""Errors raised by env construction, the id check every backend shares, and the one-line
argparse parser of the command-line tools."""

from __future__ import annotations

import argparse
import difflib
from collections.abc import Callable, Iterable
from typing import NoReturn


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


def closest_flags(name: str, flags: Iterable[str]) -> str:
    """'; closest: --seed, --seeds' for a mistyped flag name (empty when nothing is close)."""
    close = difflib.get_close_matches(name, list(flags), n=3, cutoff=0.6)
    return f"; closest: {', '.join(close)}" if close else "; see --help"


def _option_strings(parser: argparse.ArgumentParser) -> list[str]:
    """Every --flag of parser and of its subcommands (argparse reports a subcommand's unknown
    flags from the top parser)."""
    flags: list[str] = []
    for action in parser._actions:
        flags += action.option_strings
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                flags += _option_strings(sub)
    return list(dict.fromkeys(flags))


class ArgumentParser(argparse.ArgumentParser):
    """argparse.ArgumentParser whose errors are one line on stderr and exit status 2 (argparse
    prints the whole usage first, many lines for a script with many flags); an unknown flag
    names the closest known ones."""

    def error(self, message: str) -> NoReturn:
        """Print 'error: message' (one line) and exit 2."""
        prefix = "unrecognized arguments: "
        if message.startswith(prefix):
            unknown = message[len(prefix) :].split()
            flags = _option_strings(self)
            first = next((t for t in unknown if t.startswith("-")), unknown[0])
            name = first.partition("=")[0]
            hint = closest_flags(name, flags) if name.startswith("-") else ""
            message = f"unrecognized argument {first}{hint}"
        line = " ".join(message.split())  # argparse's messages hold no newline, but be sure
        self.exit(2, f"error: {line}\n")
