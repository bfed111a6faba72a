"""Ledger rows of Retrace on MuJoCo (paper_figures/retrace_vs_traces.py, panel B): Retrace's traces
against other traces in the same actor-critic (algos/retrace.py --trace; the same seed gives the
same initial networks and the same first learning_starts random steps, then the runs part), and
against PPO (different algorithms draw differently from a seed: two-sample). Trace kinds are
compared paired by seed from MIN_PAIRS pairs; with fewer, two-sample: the exact sign-flip test on n
pairs cannot give p below 2 / 2^n, which is 0.0625 at 5 pairs, so it could never decide. The current
runs are retrace_vs_traces_mujoco.csv; the earlier, smaller runs (retrace_vs_traces_mujoco_30k.csv)
give each row's old verdict and the rows of the trace kinds that were not rerun."""

from __future__ import annotations

import numpy as np

from controlrl import stats
from paper_figures.claims import (
    ALPHA,
    FAILS,
    HOLDS,
    INCONCLUSIVE,
    Row,
    layout,
    paired_verdict,
    values,
    with_theirs,
)

RETRACE = "Safe and Efficient Off-Policy Reinforcement Learning (arXiv 1606.02647)"
ACER = "Sample Efficient Actor-Critic with Experience Replay (ACER, arXiv 1611.01224)"
# each paper's budget, beside ours in the budget column
RETRACE_SETTING = "Atari, 200M frames"
RETRACE_BUDGET = f"the Retrace paper: {RETRACE_SETTING}"
ACER_BUDGET = "the ACER paper's MuJoCo budget not in its abstract"
NOW, OLD = "retrace_vs_traces_mujoco.csv", "retrace_vs_traces_mujoco_30k.csv"
KINDS = {"is": "importance-sampling", "q_lambda": "uncorrected Q(lambda)"}
MIN_PAIRS = 6  # the fewest pairs at which the exact sign-flip test can reach p < 0.05 (2/64)
METRICS = {
    "mean": ("mean_eval_return", "mean over the run's evaluations (sample efficiency)"),
    "final": ("final_eval_return", "final evaluation"),
}


def _runs(rows, config: str) -> list[dict]:
    return [r for r in rows if r["config"] == config and r["status"] == "finished"]


def _budget(rows) -> str:
    """Steps per run (PPO's: whole 2,048-step batches) and the experiment's compute, once."""
    steps = sorted({int(r["steps"]) for r in rows if r["status"] == "finished"})
    text = f"ours {steps[-1]:,} env steps per run"
    if len(steps) > 1:
        text += f" (PPO {steps[0]:,}: whole batches)"
    if "train_s" in rows[0]:
        hours = np.nansum([float(r["train_s"]) for r in rows]) / 3600
        text += f"; {hours:.1f} CPU-hours of collection and updates in all"
    return text


def _seeds_text(rows) -> str:
    n = max(len(_runs(rows, c)) for c in {r["config"] for r in rows})
    return f"{n} seeds, {int(float(rows[0]['steps'])):,} steps"


def two_sample_verdict(t: stats.TwoSample) -> str:
    """Holds when the permutation test rejects at ALPHA with the claimed sign (a > b), does not
    hold when it rejects with the other, inconclusive otherwise or on a range (< 5 seeds)."""
    if t.kind == "range" or t.p >= ALPHA:
        return INCONCLUSIVE
    return HOLDS if t.diff > 0 else FAILS


def _trace_test(rows, kind: str, column: str) -> tuple[str, str, str, str]:
    """(statistic, verdict, detectable, seeds) of Retrace minus `kind` on `column`."""
    a = values(_runs(rows, "retrace-retrace"), column)
    b = values(_runs(rows, f"retrace-{kind}"), column)
    return seed_test(a, b, ".4g")


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


def _ppo_test(rows, column: str):
    a = [float(r[column]) for r in _runs(rows, "retrace-retrace")]
    b = [float(r[column]) for r in _runs(rows, "ppo")]
    t = stats.two_sample(a, b)
    return t, two_sample_verdict(t)


def rows(read) -> list[Row]:
    now, old = read(NOW), read(OLD)
    setting = (
        "transplant: Hopper-v5, algos/retrace.py (SAC actor, twin-Q critic on the targets; "
        f"{layout('retrace')})"
    )
    protocol = {(r["eval_every"], r["eval_episodes"]) for r in now}
    if len(protocol) != 1:
        raise ValueError(f"claims_retrace: {NOW} mixes evaluation protocols {sorted(protocol)}")
    every, episodes = (int(float(v)) for v in protocol.pop())
    evals = f"evaluations every {every:,} steps over {episodes} episodes"
    out = []
    for kind, name in KINDS.items():
        rerun = bool(_runs(now, f"retrace-{kind}"))
        src = now if rerun else old
        for key, (column, label) in METRICS.items():
            stat, verdict, det, seeds = _trace_test(src, kind, column)
            if rerun:
                was = _trace_test(old, kind, column)[1]
                ours = f"{setting}, {evals}; was {was} at {_seeds_text(old)} -> {verdict}"
            else:
                ours = (
                    f"{setting}, the earlier runs (evaluations every 5,000 steps over 5 "
                    "episodes); not rerun at the larger budget of the IS row (cut to fit the "
                    "compute budget)"
                )
            out.append(
                Row(
                    f"E4-mujoco-{kind}-{key}",
                    RETRACE,
                    f"Retrace's traces learn better than {name} traces",
                    RETRACE_SETTING,
                    ours,
                    with_theirs(_budget(src), RETRACE_BUDGET),
                    seeds,
                    f"{label} return, Retrace minus {kind}",
                    stat,
                    verdict,
                    det,
                    NOW + ", " + OLD if rerun else OLD,
                )
            )
    for key, (column, label) in METRICS.items():
        t, verdict = _ppo_test(now, column)
        _, was = _ppo_test(old, column)
        out.append(
            Row(
                f"E4-mujoco-ppo-{key}",
                ACER,
                "an experience-replay actor-critic with Retrace targets is more sample "
                "efficient than on-policy learning on continuous control",
                "MuJoCo continuous control against on-policy baselines",
                f"transplant: Hopper-v5, algos/retrace.py --trace retrace against algos/ppo.py "
                f"(CleanRL's defaults: {layout('ppo')}), {evals}; was {was} at {_seeds_text(old)} "
                f"-> {verdict}",
                with_theirs(_budget(now), ACER_BUDGET),
                f"{t.a.n} vs {t.b.n} (unpaired)",
                f"{label} return, Retrace minus PPO",
                t.text(".4g"),
                verdict,
                format(t.detectable, ".4g"),
                NOW + ", " + OLD,
            )
        )
    return out
