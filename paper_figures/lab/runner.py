"""An experiment's runs through the sweep runner (controlrl/experiment.py), one sweep per arm,
and their collection into the results table."""

from __future__ import annotations

import csv
import hashlib
import importlib
import json
import shutil
import tempfile
from pathlib import Path

from controlrl import experiment as sweep
from paper_figures.lab import judge, metrics, results
from paper_figures.lab.spec import INPUTS, ROOT, Experiment, run_digest

SWEEPS = ROOT / "runs" / "lab"


def base(exp: Experiment, toy: bool, root: Path = SWEEPS) -> Path:
    return Path(root) / (exp.id + ("-toy" if toy else ""))


def inputs_dir(exp: Experiment, toy: bool, root: Path = SWEEPS) -> Path:
    return base(exp, toy, root) / "inputs"


def declared(exp: Experiment, flags, toy: bool, root: Path = SWEEPS) -> tuple[str, ...]:
    """A run's flags as declared: its inputs folder back to {inputs} (no machine's path in a
    results table or a digest)."""
    where = str(inputs_dir(exp, toy, root))
    return tuple(f.replace(where, INPUTS) for f in flags)


def configs(exp: Experiment, toy: bool = False, only: tuple[str, ...] = (), root: Path = SWEEPS
            ) -> dict[str, sweep.SweepConfig]:  # fmt: skip
    """{sweep name: its sweep}, one per arm and mode: the arm's envs (those in `only` where
    given), the declared seeds (the toy's with toy=True), each env's budget; flags: the
    experiment's, the arm's, the toy's, {inputs} in them the experiment's inputs folder."""
    out = {}
    for arm in exp.arms.values() if not exp.script else ():  # a script runs its own arms
        if (toy and arm.name not in exp.toy.arms) or arm.pending:  # pending: not tuned yet
            continue
        for mode in ("population", "separate"):
            envs = [e for e in arm.envs if (not toy or e in exp.toy.envs)
                    and exp.mode_of(arm.name, e) == mode and (not only or e in only)]  # fmt: skip
            if envs:
                name = arm.name + ("" if mode == exp.mode else f"-{mode}")
                out[name] = _config(exp, arm, envs, mode, toy, str(inputs_dir(exp, toy, root)))
    return out


def _config(exp: Experiment, arm, envs: list[str], mode: str, toy: bool, inputs: str
            ) -> sweep.SweepConfig:  # fmt: skip
    steps = {e: exp.toy.steps if toy else exp.envs[e].steps for e in envs}
    flags = [f.replace(INPUTS, inputs) for f in arm.flags + (exp.toy.flags if toy else ())]
    return sweep.SweepConfig(
        algos=[],
        envs=envs,
        seeds=0,
        total_timesteps=max(steps.values()),
        extra=[f.replace(INPUTS, inputs) for f in exp.flags],
        arms=[sweep.Arm(arm.name, arm.algo, tuple(flags))],
        seed_list=list(exp.toy.seeds if toy else exp.seeds),
        population=mode == "population",  # an arm's or env's own, where it differs from the run's
        steps_per_env=steps,
    )


def run(exp: Experiment, toy: bool = False, workers: int = 2, backend: str = "local",
        address: str | None = None, root: Path = SWEEPS, only: tuple[str, ...] = ()
        ) -> list[str]:  # fmt: skip
    """Every run not yet finished (resumable; on the envs in `only` where given); returns the
    failed runs' ids. An exact experiment (no arms) computes its table with its analysis.py's
    `run` instead."""
    if not exp.arms:
        return []  # its table is written by `write`
    if exp.script:
        run_script(exp, toy, script_dir(exp, toy, root))
        return []
    prepare(exp, toy, root)
    failed = []
    for name, config in configs(exp, toy, only, root).items():
        status = sweep.run_sweep(config, base(exp, toy, root) / name, backend=backend,
                                 workers=workers, address=address,
                                 on_update=lambda r: print(f"[{r['status']}] {r['run_id']}",
                                                           flush=True))  # fmt: skip
        failed += [k for k, v in status.items() if v["status"] == "failed"]
    return failed


def prepare(exp: Experiment, toy: bool = False, root: Path = SWEEPS) -> None:
    """What the runs read and no run makes: the analysis.py's `prepare(exp, toy)` (an offline
    experiment's datasets, in the data root) and `prepare_inputs(exp, toy, folder)` (the files
    that {inputs} in its flags names), where it has them."""
    analysis = judge.analysis_module(exp)
    if analysis is not None and hasattr(analysis, "prepare"):
        analysis.prepare(exp, toy)
    if analysis is not None and hasattr(analysis, "prepare_inputs"):
        inputs_dir(exp, toy, root).mkdir(parents=True, exist_ok=True)
        analysis.prepare_inputs(exp, toy, inputs_dir(exp, toy, root))


