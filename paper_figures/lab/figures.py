"""An experiment's figure (results/figure.png), drawn from its results table and judged lines:
(left) a forest plot of its ledger lines, the effect with its interval coloured by verdict;
(right) the arms' mean of the main metric per env with its 95% bootstrap CI (range below 5)."""

from __future__ import annotations

import dataclasses
import math
import textwrap
from pathlib import Path

import numpy as np
from PIL import Image

from controlrl import plots, stats
from controlrl.plots import plt
from paper_figures.lab import judge, ledger, protocol, results, spec
from paper_figures.lab.judge import Line

CURVE_ENVS = 5  # learning-curve axes at most (the first envs as declared)
NO_EFFECT = ("exact", "all-of")  # kinds whose lines carry no effect to plot
LOOK = {protocol.HOLDS: ("tab:green", "o"), protocol.FAILS: ("tab:red", "X"),
        protocol.INCONCLUSIVE: ("tab:gray", "s")}  # verdict: (colour, marker)  # fmt: skip


def metric_of(exp: spec.Experiment) -> str:
    """The experiment's main metric: the first claim's (as its page's results table)."""
    return next((c.metric for c in exp.claims if c.metric), exp.metrics[0])


def forest_lines(exp: spec.Experiment, lines: list[Line]) -> list[Line]:
    """The forest's rows: the experiment's headline lines that carry an effect."""
    return [ln for ln in ledger.headline(lines) if ln.exp.id == exp.id
            and ln.claim.kind not in NO_EFFECT and ln.verdict != protocol.NOT_RUN]  # fmt: skip


def _verdict(ln: Line) -> str:
    """The ledger's verdict; a line never adjusted (a toy's) at its raw p."""
    return ln.verdict or ln.judgement.verdict_at(ln.judgement.p)[0]


def forest(ax, exp: spec.Experiment, lines: list[Line]) -> list[str]:
    """The forest plot on `ax`, top to bottom in declaration order; returns the plotted ids."""
    rows = forest_lines(exp, lines)
    if not rows:  # a toy whose arms no claim compares
        ax.text(0.5, 0.5, "no ledger line with an effect\n(no claim compares the arms that ran)",
                ha="center", va="center", transform=ax.transAxes)  # fmt: skip
        ax.set_axis_off()
        return []
    ys = np.arange(len(rows))[::-1]
    raw = any(not ln.verdict for ln in rows)
    seen = set()
    for y, ln in zip(ys, rows):
        j, c, verdict = ln.judgement, ln.claim, _verdict(ln)
        colour, marker = LOOK.get(verdict, ("tab:blue", "D"))
        err = None if math.isnan(j.lo) else [[j.effect - j.lo], [j.hi - j.effect]]
        ax.errorbar(j.effect, y, xerr=err, fmt=marker, color=colour, ms=4, capsize=2, lw=1,
                    label=None if verdict in seen else verdict)  # fmt: skip
        seen.add(verdict)
        if c.margin is not None:
            ax.vlines([-c.margin, c.margin], y - 0.4, y + 0.4, colors="k", linestyles="dashed",
                      lw=0.8)  # fmt: skip
        if c.bar is not None:
            ax.vlines([c.bar], y - 0.4, y + 0.4, colors="tab:purple", linestyles="dotted")
    ax.axvline(0, color="k", lw=0.8)
    margins = [ln.claim.margin for ln in rows if ln.claim.margin]
    spans = [abs(ln.judgement.effect) + abs(ln.judgement.hi - ln.judgement.lo) for ln in rows]
    extent = max([x for x in spans if not math.isnan(x)] or [0])
    scale = ""
    if margins and extent > 20 * min(margins):  # small margins stay visible beside big effects
        ax.set_xscale("symlog", linthresh=min(margins), linscale=0.6)
        scale = f"\n(linear within +-{min(margins):g}, logarithmic beyond)"
    ax.set_yticks(ys, [ln.id for ln in rows], fontsize=6.5)
    ax.set_ylim(-0.7, len(rows) - 0.3)
    ax.grid(axis="y", alpha=0.15)
    ranges = any(ln.judgement.interval == "range" for ln in rows)
    what = "95% CI" + (" (range below 5 pairs)" if ranges else "")
    ax.set_xlabel(f"effect: a - b (a bar's kind: the runs' mean), with its {what}{scale}")
    if margins:
        ax.plot([], [], "k--", lw=0.8, label="- / + the claim's margin")
    if any(ln.claim.bar is not None for ln in rows):
        ax.plot([], [], ":", color="tab:purple", label="the claim's bar")
    rule = "raw p < 0.05 (not adjusted)" if raw else "BH-adjusted q <= 0.05"
    ax.legend(title=f"verdict at {rule}", fontsize=7, title_fontsize=7, loc="upper left",
              bbox_to_anchor=(0, -0.04 - 1.1 / max(len(rows), 8)), ncol=2)  # fmt: skip
    ax.set_title(f"the experiment's {len(rows)} ledger lines", fontsize=9)
    return [ln.id for ln in rows]


