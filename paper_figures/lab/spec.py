"""An experiment's declaration (paper_figures/<experiment>/experiment.toml) as dataclasses.

Unknown keys are refused, every reference (a claim's arms, paper, metric, envs) is resolved and
every arm's flags are parsed by its algorithm's own Args before anything runs. The digest of a
run (algorithm, its full flags, env, seed, budget) identifies it: the results table records it,
and `check` refuses results whose digest the declaration no longer gives.
"""

from __future__ import annotations

import hashlib
import json
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path

HERE = Path(__file__).resolve().parent
FIGURES = HERE.parent  # paper_figures/: one folder per experiment
ROOT = FIGURES.parent
DECLARATION = "experiment.toml"
KINDS = ("superior", "inferior", "non-inferior", "equivalent", "above", "below", "unpaired")
KINDS += ("all-of", "exact")
KINDS += ("contrast",)  # (a - b) - (c - d) > 0 per (env, seed): an interaction of two cells
MAX_CLAIM = 110  # characters of a ledger line's claim; a longer claim needs a `short`


class SpecError(ValueError):
    """A declaration that cannot be read; the message names the file and the key."""


@dataclass(frozen=True)
class Paper:
    key: str
    title: str
    arxiv: str = ""  # "2503.14476"; empty for a paper without one (then `ref` says where)
    ref: str = ""

    @property
    def name(self) -> str:
        """'<title> (arXiv <id>)', or the title with its reference."""
        where = f"arXiv {self.arxiv}" if self.arxiv else self.ref
        return f"{self.title} ({where})" if where else self.title


@dataclass(frozen=True)
class Env:
    id: str
    label: str
    suffix: str  # appended to a claim's id where the claim is judged per env
    steps: int
    unit: str
    setting: str  # what this env adds to the run's setting, in words
    mode: str  # the run's mode here ("separate" where episodes do not end together)


@dataclass(frozen=True)
class Arm:
    name: str
    algo: str
    flags: tuple[str, ...]
    recipe: str  # where the flags come from: the paper's file:line, project defaults, a budget
    label: str
    envs: tuple[str, ...]  # the envs this arm runs on
    pending: bool = False  # a tuned arm whose tuning has not chosen its flags yet: no runs
    mode: str = ""  # "separate" or "population" for this arm alone (empty: each env's mode)


@dataclass(frozen=True)
class Claim:
    id: str
    paper: str  # a Paper key
    claim: str
    short: str  # the ledger line's words (the claim when it is short enough)
    kind: str
    a: str = ""  # arms (kind "above"/"below": a alone)
    b: str = ""
    metric: str = ""
    envs: tuple[str, ...] = ()  # judged on these (default: every env both arms ran)
    per_env: bool = False  # one claim per env (id + the env's suffix) instead of a pooled one
    normalise: str = "none"  # "none" or "minmax-pair": (a - b) / the spread of both arms' runs
    margin: float | None = None  # the smallest difference that matters (equivalence, shifts)
    margin_why: str = ""
    shift: str = ""  # "", "margin": superior by more than the margin; "-margin": non-inferior
    bar: float | None = None
    bar_why: str = ""
    of: tuple[str, ...] = ()  # kind "all-of": the claims it joins
    paper_setting: str = ""
    setting: str = ""  # ours, where it differs from the experiment's
    note: str = ""
    posthoc: str = ""  # what of the rule was chosen after the data were seen, and why
    supersedes: tuple[str, ...] = ()
    part: bool = False  # a part of an all-of claim: judged and adjusted, not counted on its own
    guard: float | None = None  # inconclusive unless an arm's mean of the metric reaches it
    guard_why: str = ""
    c: str = ""  # kind "contrast": the second cell's arms, the claim (a - b) - (c - d) > 0
    d: str = ""
    difference: str = "diff"  # paired kinds: "diff" a - b per pair, "ratio" a / b - 1
    sensitivity: tuple[str, ...] = ()  # envs judged only as details (a sensitivity, not counted)


