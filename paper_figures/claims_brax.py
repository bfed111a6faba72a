"""Ledger rows of Brax locomotion (paper_figures/brax_locomotion.py): algos/ppo_brax.py against
Brax's own PPO trainer, both with Brax's published settings, as a non-inferiority test that can
fail. The trainers draw from different random streams, so seeds do not pair: the comparison is
two-sample (controlrl.stats.two_sample)."""

from __future__ import annotations

from controlrl import stats
from paper_figures.claims import FAILS, HOLDS, INCONCLUSIVE, Row

PAPER = "Brax: a differentiable physics engine (Freeman et al. 2021, arXiv 2106.13281)"
MARGIN = 0.10
"""Non-inferiority margin: a share of Brax's mean return at the budget."""


def parity(runs: list[dict], env: str, trainer: str = "ours") -> dict:
    """`trainer` against Brax's PPO on `env`, from per-run rows (env, trainer, return_at_budget,
    step_to_target, status): the difference of mean returns at the budget and its 95% bootstrap
    interval over seeds (a range below 5 seeds on either side). Holds when the interval's lower
    end is above -MARGIN x Brax's mean, does not hold when its upper end is below that, and is
    inconclusive otherwise: with a range, and whenever no run of either trainer reached the env's
    target (the parity of trainers that do not learn the task says nothing about learning it).
    A run that did not finish leaves no verdict (verdict None)."""
    pick = {
        t: [r for r in runs if r["env"] == env and r["trainer"] == t] for t in ("brax", trainer)
    }
    out = {"env": env, "trainer": trainer, "verdict": None}
    if not pick["brax"] or not pick[trainer]:
        return out
    if any(r["status"] != "ok" for v in pick.values() for r in v):
        return out
    ret = {t: [float(r["return_at_budget"]) for r in v] for t, v in pick.items()}
    t = stats.two_sample(ret[trainer], ret["brax"])
    bar = -MARGIN * t.b.mean
    learned = sum(str(r["step_to_target"]) != "" for v in pick.values() for r in v)
    if t.kind == "range" or not learned:
        verdict = INCONCLUSIVE
    else:
        verdict = HOLDS if t.lo > bar else (FAILS if t.hi < bar else INCONCLUSIVE)
    return out | {"test": t, "bar": bar, "learned": learned, "verdict": verdict}


POLICIES = (
    ("ours", "", "Brax's tanh-normal policy (--policy tanh_normal)"),
    ("ours_gaussian", "-gaussian", "a state-independent Gaussian (--policy gaussian)"),
)


def rows(read, stem: str = "brax_locomotion", old: str | None = None, tag: str = "") -> list:
    """Brax-<env><tag> for each env of <stem>.csv: ppo_brax.py (Brax's tanh-normal policy)
    against Brax's PPO trainer; Brax-<env>-gaussian<tag> for the Gaussian-policy variant where
    the sweep ran it. With `old` (the stem of the same comparison at another budget) a row says
    what that budget's verdict was beside this one's."""
    runs = read(f"{stem}.csv")
    table = read(f"{stem}_table.csv")
    before = read(f"{old}.csv") if old else []
    out = []
    for env in dict.fromkeys(r["env"] for r in runs):
        steps = int(max(float(r["steps"]) for r in runs if r["env"] == env))
        # the experiment's time, once: the env's runs of all trainers ran one after another
        hours = sum(float(r["wall_s"]) for r in runs if r["env"] == env) / 3600
        target = float(next(r["target"] for r in table if r["env"] == env))
        trainers = {r["trainer"] for r in runs if r["env"] == env}
        for trainer, suffix, policy in POLICIES:
            if trainer not in trainers:
                continue
            p = parity(runs, env, trainer)
            if p["verdict"] is None:
                raise ValueError(f"claims_brax: {stem}.csv lacks finished {env} runs")
            t = p["test"]
            why = "" if p["learned"] else f"; no run reaches {target:,.0f}: neither learns {env}"
            was = ""
            o = parity(before, env, trainer)
            if o["verdict"] is not None:
                old_steps = int(max(float(r["steps"]) for r in before if r["env"] == env))
                was = (
                    f"; was {o['verdict']} at {old_steps:,} steps (diff {o['test'].diff:.4g}, "
                    f"{o['test'].kind} {o['test'].lo:.4g} to {o['test'].hi:.4g}) -> "
                    f"{p['verdict']} at {steps:,}"
                )
            out.append(
                Row(
                    f"Brax-{env}{suffix}{tag}",
                    PAPER,
                    f"algos/ppo_brax.py with {policy} learns brax:{env} no worse than Brax's "
                    f"own PPO trainer (within {MARGIN:.0%} of its mean return, or above)",
                    "Brax's published PPO settings for the task (google/brax "
                    "notebooks/training.ipynb), 50M env steps",
                    "the paper's settings with num_envs and batch_size divided by 16, spring "
                    "pipeline, both trainers",
                    f"ours {steps:,} env steps per run; Brax's notebook 50,000,000; {hours:.1f} "
                    f"hours of wall time for the {env} runs of all trainers, one at a time",
                    f"{t.a.n} vs {t.b.n} (unpaired)",
                    "final deterministic evaluation return at the budget (16 episodes), "
                    f"ppo_brax.py minus Brax's PPO; bar {p['bar']:,.0f} = -{MARGIN:.0%} of "
                    f"Brax's mean {t.b.mean:,.0f}{why}{was}",
                    t.text(".4g"),
                    p["verdict"],
                    format(t.detectable, ".4g"),
                    ", ".join(f"{s}.csv" for s in (stem, old) if s),
                )
            )
    return out
