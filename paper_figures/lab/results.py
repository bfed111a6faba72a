"""An experiment's results table: results/runs.csv, one row per (env, arm, seed) with the run's
digest and every declared metric, and results/configs.csv beside it, one row per (env, arm)
with the algorithm, budget and full flags its every seed ran (stated once, not per seed: the
zoo's 48,000 runs share 240 configurations). Read together they are one row per run, the only
input of every statistic, figure, page and README block."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np

from paper_figures.lab.spec import Claim, Experiment, run_digest
from paper_figures.lab.tables import TableError, number, read_rows

RUN_FIELDS = ("env", "arm", "seed", "digest")
CONFIG_FIELDS = ("env", "arm", "algo", "steps", "flags")
FIXED = ("env", "arm", "seed", "algo", "steps", "digest", "flags")  # a row as read


def path(exp: Experiment, toy: bool = False, out: Path | None = None) -> Path:
    """Where the table lives: the experiment's results/ (a toy run's: under `out`); an exact
    experiment's table is results/checks.csv."""
    return (out or exp.folder / "results") / ("runs.csv" if exp.arms else "checks.csv")


def rows_of(exp: Experiment, target: Path | None = None) -> list[dict]:
    """The experiment's results rows (parsed, or as written for an exact experiment); every
    declared metric a column (TableError naming the file where one is missing or renamed)."""
    return read(target or path(exp), raw=not exp.arms, required=tuple(exp.metrics))


def row(exp: Experiment, arm: str, env: str, seed: int, steps: int, flags, values: dict) -> dict:
    """One results row: the run's identity (algorithm, budget, full flags, digest) and metrics."""
    algo = exp.arms[arm].algo
    digest = run_digest(algo, flags, env, seed, steps)
    identity = {"env": env, "arm": arm, "seed": seed, "algo": algo, "steps": steps}
    return identity | {"digest": digest, "flags": " ".join(flags), **values}


CURVE_FIELDS = ("env", "arm", "seed", "digest", "step", "train_return")


def curves_path(table: Path) -> Path:
    """The curves beside a results table (results/curves.csv): per run, its train return over
    steps (at most metrics.POINTS points), the run's digest tying each to its table row."""
    return table.parent / "curves.csv"


def write_curves(target: Path, exp: Experiment, points: list[dict]) -> None:
    """The curves in the canonical order (env, arm as declared, seed, then step)."""
    env_order = {e: i for i, e in enumerate(exp.envs)}
    arm_order = {a: i for i, a in enumerate(exp.arms)}
    points = sorted(points, key=lambda r: (env_order[r["env"]], arm_order[r["arm"]],
                                           int(r["seed"]), int(r["step"])))  # fmt: skip
    with target.open("w", newline="") as f:
        writer = csv.DictWriter(f, CURVE_FIELDS, lineterminator="\n")
        writer.writeheader()
        for r in points:
            writer.writerow({k: f"{v:.6g}" if isinstance(v, float) else v for k, v in r.items()})


def read_curves(table: Path) -> dict[tuple[str, str], list[tuple[list[int], list[float]]]]:
    """{(env, arm): [(steps, returns) per seed]} of the curves beside `table` ({} without)."""
    target = curves_path(table)
    if not target.exists():
        return {}
    runs: dict[tuple, tuple[list, list]] = {}
    for i, r in enumerate(read_rows(target, CURVE_FIELDS), 1):
        steps, values = runs.setdefault((r["env"], r["arm"], r["seed"]), ([], []))
        steps.append(number(target, i, "step", r["step"], int))
        values.append(number(target, i, "train_return", r["train_return"]))
    out: dict[tuple, list] = {}
    for (env, arm, _), run in runs.items():
        out.setdefault((env, arm), []).append(run)
    return out