def script_dir(exp: Experiment, toy: bool, root: Path = SWEEPS) -> Path:
    return base(exp, toy, root) / "script"


def script_argv(exp: Experiment, toy: bool, out: Path) -> list[str]:
    """The script's command line: the declaration's flags, the toy's after them, and --out."""
    return [*exp.flags, *(exp.toy.flags if toy else ()), "--out", str(out)]


def run_script(exp: Experiment, toy: bool, out: Path) -> None:
    """Run paper_figures/<script>.py into `out` (its analysis.py's `run_script(exp, toy, out)`
    where the script takes no argv)."""
    out.mkdir(parents=True, exist_ok=True)
    analysis = judge.analysis_module(exp)
    if hasattr(analysis, "run_script"):
        analysis.run_script(exp, toy, out)
        return
    importlib.import_module(f"paper_figures.{exp.script}").main(script_argv(exp, toy, out))


def script_rows(exp: Experiment, toy: bool, source: Path) -> list[dict]:
    """The results rows of a script's outputs in `source`: its analysis.py's `table(exp, source)`
    gives {env, arm, seed, <metric>...} per run; each row must be a declared (arm, env, seed)."""
    planned = {(a, e, s): (steps, flags) for a, e, s, steps, flags in exp.runs(toy)}
    rows = []
    for r in judge.analysis_module(exp).table(exp, Path(source)):
        key = (r["arm"], r["env"], int(r["seed"]))
        if key not in planned:
            raise ValueError(f"{exp.id}: the script's table has {key}, which is not a declared "
                             "(arm, env, seed) of this size")  # fmt: skip
        missing = [m for m in exp.metrics if m not in r]
        if missing:
            raise ValueError(f"{exp.id}: the script's table lacks metric(s) {missing} for {key}")
        steps, flags = planned[key]
        values = {m: float(r[m]) for m in exp.metrics}
        rows.append(results.row(exp, key[0], key[1], key[2], steps, flags, values))
    return rows


def collect(exp: Experiment, toy: bool = False, root: Path = SWEEPS) -> list[dict]:
    """The results rows of every finished run (an unfinished one is left out)."""
    if exp.script:
        return script_rows(exp, toy, script_dir(exp, toy, root))
    rows = []
    analysis = judge.analysis_module(exp) if exp.own_metrics else None
    named = [m for m in exp.metrics if m not in exp.own_metrics]
    for name, config in configs(exp, toy, root=root).items():
        arm = exp.arms[config.arms[0].name]
        for task in sweep.plan(config, base(exp, toy, root) / name):
            run_dir = Path(task.run_dir)
            if not sweep.is_done(run_dir):
                continue
            per_seed = metrics.extract(run_dir, task.env_id, named, exp.final_window)
            if analysis is not None:
                own = own_metrics(exp, analysis, run_dir, task.env_id, list(per_seed), toy)
                per_seed = {s: v | own[s] for s, v in per_seed.items()}
            for seed, values in sorted(per_seed.items()):
                values = {m: values[m] for m in exp.metrics}  # the declared order
                flags = declared(exp, task.extra, toy, root)
                rows.append(results.row(exp, arm.name, task.env_id, seed,
                                        task.total_timesteps, flags, values))  # fmt: skip
    return rows


OWN = "analysis_metrics.json"  # in a run directory: its analysis.py's metrics, and their key


def own_metrics(exp: Experiment, analysis, run_dir: Path, env_id: str, seeds: list[int],
                toy: bool) -> dict[int, dict[str, float]]:  # fmt: skip
    """{seed: {metric: value}} of the analysis.py's `metrics(exp, run_dir, env_id, seed, toy)`
    for each [analysis] metric, kept in the run directory while analysis.py and the [analysis]
    table stay as they were (an evaluation of a final policy can take minutes)."""
    config = json.dumps(exp.analysis_config(toy), sort_keys=True).encode()
    key = hashlib.sha256((exp.folder / "analysis.py").read_bytes() + config).hexdigest()[:16]
    saved = json.loads((run_dir / OWN).read_text()) if (run_dir / OWN).exists() else {}
    if saved.get("key") == key and all(str(s) in saved["values"] for s in seeds):
        return {s: saved["values"][str(s)] for s in seeds}
    values = {}
    for seed in seeds:
        got = analysis.metrics(exp, run_dir, env_id, seed, toy)
        missing = [m for m in exp.own_metrics if m not in got]
        if missing:
            raise ValueError(f"{exp.id}: analysis.py's metrics gave no {missing} for {run_dir}")
        values[seed] = {m: float(got[m]) for m in exp.own_metrics}
    (run_dir / OWN).write_text(json.dumps({"key": key, "values": values}))
    return values


