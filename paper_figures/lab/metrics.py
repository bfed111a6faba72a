"""Named metrics of a finished run directory, per seed: what a declaration's [run] metrics list.

A run directory is one seed's run or a population run (--num-seeds: final_eval.json lists its
seeds, metrics.csv has a `seed` column). Names:

  final_eval_return   the final deterministic evaluation's mean return (final_eval.json)
  final_eval_normalized_score  offline: that evaluation's D4RL-normalised score (final_eval.json;
                      nan for a dataset without reference scores)
  final_train_return  mean train/episode_return over the last `final_window` env steps' rows
  final_train_return_weighted  the same, each row weighted by the episodes it ended
                      (train/episodes): controlrl.plots.final_return on one seed's rows
  final_success       bandits: mean train/episode_return over the last `final_window` samples
                      (episodes), over the bandit's optimal expected reward (envs/bandits.py)
  final_eval          bandits: the final evaluation's mean reward over the optimum
  auc                 bandits: the mean over iterations of train/episode_return over the optimum
  last10:<column>     the mean of the column's last 10 logged values (one row an update: the
                      last 10 updates)
  rise:<column>       the fraction of the column's consecutive logged values that rise (an
                      entropy that falls monotonically: 0)
  entropy-law-r2-gain the R^2 of the entropy law R = -a exp(H) + b (arXiv 2505.22617) minus
                      that of a straight line R = c H + d, over the run's (train/entropy,
                      train/episode_return) points
  entropy-law-late-gain
                      the absolute error of the line's prediction of the last quarter's mean
                      return minus the law's, both fitted on the first half of the points
  entropy-cov-corr    the correlation of each update's train/entropy_change with -1 times its
                      train/logp_adv_cov (the entropy mechanism of arXiv 2505.22617)
  entropy-cov-sign-gain
                      the share of updates whose entropy moved the way -Cov points, minus that
                      share by chance (paper_figures/lab/entropy_law.py)
  <agg>:<column>      agg (mean, max, sum, last) of a metrics.csv column over the run's rows;
                      first-tenth, last-tenth: its mean over the first, the last tenth of the
                      rows; tenth-drop: the first tenth's mean minus the last tenth's
  fixup_share         FixPO: sum of train/fixup_steps over sum of train/grad_steps (the share of
                      gradient steps its fixup phase adds); nan for a run without the column
"""

from __future__ import annotations

import json
import math
from functools import cache
from pathlib import Path

import numpy as np

from paper_figures.lab import entropy_law
from paper_figures.lab.tables import read_rows


def rise_frac(x: np.ndarray) -> float:
    """The fraction of consecutive finite values that rise (nan with fewer than two)."""
    x = x[np.isfinite(x)]
    return float(np.mean(np.diff(x) > 0)) if x.size > 1 else math.nan