@dataclass(frozen=True)
class Toy:
    seeds: tuple[int, ...]
    steps: int
    flags: tuple[str, ...]
    envs: tuple[str, ...]
    arms: tuple[str, ...]


@dataclass(frozen=True)
class Experiment:
    id: str
    folder: Path
    title: str
    summary: str
    papers: dict[str, Paper]
    mode: str  # "population" (seeds as a batch dimension, one process) or "separate"
    seeds: tuple[int, ...]
    flags: tuple[str, ...]  # common to every arm
    metrics: tuple[str, ...]
    setting: str
    paper_setting: str
    budget: str  # the paper's budget, beside ours
    envs: dict[str, Env]
    arms: dict[str, Arm]
    claims: tuple[Claim, ...]
    toy: Toy
    final_window: int = 1000  # steps (bandits: samples) of the final_* metrics' window
    analysis: bool = False  # an analysis.py beside the declaration
    digest: str = ""  # of the declaration's bytes
    extra: dict = field(default_factory=dict)  # [analysis] table: what analysis.py reads
    script: str = ""  # paper_figures/<script>.py makes the runs (its analysis.py's `table` reads
    # them); empty: each arm runs an algos/ file through the sweep runner
    tunings: tuple = ()  # lab/tuning.py's Tuning of each [tuning] grid
    aggregate: dict = field(
        default_factory=dict
    )  # [aggregate] (lab/aggregates.py): baseline, metrics
    curves: bool = True  # results/curves.csv (false where thousands of runs would make it bulk)

    @property
    def own_metrics(self) -> tuple[str, ...]:
        """The metrics its analysis.py computes from each finished run ([analysis] metrics)."""
        return tuple(self.extra.get("metrics", ()))

    def analysis_config(self, toy: bool = False) -> dict:
        """The [analysis] table, its `toy` table's values in place of the full size's with
        toy=True."""
        cfg = {k: v for k, v in self.extra.items() if k != "toy"}
        return cfg | (self.extra.get("toy", {}) if toy else {})

    def mode_of(self, arm: str, env_id: str) -> str:
        """How the arm's seeds run on the env: the arm's own mode, else the env's."""
        return self.arms[arm].mode or self.envs[env_id].mode

    def runs(self, toy: bool = False) -> list[tuple[str, str, int, int, tuple[str, ...]]]:
        """(arm, env, seed, steps, full flags) of every planned run."""
        out = []
        for arm in self.arms.values():
            if (toy and arm.name not in self.toy.arms) or arm.pending:
                continue
            for env_id in arm.envs:
                if toy and env_id not in self.toy.envs:
                    continue
                steps = self.toy.steps if toy else self.envs[env_id].steps
                flags = self.flags + arm.flags + (self.toy.flags if toy else ())  # toy's last
                for seed in self.toy.seeds if toy else self.seeds:
                    out.append((arm.name, env_id, seed, steps, flags))
        return out


def run_digest(algo: str, flags, env_id: str, seed: int, steps: int) -> str:
    """What identifies a run: its algorithm, full flags, env, seed and budget."""
    text = json.dumps([algo, list(flags), env_id, int(seed), int(steps)])
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _take(table: dict, where: str, known: dict[str, type], required=()) -> dict:
    unknown = sorted(set(table) - set(known))
    if unknown:
        raise SpecError(f"{where}: unknown key(s) {', '.join(unknown)} (known: {', '.join(known)})")
    for key in required:
        if key not in table:
            raise SpecError(f"{where}: missing key '{key}'")
    for key, value in table.items():
        want = known[key]
        ok = isinstance(value, want) and not (want is int and isinstance(value, bool))
        if want is float:
            ok = isinstance(value, int | float) and not isinstance(value, bool)
        if not ok:
            raise SpecError(f"{where}: '{key}' must be {want.__name__}, got {value!r}")
    return table


