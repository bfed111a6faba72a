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
"""

from __future__ import annotations

import csv
import itertools
from dataclasses import dataclass
from pathlib import Path

from controlrl import experiment as sweep

FILE = "tuning.csv"
FIELDS = ("arm", "config", "flags", "env", "seeds", "score", "chosen")
MAX_CONFIGS = 64  # "a small grid": a few dozen configurations at most
TABLE = {"arms": list, "grid": dict, "seeds": object, "first_seed": int, "metric": str}
TABLE |= {"envs": list, "toy_seeds": list}


@dataclass(frozen=True)
class Tuning:
    arms: tuple[str, ...]
    grid: tuple[tuple[str, tuple[str, ...]], ...]  # (flag, its values) in declared order
    seeds: tuple[int, ...]
    metric: str
    envs: tuple[str, ...]  # () : each tuned arm's own envs
    toy_seeds: tuple[int, ...]  # the toy's tuning seeds (disjoint from the toy's seeds)
    declared: dict  # {arm: its declared flags, before the chosen configuration}

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
    count = 1
    for _, values in grid:
        count *= len(values)
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
    return Tuning(tuned, tuple(grid), seeds, t["metric"], tuning_envs, toy_seeds, declared)


def path(folder: Path) -> Path:
    return Path(folder) / "results" / FILE


def chosen(target: Path) -> dict[str, tuple[str, ...]]:
    """{arm: the chosen configuration's flags} of a tuning table ({} where there is none)."""
    if not target.exists():
        return {}
    with target.open(newline="") as f:
        return {
            r["arm"]: tuple(r["flags"].split()) for r in csv.DictReader(f) if r["chosen"] == "1"
        }


def configs(exp, toy: bool = False) -> dict[str, sweep.SweepConfig]:
    """{sweep name: its sweep}, one per tuned arm and mode: every grid configuration as an arm
    ('<arm>.c<k>'), on the tuning envs and seeds (the toy's size, seeds and flags with toy)."""
    tuning, out = exp.tuning, {}
    for name in tuning.arms:
        arm = exp.arms[name]
        if toy and name not in exp.toy.arms:
            continue
        arms = [sweep.Arm(f"{name}.c{k}", arm.algo,
                          (*tuning.declared[name], *flags, *(exp.toy.flags if toy else ())))
                for k, flags in enumerate(tuning.configs())]  # fmt: skip
        for mode in ("population", "separate"):
            envs = [e for e in tuning.arm_envs(exp, name) if exp.envs[e].mode == mode
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


def run(exp, toy: bool, base: Path, workers: int = 2) -> tuple[Path, list[str]]:
    """Run the grid (resumable) under base/tuning, score it and write the tuning table (the
    experiment's results/tuning.csv; a toy's under base); returns it and the failed runs."""
    from paper_figures.lab import metrics

    failed, rows = [], []
    for name, config in configs(exp, toy).items():
        out = base / "tuning" / name
        status = sweep.run_sweep(config, out, workers=workers)
        failed += [k for k, v in status.items() if v["status"] == "failed"]
        arm = name.removesuffix("-separate").removesuffix("-population")
        for task in sweep.plan(config, out):
            if not sweep.is_done(Path(task.run_dir)):
                continue
            values = metrics.extract(Path(task.run_dir), task.env_id, [exp.tuning.metric],
                                     exp.final_window)  # fmt: skip
            k = int(task.arm.rsplit(".c", 1)[1])
            rows += [(arm, k, task.env_id, seed, v[exp.tuning.metric])
                     for seed, v in values.items()]  # fmt: skip
    target = base / "results" / FILE if toy else path(exp.folder)
    write(target, exp.tuning, rows)
    return target, failed


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
    """The page's tuning section: the protocol, the grid, the seeds, the choice per arm."""
    t = exp.tuning
    grid = "; ".join(f"`{flag}` {', '.join(values)}" for flag, values in t.grid)
    s = t.seeds
    seeds = f"{s[0]}-{s[-1]}" if s == tuple(range(s[0], s[0] + len(s))) else ", ".join(map(str, s))
    where = ", ".join(t.envs) if t.envs else "each arm's envs"
    out = ["## Tuning", "", "An equal tuning budget (Patterson et al., \"Empirical Design in "
           "Reinforcement Learning\", JMLR 2024, arXiv 2304.01315): each tuned arm runs every "
           f"configuration of the grid ({len(t.configs())}: {grid}) on {len(s)} tuning seeds "
           f"({seeds}, disjoint from the evaluation seeds) on {where}, and is evaluated with the "
           f"configuration of the best {t.metric} (its mean over seeds, then over envs). "
           "results/tuning.csv holds every configuration's score.", "",
           "| arm | chosen flags | score |", "|---|---|---|"]  # fmt: skip
    target = path(exp.folder)
    rows = list(csv.DictReader(target.open(newline=""))) if target.exists() else []
    for arm in t.arms:
        mine = [r for r in rows if r["arm"] == arm and r["chosen"] == "1"]
        if not mine:
            out.append(f"| {arm} | not tuned yet (`python -m paper_figures tune {exp.id}`) | |")
            continue
        score = sum(float(r["score"]) for r in mine) / len(mine)
        out.append(f"| {arm} | `{mine[0]['flags']}` | {score:.3g} |")
    return out + [""]