def tenth(x: np.ndarray, last: bool) -> float:
    """The mean of the first (last=False) or the last tenth of a run's rows (at least one row)."""
    n = max(1, x.size // 10)
    return float(np.nanmean(x[-n:] if last else x[:n]))


def last10(x: np.ndarray) -> float:
    """The mean of the last 10 finite values (a final window of 10 updates: one row an update)."""
    x = x[np.isfinite(x)]
    return float(x[-10:].mean()) if x.size else math.nan


AGGREGATES = {"mean": np.nanmean, "max": np.nanmax, "sum": np.nansum, "last": lambda x: x[-1]}
AGGREGATES |= {"rise": rise_frac, "last10": last10}
# a rate's first and last tenth of the iterations, and how far it falls from the one to the other
AGGREGATES |= {
    "first-tenth": lambda x: tenth(x, False),
    "last-tenth": lambda x: tenth(x, True),
    "tenth-drop": lambda x: tenth(x, False) - tenth(x, True),
}
NAMED = ("final_eval_return", "final_train_return", "final_success", "final_eval", "auc")
NAMED += (*entropy_law.LAW, *entropy_law.COVARIANCE, "fixup_share")
NAMED += ("final_eval_normalized_score", "final_train_return_weighted")


def final_train_weighted(rows: list[dict], window: int) -> float:
    """Episode-weighted mean train/episode_return of the episodes that ended in the last
    `window` env steps (controlrl.plots.final_return on one seed's metrics.csv rows)."""
    end = float(rows[-1]["step"])
    tail = [r for r in rows if float(r["step"]) > end - window
            and as_float(r.get("train/episodes")) > 0]  # fmt: skip
    n = np.array([as_float(r["train/episodes"]) for r in tail])
    ret = np.array([as_float(r["train/episode_return"]) for r in tail])
    return float((n * ret).sum() / n.sum()) if n.sum() else math.nan


def check_name(name: str) -> None:
    """Raise ValueError for a metric name this module cannot compute."""
    agg, _, column = name.partition(":")
    if name in NAMED or (column and agg in AGGREGATES):
        return
    raise ValueError(f"unknown metric {name!r} (known: {', '.join(NAMED)}, or <agg>:<column> "
                     f"with agg one of {', '.join(AGGREGATES)})")  # fmt: skip


@cache
def bandit_truth(env_id: str) -> dict:
    """A bandit's episode length, optimal expected reward and whether it is a sequence bandit,
    asked of the env (envs/bandits.py), never read off its id."""
    from envs import bandits

    env = bandits.make(env_id.removeprefix("bandit:"), 1)
    try:
        return {"length": int(env.length), "optimal": float(env.optimal_reward),
                "sequence": bool(env.sequence)}  # fmt: skip
    finally:
        env.close()


def as_float(value: str | None) -> float:
    """A metrics.csv cell as a float; an empty or missing cell NaN."""
    return float(value) if value not in (None, "") else math.nan


def _by_seed(run_dir: Path, seeds: list[int]) -> dict[int, list[dict]]:
    out: dict[int, list[dict]] = {s: [] for s in seeds}
    for r in read_rows(run_dir / "metrics.csv", ("step",)):  # bounded, faults one line
        seed = int(r["seed"]) if r.get("seed") not in (None, "") else seeds[0]
        if seed in out:
            out[seed].append(r)
    return out


def rows_by_seed(run_dir: Path) -> dict[int, list[dict]]:
    """{seed: its metrics.csv rows} of a finished run directory (a population's seeds apart)."""
    return _by_seed(Path(run_dir), seeds_of(Path(run_dir)))


def seeds_of(run_dir: Path) -> list[int]:
    """The seeds a finished run directory holds (its final_eval.json, else config.json)."""
    final = json.loads((run_dir / "final_eval.json").read_text())
    if "seeds" in final:
        return [int(s) for s in final["seeds"]]
    return [int(json.loads((run_dir / "config.json").read_text())["args"]["seed"])]


CURVE = "train/episode_return"  # what an experiment's results/curves.csv holds per run
POINTS = 100  # the most points a run's curve keeps


def curves(run_dir: Path, points: int = POINTS) -> dict[int, list[tuple[int, float]]]:
    """{seed: [(step, return)]} of a finished run directory: its logged train/episode_return,
    in at most `points` consecutive chunks of rows, each the last step and the mean return (a
    seed that logged none is left out)."""
    run_dir = Path(run_dir)
    out = {}
    for seed, rows in _by_seed(run_dir, seeds_of(run_dir)).items():
        logged = [r for r in rows if r.get(CURVE) not in (None, "")]
        if not logged:  # an offline run trains on no episodes
            continue
        chunks = np.array_split(np.arange(len(logged)), min(points, len(logged)))
        out[seed] = [(int(float(logged[c[-1]]["step"])),
                      float(np.mean([float(logged[i][CURVE]) for i in c])))
                     for c in chunks if c.size]  # fmt: skip
    return out


def extract(run_dir: Path, env_id: str, names, final_window: int) -> dict[int, dict[str, float]]:
    """{seed: {metric: value}} of a finished run directory."""
    run_dir = Path(run_dir)
    seeds = seeds_of(run_dir)
    final = json.loads((run_dir / "final_eval.json").read_text())
    evals = dict(zip(seeds, final.get("eval_return_per_seed", [final["eval_return_mean"]])))
    rows = _by_seed(run_dir, seeds)
    out = {}
    for seed in seeds:
        mine = rows[seed]
        values = {}
        for name in names:
            if name == "final_eval_normalized_score":  # offline runs, where the dataset has
                # reference scores: the final evaluation's D4RL-normalised score
                score = final.get("eval_normalized_score")
                values[name] = math.nan if score is None else float(score)
            else:
                values[name] = _one(name, mine, evals[seed], env_id, final_window)
        out[seed] = values
    return out


def share(rows: list[dict], part: str, whole: str) -> float:
    """Sum of the column `part` over the sum of the column `whole` (nan when `part` is absent)."""
    num = np.array([as_float(r.get(part)) for r in rows])
    den = np.array([as_float(r.get(whole)) for r in rows])
    if not np.isfinite(num).any() or not np.nansum(den):
        return math.nan
    return float(np.nansum(num) / np.nansum(den))


def _one(name: str, rows: list[dict], final_eval: float, env_id: str, window: int) -> float:
    if name == "fixup_share":
        return share(rows, "train/fixup_steps", "train/grad_steps")
    if name == "final_eval_return":
        return float(final_eval)
    if name == "final_train_return_weighted":
        return final_train_weighted(rows, window)
    if name == "final_eval":
        return float(final_eval) / bandit_truth(env_id)["optimal"]
    if name in entropy_law.COVARIANCE:
        change, cov = (np.array([as_float(r.get(c)) for r in rows]) for c in entropy_law.COLUMNS)
        return entropy_law.covariance_gains(change, cov)[name]
    points = [r for r in rows if r.get("train/episode_return") not in (None, "")]
    returns = np.array([float(r["train/episode_return"]) for r in points])
    if name in entropy_law.LAW:
        entropy = np.array([float(r["train/entropy"]) for r in points])
        return entropy_law.law_gains(entropy, returns)[name]
    if name == "final_train_return":
        steps = np.array([float(r["step"]) for r in points])
        return float(returns[steps > steps[-1] - window].mean())
    if name in ("final_success", "auc"):
        success = returns / bandit_truth(env_id)["optimal"]
        if name == "auc":
            return float(success.mean())
        samples = np.cumsum([float(r["train/episodes"]) for r in points])
        return float(success[samples > samples[-1] - window].mean())
    agg, _, column = name.partition(":")
    x = np.array([as_float(r.get(column)) for r in rows])
    x = x[np.isfinite(x)] if agg == "last" else x
    if x.size == 0 or not np.isfinite(x).any():
        return math.nan
    return float(AGGREGATES[agg](x))