def _strs(value, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise SpecError(f"{where}: expected a list of strings, got {value!r}")
    return tuple(value)


def _seeds(value, where: str) -> tuple[int, ...]:
    seeds = tuple(range(1, value + 1)) if isinstance(value, int) else tuple(value)
    if isinstance(value, int) and value <= 0:
        raise SpecError(f"{where}: a seed count must be > 0, got {value}")
    if not seeds or not all(isinstance(s, int) and s >= 0 for s in seeds):
        raise SpecError(f"{where}: seeds must be a count > 0 or a list of integers >= 0")
    if len(set(seeds)) != len(seeds):
        raise SpecError(f"{where}: a seed is listed twice")
    return seeds


TOP = {"title": str, "summary": str, "paper": list, "run": dict, "envs": dict, "arms": dict}
TOP |= {"claim": list, "toy": dict, "analysis": dict, "tuning": object, "aggregate": dict}
AGGREGATE = {"baseline": str, "metrics": list, "tables": list}
RUN = {"algo": str, "mode": str, "seeds": object, "steps": int, "unit": str, "flags": list}
RUN |= {"metrics": list, "setting": str, "paper_setting": str, "budget": str}
RUN |= {"final_window": int, "script": str, "curves": bool}
TOY = {"seeds": object, "steps": int, "flags": list, "envs": list, "arms": list}
# a field's TOML type, by its annotation: a tuple is a list, a float may be written as an int
TOML_TYPES = {"str": str, "int": int, "bool": bool, "float | None": float}


def _keys(cls, *leave_out: str) -> dict[str, type]:
    """The keys a table declaring a `cls` may hold, with their TOML types (its fields')."""
    return {f.name: TOML_TYPES.get(f.type, list) for f in fields(cls) if f.name not in leave_out}


def _build(cls, table: dict, where: str, **defaults):
    """A `cls` of a checked table: each field the table holds (lists as tuples of strings,
    numbers as floats where the field is a float), else `defaults`, else the field's default."""
    for f in fields(cls):
        if f.name in table:
            value = table[f.name]
            if f.type.startswith("tuple"):
                value = _strs(value, f"{where} {f.name}")
            defaults[f.name] = float(value) if f.type == "float | None" else value
    return cls(**defaults)


PAPER, ENV, ARM, CLAIM = _keys(Paper), _keys(Env, "id"), _keys(Arm, "name", "pending"), _keys(Claim)


def load(folder: Path) -> Experiment:
    """The declaration in `folder` (its experiment.toml), checked."""
    folder = Path(folder)
    path = folder / DECLARATION
    where = f"{folder.name}/{DECLARATION}"
    raw = path.read_bytes()
    try:
        data = tomllib.loads(raw.decode())
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"{where}: {exc}") from None
    _take(data, where, TOP, ("title", "paper", "claim"))
    # an experiment whose every claim is an exact computation (its analysis.py) has no runs
    exact_only = all(c.get("kind") in ("exact", "all-of") for c in data["claim"])
    if exact_only and not (folder / "analysis.py").exists():
        raise SpecError(f"{where}: every claim is exact, so the folder needs an analysis.py")
    if exact_only:
        data.setdefault("run", {"algo": "", "seeds": 1, "steps": 0, "metrics": []})
        data.setdefault("envs", {})
        data.setdefault("arms", {})
        data.setdefault("toy", {"seeds": 1, "steps": 0, "envs": [], "arms": []})
    for key in ("run", "envs", "arms", "toy"):
        if key not in data:
            raise SpecError(f"{where}: missing key '{key}'")
    need = ("seeds", "steps", "metrics") + (("algo",) if "script" not in data["run"] else ())
    run = _take(data["run"], f"{where} [run]", RUN, need)
    mode = run.get("mode", "separate")
    if mode not in ("separate", "population"):
        raise SpecError(f"{where} [run]: mode must be 'separate' or 'population', got {mode!r}")
    papers = {}
    for i, p in enumerate(data["paper"]):
        p = _take(p, f"{where} [[paper]] {i + 1}", PAPER, ("key", "title"))
        papers[p["key"]] = _build(Paper, p, where)
    unit = run.get("unit", "env steps")
    envs = {}
    for env_id, e in data["envs"].items():
        e = _take(e, f'{where} [envs."{env_id}"]', ENV)
        given = {"id": env_id, "label": env_id, "suffix": "", "steps": run["steps"]}
        envs[env_id] = Env(**given | {"unit": unit, "setting": "", "mode": mode} | e)
        if envs[env_id].mode not in ("separate", "population"):
            raise SpecError(f"{where} [envs.\"{env_id}\"]: mode must be 'separate' or "
                            "'population'")  # fmt: skip
    script = run.get("script", "")
    if script and not (folder / "analysis.py").exists():
        raise SpecError(f"{where} [run]: a script's runs need an analysis.py whose `table` reads "
                        "them")  # fmt: skip
    arms = {}
    for name, a in data["arms"].items():
        at = f"{where} [arms.{name}]"
        a = _take(a, at, ARM, ("recipe",))
        if script and ({"algo", "flags"} & set(a)):
            raise SpecError(f"{at}: an arm of script {script} is one of its conditions; it takes "
                            "no algo or flags ([run] flags are the script's)")  # fmt: skip
        arm_envs = _strs(a.get("envs", list(envs)), f"{at} envs")
        bad = [e for e in arm_envs if e not in envs]
        if bad:
            raise SpecError(f"{at}: envs {bad} are not in [envs]")
        if a.get("mode", "separate") not in ("separate", "population"):
            raise SpecError(f"{at}: mode must be 'separate' or 'population', got {a['mode']!r}")
        algo = script or run["algo"]
        arms[name] = _build(Arm, a, at, name=name, algo=algo, label=name, envs=arm_envs, flags=())
    claims = tuple(
        _claim(c, i, where, papers, arms, envs, run) for i, c in enumerate(data["claim"])
    )
    tunings = ()
    if "tuning" in data:
        tunings = _tuning(data["tuning"], where, folder, arms, envs, run)
    ids = [c.id for c in claims]
    twice = sorted({i for i in ids if ids.count(i) > 1})
    if twice:
        raise SpecError(f"{where}: claim ids {twice} appear twice")
    for c in claims:
        missing = [o for o in c.of if o not in ids]
        if missing:
            raise SpecError(f"{where} claim {c.id}: 'of' names unknown claims {missing}")
    toy = _take(data["toy"], f"{where} [toy]", TOY, ("seeds", "steps"))
    toy_envs = _strs(toy.get("envs", list(envs)[:1]), f"{where} [toy] envs")
    toy_arms = _strs(toy.get("arms", list(arms)), f"{where} [toy] arms")
    for name, group, pool in (("envs", toy_envs, envs), ("arms", toy_arms, arms)):
        bad = [x for x in group if x not in pool]
        if bad:
            raise SpecError(f"{where} [toy]: {name} {bad} are not declared")
    exp = Experiment(
        id=folder.name,
        folder=folder,
        title=data["title"],
        summary=data.get("summary", ""),
        papers=papers,
        mode=mode,
        seeds=_seeds(run["seeds"], f"{where} [run]"),
        flags=_strs(run.get("flags", []), f"{where} [run] flags"),
        metrics=_strs(run["metrics"], f"{where} [run] metrics"),
        setting=run.get("setting", ""),
        paper_setting=run.get("paper_setting", ""),
        budget=run.get("budget", ""),
        envs=envs,
        arms=arms,
        claims=claims,
        toy=Toy(
            _seeds(toy["seeds"], f"{where} [toy]"),
            toy["steps"],
            _strs(toy.get("flags", []), f"{where} [toy] flags"),
            toy_envs,
            toy_arms,
        ),
        final_window=run.get("final_window", 1000),
        analysis=(folder / "analysis.py").exists(),
        digest=hashlib.sha256(raw).hexdigest()[:12],
        extra=data.get("analysis", {}),
        script=script,
        tunings=tunings,
        aggregate=_aggregate(data.get("aggregate"), where, arms, run),
        curves=run.get("curves", True),
    )
    from paper_figures.lab.metrics import check_name

    if exp.own_metrics and (script or not exp.analysis):
        raise SpecError(f"{where} [analysis] metrics: computed per run by an analysis.py's "
                        "`metrics`, so the folder needs one and no script")  # fmt: skip
    for name in exp.metrics if not script else ():  # a script's metrics are its table's columns
        if name in exp.own_metrics:
            continue
        try:
            check_name(name)
        except ValueError as exc:
            raise SpecError(f"{where} [run] metrics: {exc}") from None
    for c in claims:
        if c.metric and c.metric not in exp.metrics:
            raise SpecError(f"{where} claim {c.id}: metric '{c.metric}' is not in [run] metrics")
    return exp


