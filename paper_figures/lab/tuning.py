"""An equal tuning budget (Patterson et al., "Empirical Design in Reinforcement Learning", JMLR
2024, arXiv 2304.01315): each tuned arm runs every configuration of one declared grid on tuning
seeds disjoint from the evaluation seeds, and is then evaluated with the configuration that
scored best there. `python -m paper_figures tune <id>` runs the grid through the sweep runner and
writes results/tuning.csv (every configuration's score per arm and env, the chosen one marked);
the declaration's tuned arms take their flags from that file (an arm not yet tuned runs nothing).

    [tuning]
    arms = ["grpo-tuned", "gpg-tuned"]     the arms the grid completes (their own flags first)
    grid = { "--learning-rate" = ["3e-4", "1e-3"], "--update-epochs" = ["1", "4"] }
    seeds = 20                            tuning seeds: a count from first_seed, or a list
    first_seed = 1001
    metric = "final_success"              the score: its mean over seeds, then over envs
    envs = ["bandit:bernoulli-10"]        where the grid runs (default: each arm's envs)

Several grids are an array of tables ([[tuning]]), each tuning arms of its own; all but one are
named (`name = "wide"`: results/tuning-wide.csv) and a grid may say why it exists (`why`, shown
on the page: a grid widened after seeing a choice says so there). A tuning table is tied to its
grid: one made with another grid (a configuration more or fewer) is refused until tuned again,
so a widened grid is a new named grid with arms of its own, not an edit that would reuse a
choice made among other configurations.
"""

from __future__ import annotations

import csv
import itertools
import math
import re
from dataclasses import dataclass
from pathlib import Path

from controlrl import experiment as sweep

FILE = "tuning.csv"
FIELDS = ("arm", "config", "flags", "env", "seeds", "score", "chosen")
MAX_CONFIGS = 64  # "a small grid": a few dozen configurations at most
TABLE = {"arms": list, "grid": dict, "seeds": object, "first_seed": int, "metric": str}
TABLE |= {"envs": list, "toy_seeds": list, "name": str, "why": str}
NAME = re.compile(r"[a-z0-9][a-z0-9-]*")


@dataclass(frozen=True)
class Tuning:
    arms: tuple[str, ...]
    grid: tuple[tuple[str, tuple[str, ...]], ...]  # (flag, its values) in declared order
    seeds: tuple[int, ...]
    metric: str
    envs: tuple[str, ...]  # () : each tuned arm's own envs
    toy_seeds: tuple[int, ...]  # the toy's tuning seeds (disjoint from the toy's seeds)
    declared: dict  # {arm: its declared flags, before the chosen configuration}
    name: str = ""  # "": results/tuning.csv; else results/tuning-<name>.csv
    why: str = ""  # the declaration's reason for this grid (the page shows it)

    @property
    def file(self) -> str:
        return f"tuning-{self.name}.csv" if self.name else FILE

    def configs(self) -> list[tuple[str, ...]]:
        """Every configuration's flags, in grid order (the last flag varies fastest)."""
        flags = [flag for flag, _ in self.grid]
        return [tuple(x for pair in zip(flags, values) for x in pair)
                for values in itertools.product(*(v for _, v in self.grid))]  # fmt: skip

    def arm_envs(self, exp, arm: str) -> list[str]:
        return [e for e in exp.arms[arm].envs if not self.envs or e in self.envs]


