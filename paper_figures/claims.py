"""The ledger rows of the experiments not yet declared (paper_figures/<experiment>/
experiment.toml holds the declared ones): each paper claim, the paper's setting beside ours, the
statistic from committed CSVs of paper_figures/out/, the verdict and the smallest effect the
experiment could detect. `python -m paper_figures report` writes them into CLAIMS.md after the
declared lines, and the old table blocks of both READMEs (paper_figures/readme_tables.py).

It reads only committed CSVs of paper_figures/out/ (a missing one is an error) and computes every
statistic with controlrl.stats: sample SD, intervals only from >= 5 seeds (a range below), paired
per-seed comparisons where seeds pair. A verdict is "holds" or "does not hold" only where the
two-sided test rejects at 0.05 (exact sign-flip test on the paired differences) or the exact
computation decides; otherwise "inconclusive at this power", with the smallest mean difference the
experiment would detect with power 0.8. Rows of experiments not run here say why.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from controlrl import stats

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "paper_figures" / "out"
ALPHA = 0.05
# the SPO paper's MuJoCo budget, read from its reference code (the depth rows name it)
SPO_BUDGET = (
    "the SPO reference (MyRepositories-hub/Simple-Policy-Optimization mujoco/main.py): "
    "10,000,000 env steps per run, 5 seeds, 8 envs x 256 steps, 4 minibatches"
)


# The env layout and batch of the committed MuJoCo runs each row names: every one on Gymnasium's
# sync vector env at the algorithm file's defaults (the Makefile's lines pass no layout flag);
# tests/paper_figures/test_claims.py checks these settings still equal the files' defaults.
LAYOUT_SETTINGS = {
    "ppo": {"num_envs": 1, "num_steps": 2048, "num_minibatches": 32, "update_epochs": 10},
    "gae": {"num_envs": 2, "num_steps": 1024},
    "retrace": {"num_envs": 1, "batch_size": 256, "segment_length": 8, "updates_per_step": 1},
    "grpo": {"num_envs": 64, "group_size": 8, "update_epochs": 4},
}


def layout(algo: str) -> str:
    """The env layout and batch of `algo`'s committed MuJoCo runs, in words."""
    s = LAYOUT_SETTINGS[algo]
    envs = f"Gymnasium, {s['num_envs']} env{'s' * (s['num_envs'] > 1)}"
    if algo in ("ppo", "gae"):
        text = f"{envs} x {s['num_steps']:,} steps per batch"
        if "num_minibatches" in s:
            text += f", {s['num_minibatches']} minibatches x {s['update_epochs']} epochs"
        return text
    if algo == "retrace":
        return (
            f"{envs}, {s['updates_per_step']} gradient step per env step on {s['batch_size']} "
            f"transitions ({s['batch_size'] // s['segment_length']} replayed segments of "
            f"{s['segment_length']} steps)"
        )
    return (
        f"{envs} per iteration ({s['num_envs'] // s['group_size']} groups of "
        f"{s['group_size']} episodes), {s['update_epochs']} epochs"
    )


NO_WALL_TIME = "wall time not recorded for these runs"

HOLDS, FAILS, INCONCLUSIVE = "holds", "does not hold", "inconclusive at this power"
NOT_RUN, CANNOT = "not run yet", "cannot run here"


@dataclass
class Row:
    """One ledger row."""

    id: str
    paper: str
    claim: str
    paper_setting: str
    our_setting: str  # "paper's own setting" or what differs (a transplant)
    budget: str  # ours beside the paper's
    seeds: str
    metric: str
    statistic: str
    verdict: str
    detectable: str
    evidence: str  # the CSVs the row reads


def read(name: str) -> list[dict[str, str]]:
    """Rows of a committed CSV of paper_figures/out/; a missing file is an error naming it."""
    path = OUT / name
    if not path.exists():
        raise FileNotFoundError(
            f"claims.py: the ledger reads paper_figures/out/{name}, which is missing"
        )
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def values(rows, value: str, **match) -> dict[tuple, float]:
    """{(seed,): value} of the rows whose columns equal `match` (values compared as strings)."""
    out = {}
    for r in rows:
        if all(r[k] == str(v) for k, v in match.items()):
            out[(r["seed"],)] = float(r[value])
    return out