def _aggregate(table: dict | None, where: str, arms: dict, run: dict) -> dict:
    """The [aggregate] table (lab/aggregates.py), checked: a declared baseline arm, metrics of
    [run] metrics (tables: more [run] metrics shown per arm and env, not aggregated)."""
    if table is None:
        return {}
    t = _take(table, f"{where} [aggregate]", AGGREGATE, ("baseline", "metrics"))
    if t["baseline"] not in arms:
        raise SpecError(f"{where} [aggregate]: baseline '{t['baseline']}' is not an arm")
    metrics = _strs(t["metrics"], f"{where} [aggregate] metrics")
    tables = _strs(t.get("tables", []), f"{where} [aggregate] tables")
    bad = [m for m in metrics + tables if m not in run["metrics"]]
    if bad or not metrics:
        raise SpecError(f"{where} [aggregate]: metrics {bad} are not in [run] metrics")
    return {"baseline": t["baseline"], "metrics": metrics, "tables": tables}


def _tuning(tables, where: str, folder: Path, arms: dict, envs: dict, run: dict) -> tuple:
    """The [tuning] grids (lab/tuning.py); each tuned arm's flags completed in place by the
    configuration its grid's tuning table chose, or the arm marked pending (not tuned yet). A
    table made with another grid is refused: its choice was made among other configurations."""
    from dataclasses import replace

    from paper_figures.lab import tuning as tuner

    metrics = _strs(run["metrics"], f"{where} [run] metrics")
    seeds = _seeds(run["seeds"], f"{where} [run]")
    grids = tuner.parse_all(tables, where, arms, envs, metrics, seeds)
    for t in grids:
        target = tuner.path(folder, t)
        chosen, tried = tuner.chosen(target), tuner.tried(target)
        for name in t.arms:
            if name not in chosen:
                arms[name] = replace(arms[name], pending=True)
                continue
            other = tuner.other_grid(t, tried[name])
            if other:
                raise SpecError(f"{where}: results/{t.file} was made with another grid for "
                                f"{name}: {other} (tune again, or declare the new grid as a "
                                "named [[tuning]] with arms of its own)")  # fmt: skip
            arms[name] = replace(arms[name], flags=arms[name].flags + chosen[name])
    return grids


