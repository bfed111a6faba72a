"""Ledger rows of IQL at the larger budget (paper_figures/iql_tau.py --name iql_vs_bc_100k).

E5-vs-BC-<dataset>: IQL (tau 0.7) against behaviour cloning, the final D4RL-normalised score,
IQL minus BC. The two are different learners (BC trains no critics), so a seed does not pair
them: two-sample permutation test.
E5-tau-<dataset>: on each dataset the study also ran IQL at tau 0.5 and 0.9, tau 0.9 minus
tau 0.5 (same learner, same seeds: paired where enough pairs can decide, see
seed_test below), the other tau and BC beside.
Each row states the earlier, smaller run's verdict on the same dataset, whether the curves are
still rising at the end of the budget (the least-squares slope over the second half of each run's
evaluations), and its compute."""

from __future__ import annotations

import numpy as np

from controlrl import stats
from paper_figures.claims import ALPHA, FAILS, HOLDS, INCONCLUSIVE, Row, paired_verdict, values

MIN_PAIRS = 6  # the fewest pairs at which the exact sign-flip test can reach p < 0.05 (2/64)


def two_sample_verdict(t: stats.TwoSample) -> str:
    """Holds when the permutation test rejects at ALPHA with the claimed sign (a > b), does not
    hold when it rejects with the other, inconclusive otherwise or on a range (< 5 seeds)."""
    if t.kind == "range" or t.p >= ALPHA:
        return INCONCLUSIVE
    return HOLDS if t.diff > 0 else FAILS


def seed_test(a: dict, b: dict, fmt: str = ".3g") -> tuple[str, str, str, str]:
    """(statistic, verdict, detectable, seeds) of a - b for {seed: value} dicts whose seeds pair:
    the exact sign-flip test on the pairs from MIN_PAIRS of them, below that the two-sample
    permutation test (which can reject at 5 vs 5), saying why."""
    d = np.array([a[s] - b[s] for s in sorted(a) if s in b])
    if d.size >= MIN_PAIRS:
        stat, verdict, det = paired_verdict(d, fmt)
        return stat, verdict, det, f"{d.size} pairs"
    t = stats.two_sample(list(a.values()), list(b.values()))
    seeds = f"{t.a.n} vs {t.b.n} (two-sample: {d.size} pairs cannot reach p < {ALPHA:g})"
    return t.text(fmt), two_sample_verdict(t), format(t.detectable, fmt), seeds


PAPER = "Offline Reinforcement Learning with Implicit Q-Learning (arXiv 2110.06169)"
NOW, OLD = "iql_vs_bc_100k.csv", "iql_vs_bc.csv"
OLD_TAU = "iql_tau.csv"  # the tau sweep at its smoke-size budget
VS_BC_TAU = "0.7"  # the tau IQL meets BC at (the paper's and CORL's for locomotion)
TAU_LO, TAU_HI = "0.5", "0.9"
CURVES = "iql_vs_bc_100k_curves.csv"
# IQL's scores in the paper's table (D4RL locomotion-v2 datasets, 1M gradient steps)
PAPER_IQL = {"hopper-medium": 66.3, "hopper-medium-replay": 94.7,
             "halfcheetah-medium-replay": 44.2, "walker2d-medium-replay": 73.9}  # fmt: skip
# d3rlpy 2.8.1's IQL at the rerun's budget on one dataset (paper_figures/bench_iql.py --eval)
D3RLPY = "bench_iql_eval_100k.csv"
SLOPE_PER = 10_000  # slopes in score per this many gradient steps
# the datasets a rerun at this budget is sized for: the three medium-replay ones and hopper-medium
TARGETS = ("hopper-medium", "hopper-medium-replay", "halfcheetah-medium-replay",
           "walker2d-medium-replay")  # fmt: skip


def vs_bc(rows) -> list[dict]:
    """The rows (results or curves) of the IQL-vs-BC comparison: BC and IQL at VS_BC_TAU (the
    study holds other taus on the datasets the tau sweep ran on)."""
    return [r for r in rows if r["method"] == "bc" or r["tau"] == VS_BC_TAU]


def _scores(rows, dataset: str, method: str) -> list[float]:
    return [
        float(r["final_normalized_score"])
        for r in rows
        if r["dataset"] == dataset and r["method"] == method
    ]


def slopes(curves, dataset: str, method: str, tau: str | None = None) -> list[float]:
    """Per run (seed): the least-squares slope of its evaluation score against gradient steps
    over the evaluations in the second half of the run, per SLOPE_PER steps (IQL's runs at
    `tau` alone when given)."""
    runs: dict[str, list[tuple[float, float]]] = {}
    for r in curves:
        if (r["dataset"], r["method"]) == (dataset, method) and tau in (None, r["tau"]):
            runs.setdefault(r["seed"], []).append((float(r["step"]), float(r["score"])))
    out = []
    for seed in sorted(runs, key=int):
        pts = np.array(sorted(runs[seed]))
        late = pts[pts[:, 0] >= pts[:, 0].max() / 2]
        if len(late) >= 2:
            slope = np.polyfit(late[:, 0], late[:, 1], 1)[0] * SLOPE_PER
            out.append(float(np.round(slope, 9)) + 0.0)  # no "-0.00" from rounding noise
    return out