def _n(x: float) -> str:
    return format(x, ".3g" if abs(x) >= 0.01 else ".2g")


def arms_panel(ax, exp: spec.Experiment, rows: list[dict]) -> None:
    """One row per arm, one column per env: the arm's mean of the main metric (colour) and its
    interval (text); a cell where the arm did not run stays blank."""
    ran = {(r["arm"], r["env"]) for r in rows}  # a toy's table: the arms and envs it ran
    metric, arms = metric_of(exp), [a for a in exp.arms.values() if a.name in {r for r, _ in ran}]
    envs = [e for e in exp.envs if e in {env for _, env in ran}]
    mean = np.full((len(arms), len(envs)), np.nan)
    cells = {}
    for i, arm in enumerate(arms):
        for k, env in enumerate(envs):
            x = results.sample(rows, arm.name, metric, [env])
            if np.isfinite(x).any():
                cells[i, k] = stats.summarize(x[np.isfinite(x)])
                mean[i, k] = cells[i, k].mean
    im = ax.imshow(mean, aspect="auto", cmap="viridis")
    for (i, k), s in cells.items():
        text = f"{_n(s.mean)}\n[{_n(s.lo)}, {_n(s.hi)}]"
        ax.text(k, i, text, ha="center", va="center", fontsize=5.5 if len(envs) > 3 else 7,
                color="kw"[int(im.norm(s.mean) < 0.55)])  # fmt: skip
    width, names = max(10, 72 // max(len(envs), 1)), [exp.envs[e].label for e in envs]
    names = [n if len(n) <= width else n.replace("-", "-\n", 1) for n in names]  # 2 lines
    ax.set_xticks(range(len(envs)), names, fontsize=7)
    ax.xaxis.tick_top()
    ax.set_yticks(range(len(arms)), [a.label for a in arms], fontsize=7)
    ax.grid(False)
    words = plots.band_words([c.n for c in cells.values()]) if cells else "no runs"
    ax.set_xlabel(f"{metric}: {words}\n(cell: mean [interval]; colour: mean)", fontsize=8)
    bar = plt.colorbar(im, ax=ax, fraction=0.04, pad=0.02, shrink=min(1.0, 8 / len(arms)))
    bar.set_label(f"mean {metric}", fontsize=7)


def curves_panels(axes, exp: spec.Experiment, curves: dict) -> None:
    """Per env (one axis each), every arm's train return over env steps: the mean and its band
    over seeds (controlrl.plots.plot_curves: 95% bootstrap CI from 5 seeds, range below)."""
    envs = [e for e in exp.envs if any(env == e for env, _ in curves)]
    for ax, env in zip(axes, envs):
        groups = {a.label: [(np.array(s), np.array(v)) for s, v in curves[(env, a.name)]]
                  for a in exp.arms.values() if (env, a.name) in curves}  # fmt: skip
        plots.plot_curves(ax, groups)
        ax.set_title(exp.envs[env].label, fontsize=8)
        ax.set_ylabel("train return", fontsize=7)
        ax.legend(fontsize=5.5)


def draw(exp: spec.Experiment, lines: list[Line], rows: list[dict], target: Path,
         curves: dict | None = None) -> None:  # fmt: skip
    """The experiment's figure, written to `target` (PNG); with `curves` (results/curves.csv) a
    row of learning curves below, one axis per env (at most CURVE_ENVS)."""
    n = len(forest_lines(exp, lines))
    seeds = len({r["seed"] for r in rows})
    height = max(4.5, 0.16 * n + 2.2, 0.3 * len({r["arm"] for r in rows}) + 2.2)
    envs = min(CURVE_ENVS, len({env for env, _ in curves or {}}))
    total = height + 3.6 * (envs > 0)
    with plt.rc_context(plots.STYLE):
        fig = plt.figure(figsize=(13, total))
        grid = fig.add_gridspec(2 if envs else 1, 1, height_ratios=[height, 3.6][: 1 + (envs > 0)])
        top = grid[0].subgridspec(1, 2, width_ratios=[1, 1.15])
        forest(fig.add_subplot(top[0]), exp, lines)
        arms_panel(fig.add_subplot(top[1]), exp, rows)
        if envs:
            bottom = grid[1].subgridspec(1, envs)
            curves_panels([fig.add_subplot(bottom[i]) for i in range(envs)], exp, curves)
        title = f"{exp.id}: {exp.title} ({seeds} seeds)"
        fig.suptitle(textwrap.fill(title, 130), fontsize=10)
        fig.tight_layout(rect=(0, 0, 1, 1 - 0.35 / total))
        target.parent.mkdir(parents=True, exist_ok=True)
        fig.canvas.draw()  # saved as RGB (no alpha): a tenth smaller than savefig's RGBA
        pixels = np.asarray(fig.canvas.buffer_rgba())[..., :3]
        Image.fromarray(pixels).save(target, optimize=True)
        plt.close(fig)


def toy_lines(exp: spec.Experiment, rows: list[dict]) -> list[Line]:
    """The lines of the claims whose arms and envs ran in `rows` (a toy's), unadjusted."""
    arms, envs = {r["arm"] for r in rows}, {r["env"] for r in rows}
    keep = []
    for c in exp.claims:
        on = tuple(e for e in c.envs if e in envs)
        if c.kind not in NO_EFFECT and {c.a, c.b, c.c, c.d} - {""} <= arms and (on or not c.envs):
            keep.append(dataclasses.replace(c, envs=on))
    ran = {e: v for e, v in exp.envs.items() if e in envs}  # the toy's envs are all it declares
    toy = dataclasses.replace(exp, claims=tuple(keep), envs=ran, seeds=exp.toy.seeds)
    return judge.lines(dataclasses.replace(toy, analysis=False), rows)


def write(exp: spec.Experiment) -> Path:
    """results/figure.png of a declared experiment, its lines judged with the whole ledger."""
    lines = ledger.judged(spec.load_all(exp.folder.parent))
    target = exp.folder / "results" / "figure.png"
    table = results.path(exp)
    rows = results.read(table)
    draw(exp, lines, rows, target, results.read_curves(table))
    if exp.aggregate:
        from paper_figures.lab import aggregates

        aggregates.draw(exp, rows, target.parent / "aggregates.png")
    return target


def write_toy(exp: spec.Experiment, table: Path) -> Path:
    """figure.png beside a toy's results table, its lines judged on the toy's rows alone."""
    rows = results.read(table)
    target = table.parent / "figure.png"
    draw(exp, toy_lines(exp, rows), rows, target, results.read_curves(table))
    return target