def _claim(c: dict, i: int, where: str, papers, arms, envs, run) -> Claim:
    where = f"{where} [[claim]] {c.get('id', i + 1)}"
    c = _take(c, where, CLAIM, ("id", "paper", "claim", "kind"))
    if c["paper"] not in papers:
        raise SpecError(f"{where}: paper '{c['paper']}' is not a [[paper]] key")
    kind = c["kind"]
    if kind not in KINDS:
        raise SpecError(f"{where}: kind must be one of {', '.join(KINDS)}, got {kind!r}")
    short = c.get("short", c["claim"])
    if len(short) > MAX_CLAIM:
        raise SpecError(f"{where}: the claim is {len(short)} characters; give a `short` of at "
                        f"most {MAX_CLAIM} for the ledger line")  # fmt: skip
    sides = ("a",) if kind in ("above", "below") else ("a", "b")
    if kind != "contrast" and ("c" in c or "d" in c):
        raise SpecError(f"{where}: 'c' and 'd' belong to kind contrast, not {kind}")
    if kind not in ("all-of", "exact"):
        # kind contrast names four arms: the claim (a - b) - (c - d) > 0
        for side in sides + (("c", "d") if kind == "contrast" else ()):
            if c.get(side) not in arms:
                raise SpecError(f"{where}: '{side}' must name an arm, got {c.get(side)!r}")
        if "metric" not in c:
            raise SpecError(f"{where}: missing key 'metric'")
    if kind in ("non-inferior", "equivalent") and "margin" not in c:
        raise SpecError(f"{where}: kind {kind} needs a margin (and margin_why)")
    if "margin" in c and not c.get("margin_why"):
        raise SpecError(f"{where}: a margin needs margin_why (where it comes from)")
    if kind in ("above", "below") and ("bar" not in c or not c.get("bar_why")):
        raise SpecError(f"{where}: kind {kind} needs a bar and bar_why")
    if c.get("shift", "") not in ("", "margin"):
        raise SpecError(f"{where}: shift must be '' or 'margin', got {c['shift']!r}")
    if c.get("normalise", "none") not in ("none", "minmax-pair"):
        raise SpecError(f"{where}: normalise must be 'none' or 'minmax-pair'")
    if c.get("difference", "diff") not in ("diff", "ratio"):
        raise SpecError(f"{where}: difference must be 'diff' (a - b) or 'ratio' (a / b - 1)")
    claim_envs = _strs(c.get("envs", []), f"{where} envs")
    bad = [e for e in claim_envs if e not in envs]
    if bad:
        raise SpecError(f"{where}: envs {bad} are not in [envs]")
    sensitivity = _strs(c.get("sensitivity", []), f"{where} sensitivity")
    if [e for e in sensitivity if e not in envs] or set(sensitivity) & set(claim_envs):
        raise SpecError(f"{where}: sensitivity envs must be declared envs outside its envs")
    # a guard: at least one arm's mean of the metric reaches it, else the line is inconclusive
    if "guard" in c and not c.get("guard_why"):
        raise SpecError(f"{where}: a guard needs guard_why (what it stands for)")
    if "guard" in c and kind not in ("superior", "inferior", "non-inferior", "equivalent",
                                     "unpaired"):  # fmt: skip
        raise SpecError(f"{where}: a guard applies to paired and unpaired kinds, not {kind}")
    return _build(Claim, c, where, short=short)