def _trend(curves, dataset: str, steps: int) -> str:
    parts = []
    for method, name in (("iql", "IQL"), ("bc", "BC")):
        s = slopes(curves, dataset, method)
        if s:
            parts.append(f"{name} {stats.summarize(s).text('.2f')}")
    return (
        f"slope of the score over the second half of the run ({steps // 2:,}-{steps:,} steps),"
        f" per {SLOPE_PER:,} gradient steps: " + "; ".join(parts)
    )


def d3rlpy_test(now, peer) -> tuple[str, stats.TwoSample, float] | None:
    """(dataset, ours minus d3rlpy, d3rlpy's run hours summed) on the dataset d3rlpy's IQL ran on
    at the rerun's budget, or None if it has no finished runs. Ours is the rerun's IQL at
    VS_BC_TAU on that dataset: bench_iql.py's `ours` runs the same code at the same settings.
    The seeds do not pair (each library draws its own way from a seed): two-sample."""
    scores = d3rlpy_scores(now, peer)
    if scores is None:
        return None
    done = [r for r in peer if r["contender"] == "d3rlpy" and r["status"] == "ok"]
    t = stats.two_sample(*scores)
    return (
        done[0]["dataset"].removesuffix(".hdf5"),
        t,
        sum(float(r["process_s"]) for r in done) / 3600,
    )


def d3rlpy_scores(now, peer) -> tuple[list[float], list[float]] | None:
    """(ours, d3rlpy's) final normalised scores of d3rlpy_test's comparison, or None."""
    done = [r for r in peer if r["contender"] == "d3rlpy" and r["status"] == "ok"]
    if not done:
        return None
    keys = {(r["dataset"].removesuffix(".hdf5"), int(r["updates"])) for r in done}
    if len(keys) != 1:
        raise ValueError(f"claims_iql: {D3RLPY} mixes datasets or budgets {sorted(keys)}")
    ds, updates = keys.pop()
    ours = _scores(vs_bc(now), ds, "iql")
    steps = {int(r["steps"]) for r in now}
    if not ours or steps != {updates}:
        raise ValueError(
            f"claims_iql: {D3RLPY} ran {ds} at {updates:,} updates; {NOW} has "
            f"{len(ours)} IQL runs of it at {sorted(steps)} steps"
        )
    return ours, [float(r["normalized_score"]) for r in done]


def _d3rlpy_parts(test: tuple[str, stats.TwoSample, float] | None, ds: str) -> tuple[str, str]:
    """(what a dataset's row says of d3rlpy's IQL at this budget, or "" if it was not run; the
    entry for the row's list of what was not rerun, or "" if it was)."""
    if test is None:
        return "", "d3rlpy's IQL"
    where, t, hours = test
    if where != ds:
        return f"; d3rlpy's IQL ran at this budget on {where} alone", ""
    return (
        f"; beside it d3rlpy 2.8.1's IQL at this budget on this dataset (bench_iql.py --eval, the "
        f"same settings, one process per run, {hours:.1f} hours summed over its {t.b.n} runs): "
        f"{t.b.text('.3g')} against our IQL's {t.a.text('.3g')}; ours minus d3rlpy "
        f"{t.text('.3g')}",
        "",
    )


def _not_rerun(items: list[str]) -> str:
    """'; not rerun at this budget: a, b and c (cut to fit the compute)', or '' for none."""
    items = [x for x in items if x]
    return f"; not rerun at this budget: {_listed(items)} (cut to fit the compute)" if items else ""


def _listed(items: list[str]) -> str:
    """'a', 'a and b', 'a, b and c'."""
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def update_hours(rows) -> float:
    """The study's compute: the runs' update seconds (train_s) summed, in hours."""
    return float(np.nansum([float(r.get("train_s") or "nan") for r in rows])) / 3600


def rerun_text(read) -> str:
    """What the pooled smaller run's row says of the rerun: its datasets and budget."""
    now = read(NOW)
    names = ", ".join(dict.fromkeys(short_name(r) for r in now))
    return (
        f"rerun at {int(now[0]['steps']):,} gradient steps on {names} alone (rows "
        f"`E5-vs-BC-<dataset>`)"
    )