def parse(table: dict, where: str, arms: dict, envs: dict, metrics, eval_seeds) -> Tuning:
    """The [tuning] table, checked: known arms and envs, a grid of at most MAX_CONFIGS
    configurations whose flags no tuned arm sets itself, tuning seeds disjoint from `eval_seeds`."""
    from paper_figures.lab.spec import SpecError, _seeds, _strs, _take

    where = f"{where} [tuning]"
    t = _take(table, where, TABLE, ("arms", "grid", "seeds", "metric"))
    name = t.get("name", "")
    if name:
        where = f"{where} {name}"
        if not NAME.fullmatch(name):
            raise SpecError(f"{where}: name must be lower-case letters, digits and '-'")
    tuned = _strs(t["arms"], f"{where} arms")
    bad = [a for a in tuned if a not in arms]
    if bad:
        raise SpecError(f"{where}: arms {bad} are not declared")
    grid = []
    for flag, values in t["grid"].items():
        values = _strs(values, f"{where} grid {flag}")
        if not flag.startswith("--") or not values:
            raise SpecError(f"{where}: grid keys are flags ('--name') with a list of values")
        grid.append((flag, values))
    count = math.prod(len(values) for _, values in grid)
    if count > MAX_CONFIGS:
        raise SpecError(f"{where}: the grid has {count} configurations, at most {MAX_CONFIGS}")
    for a in tuned:
        own = [f for f, _ in grid if f in arms[a].flags]
        if own:
            raise SpecError(f"{where}: arm {a} sets {own} itself; the grid tunes them")
    seeds = t["seeds"]
    if isinstance(seeds, int) and not isinstance(seeds, bool):
        seeds = list(range(t.get("first_seed", 1), t.get("first_seed", 1) + seeds))
    seeds = _seeds(seeds, where)
    toy_seeds = _seeds(t.get("toy_seeds", list(seeds[:2])), f"{where} toy_seeds")
    overlap = sorted(set(seeds) & set(eval_seeds))
    if overlap:
        raise SpecError(f"{where}: tuning seeds {overlap[:5]} are evaluation seeds too (they "
                        "must be disjoint)")  # fmt: skip
    if t["metric"] not in metrics:
        raise SpecError(f"{where}: metric '{t['metric']}' is not in [run] metrics")
    tuning_envs = _strs(t.get("envs", []), f"{where} envs")
    bad = [e for e in tuning_envs if e not in envs]
    if bad:
        raise SpecError(f"{where}: envs {bad} are not in [envs]")
    declared = {a: arms[a].flags for a in tuned}
    return Tuning(tuned, tuple(grid), seeds, t["metric"], tuning_envs, toy_seeds, declared, name,
                  t.get("why", ""))  # fmt: skip


def parse_all(tables, where: str, arms: dict, envs: dict, metrics, eval_seeds
              ) -> tuple[Tuning, ...]:  # fmt: skip
    """[tuning] (one grid) or [[tuning]] (several): each checked by parse; names unique, one
    grid at most unnamed, and no arm tuned by two grids."""
    from paper_figures.lab.spec import SpecError

    tables = [tables] if isinstance(tables, dict) else tables
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        raise SpecError(f"{where}: [tuning] is a table or an array of tables ([[tuning]])")
    out = tuple(parse(t, where, arms, envs, metrics, eval_seeds) for t in tables)
    names = [t.name for t in out]
    twice = sorted({n or '""' for n in names if names.count(n) > 1})
    if twice:
        raise SpecError(f"{where} [tuning]: grid names {twice} appear twice (name each grid)")
    tuned = [a for t in out for a in t.arms]
    twice = sorted({a for a in tuned if tuned.count(a) > 1})
    if twice:
        raise SpecError(f"{where} [tuning]: arms {twice} are tuned by two grids (one each)")
    return out


def path(folder: Path, tuning: Tuning) -> Path:
    return Path(folder) / "results" / tuning.file


def _rows(target: Path) -> list[dict[str, str]]:
    """A tuning table's rows ([] where there is none)."""
    if not target.exists():
        return []
    with target.open(newline="") as f:
        return list(csv.DictReader(f))


def chosen(target: Path) -> dict[str, tuple[str, ...]]:
    """{arm: the chosen configuration's flags} of a tuning table ({} where there is none)."""
    return {r["arm"]: tuple(r["flags"].split()) for r in _rows(target) if r["chosen"] == "1"}


def tried(target: Path) -> dict[str, set[tuple[str, ...]]]:
    """{arm: the configurations (their flags) its tuning table scored} ({} where none)."""
    out: dict[str, set[tuple[str, ...]]] = {}
    for r in _rows(target):
        out.setdefault(r["arm"], set()).add(tuple(r["flags"].split()))
    return out


