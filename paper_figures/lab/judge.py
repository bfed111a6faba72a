"""An experiment's claims judged on its results table: one Line per claim (per env where the
claim says so), and the per-env details of a pooled claim."""

from __future__ import annotations

import dataclasses
import importlib.util
from dataclasses import dataclass, field

from controlrl import stats
from paper_figures.lab import protocol, results
from paper_figures.lab.spec import Claim, Experiment


@dataclass
class Line:
    """One ledger line before the multiplicity adjustment fills q, verdict and cause."""

    id: str
    exp: Experiment
    claim: Claim
    envs: list[str]
    judgement: protocol.Judgement
    main: bool = True  # a detail (one env of a pooled claim) does not count in the headline
    parent: str = ""
    suffix: str = ""  # the env suffix of a per-env line
    q: float = float("nan")
    verdict: str = ""
    cause: str = ""
    details: list[Line] = field(default_factory=list)
    also: list = field(default_factory=list)  # (metric, Summary): the other metrics, not judged

    @property
    def paper(self):
        return self.exp.papers[self.claim.paper]


def analysis_module(exp: Experiment):
    """The experiment's analysis.py as a module (None when it has none)."""
    if not exp.analysis:
        return None
    path = exp.folder / "analysis.py"
    spec = importlib.util.spec_from_file_location(f"paper_figures.{exp.id}_analysis", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def compare(exp: Experiment, claim: Claim, rows: list[dict], envs: list[str]):
    """The claim's judgement on `envs` (kinds with a statistic; exact and all-of elsewhere)."""
    if claim.kind in ("above", "below"):
        return protocol.bar(
            results.sample(rows, claim.a, claim.metric, envs), claim.kind, claim.bar
        )
    if claim.kind == "unpaired":
        a = results.sample(rows, claim.a, claim.metric, envs)
        b = results.sample(rows, claim.b, claim.metric, envs)
        j = protocol.unpaired(a, b, claim.margin, claim.difference == "ratio")
        return guarded(claim, rows, envs, j)
    if claim.kind == "contrast":
        return contrast(exp, claim, rows, envs)
    d = results.differences(rows, claim, envs)
    if d.size == 0:
        raise ValueError(f"{exp.id} claim {claim.id}: no pairs of {claim.a} and {claim.b} on "
                         f"{', '.join(envs)}")  # fmt: skip
    return guarded(claim, rows, envs, protocol.paired(d, claim.kind, claim.margin, claim.shift))


PAIRED = ("superior", "inferior", "non-inferior", "equivalent")


def also(exp: Experiment, claim: Claim, rows: list[dict], envs: list[str]) -> list:
    """The claim's differences on the [aggregate]'s other metrics (a paired claim's a minus b
    per seed, as its own metric's), each as a Summary with its 95% bootstrap CI: reported
    beside the verdict, never judged."""
    if claim.kind not in PAIRED:
        return []
    out = []
    for metric in exp.aggregate.get("metrics", ()):
        if metric != claim.metric:
            d = results.differences(rows, dataclasses.replace(claim, metric=metric), envs)
            if d.size:
                out.append((metric, stats.summarize(d)))
    return out


def contrast(exp: Experiment, claim: Claim, rows: list[dict], envs: list[str]):
    """Kind contrast: (a - b) - (c - d) per (env, seed), judged as superior (the claim: > 0)."""
    d = results.contrasts(rows, claim, envs)
    if d.size == 0:
        raise ValueError(f"{exp.id} claim {claim.id}: no seed of {claim.a}, {claim.b}, {claim.c} "
                         f"and {claim.d} on {', '.join(envs)}")  # fmt: skip
    j = protocol.paired(d, "superior", claim.margin, claim.shift)
    j.kind = "contrast"
    return j


def guarded(claim: Claim, rows: list[dict], envs: list[str], j: protocol.Judgement):
    """The judgement under the claim's guard: when neither arm's mean of the metric reaches
    `guard` (neither learns), no rejection can decide the claim: inconclusive, 'guard not met'."""
    if claim.guard is None:
        return j
    means = [
        float(results.sample(rows, arm, claim.metric, envs).mean()) for arm in (claim.a, claim.b)
    ]
    met = max(means) >= claim.guard
    j.text += (f"; guard {claim.guard:g} ({claim.guard_why}): {claim.a} {means[0]:.3g}, "
               f"{claim.b} {means[1]:.3g}, {'met' if met else 'not met'}")  # fmt: skip
    if not met:
        j.direction, j.cause = 0, protocol.GUARD
    return j


def complete(exp: Experiment, rows: list[dict]) -> list[dict]:
    """The rows of each (arm, env) whose every declared seed has run: an arm part-way through
    its seeds (a sweep still running) counts as not run there, so no line is judged on a
    subset of the seeds it declared."""
    planned = {(a.name, e): set(exp.seeds) for a in exp.arms.values() for e in a.envs}
    have: dict[tuple, set] = {}
    for r in rows:
        have.setdefault((r["arm"], r["env"]), set()).add(r["seed"])
    whole = {k for k, seeds in have.items() if planned.get(k, seeds) <= seeds}
    return [r for r in rows if (r["arm"], r["env"]) in whole]


def lines(exp: Experiment, rows: list[dict]) -> list[Line]:
    """Every line of the experiment, in declaration order (all-of lines judged later); an arm
    judged on an env only once all its declared seeds ran there."""
    if exp.arms:
        rows = complete(exp, rows)
    analysis = analysis_module(exp)
    exact = analysis.judge(exp, rows) if analysis and hasattr(analysis, "judge") else {}
    out = []
    for claim in exp.claims:
        if claim.kind == "exact":
            if claim.id not in exact:
                raise ValueError(f"{exp.id}: analysis.py gives no judgement for {claim.id}")
            out.append(Line(claim.id, exp, claim, list(exp.envs), exact[claim.id]))
            continue
        envs = results.claim_envs(exp, claim, rows) if claim.a else list(claim.envs)
        if claim.kind == "all-of":
            for env in envs if claim.per_env else [""]:
                suffix = exp.envs[env].suffix if env else ""
                line = Line(claim.id + suffix, exp, claim, [env] if env else [],
                            protocol.Judgement("all-of"), suffix=suffix)  # fmt: skip
                out.append(line)
            continue
        missing = [e for e in declared_envs(exp, claim) if e not in envs] if claim.a else []
        if missing and not claim.envs and not claim.per_env:  # judged once all its envs ran
            where = ", ".join(exp.envs[e].label for e in missing)
            out.append(Line(claim.id, exp, claim, envs + missing, not_run(claim, where)))
            continue
        if not envs:
            continue  # neither side ran here (an env-restricted arm)
        if claim.per_env:
            for env in envs:
                suffix = exp.envs[env].suffix
                judged = not_run(claim, env)
                line = Line(claim.id + suffix, exp, claim, [env], judged, suffix=suffix)
                if has_runs(claim, rows, env):
                    line.judgement = compare(exp, claim, rows, [env])
                    line.also = also(exp, claim, rows, [env])
                out.append(line)
            continue
        if claim.envs and not any(has_runs(claim, rows, env) for env in envs):
            out.append(Line(claim.id, exp, claim, envs, not_run(claim, ", ".join(envs))))
            continue
        line = Line(claim.id, exp, claim, envs, compare(exp, claim, rows, envs))
        line.also = also(exp, claim, rows, envs)
        ran = {(r["arm"], r["env"]) for r in rows}  # a sensitivity env: a detail where run
        arms = [x for x in (claim.a, claim.b, claim.c, claim.d) if x]
        extra = [e for e in claim.sensitivity if all((a, e) in ran for a in arms)]
        for env in (envs if len(envs) > 1 else []) + extra:
            rid = claim.id + (exp.envs[env].suffix or f"-{exp.envs[env].label}")
            detail = Line(rid, exp, claim, [env], compare(exp, claim, rows, [env]), False)
            detail.parent = claim.id
            line.details.append(detail)
        out.append(line)
    return out


def declared_envs(exp: Experiment, claim: Claim) -> list[str]:
    """The envs on which every arm of the claim is declared (where a pooled claim is judged)."""
    arms = [exp.arms[x] for x in (claim.a, claim.b, claim.c, claim.d) if x]
    return [e for e in exp.envs if all(e in arm.envs for arm in arms)]


def has_runs(claim: Claim, rows: list[dict], env: str) -> bool:
    """Whether every arm of the claim has results on env."""
    done = {(r["arm"], r["env"]) for r in rows}
    return all((arm, env) in done for arm in (claim.a, claim.b, claim.c, claim.d) if arm)


def not_run(claim: Claim, where: str) -> protocol.Judgement:
    """The line of a declared claim on envs whose runs are not in the results yet: no
    statistic, no p-value (outside the multiplicity family), the verdict 'not run yet'."""
    arms = ", ".join(a for a in (claim.a, claim.b, claim.c, claim.d) if a)
    return protocol.Judgement(claim.kind, verdict=protocol.NOT_RUN,
                              text=f"not run yet: no results of {arms} on {where}")  # fmt: skip


def settle_all_of(every: list[Line]) -> None:
    """Judge the all-of lines from their parts' verdicts (each part in the same experiment)."""
    by_key = {(ln.exp.id, ln.id): ln for ln in every}
    for ln in every:
        if ln.claim.kind != "all-of":
            continue
        parts = [by_key[(ln.exp.id, p + ln.suffix)].verdict for p in ln.claim.of]
        ln.judgement = protocol.all_of(parts)
        ln.verdict, ln.cause = ln.judgement.verdict, ln.judgement.cause
        ln.judgement.text = "; ".join(f"{p}: {v}" for p, v in zip(ln.claim.of, parts))