def tau_rerun_text(read) -> str:
    """What the smoke-size tau row says of the rerun: where it ran (rows E5-tau-<dataset>) and
    which of its datasets it left out."""
    now = read(NOW)
    swept = tau_datasets(now)
    if not swept:
        return (
            "not rerun at the larger budget of rows `E5-vs-BC-<dataset>` (cut to fit the compute)"
        )
    names = [short_name(next(r for r in now if r["dataset"] == ds)) for ds in swept]
    rows = ", ".join(f"E5-tau-{n}" for n in names)
    return (
        f"rerun at {int(now[0]['steps']):,} gradient steps on {', '.join(names)} (rows {rows})"
        + tau_cut_text(now)
    )


def tau_cut_text(now) -> str:
    """'; not rerun at this budget: the tau sweep on <targets> (cut to fit the compute)' for the
    TARGETS datasets a results CSV has no tau pair on, or '' when it has all of them."""
    swept = {short_name(r) for r in now if r["dataset"] in tau_datasets(now)}
    left = [t for t in TARGETS if t not in swept]
    return _not_rerun([f"the tau sweep on {_listed(left)}"] if left else [])


def short_name(r) -> str:
    """A CSV row's dataset as the rows name it: hopper-medium-replay (env and kind)."""
    return f"{r['env'].split('-')[0].lower()}-{r['kind']}"


def rows(read) -> list[Row]:
    everything = read(NOW)
    now, old, curves = vs_bc(everything), read(OLD), vs_bc(read(CURVES))
    steps = {int(r["steps"]) for r in everything}
    if len(steps) != 1:
        raise ValueError(f"claims_iql: {NOW} mixes budgets {sorted(steps)}")
    steps = steps.pop()
    swept = tau_datasets(everything)
    old_steps = int(old[0]["steps"])
    datasets = list(dict.fromkeys(r["dataset"] for r in now))
    kinds = ", ".join(dict.fromkeys(f"{r['env']} {r['kind']}" for r in now))
    budget = (
        f"ours {steps:,} gradient steps per run; {update_hours(now):.1f} CPU-hours of updates in "
        f"all ({kinds}); paper 1,000,000"
    )
    have = {short_name(r) for r in now}
    cut = [t for t in TARGETS if t not in have]
    peer = d3rlpy_test(everything, read(D3RLPY))
    out = []
    for ds in datasets:
        name = short_name(next(r for r in now if r["dataset"] == ds))
        t = stats.two_sample(_scores(now, ds, "iql"), _scores(now, ds, "bc"))
        verdict = two_sample_verdict(t)
        was = ""
        if _scores(old, ds, "iql") and _scores(old, ds, "bc"):
            o = stats.two_sample(_scores(old, ds, "iql"), _scores(old, ds, "bc"))
            was = (
                f"; was {two_sample_verdict(o)} at {old_steps:,} steps x {o.a.n} seeds "
                f"(diff {o.diff:.3g}, {o.kind} {o.lo:.3g} to {o.hi:.3g}) -> {verdict}"
            )
        beside, peer_cut = _d3rlpy_parts(peer, ds)
        missing = ["" if ds in swept else "the tau sweep", *cut, peer_cut]
        paper = f"D4RL {name}-v2, 1M gradient steps"
        if name in PAPER_IQL:
            paper += f" (the paper's IQL: {PAPER_IQL[name]})"
        ours = (
            f"transplant: generated {ds} (D4RL's recipe and layout, a PPO behaviour policy of "
            "ours, so its normalised scores are not D4RL's); algos/iql.py with CORL's defaults, "
            f"tau {VS_BC_TAU}, against --bc; {_trend(curves, ds, steps)}{beside}"
            + _not_rerun(missing)
            + was
        )
        out.append(
            Row(
                f"E5-vs-BC-{name}",
                PAPER,
                "IQL beats behaviour cloning on D4RL locomotion",
                paper,
                ours,
                budget,
                f"{t.a.n} vs {t.b.n} (unpaired)",
                "final normalised score (deterministic evaluation), IQL minus BC",
                f"IQL {t.a.mean:.3g} vs BC {t.b.mean:.3g} (means); {t.text('.3g')}",
                verdict,
                format(t.detectable, ".3g"),
                f"{NOW}, {CURVES}, {OLD}" + (f", {D3RLPY}" if peer and peer[0] == ds else ""),
            )
        )
    return out + tau_rows(read)


def tau_datasets(rows) -> list[str]:
    """The datasets of a results CSV with IQL runs at both TAU_LO and TAU_HI."""
    have = {(r["dataset"], r["tau"]) for r in rows if r["method"] == "iql"}
    names = dict.fromkeys(r["dataset"] for r in rows)
    return [ds for ds in names if {(ds, TAU_LO), (ds, TAU_HI)} <= have]