def collect_curves(exp: Experiment, toy: bool = False, root: Path = SWEEPS) -> list[dict]:
    """The curve points of every finished run (results/curves.csv); a script has none."""
    points = []
    for name, config in configs(exp, toy, root=root).items():
        arm = exp.arms[config.arms[0].name]
        for task in sweep.plan(config, base(exp, toy, root) / name):
            if not sweep.is_done(Path(task.run_dir)):
                continue
            for seed, curve in sorted(metrics.curves(Path(task.run_dir)).items()):
                flags = declared(exp, task.extra, toy, root)
                digest = run_digest(arm.algo, flags, task.env_id, seed, task.total_timesteps)
                points += [{"env": task.env_id, "arm": arm.name, "seed": seed, "digest": digest,
                            "step": step, "train_return": value}
                           for step, value in curve]  # fmt: skip
    return points


def collect_compute(exp: Experiment, toy: bool = False, root: Path = SWEEPS) -> list[dict]:
    """Per arm and env: its finished processes, their seeds and training seconds."""
    sweeps = configs(exp, toy, root=root).items()
    return compute_rows((config.arms[0].name, task) for name, config in sweeps
                        for task in sweep.plan(config, base(exp, toy, root) / name))  # fmt: skip


def compute_rows(tasks) -> list[dict]:
    """Per (arm, env) of (arm, task) pairs: the finished processes, their seeds and training
    seconds (the laps of their timing.csv: rollout, update or train seconds, each process's
    wall clock on its own core)."""
    out: dict[tuple[str, str], dict] = {}
    for arm, task in tasks:
        timing = Path(task.run_dir) / "timing.csv"
        if not sweep.is_done(Path(task.run_dir)) or not timing.exists():
            continue
        with timing.open() as f:  # every lap (rollout_s, update_s, train_s), not time/sps
            seconds = sum(float(v) for r in csv.DictReader(f) for k, v in r.items()
                          if k.startswith("time/") and k.endswith("_s") and v)  # fmt: skip
        row = out.setdefault((task.env_id, arm), {"env": task.env_id, "arm": arm,
                             "processes": 0, "seeds": 0, "train_s": 0.0})  # fmt: skip
        row["processes"] += 1
        row["seeds"] += len(task.seeds)
        row["train_s"] += seconds
    return [{**r, "train_s": f"{r['train_s']:.0f}"} for r in out.values()]


def write_compute(target: Path, rows: list[dict]) -> None:
    """A compute table (compute_rows) as CSV; nothing where no run was timed."""
    if rows:
        with target.open("w", newline="") as f:
            writer = csv.DictWriter(f, list(rows[0]), lineterminator="\n")
            writer.writeheader()
            writer.writerows(rows)


def write(exp: Experiment, toy: bool = False, root: Path = SWEEPS, source: Path | None = None,
          ) -> Path:  # fmt: skip
    """Collect and write the results table: the experiment's results/ (a toy's: its sweep's);
    a script's table from its outputs in `source` where given (outputs it already made)."""
    if not exp.arms:  # an exact experiment: its analysis computes the table
        target = results.path(exp, out=base(exp, toy, root) / "results" if toy else None)
        target.parent.mkdir(parents=True, exist_ok=True)
        judge.analysis_module(exp).run(exp, toy, target)
        return target
    rows = script_rows(exp, toy, source) if source else collect(exp, toy, root)
    if not rows:
        raise SystemExit(f"error: {exp.id}: no finished runs under {base(exp, toy, root)}")
    target = results.path(exp, out=base(exp, toy, root) / "results" if toy else None)
    results.write(target, exp, rows)
    points = [] if source or not exp.curves else collect_curves(exp, toy, root)
    if points:
        results.write_curves(results.curves_path(target), exp, points)
    write_compute(target.parent / "compute.csv", [] if source else collect_compute(exp, toy, root))
    return target


def declare(exp: Experiment) -> Path:
    """Register a declaration before its runs: its header-only results table (every line 'not
    run yet'; `run` replaces it). Refused where results exist or come from a script or analysis."""
    target = results.path(exp)
    if not exp.arms or exp.script:
        raise SystemExit(f"error: {exp.id}: its results come from its script or analysis.py")
    if target.exists():
        raise SystemExit(f"error: {exp.id} has results already: {target}")
    results.write(target, exp, [])
    return target


def script_table(name: str, toy: bool, target: Path) -> None:
    """An exact experiment's table made by a figure script: paper_figures/<name>.py's main (its
    toy size with toy=True) run into a temporary folder, its <name>.csv kept as `target`."""
    module = importlib.import_module(f"paper_figures.{name}")
    with tempfile.TemporaryDirectory() as tmp:
        module.main(module.Args(out=tmp, toy=toy))
        shutil.copyfile(Path(tmp) / f"{name}.csv", target)
