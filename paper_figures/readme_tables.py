"""The numbers README.md and paper_figures/README.md quote, rendered from the committed CSVs of
paper_figures/out/ into each README's generated blocks

    <!-- table:<name> -->
    ...text written by TABLES[<name>](read)...
    <!-- table:end -->

(`python -m paper_figures report` rewrites them, `check` fails naming each block that differs; a
block without a function, or a function without a block, is an error). "mean (range)" below 5
seeds, "mean [lo, hi]" (95% bootstrap CI, controlrl.stats) from 5. The blocks of
paper_figures/README.md are paper_figures/figures_tables.py's.
"""

from __future__ import annotations

import math
import re
import textwrap
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import numpy as np

from controlrl import stats
from paper_figures.lab.tables import read_rows

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "paper_figures" / "out"
Read = Callable[[str], list[dict[str, str]]]
TABLES: dict[str, Callable[[Read], str]] = {}
BLOCK = re.compile(r"<!-- table:(?P<name>[\w.-]+) -->\n(?P<body>.*?)<!-- table:end -->", re.S)
END = "<!-- table:end -->"


def table(name: str):
    """Register the function that renders block `name`."""

    def register(fn: Callable[[Read], str]) -> Callable[[Read], str]:
        if name in TABLES:
            raise ValueError(f"two functions render the README block table:{name}")
        TABLES[name] = fn
        return fn

    return register


def render(text: str, read: Read, where: str) -> tuple[str, list[str]]:
    """`text` with every generated block rewritten, and the names of the blocks that changed."""
    changed: list[str] = []

    def one(m: re.Match) -> str:
        name = m["name"]
        if name not in TABLES:
            raise ValueError(
                f"{where}: block table:{name} has no function in paper_figures/readme_tables.py"
            )
        body = TABLES[name](read).rstrip("\n") + "\n"
        if body != m["body"]:
            changed.append(name)
        return f"<!-- table:{name} -->\n{body}{END}"

    return BLOCK.sub(one, text), changed


def read(name: str) -> list[dict[str, str]]:
    """Rows of a committed CSV of paper_figures/out/; a missing file is an error naming it."""
    path = OUT / name
    if not path.exists():
        raise FileNotFoundError(f"a README table reads paper_figures/out/{name}, which is missing")
    return read_rows(path)  # bounded; a fault is one line naming the file


def readme_texts(readme: Path, figures_readme: Path) -> tuple[dict[Path, str], list[str]]:
    """Both READMEs with every table block as its CSVs give it, and "<file>: table:<name>" for
    each block whose committed text differs."""
    from paper_figures import figures_tables  # noqa: F401  (registers paper_figures/README.md's)

    texts = {readme: readme.read_text(), figures_readme: figures_readme.read_text()}
    changed, used = [], set()
    for path, text in texts.items():
        texts[path], names = render(text, read, path.name)
        changed += [f"{path.name}: table:{n}" for n in names]
        used |= {m["name"] for m in BLOCK.finditer(text)}
    unused = sorted(set(TABLES) - used)
    if unused:
        raise ValueError(f"the README tables render blocks no README holds: {', '.join(unused)}")
    return texts, changed


# --- formatting -------------------------------------------------------------------------------


def f(x: float, spec: str = ",.0f") -> str:
    """One number; "-0" printed as "0"."""
    s = format(float(x), spec)
    return s[1:] if re.fullmatch(r"-0[.,0]*", s) else s


def g(x: float, digits: int = 2) -> str:
    """`digits` significant digits below 1,000; whole numbers with separators from 1,000."""
    x = float(x)
    return f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.{digits}g}"


def span(lo: float, hi: float, spec: str) -> str:
    """'lo-hi', or 'lo to hi' where a minus sign would make the dash ambiguous."""
    a, b = f(lo, spec), f(hi, spec)
    return f"{a} to {b}" if a.startswith("-") or b.startswith("-") else f"{a}-{b}"


def spread(values, spec: str = ",.0f") -> str:
    """'mean (min-max)' below 5 seeds, 'mean [lo, hi]' (95% bootstrap CI of the mean) from 5:
    stats.summarize's interval, so a README cell and a ledger row on the same runs agree."""
    x = np.asarray(list(values), np.float64)
    if x.size == 0:
        raise ValueError("no values")
    s = stats.summarize(x)
    if s.kind == "range":
        return f"{f(s.mean, spec)} ({span(s.lo, s.hi, spec)})"
    return f"{f(s.mean, spec)} [{f(s.lo, spec)}, {f(s.hi, spec)}]"


