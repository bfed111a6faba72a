"""A sweep-backed figure script's runs on disk and back: each finished run of a sweep column, and
the runs as two CSVs, <name>.csv (one row per run) and <name>_curves.csv (one row per point of
each run's curves), which --replot reads back without any run directory."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np

from controlrl.experiment import read_rows


def finished(base: Path) -> list[tuple[int, Path, dict]]:
    """(seed, run directory, final_eval.json) of every finished run under base (<sweep>/runs/
    <algo>/<env tag>), in the order of the directories' names."""
    done = sorted(Path(base).glob("seed*/final_eval.json"))
    return [(int(p.parent.name.removeprefix("seed")), p.parent, json.loads(p.read_text()))
            for p in done]  # fmt: skip


def write(out: Path, name: str, runs: list[dict], fields, key, curves: dict[str, str],
          value: str, exact: bool = True) -> None:  # fmt: skip
    """<name>.csv: run["row"] of each run, columns `fields` (floats as Python prints them, or to
    6 significant digits with exact=False); <name>_curves.csv: the columns `key` of the row, a
    metric column where `curves` (run key -> metric name) names several, step and `value`, one
    line per point (int step, value to 6 significant digits)."""
    out.mkdir(parents=True, exist_ok=True)
    with (out / f"{name}.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        for r in runs:
            row = r["row"]
            writer.writerow(row if exact else {k: _six(v) for k, v in row.items()})
    with (out / f"{name}_curves.csv").open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow([*key, *(["metric"] if len(curves) > 1 else []), "step", value])
        for r in runs:
            cells = [r["row"][k] for k in key]
            for run_key, metric in curves.items():
                tag = [metric] if len(curves) > 1 else []
                writer.writerows([*cells, *tag, int(s), _six(v)] for s, v in zip(*r[run_key]))


def _six(v):
    return f"{v:.6g}" if isinstance(v, float) else v


def read(out: Path, name: str, key, curves: dict[str, str], value: str, ints=(),
         floats=()) -> list[dict]:  # fmt: skip
    """The runs as write left them in `out`: {"row": row, run key: (steps, values)} each, the
    row's `ints` and `floats` parsed (an absent or empty float NaN: CSVs from before a column);
    a missing file exits naming --replot."""
    rows = read_rows(out / f"{name}.csv", flag="--replot")
    points: dict[tuple, list] = {}
    for p in read_rows(out / f"{name}_curves.csv", flag="--replot"):
        metric = p.get("metric", next(iter(curves.values())))
        cell = tuple(p[k] for k in key)
        points.setdefault((cell, metric), []).append((float(p["step"]), float(p[value])))
    runs = []
    for row in rows:
        cell = tuple(row[k] for k in key)  # the text of the cells, as the curves hold them
        row.update({k: int(row[k]) for k in ints})
        row.update({k: float(row.get(k) or "nan") for k in floats})
        run = {"row": row}
        for run_key, metric in curves.items():
            pts = np.array(points.get((cell, metric), []), float).reshape(-1, 2)
            run[run_key] = (pts[:, 0], pts[:, 1])
        runs.append(run)
    return runs
