"""Aggregates across an experiment's envs, by rliable's definitions (controlrl/stats.py): per
arm the IQM of each declared metric over its runs on every env (a stratified-bootstrap 95%
interval) and the probability that a run of the arm beats one of the baseline arm, P(arm >
baseline) averaged over the envs both ran; with each other metric's per-env table. Declared as

    [aggregate]
    baseline = "grpo"                            the arm P(arm > baseline) is against
    metrics = ["final_success", "final_eval"]    the first: the page's figure
"""

from __future__ import annotations

import math

import numpy as np

from controlrl import stats
from paper_figures.lab import results
from paper_figures.lab.ledger import num

N_BOOT = 1000  # resamples of each interval (seeded: a page is the same each time it is written)


def scores(rows: list[dict], arm: str, metric: str, envs: list[str]) -> np.ndarray:
    """[runs, envs]: the arm's metric on the seeds it ran on every one of the envs."""
    per_env = [results.values(rows, arm, env, metric) for env in envs]
    seeds = sorted(set.intersection(*(set(v) for v in per_env))) if per_env else []
    return np.array([[v[s] for v in per_env] for s in seeds], np.float64).reshape(
        len(seeds), len(envs)
    )


def shared_envs(exp, rows: list[dict], arm: str, baseline: str) -> list[str]:
    ran = {(r["arm"], r["env"]) for r in rows}
    return [e for e in exp.envs if (arm, e) in ran and (baseline, e) in ran]


def summary(exp, rows: list[dict], arm: str, metric: str) -> dict:
    """{envs, iqm, lo, hi, poi, poi_lo, poi_hi} of one arm on one metric (nan where none)."""
    baseline = exp.aggregate["baseline"]
    envs = shared_envs(exp, rows, arm, baseline)
    out = {"envs": envs, "iqm": math.nan, "lo": math.nan, "hi": math.nan}
    out |= {"poi": math.nan, "poi_lo": math.nan, "poi_hi": math.nan}
    x, y = scores(rows, arm, metric, envs), scores(rows, baseline, metric, envs)
    if not envs or not x.size or not y.size or not (np.isfinite(x).all() and np.isfinite(y).all()):
        return out
    out["iqm"], out["lo"], out["hi"], _ = stats.iqm_band(x, N_BOOT)
    if min(len(x), len(y)) >= stats.MIN_SEEDS:
        out["poi"], out["poi_lo"], out["poi_hi"] = stats.probability_of_improvement_ci(x, y, N_BOOT)
    else:
        out["poi"] = stats.probability_of_improvement(x, y)
    return out


def _cell(value: float, lo: float, hi: float) -> str:
    if math.isnan(value):
        return ""
    return num(value) + ("" if math.isnan(lo) else f" [{num(lo)}, {num(hi)}]")


def page_lines(exp, rows: list[dict], main: str) -> list[str]:
    """The other metrics' per-env tables (and the declared tables', arms without values left
    out) and the aggregate table, for the experiment's page."""
    agg, out = exp.aggregate, []
    labels = [e.label for e in exp.envs.values()]
    for metric in [m for m in agg["metrics"] if m != main] + list(agg.get("tables", ())):
        out += ["", f"{metric}: mean [95% CI] over seeds (a range below 5 seeds), "
                "results/runs.csv.", "", "| arm | " + " | ".join(labels) + " |",
                "|---|" + "---|" * len(labels)]  # fmt: skip
        for a in exp.arms.values():
            cells = []
            for env in exp.envs:
                x = results.sample(rows, a.name, metric, [env])
                s = stats.summarize(x) if x.size else None
                cells.append(_cell(s.mean, s.lo, s.hi) if s else "")
            if metric in agg["metrics"] or any(cells):
                out.append(f"| {a.label} | " + " | ".join(cells) + " |")
    base = exp.arms[agg["baseline"]].label
    out += ["", f"Across envs (rliable's definitions): the IQM of each arm's runs on the envs it "
            f"shares with {base}, and P(arm > {base}), the probability that a run of the arm "
            "beats a run of the baseline, averaged over those envs; 95% stratified-bootstrap "
            f"intervals ({N_BOOT} resamples).", "",
            "| arm | envs | " + " | ".join(f"IQM {m} | P(> {base}) {m}" for m in agg["metrics"])
            + " |", "|---|---|" + "---|---|" * len(agg["metrics"])]  # fmt: skip
    for a in exp.arms.values():
        cells, envs = [], []
        for metric in agg["metrics"]:
            s = summary(exp, rows, a.name, metric)
            envs = s["envs"] or envs
            poi = "" if a.name == agg["baseline"] else _cell(s["poi"], s["poi_lo"], s["poi_hi"])
            cells += [_cell(s["iqm"], s["lo"], s["hi"]), poi]
        if envs:
            out.append(f"| {a.label} | {len(envs)} | " + " | ".join(cells) + " |")
    return out


def draw(exp, rows: list[dict], target) -> None:
    """results/aggregates.png: per declared metric, each arm's IQM across envs and its P(arm >
    baseline), with their 95% intervals (arms top to bottom as declared)."""
    from PIL import Image

    from controlrl import plots
    from controlrl.plots import plt

    agg = exp.aggregate
    arms = [a for a in exp.arms.values() if shared_envs(exp, rows, a.name, agg["baseline"])]
    base = exp.arms[agg["baseline"]].label
    with plt.rc_context(plots.STYLE):
        fig, axes = plt.subplots(
            1,
            2 * len(agg["metrics"]),
            sharey=True,
            squeeze=False,
            figsize=(3.2 * 2 * len(agg["metrics"]), 0.22 * len(arms) + 1.6),
        )
        ys = np.arange(len(arms))[::-1]
        for i, metric in enumerate(agg["metrics"]):
            every = [summary(exp, rows, a.name, metric) for a in arms]
            for ax, key, label in (
                (axes[0, 2 * i], "iqm", f"IQM {metric}"),
                (axes[0, 2 * i + 1], "poi", f"P(arm > {base}), {metric}"),
            ):
                lo, hi = ("lo", "hi") if key == "iqm" else ("poi_lo", "poi_hi")
                v = np.array([s[key] for s in every])
                err = np.array([[s[key] - s[lo] for s in every], [s[hi] - s[key] for s in every]])
                ax.errorbar(v, ys, xerr=np.nan_to_num(err), fmt="o", ms=3, capsize=2, lw=1)
                if key == "poi":
                    ax.axvline(0.5, color="k", lw=0.8, ls="--")
                ax.set_xlabel(label, fontsize=7)
                ax.grid(axis="y", alpha=0.15)
        axes[0, 0].set_yticks(ys, [a.label for a in arms], fontsize=6.5)
        fig.suptitle(f"{exp.id}: across envs, 95% stratified-bootstrap intervals", fontsize=9)
        fig.tight_layout()
        target.parent.mkdir(parents=True, exist_ok=True)
        fig.canvas.draw()
        Image.fromarray(np.asarray(fig.canvas.buffer_rgba())[..., :3]).save(target, optimize=True)
        plt.close(fig)