def para(text: str) -> str:
    """A prose paragraph wrapped at 100 columns, as the READMEs are."""
    return textwrap.fill(text, 100, break_long_words=False, break_on_hyphens=False)


def kind(n: int) -> str:
    """What `spread` shows for n seeds."""
    return "mean (range)" if n < stats.MIN_SEEDS else "mean [95% bootstrap CI]"


def med_range(values, spec: str) -> str:
    """'median (min-max)' of a few repeats."""
    x = np.asarray(list(values), np.float64)
    return f"{f(np.median(x), spec)} ({span(x.min(), x.max(), spec)})"


def rows_where(rows: list[dict[str, str]], **match) -> list[dict[str, str]]:
    """The rows whose columns equal `match` (compared as strings); an error if none."""
    out = [r for r in rows if all(r[k] == str(v) for k, v in match.items())]
    if not out:
        raise ValueError(f"no CSV row with {match}")
    return out


def col(rows, name: str) -> list[float]:
    """A column as floats."""
    return [float(r[name]) for r in rows]


def one(rows, **match) -> dict[str, str]:
    """The single row matching `match`."""
    found = rows_where(rows, **match)
    if len(found) != 1:
        raise ValueError(f"{len(found)} CSV rows with {match}, expected one")
    return found[0]


def md(header: list[str], body: list[list[str]], align: list[str] | None = None) -> str:
    """A markdown table."""
    align = align or ["---"] * len(header)
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(align) + " |"]
    lines += ["| " + " | ".join(r) + " |" for r in body]
    return "\n".join(lines)


def uniform_n(groups: list[list]) -> int:
    """The common size of the groups (a caption states one seed count)."""
    sizes = {len(g) for g in groups}
    if len(sizes) != 1:
        raise ValueError(f"groups of different sizes {sorted(sizes)}")
    return sizes.pop()


def paired_ratio(rows, metric: str, ours: str, theirs: str, key="contender", **match):
    """ours / theirs per repeat (rows of one `repeat` pair), ours and theirs values of `key`."""
    by = defaultdict(dict)
    for r in rows_where(rows, **match):
        by[r["repeat"]][r[key]] = float(r[metric])
    return [v[ours] / v[theirs] for _, v in sorted(by.items()) if ours in v and theirs in v]


def isnan(s: str) -> bool:
    return s == "" or math.isnan(float(s))


# --- README.md ---------------------------------------------------------------------------------

PUBLISHED = {  # (algo, env) -> who published the reference column's number, and how
    ("ppo", "Hopper-v5"): "CleanRL (v4, train)",
    ("ppo", "HalfCheetah-v5"): "CleanRL",
    ("ppo", "Walker2d-v5"): "CleanRL",
    ("trpo", "Hopper-v5"): "RL Zoo (v3, eval)",
    ("trpo", "HalfCheetah-v5"): "RL Zoo",
    ("trpo", "Walker2d-v5"): "RL Zoo",
    ("ppo", "dmc:cheetah-run"): "CleanRL at 8M",
    ("ppo", "dmc:walker-walk"): "CleanRL at 8M",
}


def learning_body(read: Read, files: list[str]) -> tuple[str, int]:
    """algo | env | train | final evaluation | published, from the mujoco_results.py CSVs."""
    body, groups = [], []
    for name in files:
        rows = read(name)
        for algo, env in dict.fromkeys((r["algo"], r["env_id"]) for r in rows):
            g = rows_where(rows, algo=algo, env_id=env)
            groups.append(g)
            ref = {r["reference"] for r in g}
            if len(ref) != 1:
                raise ValueError(f"{name}: {algo} {env} has several references")
            finals = [spread(col(g, k)) for k in ("final_train_return", "final_eval_return")]
            body.append(
                [algo.upper(), env, *finals, f"{PUBLISHED[(algo, env)]}: {f(float(ref.pop()))}"]
            )
    n = uniform_n(groups)
    return md(["algo", "env", "train", "final evaluation", "published"], body), n


@table("learning")
def learning(read: Read) -> str:
    files = ["ppo_mujoco.csv", "trpo_mujoco.csv", "ppo_dmc.csv"]
    text, n = learning_body(read, files)
    steps = {r["steps"] for name in files for r in read(name)}
    steps = max(map(int, steps))
    return (
        para(
            f"**Learning at {round(steps, -5) / 1e6:g}M steps** (`{'`, `'.join(files)}`;"
            f" {kind(n)} over {n} seeds; train = mean training return over the last 20,480 steps,"
            " final evaluation = deterministic episodes at the end, normaliser frozen):"
        )
        + "\n\n"
        + text
    )