def other_grid(tuning: Tuning, made: set[tuple[str, ...]]) -> str:
    """Why a tuning table's configurations `made` are not this grid's ('' : they are)."""
    want = set(tuning.configs())
    if made == want:
        return ""
    extra, missing = len(made - want), len(want - made)
    return (f"it scored {len(made)} configurations, the grid declares {len(want)} ({missing} "
            f"not scored, {extra} not in the grid)")  # fmt: skip


def edges(tuning: Tuning, flags: tuple[str, ...]) -> list[str]:
    """The numeric grid flags whose chosen value is the grid's largest or smallest (of two or
    more values): a choice at the edge says the grid may be too narrow there. A smallest value
    of 0 is no edge: it switches the term off, and nothing below it is of the same kind."""
    value = dict(zip(flags[::2], flags[1::2]))
    out = []
    for flag, values in tuning.grid:
        try:
            numbers = [float(v) for v in values]
        except ValueError:
            continue
        if len(set(numbers)) < 2 or flag not in value:
            continue
        v = float(value[flag])
        if v == max(numbers):
            out.append(f"largest {flag}")
        elif v == min(numbers) and v != 0:
            out.append(f"smallest {flag}")
    return out


def configs(exp, tuning: Tuning, toy: bool = False) -> dict[str, sweep.SweepConfig]:
    """{sweep name: its sweep}, one per tuned arm and mode: every grid configuration as an arm
    ('<arm>.c<k>'), on the tuning envs and seeds (the toy's size, seeds and flags with toy)."""
    out = {}
    for name in tuning.arms:
        arm = exp.arms[name]
        if toy and name not in exp.toy.arms:
            continue
        arms = [sweep.Arm(f"{name}.c{k}", arm.algo,
                          (*tuning.declared[name], *flags, *(exp.toy.flags if toy else ())))
                for k, flags in enumerate(tuning.configs())]  # fmt: skip
        for mode in ("population", "separate"):
            envs = [e for e in tuning.arm_envs(exp, name) if exp.mode_of(name, e) == mode
                    and (not toy or e in exp.toy.envs)]  # fmt: skip
            if not envs:
                continue
            steps = {e: exp.toy.steps if toy else exp.envs[e].steps for e in envs}
            out[name + ("" if mode == exp.mode else f"-{mode}")] = sweep.SweepConfig(
                algos=[], envs=envs, seeds=0, total_timesteps=max(steps.values()),
                extra=list(exp.flags), arms=arms,
                seed_list=list(tuning.toy_seeds if toy else tuning.seeds),
                population=mode == "population", steps_per_env=steps,
            )  # fmt: skip
    return out


def run(exp, tuning: Tuning, toy: bool, base: Path, workers: int = 2) -> tuple[Path, list[str]]:
    """Run one grid (resumable) under base/tuning (base/tuning-<name> for a named grid), score
    it and write its tuning table (the experiment's results/<tuning.file>; a toy's under base);
    returns it and the failed runs."""
    from paper_figures.lab import metrics, runner

    failed, rows, timed = [], [], []
    for name, config in configs(exp, tuning, toy).items():
        out = base / tuning.file.removesuffix(".csv") / name
        status = sweep.run_sweep(config, out, workers=workers)
        failed += [k for k, v in status.items() if v["status"] == "failed"]
        arm = name.removesuffix("-separate").removesuffix("-population")
        for task in sweep.plan(config, out):
            timed.append((arm, task))
            if not sweep.is_done(Path(task.run_dir)):
                continue
            values = metrics.extract(Path(task.run_dir), task.env_id, [tuning.metric],
                                     exp.final_window)  # fmt: skip
            k = int(task.arm.rsplit(".c", 1)[1])
            rows += [(arm, k, task.env_id, seed, v[tuning.metric])
                     for seed, v in values.items()]  # fmt: skip
    target = base / "results" / tuning.file if toy else path(exp.folder, tuning)
    write(target, tuning, rows)
    runner.write_compute(compute_path(target), runner.compute_rows(timed))
    return target, failed


def compute_path(table: Path) -> Path:
    """A grid's compute table beside its tuning table (tuning-compute.csv, tuning-wide-...)."""
    return table.with_name(table.stem + "-compute.csv")


