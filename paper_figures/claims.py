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


IQL_RERUN = (
    "rerun at 100,000 gradient steps on hopper-medium, hopper-medium-replay, "
    "walker2d-medium-replay and halfcheetah-medium-replay (the declared experiment iql-100k: "
    "rows `E5-vs-BC-<dataset>` and `E5-tau-<dataset>`)"
)


def iql_rows() -> list[Row]:
    """E5-tau (iql_tau.csv, 5,000 gradient steps) and E5-vs-BC (iql_vs_bc.csv, 20,000): each
    pooled over datasets; their 100,000-step rerun is the declared experiment iql-100k."""
    rows = read("iql_tau.csv")
    out = []
    d = []
    for ds in sorted({r["dataset"] for r in rows}):
        hi = values(
            rows, "final_normalized_score", dataset=ds, method="iql", tau="0.9", online_steps=0
        )
        lo = values(
            rows, "final_normalized_score", dataset=ds, method="iql", tau="0.5", online_steps=0
        )
        d += [hi[s] - lo[s] for s in sorted(hi) if s in lo]
    d = np.array(d)
    stat, verdict, det = paired_verdict(d)
    steps = int(rows[0]["steps"])
    out.append(
        Row(
            "E5-tau",
            "Offline Reinforcement Learning with Implicit Q-Learning (arXiv 2110.06169)",
            "a larger expectile tau (0.9 vs 0.5) improves the score",
            "D4RL, 1M gradient steps",
            "transplant: generated hopper datasets (medium, medium-replay) in the D4RL layout; "
            f"{IQL_RERUN}",
            f"ours {steps:,} gradient steps; paper 1,000,000; {wall_time(rows)}",
            f"{d.size} pairs",
            "final normalised score, tau 0.9 minus tau 0.5",
            stat,
            verdict,
            det,
            "iql_tau.csv",
        )
    )
    vs = read("iql_vs_bc.csv")
    d = []
    for ds in sorted({r["dataset"] for r in vs}):
        a = values(vs, "final_normalized_score", dataset=ds, method="iql")
        b = values(vs, "final_normalized_score", dataset=ds, method="bc")
        d += [a[s] - b[s] for s in sorted(a) if s in b]
    d = np.array(d)
    stat, verdict, det = paired_verdict(d)
    out.append(
        Row(
            "E5-vs-BC",
            "Offline Reinforcement Learning with Implicit Q-Learning (arXiv 2110.06169)",
            "IQL beats behaviour cloning on D4RL locomotion",
            "D4RL, 1M gradient steps",
            "transplant: generated hopper, halfcheetah, "
            "walker2d datasets (medium, medium-replay, medium-expert); "
            f"{IQL_RERUN}",
            f"ours {int(vs[0]['steps']):,} gradient steps; paper 1,000,000; {wall_time(vs)}",
            f"{d.size} pairs",
            "final normalised score, IQL minus BC",
            stat,
            verdict,
            det,
            "iql_vs_bc.csv",
        )
    )
    return out


KEEP_BOTH = 0.2  # fpo_multimodal.py: a policy keeps both modes when its minority share >= 0.2


def fpo_rows() -> list[Row]:
    """E7-modes (the FPO policies' minority-mode share against the keep-both bar); E7-mujoco is
    the declared experiment fpo-hopper-300k."""
    band = read("fpo_multimodal.csv")
    share = {
        k: [float(r["minority_share"]) for r in band if r["algo"] == k] for k in ("fpo", "ppo")
    }
    kept = sum(r["keeps_both"] == "True" for r in band if r["algo"] == "fpo")
    s = stats.summarize(share["fpo"])
    modes = bar_verdict(s.kind, s.lo, s.hi, KEEP_BOTH)
    paper = "Flow Matching Policy Gradients (arXiv 2507.21053)"
    return [
        Row(
            "E7-modes",
            paper,
            "flow policies keep a bimodal optimal action distribution",
            "under-conditioned tasks",
            "transplant: a continuous bandit with two equally good modes at -0.5 and +0.5",
            f"ours {int(band[0]['steps']):,} samples per run",
            f"{len(share['fpo'])} FPO, {len(share['ppo'])} PPO runs",
            "minority-mode share of the final policy's sampled actions (an even split 0.5), "
            f"mean over FPO's runs; holds if its 95% CI lies at or above {KEEP_BOTH} (keeps "
            "both modes), fails if below",
            f"FPO {s.text('.3g')}; {kept} of {len(share['fpo'])} FPO runs keep both; PPO "
            f"(Gaussian) mean {np.mean(share['ppo']):.3g}",
            modes,
            "n/a",
            "fpo_multimodal.csv",
        ),
    ]


def ratio_filter_rows() -> list[Row]:
    rows = read("ratio_filters.csv")
    stale = max(int(r["staleness"]) for r in rows)
    k = values(rows, "grad_var", kind="kalman", staleness=stale)
    s = values(rows, "grad_var", kind="step", staleness=stale)
    d = np.array([np.log(s[x] / k[x]) for x in sorted(k) if x in s])
    stat, verdict, det = paired_verdict(d)
    return [
        Row(
            "E13",
            "Online Causal Kalman Filtering for Stable and Effective Policy "
            "Optimization (arXiv 2602.10609)",
            "Kalman-filtered ratios have lower gradient variance than per-step ratios",
            "LLM RL, token-level ratios",
            f"transplant: Hopper-v5 PPO, per-step vs filtered ratios, staleness {stale}",
            "ours: the figure's runs",
            f"{d.size} pairs",
            "log(gradient variance of per-step / of Kalman ratios)",
            stat,
            verdict,
            det,
            "ratio_filters.csv",
        )
    ]


# ---------------------------------------------------------------- output


def all_rows() -> list[Row]:
    """Every ledger row, experiments E1-E18 first, then the theory statements."""
    from paper_figures import claims_cheap  # it imports this module
    from paper_figures.claims_fpo_under import rows as fpo_under_rows
    from paper_figures.claims_hard_starts import rows as hard_start_rows
    from paper_figures.claims_knapsack import rows as knapsack_rows
    from paper_figures.claims_rarl import rows as rarl_rows
    from paper_figures.claims_subspace import rows as subspace_rows
    from paper_figures.claims_tpo import rows as tpo_rows  # it imports this module

    rows = (
        iql_rows()
        + fpo_rows()
        + fpo_under_rows(read)
        + rarl_rows(read)
        + tpo_rows()
        + ratio_filter_rows()
        + subspace_rows(read)
        + hard_start_rows(read)
        + knapsack_rows(read)
        + claims_cheap.rows()
    )
    from paper_figures.claims_theory import rows as theory_curve_rows

    return rows + theory_curve_rows(read)


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