BENCH_ROWS = [  # label, CSV, filter, ours / theirs contenders, rate column, rate format
    ("SB3 PPO, 1 env, env steps/s", "bench_ppo.csv", {"algo": "ppo", "num_envs": 1}, "sb3", "sps",
     ",.0f"),
    ("SB3 PPO, 8 envs", "bench_ppo.csv", {"algo": "ppo", "num_envs": 8}, "sb3", "sps", ",.0f"),
    ("sb3-contrib TRPO, 2 envs", "bench_trpo.csv", {"num_envs": 2}, "sb3", "sps", ",.0f"),
    ("sb3-contrib TRPO, 8 envs", "bench_trpo.csv", {"num_envs": 8}, "sb3", "sps", ",.0f"),
    ("SB3 SAC (Retrace actor-critic), updates/s", "bench_retrace.csv", {}, "sb3", "updates_per_s",
     ".1f"),
    ("d3rlpy 2.8.1 IQL, updates per CPU second", "bench_iql.csv", {}, "d3rlpy",
     "updates_per_cpu_s", ".1f"),
]  # fmt: skip


@table("speed")
def speed(read: Read) -> str:
    body, repeats = [], set()
    for label, name, match, theirs, metric, spec in BENCH_ROWS:
        rows = rows_where(read(name), **match)
        ours = col(rows_where(rows, contender="ours"), metric)
        other = col(rows_where(rows, contender=theirs), metric)
        ratio = paired_ratio(rows, metric, "ours", theirs)
        repeats.add(len(ratio))
        body.append(
            [label, f"`{name}`", f(np.median(ours), spec), f(np.median(other), spec),
             med_range(ratio, ".2f")]
        )  # fmt: skip
    n = "/".join(str(r) for r in sorted(repeats))
    return (
        para(
            f"**Speed** (each contender in its own process, order rotated, {n} repeats; rates:"
            " median, ratios: median (range) paired per repeat; HalfCheetah-v5 sizes, identical"
            " settings, 1 torch thread):"
        )
        + "\n\n"
        + md(["ours vs", "CSV", "ours", "theirs", "ours / theirs"], body,
             ["---", "---", "---:", "---:", "---:"])
    )  # fmt: skip


@table("brax")
def brax(read: Read) -> str:
    bench = read("bench_brax.csv")
    adapter = rows_where(bench, backend="brax adapter", status="ok")
    ratios = col(adapter, "ratio_to_raw")
    configs = {(r["env"], r["pipeline"]) for r in adapter}
    envs = sorted(int(r["num_envs"]) for r in adapter)
    per_seed = parity_per_seed(read("brax_parity.csv"))
    return para(
        "**Brax** (`bench_brax.csv`, `brax_parity.csv`): the adapter"
        f" runs at {span(min(ratios), max(ratios), '.2f')} of the raw jitted Brax step"
        f" ({len(configs)} env x pipeline configurations, {envs[0]} to {envs[-1]} envs);"
        " `ppo_brax.py` over Brax's own PPO trainer, training time per env step in one process"
        f" pinned to one CPU: {f(np.median(per_seed), '.3f')} (median of {len(per_seed)} seeds'"
        " medians). Locomotion against Brax's trainer with its published settings: the declared"
        " experiments [`brax-locomotion-410k`](paper_figures/brax-locomotion-410k/README.md) and"
        " [`brax-locomotion-2m`](paper_figures/brax-locomotion-2m/README.md)."
    )


def parity_per_seed(rows) -> list[float]:
    """Per seed, the median over rounds of ours / Brax training time per env step."""
    by = defaultdict(dict)
    for r in rows:
        if r["trainer"] == "ours_jax":
            by[r["seed"]][r["round"]] = float(r["ours_over_brax"])
    return [float(np.median(list(v.values()))) for _, v in sorted(by.items())]


OFFLINE_ENVS = ["Hopper-v5", "HalfCheetah-v5", "Walker2d-v5"]
OFFLINE_KINDS = ["medium", "medium-replay", "medium-expert"]