def tau_rows(read) -> list[Row]:
    """E5-tau-<dataset>: IQL at TAU_HI minus TAU_LO at this budget, with the earlier smoke-size
    sweep's verdict on the same kind of dataset."""
    everything, curves, old = read(NOW), read(CURVES), read(OLD_TAU)
    cut = tau_cut_text(everything)
    out = []
    for ds in tau_datasets(everything):
        here = [r for r in everything if r["dataset"] == ds]
        name, steps = short_name(here[0]), int(here[0]["steps"])
        score = "final_normalized_score"
        hi = values(here, score, method="iql", tau=TAU_HI, online_steps=0)
        lo = values(here, score, method="iql", tau=TAU_LO, online_steps=0)
        stat, verdict, det, seeds = seed_test(hi, lo)
        taus = sorted({r["tau"] for r in here if r["method"] == "iql"}, key=float)
        means = [f"tau {t} {np.mean(_scores_at(here, t)):.3g}" for t in taus]
        means += [f"BC {np.mean(_scores(here, ds, 'bc')):.3g}"] if _scores(here, ds, "bc") else []
        trend = "; ".join(
            f"tau {t} {stats.summarize(slopes(curves, ds, 'iql', t)).text('.2f')}"
            for t in (TAU_LO, TAU_HI)
            if slopes(curves, ds, "iql", t)
        )
        run_means = "; ".join(
            f"tau {t} {stats.summarize(run_means_of(curves, ds, t)).text('.3g')}"
            for t in taus
            if run_means_of(curves, ds, t)
        )
        iql = [r for r in here if r["method"] == "iql"]
        ours = (
            f"transplant: generated {ds} (D4RL's recipe and layout, a PPO behaviour policy of "
            f"ours); algos/iql.py with CORL's defaults at tau {', '.join(taus)}, the same seeds "
            f"at each tau; slope of the score over the second half of the run "
            f"({steps // 2:,}-{steps:,} steps), per {SLOPE_PER:,} gradient steps: {trend}; mean "
            f"over each run's evaluations (a second metric, not the verdict's): {run_means}"
            f"{cut}{_old_tau(old, here[0], verdict)}"
        )
        out.append(
            Row(
                f"E5-tau-{name}",
                PAPER,
                f"a larger expectile tau ({TAU_HI} vs {TAU_LO}) improves the score",
                f"D4RL {name}-v2, 1M gradient steps (the paper: tau {VS_BC_TAU} on locomotion, "
                "0.9 on AntMaze)",
                ours,
                f"ours {steps:,} gradient steps per run; {update_hours(iql):.1f} CPU-hours of "
                f"updates for the {len(iql)} IQL runs; paper 1,000,000",
                seeds,
                f"final normalised score (deterministic evaluation), tau {TAU_HI} minus tau "
                f"{TAU_LO}",
                f"means: {'; '.join(means)}; {stat}",
                verdict,
                det,
                f"{NOW}, {CURVES}, {OLD_TAU}",
            )
        )
    return out


def run_means_of(curves, dataset: str, tau: str) -> list[float]:
    """Per IQL run at `tau` on `dataset`: the mean of its evaluation scores along the run."""
    runs: dict[str, list[float]] = {}
    for r in curves:
        if (r["dataset"], r["method"], r["tau"]) == (dataset, "iql", tau):
            runs.setdefault(r["seed"], []).append(float(r["score"]))
    return [float(np.mean(v)) for _, v in sorted(runs.items(), key=lambda kv: int(kv[0]))]


def _scores_at(rows, tau: str) -> list[float]:
    return [float(r["final_normalized_score"]) for r in rows
            if r["method"] == "iql" and r["tau"] == tau and r["online_steps"] == "0"]  # fmt: skip


def _old_tau(old, like: dict, verdict: str) -> str:
    """'; was <verdict> at <steps> x <n> seeds on <dataset> (...) -> <verdict>' from the smoke-size
    sweep's runs on the same task and kind ('' if it has none)."""
    task = like["dataset"].split("-")[0]  # the smoke-size CSV has no env column
    same = [r for r in old if r["dataset"].split("-")[0] == task and r["kind"] == like["kind"]]
    same = [r for r in same if r["online_steps"] == "0"]
    score = "final_normalized_score"
    hi = values(same, score, method="iql", tau=TAU_HI)
    lo = values(same, score, method="iql", tau=TAU_LO)
    if not (hi and lo):
        return ""
    stat, was, _, _ = seed_test(hi, lo)
    names = ", ".join(dict.fromkeys(r["dataset"] for r in same))
    note = ""
    if names != like["dataset"]:
        note = ", an earlier generation of the dataset with its own reference scores"
    return (
        f"; was {was} at {int(same[0]['steps']):,} steps x {len(hi)} seeds on {names}{note} "
        f"({_diff_part(stat)}) -> {verdict}"
    )


def _diff_part(stat: str) -> str:
    """A seed_test statistic without its p and detectable effect: 'diff d (... n=..)'."""
    return stat.split("; sign-flip")[0].split("; permutation")[0]