def scores(rows) -> dict[tuple[str, int, str], tuple[int, float]]:
    """{(arm, config, env): (seeds, mean score)} of (arm, config, env, seed, value) rows."""
    acc: dict[tuple, list[float]] = {}
    for arm, k, env, _, value in rows:
        acc.setdefault((arm, k, env), []).append(value)
    return {key: (len(v), sum(v) / len(v)) for key, v in acc.items()}


def pick(table: dict, arm: str) -> int:
    """The arm's chosen configuration: the best mean over envs of the per-env mean score (the
    first in grid order on a tie); a configuration missing an env or a seed cannot be chosen."""
    envs = {env for (a, _, env) in table if a == arm}
    full = max(n for (a, _, _), (n, _) in table.items() if a == arm)
    best, best_score = -1, float("-inf")
    for k in sorted({k for (a, k, _) in table if a == arm}):
        cells = [table.get((arm, k, env)) for env in envs]
        if any(c is None or c[0] < full for c in cells):
            continue
        score = sum(c[1] for c in cells) / len(cells)
        if score > best_score:
            best, best_score = k, score
    return best


def write(target: Path, tuning: Tuning, rows) -> None:
    """Every (arm, configuration, env)'s score, the chosen configuration's rows marked 1."""
    table = scores(rows)
    grid = tuning.configs()
    choice = {arm: pick(table, arm) for arm in {a for (a, _, _) in table}}
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.open("w", newline="") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(FIELDS)
        for arm in tuning.arms:
            for (a, k, env), (n, score) in sorted(table.items(), key=lambda x: (x[0][1], x[0][2])):
                if a == arm:
                    chosen_ = int(k == choice[arm])
                    writer.writerow([arm, k, " ".join(grid[k]), env, n, f"{score:.6g}", chosen_])


def page_lines(exp) -> list[str]:
    """The page's tuning section: the protocol, then per grid its configurations, seeds, why
    it was declared and the choice per arm (marked where it lies at the grid's edge)."""
    out = ["## Tuning", "", "An equal tuning budget (Patterson et al., \"Empirical Design in "
           "Reinforcement Learning\", JMLR 2024, arXiv 2304.01315): each tuned arm runs every "
           "configuration of its grid on tuning seeds disjoint from the evaluation seeds, and is "
           "evaluated with the configuration of the best score (its mean over seeds, then over "
           "envs). Each grid's tuning table in results/ holds every configuration's score.",
           ""]  # fmt: skip
    for t in exp.tunings:
        out += _grid_lines(exp, t)
    return out


def _grid_lines(exp, t: Tuning) -> list[str]:
    grid = "; ".join(f"`{flag}` {', '.join(values)}" for flag, values in t.grid)
    s = t.seeds
    seeds = f"{s[0]}-{s[-1]}" if s == tuple(range(s[0], s[0] + len(s))) else ", ".join(map(str, s))
    where = ", ".join(t.envs) if t.envs else "each arm's envs"
    title = f"Grid `{t.name}`" if t.name else "The grid"
    out = [f"{title} ({len(t.configs())} configurations: {grid}) on {len(s)} tuning seeds "
           f"({seeds}) on {where}, scored by {t.metric}; results/{t.file}."]  # fmt: skip
    out += ["", t.why] if t.why else []
    out += ["", "| arm | chosen flags | score | at the grid's edge |", "|---|---|---|---|"]
    rows = _rows(path(exp.folder, t))
    for arm in t.arms:
        mine = [r for r in rows if r["arm"] == arm and r["chosen"] == "1"]
        if not mine:
            cmd = f"python -m paper_figures tune {exp.id}" + (f" --grid {t.name}" if t.name else "")
            out.append(f"| {arm} | not tuned yet (`{cmd}`) | | |")
            continue
        score = sum(float(r["score"]) for r in mine) / len(mine)
        edge = ", ".join(edges(t, tuple(mine[0]["flags"].split()))) or "no"
        out.append(f"| {arm} | `{mine[0]['flags']}` | {score:.3g} | {edge} |")
    return out + [""]