def discover(root: Path = FIGURES) -> list[Path]:
    """Every experiment folder under paper_figures/ (one holding an experiment.toml), sorted."""
    return sorted(p.parent for p in Path(root).glob(f"*/{DECLARATION}"))


def load_all(root: Path = FIGURES) -> list[Experiment]:
    return [load(p) for p in discover(root)]


INPUTS = "{inputs}"  # in a declaration's flags: the folder its analysis.py's prepare_inputs fills


def _without_inputs(flags: list[str]) -> list[str]:
    """Flags less each flag whose value names {inputs} (its file is made by the analysis.py's
    prepare_inputs just before the runs; the algorithm may read it while parsing)."""
    out = []
    for f in flags:
        if INPUTS in f:
            out.pop()  # the flag it is the value of
        else:
            out.append(f)
    return out


def check_flags(exp: Experiment) -> None:
    """Parse every arm's full flags with its algorithm's own Args (what a run would do), so a
    misspelt flag fails here, before anything runs."""
    import importlib

    from controlrl.cli import parse

    if exp.script:  # the arms are the script's conditions; its toy run parses its flags
        return
    # a tuned arm: each configuration of its grid after its declared flags
    grids = {a: [t.declared[a] + c for c in t.configs()] for t in exp.tunings for a in t.arms}
    for arm, flags in ((a, f) for a in exp.arms.values() for f in grids.get(a.name, [a.flags])):
        env = exp.envs[arm.envs[0]]  # its first env
        argv = ["--env-id", env.id, "--seed", "1", "--total-timesteps", str(env.steps)]
        argv += _without_inputs([*exp.flags, *flags])
        if exp.mode_of(arm.name, env.id) == "population":
            argv += ["--num-seeds", str(len(exp.seeds))]
        try:
            parse(importlib.import_module(f"algos.{arm.algo}").Args, argv)
        except SystemExit as exc:
            raise SpecError(f"{exp.id} arm {arm.name}: algos/{arm.algo}.py refuses its flags "
                            f"{' '.join(argv)} (exit {exc.code})") from None  # fmt: skip