@table("offline")
def offline(read: Read) -> str:
    rows = read("iql_vs_bc.csv")
    body, groups = [], []
    for env in OFFLINE_ENVS:
        cells = []
        for k in OFFLINE_KINDS:
            bc = rows_where(rows, env=env, kind=k, method="bc")
            iql = rows_where(rows, env=env, kind=k, method="iql", tau="0.7")
            groups += [bc, iql]
            cells.append(
                f"{f(np.mean(col(bc, 'final_normalized_score')), '.1f')} / "
                f"{f(np.mean(col(iql, 'final_normalized_score')), '.1f')}"
            )
        body.append([env.split("-")[0].lower(), *cells])
    n = uniform_n(groups)
    steps = {r["steps"] for r in rows}
    ev = read("bench_iql_eval.csv")
    sides = {c: col(rows_where(ev, contender=c), "normalized_score") for c in ("ours", "d3rlpy")}
    n_ev = uniform_n(list(sides.values()))
    updates = {r["updates"] for r in ev}
    return (
        para(
            f"**Offline** (`iql_vs_bc.csv`: generated datasets, {f(int(steps.pop()))} gradient"
            f" steps, final normalised score of deterministic episodes, mean over {n} seeds, BC /"
            " IQL with tau 0.7):"
        )
        + "\n\n"
        + md(["env", *OFFLINE_KINDS], body)
        + "\n\n"
        + para(
            f"IQL against d3rlpy's on hopper-medium-v5-s0 at {f(int(updates.pop()))} updates"
            f" (`bench_iql_eval.csv`, {kind(n_ev)} over {n_ev} seeds):"
            f" {spread(sides['ours'], '.1f')}"
            f" vs {spread(sides['d3rlpy'], '.1f')}."
        )
        + "\n\n"
        + para(
            "Declared: [`paper_figures/iql-vs-bc-20k`](paper_figures/iql-vs-bc-20k/README.md);"
            " rerun at 100,000 gradient steps x 5 seeds, with IQL's tau 0.5, 0.7 and 0.9 on four of"
            " these datasets: [`paper_figures/iql-100k`](paper_figures/iql-100k/README.md)."
        )
    )


@table("population")
def population(read: Read) -> str:
    rows = [
        r for r in read("bench_population.csv")
        if r["status"] == "ok"
        and r["contender"].startswith("population-")
        and not isnan(r["speedup"])
    ]  # fmt: skip
    if not rows:
        raise ValueError("bench_population.csv has no population row with a speed-up")
    top = max(int(r["seeds"]) for r in rows)
    parts, bandits = [], set()
    for algo, bandit in dict.fromkeys((r["algo"], r["bandit"]) for r in rows):
        g = [r for r in rows if (r["algo"], r["bandit"], int(r["seeds"])) == (algo, bandit, top)]
        if not g:
            continue
        bandits.add(bandit.split(":", 1)[1])
        med = {c: float(np.median(col(g, c))) for c in ("wall_s", "speedup", "peak_rss_mb")}
        threads = int(g[0]["threads"])
        parts.append(
            f"{algo} {f(med['wall_s'])} s on {threads} thread{'s' if threads > 1 else ''},"
            f" {f(med['speedup'])}x, {f(med['peak_rss_mb'])} MB"
            + (f" (median of {len(g)} runs)" if len(g) > 1 else "")
        )
    return para(f"Measured (`paper_figures/out/bench_population.csv`), {top:,} seeds on "
                f"{', '.join(sorted(bandits))} in one process (wall clock with start-up, the "
                "per-seed rate against separate processes, peak RSS): "
                + "; ".join(parts) + ".")  # fmt: skip


@table("sweep-launch")
def sweep_launch(read: Read) -> str:
    rows = [r for r in read("bench_sweep_launch.csv") if r["status"] == "ok"]
    cpu = paired_ratio(rows, "cpu_s", "exec", "fork")
    wall = paired_ratio(rows, "wall_s", "exec", "fork")
    per_run = {c: np.median(col(rows_where(rows, contender=c), "cpu_per_run_s"))
               for c in ("fork", "exec")}  # fmt: skip
    return para(
        f"Forked: {f(per_run['fork'], '.2f')} CPU s per short grpo run against "
        f"{f(per_run['exec'], '.2f')} s exec'd, {spread(cpu, '.1f')}x less CPU and "
        f"{spread(wall, '.1f')}x less wall clock ({len(cpu)} paired repeats of {rows[0]['runs']} "
        "runs, `paper_figures/out/bench_sweep_launch.csv`)."
    )