def stray_curves(exp: Experiment) -> list[str]:
    """Curves (results/curves.csv) of a run the results table does not hold (its digest)."""
    target = curves_path(path(exp))
    if not exp.arms or not target.exists():
        return []
    held = {r["digest"] for r in rows_of(exp)}
    curves = read_rows(target, CURVE_FIELDS)
    stray = sorted({(r["arm"], r["env"], r["seed"], r["digest"]) for r in curves
                    if r["digest"] not in held})  # fmt: skip
    return [
        f"curves of {a} {e} seed {s}: digest {d} is no run of the table" for a, e, s, d in stray
    ]


def configs_path(table: Path) -> Path:
    """The configurations beside a results table (results/configs.csv)."""
    return table.parent / "configs.csv"


def write(target: Path, exp: Experiment, rows: list[dict]) -> None:
    """The table and its configurations, rows in the canonical order (env as declared, arm as
    declared, seed); ValueError where two seeds of one (env, arm) ran different configurations."""
    env_order = {e: i for i, e in enumerate(exp.envs)}
    arm_order = {a: i for i, a in enumerate(exp.arms)}
    rows = sorted(rows, key=lambda r: (env_order[r["env"]], arm_order[r["arm"]], int(r["seed"])))
    configs: dict[tuple, dict] = {}
    for r in rows:
        config = {k: r[k] for k in CONFIG_FIELDS}
        held = configs.setdefault((r["env"], r["arm"]), config)
        if held != config:
            raise ValueError(f"{exp.id}: {r['arm']} on {r['env']} ran two configurations: "
                             f"{held} and {config}")  # fmt: skip
    target.parent.mkdir(parents=True, exist_ok=True)
    _write_csv(configs_path(target), CONFIG_FIELDS, configs.values())
    fields = (*RUN_FIELDS, *exp.metrics)
    _write_csv(target, fields, ({k: r[k] for k in fields} for r in rows))


def _write_csv(target: Path, fields, rows) -> None:
    with target.open("w", newline="") as f:
        writer = csv.DictWriter(f, fields, lineterminator="\n")
        writer.writeheader()
        for r in rows:
            writer.writerow({k: f"{v:.6g}" if isinstance(v, float) else v for k, v in r.items()})


def read(target: Path, raw: bool = False, required: tuple[str, ...] = ()) -> list[dict]:
    """The table's rows joined with their configurations (configs.csv), seed as int and metrics
    as float (an empty cell as nan); raw=True: as written (an exact experiment's own table, read
    by its analysis.py). Bounded and checked (lab.tables.read_rows: the columns and `required`
    present, every run's configuration there): a fault is one TableError naming the file."""
    if not target.exists():
        raise FileNotFoundError(f"{target} is missing: run the experiment first")
    if raw:
        return read_rows(target)
    source = configs_path(target)
    configs = {(c["env"], c["arm"]): c for c in read_rows(source, CONFIG_FIELDS)}
    rows = read_rows(target, (*RUN_FIELDS, *required))
    out = []
    for i, r in enumerate(rows, 1):
        config = configs.get((r["env"], r["arm"]))
        if config is None:
            raise TableError(f"{source}: no configuration of {r['arm']} on {r['env']} "
                             f"(row {i} of {target.name})")  # fmt: skip
        row = {"env": r["env"], "arm": r["arm"], "seed": number(target, i, "seed", r["seed"], int),
               "algo": config["algo"], "steps": config["steps"], "digest": r["digest"],
               "flags": config["flags"]}  # fmt: skip
        for k, v in r.items():
            if k not in FIXED:
                row[k] = number(target, i, k, v) if v != "" else math.nan
        out.append(row)
    return out


