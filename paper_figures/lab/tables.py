"""The one reader of the engine's CSV tables (results/runs.csv, results/curves.csv, a run's
metrics.csv, the README tables' CSVs): bounded in what it reads, every fault one line naming the
file, never a traceback.

A table over MAX_BYTES, a cell over MAX_FIELD characters, a row whose cells do not match the
header, a missing column the caller needs, undecodable bytes: TableError (a ValueError, which
`python -m paper_figures check` reports as one line).
"""

from __future__ import annotations

import csv
from pathlib import Path

# the largest table the engine writes is a few MB (objective-zoo-recipes' runs.csv: 4 MB); far above
MAX_BYTES = 256 * 2**20
# the longest cell it writes is a run's full flags (a few hundred characters); csv's own
# default limit (131,072) is the ceiling
MAX_FIELD = 131_072


class TableError(ValueError):
    """A table the engine cannot read: one line naming the file."""


def read_rows(path: str | Path, required: tuple[str, ...] = ()) -> list[dict[str, str]]:
    """The rows of the CSV table at path as dicts of strings, header first; TableError naming
    the file for a table too large, a cell too long, a row that does not fit the header, or a
    required column missing."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing")
    size = path.stat().st_size
    if size > MAX_BYTES:
        raise TableError(f"{path}: {size:,} bytes, over the {MAX_BYTES:,} a table may hold")
    old_limit = csv.field_size_limit(MAX_FIELD)
    try:
        with path.open(newline="", encoding="utf-8") as f:
            reader = csv.reader(f)
            header = next(reader, None)
            if not header:
                raise TableError(f"{path}: empty, no header")
            missing = [c for c in required if c not in header]
            if missing:
                raise TableError(
                    f"{path}: no column {', '.join(missing)} (a renamed or missing column; "
                    f"it has {', '.join(header)[:200]})"
                )
            rows = []
            for cells in reader:
                if len(cells) != len(header):
                    raise TableError(
                        f"{path} line {reader.line_num}: {len(cells)} cells for "
                        f"{len(header)} columns"
                    )
                rows.append(dict(zip(header, cells)))
    except csv.Error as exc:  # a cell over the field limit, a NUL byte, a stray quote
        raise TableError(f"{path}: not a readable table ({exc})") from None
    except UnicodeDecodeError as exc:
        raise TableError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    finally:
        csv.field_size_limit(old_limit)
    return rows


def number(path: str | Path, row: int, column: str, text: str, kind=float):
    """kind(text) of a cell; TableError naming the file, row (1-based, after the header) and
    column when it is not one."""
    try:
        return kind(text)
    except (TypeError, ValueError):
        raise TableError(
            f"{path} row {row} [{column}]: {str(text)[:40]!r} is not {kind.__name__}"
        ) from None