def paired_verdict(diffs: np.ndarray, fmt: str = ".3g", claim_sign: int = 1):
    """(statistic, verdict, detectable) of paired differences; claim_sign +1 claims mean > 0."""
    result = stats.paired(diffs, np.zeros_like(diffs))
    significant = result.p < ALPHA
    if significant and np.sign(result.diff.mean) == claim_sign:
        verdict = HOLDS
    elif significant:
        verdict = FAILS
    else:
        verdict = INCONCLUSIVE
    return result.text(fmt), verdict, format(result.detectable, fmt)


def bar_verdict(kind: str, lo: float, hi: float, bar: float, above: bool = True) -> str:
    """A claim that a mean lies at or above `bar` (at or below it with above=False): holds when
    the 95% CI [lo, hi] lies wholly on the claimed side, fails when wholly on the other,
    inconclusive when it straddles the bar or is a range (kind "range": fewer than 5 seeds)."""
    if kind == "range":
        return INCONCLUSIVE
    if not above:
        lo, hi, bar = -hi, -lo, -bar
    return HOLDS if lo >= bar else FAILS if hi < bar else INCONCLUSIVE


def normalised_diffs(
    rows, value: str, a: str, b: str, envs, key: str = "algo", env: str = "env_id"
):
    """Per (env, seed): (a - b) / (max - min of `value` over the runs of a and b on that env),
    pooled over envs: the difference of min-max normalised scores, so that no task's scale
    dominates and a third algorithm added to the figure changes nothing."""
    out = []
    for e in envs:
        every = [float(r[value]) for r in rows if r[env] == e and r[key] in (a, b)]
        spread = max(every) - min(every) or 1.0
        va = values(rows, value, **{key: a, env: e})
        vb = values(rows, value, **{key: b, env: e})
        out += [(va[s] - vb[s]) / spread for s in sorted(va) if s in vb]
    return np.array(out)


# ---------------------------------------------------------------- experiments


LOCOMOTION = ("HalfCheetah-v5", "Hopper-v5", "Walker2d-v5")  # the tasks a rerun is sized for


def wall_time(rows) -> str:
    """The experiment's compute from its CSV's train_s column (each run's seconds collecting and
    updating), once: '<h> hours of collection and updates summed over the <n> runs'; CSVs from
    before the column say it was not recorded."""
    secs = np.array([float(r.get("train_s") or "nan") for r in rows])
    timed = ~np.isnan(secs)
    if not timed.any():
        return NO_WALL_TIME
    text = f"{secs[timed].sum() / 3600:.1f} hours of collection and updates summed over the "
    if timed.all():
        return text + f"{secs.size} runs"
    return text + f"{timed.sum()} of {secs.size} runs that recorded it"


def cut_tasks(envs) -> str:
    """'; <tasks> not rerun at this budget (cut to fit the compute)' for the locomotion tasks a
    rerun left out, else ''."""
    cut = [e for e in LOCOMOTION if e not in envs]
    return f"; {' and '.join(cut)} not rerun at this budget (cut to fit the compute)" if cut else ""


E1_METRIC = (
    "final deterministic evaluation return, difference of min-max normalised scores (per task,"
    " over the runs of the two algorithms compared)"
)


# ---------------------------------------------------------------- output


def all_rows() -> list[Row]:
    """Every ledger row not yet declared: none."""
    return []


def readme_texts(readme: Path, figures_readme: Path) -> tuple[dict[Path, str], list[str]]:
    """Both READMEs with every old table block as its CSVs give it, and "<file>: table:<name>"
    for each block whose committed text differs."""
    from paper_figures import readme_tables  # the README blocks; imported here, as ledger modules

    texts = {readme: readme.read_text(), figures_readme: figures_readme.read_text()}
    changed, used = [], set()
    for path, text in texts.items():
        texts[path], names = readme_tables.render(text, read, path.name)
        changed += [f"{path.name}: table:{n}" for n in names]
        used |= set(readme_tables.names_in(text))
    unused = sorted(set(readme_tables.TABLES) - used)
    if unused:
        raise ValueError(f"readme_tables.py renders blocks no README holds: {', '.join(unused)}")
    return texts, changed