def stale(exp: Experiment, rows: list[dict]) -> list[str]:
    """Rows whose digest is not what the declaration gives for that (arm, env, seed): results
    of runs the declaration no longer describes (an exact experiment's table has no runs)."""
    if not exp.arms:
        return []
    planned = {(a, e, s): (steps, flags) for a, e, s, steps, flags in exp.runs()}
    out = []
    for r in rows:
        key = (r["arm"], r["env"], r["seed"])
        if key not in planned:
            out.append(f"{r['arm']} {r['env']} seed {r['seed']}: not declared")
            continue
        steps, flags = planned[key]
        want = run_digest(exp.arms[r["arm"]].algo, flags, r["env"], r["seed"], steps)
        if r["digest"] != want:
            out.append(f"{r['arm']} {r['env']} seed {r['seed']}: digest {r['digest']} != {want}")
    return out


_BY_CELL: list = []  # [(rows, its rows per (arm, env))]: the last tables indexed


def values(rows: list[dict], arm: str, env: str, metric: str) -> dict[int, float]:
    """{seed: metric} of one arm on one env (the table indexed by (arm, env) once: a ledger
    looks up thousands of cells in tables of tens of thousands of rows)."""
    for held, index in _BY_CELL:
        if held is rows and index[None] == len(rows):
            break
    else:
        index = {None: len(rows)}
        for r in rows:
            index.setdefault((r["arm"], r["env"]), []).append(r)
        _BY_CELL[:] = [(rows, index), *_BY_CELL[:3]]
    return {r["seed"]: r[metric] for r in index.get((arm, env), ())}


def claim_envs(exp: Experiment, claim: Claim, rows: list[dict]) -> list[str]:
    """The envs a claim is judged on: its own list, else every declared env both arms ran."""
    if claim.envs:
        return list(claim.envs)
    ran = {(r["arm"], r["env"]) for r in rows}
    arms = [claim.a] + ([claim.b] if claim.b else [])
    arms += [x for x in (claim.c, claim.d) if x]  # kind contrast's second cell
    return [e for e in exp.envs if all((a, e) in ran for a in arms)]


def differences(rows: list[dict], claim: Claim, envs: list[str]) -> np.ndarray:
    """Per (env, seed) in canonical order: a - b on the claim's metric, normalised per env by
    the spread of both arms' runs there when the claim says minmax-pair (a / b - 1 when the
    claim's difference is 'ratio')."""
    out = []
    for env in envs:
        va = values(rows, claim.a, env, claim.metric)
        vb = values(rows, claim.b, env, claim.metric)
        spread = 1.0
        if claim.normalise == "minmax-pair":
            every = list(va.values()) + list(vb.values())
            spread = (max(every) - min(every)) or 1.0
        if claim.difference == "ratio":
            out += [va[s] / vb[s] - 1 for s in sorted(va) if s in vb]
            continue
        out += [(va[s] - vb[s]) / spread for s in sorted(va) if s in vb]
    return np.array(out, np.float64)


def sample(rows: list[dict], arm: str, metric: str, envs: list[str]) -> np.ndarray:
    """One arm's runs on the envs, canonical order."""
    out = []
    for env in envs:
        v = values(rows, arm, env, metric)
        out += [v[s] for s in sorted(v)]
    return np.array(out, np.float64)


def contrasts(rows: list[dict], claim: Claim, envs: list[str]) -> np.ndarray:
    """Kind contrast, per (env, seed) in canonical order: (a - b) - (c - d) on the claim's
    metric, normalised per env by the spread of all four arms' runs there when the claim says
    minmax-pair; a seed counts where all four arms ran it."""
    out = []
    for env in envs:
        v = [values(rows, arm, env, claim.metric) for arm in (claim.a, claim.b, claim.c, claim.d)]
        spread = 1.0
        if claim.normalise == "minmax-pair":
            every = [x for side in v for x in side.values()]
            spread = (max(every) - min(every)) or 1.0
        seeds = sorted(set(v[0]) & set(v[1]) & set(v[2]) & set(v[3]))
        out += [((v[0][s] - v[1][s]) - (v[2][s] - v[3][s])) / spread for s in seeds]
    return np.array(out, np.float64)
