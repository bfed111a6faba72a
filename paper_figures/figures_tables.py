"""The tables of paper_figures/README.md (its figures and benchmarks), rendered from the committed
CSVs of paper_figures/out/ into its `<!-- table:<name> -->` blocks: the registry, the formatting
and the README.md tables are paper_figures/readme_tables.py's."""

from __future__ import annotations

import numpy as np

from controlrl import stats
from paper_figures.readme_tables import (
    BENCH_ROWS,
    Read,
    col,
    f,
    g,
    isnan,
    kind,
    learning_body,
    md,
    med_range,
    one,
    paired_ratio,
    para,
    parity_per_seed,
    rows_where,
    span,
    spread,
    table,
)

TRACE_KINDS = {"retrace": "Retrace", "is": "IS", "tree_backup": "tree backup",
               "q_lambda": "Q(lambda)"}  # fmt: skip


@table("retrace-traces")
def retrace_traces(read: Read) -> str:
    rows = read("retrace_vs_traces_summary.csv")
    alphas = sorted({r["alpha"] for r in rows}, key=float)
    seeds = {r["seeds"] for r in rows}

    def cells(kind: str, column: str, spec: str | None) -> str:
        v = [float(one(rows, alpha=a, kind=kind)[column]) for a in alphas]
        return " / ".join(g(x) if spec is None else f(x, spec) for x in v)

    body = [
        [name, cells(k, "expected_rate", ".3f"), cells(k, "target_var_mean", None),
         cells(k, "err_final_median", None)]
        for k, name in TRACE_KINDS.items()
    ]  # fmt: skip
    hi = alphas[-1]
    is_hi = one(rows, alpha=hi, kind="is")
    q_hi = one(rows, alpha=hi, kind="q_lambda")
    lo = alphas[0]
    tb, rt = one(rows, alpha=lo, kind="tree_backup"), one(rows, alpha=lo, kind="retrace")
    return (
        para(
            f"`out/retrace_vs_traces_summary.csv` (per alpha {' / '.join(alphas)}; rate ="
            " spectral radius of the expected update; target variance: mean over (x, a); error ="
            f" median over {seeds.pop()} seeds of the error over the last 10% of updates):"
        )
        + "\n\n"
        + md(["kind", "expected rate", "exact target variance", "error"], body)
        + "\n\n"
        + para(
            f"IS's sampled variance at alpha {hi} is {f(float(is_hi['sample_var_mean']), ',.0f')}"
            f" against the exact {f(float(is_hi['target_var_mean']), ',.1f')}: the tail is too"
            f" heavy to estimate from sampled paths. Q(lambda) diverges at alpha {hi} (expected"
            f" rate {f(float(q_hi['expected_rate']), '.3f')}; {q_hi['diverged']} of"
            f" {q_hi['seeds']} seeds diverged). Tree backup needs more expected updates to the"
            f" tolerance than Retrace at alpha {lo} ({tb['expected_updates_to_tol']} vs"
            f" {rt['expected_updates_to_tol']}) but ends with the lower sampled error."
        )
    )


@table("mujoco")
def mujoco(read: Read) -> str:
    text, n = learning_body(read, ["ppo_mujoco.csv", "trpo_mujoco.csv"])
    return f"`out/ppo_mujoco.csv`, `out/trpo_mujoco.csv`, {kind(n)} over {n} seeds:\n\n" + text


@table("dmc")
def dmc(read: Read) -> str:
    text, n = learning_body(read, ["ppo_dmc.csv"])
    return f"`out/ppo_dmc.csv`, {kind(n)} over {n} seeds:\n\n" + text


def seeds_above(read: Read, name: str, column: str) -> str:
    """Per env, how many seeds' `column` exceed the CSV's published reference."""
    rows = read(name)
    parts = []
    for env in dict.fromkeys(r["env_id"] for r in rows):
        g = rows_where(rows, env_id=env)
        k = sum(float(r[column]) > float(r["reference"]) for r in g)
        parts.append(f"{env} {k} of {len(g)}")
    return ", ".join(parts)


@table("mujoco-above")
def mujoco_above(read: Read) -> str:
    return para(
        "Seeds above the published number: PPO's train return (CleanRL's is a train return)"
        f" {seeds_above(read, 'ppo_mujoco.csv', 'final_train_return')}; TRPO's final evaluation"
        f" (RL Zoo's is an evaluation) {seeds_above(read, 'trpo_mujoco.csv', 'final_eval_return')}."
    )


@table("dmc-above")
def dmc_above(read: Read) -> str:
    return para(
        "Seeds above CleanRL's published return at 8x our budget: train"
        f" {seeds_above(read, 'ppo_dmc.csv', 'final_train_return')}; final evaluation"
        f" {seeds_above(read, 'ppo_dmc.csv', 'final_eval_return')}."
    )


@table("brax-pipeline")
def brax_pipeline(read: Read) -> str:
    rows = read("brax_pipeline_check.csv")
    body = []
    for p in dict.fromkeys(r["pipeline"] for r in rows):
        cells = [p]
        for c in ("pd", "zero"):
            r = one(rows, pipeline=p, controller=c)
            lo, hi = int(r["min_length"]), int(r["max_length"])
            cells.append(str(lo) if lo == hi else f"{lo}-{hi}")
        body.append(cells)
    n = {r["episodes"] for r in rows}.pop()
    return (
        f"`out/brax_pipeline_check.csv`, episode length min-max over {n} episodes (1000 ="
        " balanced to the end):\n\n" + md(["pipeline", "PD controller", "zero action"], body)
    )


@table("bench-ppo")
def bench_ppo(read: Read) -> str:
    labels = ("PPO (CleanRL settings)", "PPO", "TRPO (RL Zoo settings)", "TRPO")
    body = []
    for label, (_, name, match, *_) in zip(labels, BENCH_ROWS):  # the README's speed rows
        rows = rows_where(read(name), **match)
        floor = [r for r in rows if r["contender"] == "floor"]
        # time ours / floor = floor rate / our rate, paired per repeat
        vs_floor = floor and med_range(
            [1 / x for x in paired_ratio(rows, "sps", "ours", "floor")], ".2f"
        )
        body.append([
            label, str(match["num_envs"]),
            f(np.median(col(rows_where(rows, contender="ours"), "sps"))),
            f(np.median(col(rows_where(rows, contender="sb3"), "sps"))),
            med_range(paired_ratio(rows, "sps", "ours", "sb3"), ".2f"),
            vs_floor if floor else "-", f"`out/{name}`",
        ])  # fmt: skip
    return md(["", "envs", "ours steps/s", "SB3 steps/s", "ours / SB3", "time ours / floor", "CSV"],
              body, ["---", "---", "---:", "---:", "---", "---", "---"])  # fmt: skip


@table("bench-backends")
def bench_backends(read: Read) -> str:
    """Our PPO per backend and vector layout at one batch: steps/s, and the speed against the
    first layout of the CSV paired per repeat."""
    rows = [r for r in read("bench_backends.csv") if r["status"] == "ok"]
    layouts = list(dict.fromkeys(r["layout"] for r in rows))
    body = []
    for name in layouts:
        mine = rows_where(rows, layout=name)
        ratio = paired_ratio(rows, "sps", name, layouts[0], key="layout")
        body.append([
            f"`{name}`", mine[0]["backend"], med_range(col(mine, "sps"), ",.0f"),
            med_range(col(mine, "rollout_s"), ".2f"), med_range(col(mine, "update_s"), ".2f"),
            "-" if name == layouts[0] else med_range(ratio, ".2f"),
        ])  # fmt: skip
    repeats = len({r["repeat"] for r in rows})
    head = (f"`out/bench_backends.csv`: {repeats} repeats, {rows[0]['iterations']} timed "
            f"iterations each, batch {int(rows[0]['steps_per_iter']):,} steps; median (range) over "
            f"the repeats, speed paired per repeat against `{layouts[0]}`:")  # fmt: skip
    table = md(["layout", "backend", "steps/s", "rollout s/iter", "update s/iter",
                f"speed vs {layouts[0].rpartition(':')[2]}"], body,
               ["---", "---", "---:", "---:", "---:", "---:"])  # fmt: skip
    return para(head) + "\n\n" + table


GENERATIVE = {"ppo": "ppo.py", "fpo": "fpo.py, reference defaults",
              "fpo_ppo_update": "fpo.py with ppo's update size (10 epochs, 64-64 critic)",
              "dppo": "dppo.py, reference sizes (K 20, K' 10, 512x3 residual actor, 256x3 critic)",
              "dppo_ppo_nets": "dppo.py with ppo's widths (64x3 actor, 64-64 critic; same K, K',"
                               " 5 epochs)"}  # fmt: skip


@table("bench-generative")
def bench_generative(read: Read) -> str:
    rows = read("bench_generative.csv")
    body = []
    for c, label in GENERATIVE.items():
        mine = rows_where(rows, contender=c)
        if c == "ppo":
            cpu = wall = "1"
        else:
            cpu = med_range(paired_ratio(rows, "sps_cpu", c, "ppo"), ".2f")
            wall = med_range(paired_ratio(rows, "sps", c, "ppo"), ".2f")
        body.append([label, med_range(col(mine, "sps_cpu"), ",.0f"), cpu, wall])
    table = md(["contender", "steps per CPU s", "/ ppo.py, CPU", "/ ppo.py, wall"], body,
               ["---", "---:", "---", "---"])  # fmt: skip
    return (
        para(
            "`out/bench_generative.csv`, training env steps per CPU second, median (range) over"
            f" {len(rows_where(rows, contender='ppo'))} repeats, and the ratio to ppo.py paired"
            " per repeat (CPU time / wall time):"
        )
        + "\n\n"
        + table
    )


@table("bench-retrace")
def bench_retrace(read: Read) -> str:
    body = []
    for name in ("bench_retrace.csv", "bench_retrace_idle.csv"):
        rows = read(name)
        ours, sb3 = rows_where(rows, contender="ours"), rows_where(rows, contender="sb3")
        body.append([
            f"`out/{name}`", f"{rows[0]['updates']}, {rows[0]['warmup']}", str(len(ours)),
            med_range(col(ours, "updates_per_s"), ".1f"),
            med_range(col(sb3, "updates_per_s"), ".1f"),
            med_range(paired_ratio(rows, "updates_per_s", "ours", "sb3"), ".2f"),
            med_range(paired_ratio(rows, "updates_per_cpu_s", "ours", "sb3"), ".2f"),
        ])  # fmt: skip
    return md(["CSV", "updates, of which untimed", "repeats", "ours", "SB3", "ours / SB3, wall",
               "ours / SB3, CPU"], body, ["---"] * 3 + ["---:"] * 2 + ["---"] * 2)  # fmt: skip


@table("bench-iql")
def bench_iql(read: Read) -> str:
    rows = read("bench_iql.csv")
    ours, d3 = rows_where(rows, contender="ours"), rows_where(rows, contender="d3rlpy")
    body = [["`out/bench_iql.csv`", f(np.median(col(ours, "updates_per_cpu_s")), ".1f"),
             f(np.median(col(d3, "updates_per_cpu_s")), ".1f"),
             med_range(paired_ratio(rows, "updates_per_cpu_s", "ours", "d3rlpy"), ".2f"),
             med_range(paired_ratio(rows, "updates_per_s", "ours", "d3rlpy"), ".2f")]]  # fmt: skip
    head = ["CSV", "ours updates per CPU s", "d3rlpy updates per CPU s",
            "ours / d3rlpy by CPU time", "by wall clock"]  # fmt: skip
    return (
        md(head, body, ["---", "---:", "---:", "---", "---"])
        + f"\n\nMedians over the {len(ours)} repeats, ratios paired per repeat (median and range)."
    )


def same_iql(ev, runs) -> None:
    """bench_iql.py's `ours` and iql_tau.py's IQL (tau 0.7) are one code path: at the same
    dataset, seed and budget their scores must agree to the last digit (so the larger budget
    takes our side from iql_tau.py's runs). Raises naming the first disagreement."""
    for r in rows_where(ev, contender="ours", status="ok"):
        ds = r["dataset"].removesuffix(".hdf5")
        twin = rows_where(runs, dataset=ds, method="iql", tau="0.7", seed=r["seed"],
                          steps=r["updates"])  # fmt: skip
        if [t["final_normalized_score"] for t in twin] != [r["normalized_score"]]:
            raise ValueError(
                f"bench_iql.py's ours on {ds} seed {r['seed']} at {r['updates']} updates scores "
                f"{r['normalized_score']}; iql_tau.py's IQL there: "
                f"{[t['final_normalized_score'] for t in twin]}"
            )


IQL_100K = "iql-100k"  # the declared IQL runs at 100,000 gradient steps (our side's larger budget)
IQL_20K = "iql_vs_bc.csv"  # iql_tau.py's IQL at 20,000 gradient steps
D3RLPY_100K = "bench_iql_eval_100k.csv"  # d3rlpy's IQL at the declared runs' budget


def iql_100k_scores(dataset: str, steps: int) -> list[float]:
    """Our IQL (tau 0.7) on `dataset` at `steps` gradient steps: the declared experiment
    iql-100k's runs (its results table), seeds in order."""
    from paper_figures.lab import results, spec

    exp = spec.load(spec.FIGURES / IQL_100K)
    arm = f"iql-{dataset.removesuffix('-v5-s0')}"
    if arm not in exp.arms or exp.envs[exp.arms[arm].envs[0]].steps != steps:
        raise ValueError(f"{IQL_100K} declares no IQL run of {dataset} at {steps:,} steps")
    env = exp.arms[arm].envs[0]
    got = results.values(results.rows_of(exp), arm, env, "final_eval_normalized_score")
    return [got[s] for s in sorted(got)]


@table("bench-iql-eval")
def bench_iql_eval(read: Read) -> str:
    ev = [r for r in read("bench_iql_eval.csv") if r["status"] == "ok"]
    same_iql(ev, read(IQL_20K))
    sides = {c: col(rows_where(ev, contender=c), "normalized_score") for c in ("ours", "d3rlpy")}
    body = [[f(int(ev[0]["updates"])), f"{len(sides['ours'])} / {len(sides['d3rlpy'])}",
             spread(sides["ours"], ".1f"), spread(sides["d3rlpy"], ".1f"),
             _diff_cell(stats.two_sample(sides["ours"], sides["d3rlpy"]))]]  # fmt: skip
    sources = [f"at {f(int(ev[0]['updates']))} updates both sides from `bench_iql_eval.csv`"]
    peer = [r for r in read(D3RLPY_100K) if r["contender"] == "d3rlpy" and r["status"] == "ok"]
    episodes = {r["eval_episodes"] for r in ev + peer}
    if len(episodes) != 1:
        raise ValueError(f"bench-iql-eval: the runs differ in evaluation episodes {episodes}")
    if peer:
        keys = {(r["dataset"].removesuffix(".hdf5"), int(r["updates"])) for r in peer}
        if len(keys) != 1:
            raise ValueError(f"{D3RLPY_100K} mixes datasets or budgets {sorted(keys)}")
        ds, updates = keys.pop()
        ours = iql_100k_scores(ds, updates)
        theirs = [float(r["normalized_score"]) for r in peer]
        t = stats.two_sample(ours, theirs)
        body.append([f(updates), f"{t.a.n} / {t.b.n}", spread(ours, ".1f"),
                     spread(theirs, ".1f"), _diff_cell(t)])  # fmt: skip
        sources.append(
            f"at {f(updates)} ours from [`{IQL_100K}`]({IQL_100K}/README.md) (IQL, tau 0.7) and"
            f" d3rlpy from `{D3RLPY_100K}`"
        )
    table = md(["updates", "seeds (ours / d3rlpy)", "ours", "d3rlpy", "ours minus d3rlpy"], body,
               ["---:", "---:", "---:", "---:", "---"])  # fmt: skip
    return (
        table
        + "\n\n"
        + para(
            f"Normalised final evaluation (deterministic, {episodes.pop()} episodes per run):"
            " mean (range)"
            " below 5 seeds, mean [95% bootstrap CI] from 5; the difference unpaired (the"
            " libraries draw differently from a seed), with its permutation p;"
            f" {'; '.join(sources)}."
            " Our IQL in the two files is one code path: the 20,000-update scores of `ours`"
            f" equal `{IQL_20K}`'s IQL at the same seeds to the last digit (checked when"
            " this table is written)."
        )
    )


def _diff_cell(t: stats.TwoSample) -> str:
    """ours minus d3rlpy as a cell: 'd (lo to hi), p = ..' with a range below 5 seeds."""
    return f"{f(t.diff, '.1f')} ({t.kind} {f(t.lo, '.1f')} to {f(t.hi, '.1f')}), p = {t.p:.2f}"


@table("ppo-vs-sb3")
def ppo_vs_sb3(read: Read) -> str:
    runs = read("ppo_vs_sb3.csv")
    tests = read("ppo_vs_sb3_tests.csv")
    metric = "final_eval_return"

    def above(side: str) -> str:
        v = sorted(col(rows_where(runs, side=side), metric))
        hi = [x for x in v if x > 3000]
        extra = f" ({', '.join(f(x) for x in hi)})" if hi else f" (max {f(max(v))})"
        return f"{len(hi)} of {len(v)}{extra}"

    body = [["SB3", f(np.median(col(rows_where(runs, side="SB3"), metric))), "", "", "",
             above("SB3")]]  # fmt: skip
    for side, label in (("controlrl", "controlrl"), ("controlrl vf_coef=1",
                                                      "controlrl `--vf-coef 1.0`")):  # fmt: skip
        t = one(tests, side=side, metric=metric)
        body.append([
            label, f(float(t["median"])),
            f"{f(float(t['median_diff']))} [{f(float(t['median_diff_ci_lo']))},"
            f" {f(float(t['median_diff_ci_hi']))}]",
            f(float(t["p_mean_permutation"]), ".2f"), f(float(t["p_ks"]), ".2f"), above(side),
        ])  # fmt: skip
    return md(["side vs SB3", "median", "median difference", "p (means)", "p (KS)",
               "seeds above 3000"], body,
              ["---", "---:", "---", "---:", "---:", "---:"])  # fmt: skip


@table("bench-brax")
def bench_brax(read: Read) -> str:
    rows = [r for r in read("bench_brax.csv") if r["status"] == "ok"]
    adapter = [r for r in rows if r["backend"] == "brax adapter"]
    wrap = [r for r in rows if r["backend"] == "brax raw+autoreset"]
    sizes = sorted({int(r["num_envs"]) for r in adapter})
    body = []
    for n in sizes:
        a = [r for r in adapter if int(r["num_envs"]) == n]
        w = [float(r["ratio_to_raw"]) for r in wrap if int(r["num_envs"]) == n]
        ra = [float(r["ratio_to_raw"]) for r in a]
        low = min(a, key=lambda r: float(r["ratio_to_raw"]))
        body.append([
            str(n),
            f"{span(min(ra), max(ra), '.2f')} ({sum(x >= 0.9 for x in ra)} of {len(ra)} >= 0.9;"
            f" lowest {low['env']} on {low['pipeline']})",
            span(min(w), max(w), ".2f"),
        ])  # fmt: skip
    configs = len({(r["env"], r["pipeline"]) for r in adapter})
    pipes = list(dict.fromkeys(r["pipeline"] for r in adapter))
    shown = [n for n in sizes if n > 1]
    rates = []
    for env in dict.fromkeys(r["env"] for r in adapter):
        cells = [env]
        for p in pipes:
            v = [one(adapter, env=env, pipeline=p, num_envs=n)["steps_per_s"] for n in shown]
            cells.append(" / ".join(f(float(x)) for x in v))
        rates.append(cells)
    alone = read("bench_brax_halfcheetah_mjx_1024.csv")
    by = {r["backend"]: r for r in alone}
    compile_s = [float(r["compile_s"]) for r in rows + alone if r["compile_s"]]
    host = []
    hosts = (("gymnasium", "Gymnasium's SyncVectorEnv"), ("envpool", "EnvPool (our adapter)"))
    for backend, label in hosts:
        parts = []
        for env in dict.fromkeys(r["env"] for r in rows if r["backend"] == backend):
            v = [r for r in rows if r["backend"] == backend and r["env"] == env]
            parts.append(f"{env} {' / '.join(f(float(r['steps_per_s'])) for r in v)}")
        ns = " / ".join(r["num_envs"] for r in rows if r["backend"] == backend
                        and r["env"] == rows[0]["env"])  # fmt: skip
        host.append(f"{label} at {ns} envs: {', '.join(parts)}")
    ep = [float(r["ratio_to_raw"]) for r in rows if r["backend"] == "envpool"]
    one_env = [float(r["ratio_to_raw"]) for r in adapter if int(r["num_envs"]) == 1]
    head = ["num_envs", f"adapter / raw, {configs} (env, pipeline) configs",
            "brax's autoreset wrappers / raw"]  # fmt: skip
    return (
        "`out/bench_brax.csv`:\n\n"
        + md(head, body)
        + f"\n\nAdapter env steps/s at {' / '.join(map(str, shown))} envs:\n\n"
        + md(["env", *pipes], rates)
        + "\n\n"
        + para(
            "halfcheetah on mjx at 1024 envs, also alone in"
            " `out/bench_brax_halfcheetah_mjx_1024.csv` (`--envs halfcheetah --pipelines mjx"
            f" --num-envs 1024 --host-envs ''`): raw {f(float(by['brax raw']['steps_per_s']))},"
            f" adapter {f(float(by['brax adapter']['steps_per_s']))}"
            f" ({f(float(by['brax adapter']['ratio_to_raw']), '.3f')}), brax's autoreset wrappers"
            f" {f(float(by['brax raw+autoreset']['steps_per_s']))}"
            f" ({f(float(by['brax raw+autoreset']['ratio_to_raw']), '.3f')}) steps/s. Cold compiles"
            f" take {span(min(compile_s), max(compile_s), '.1f')} s per (pipeline, batch). "
            + "; ".join(host)
            + f"; EnvPool through our adapter runs at {span(min(ep), max(ep), '.2f')} of EnvPool's"
            f" own rate. At one env a fixed host round trip per step costs up to"
            f" {1 - min(one_env):.0%}; from 64 envs on it disappears in the step."
        )
    )


TRAINERS = {"brax": "Brax's PPO trainer", "ours_jax": "`algos/ppo_brax.py` (JAX)",
            "ours": "`algos/ppo.py` (torch)"}  # fmt: skip


@table("brax-race")
def brax_race(read: Read) -> str:
    rows = read("brax_ppo_race.csv")
    ok = sum(r["status"] == "ok" and not isnan(r["step_at_target"]) for r in rows)
    body = []
    for t, label in TRAINERS.items():
        g = sorted(rows_where(rows, trainer=t), key=lambda r: int(r["seed"]))
        if t == "brax":
            body.append([label, "1", "1"])
            continue
        cost = " / ".join(f(float(r["train_cost_vs_brax"]), ".2f") for r in g)
        wall = col(g, "wall_ratio_vs_brax")
        body.append([label, cost, span(min(wall), max(wall), ".2f")])
    jax = rows_where(rows, trainer="ours_jax")
    others = []
    for name in ("brax_ppo_race_jax_only.csv", "brax_ppo_race_jax_only_2.csv",
                 "brax_ppo_race_jax_only_3.csv"):  # fmt: skip
        others.append(f(np.median(col(rows_where(read(name), trainer="ours_jax"),
                                      "train_cost_vs_brax")), ".2f"))  # fmt: skip
    ant = sorted(rows_where(read("brax_ppo_race_ant.csv"), trainer="ours_jax"),
                 key=lambda r: int(r["seed"]))  # fmt: skip
    head = ["trainer", "training time per env step / Brax's, per seed",
            "wall clock to target / Brax's"]  # fmt: skip
    return (
        f"`out/brax_ppo_race.csv` ({ok} of {len(rows)} runs reach the target):\n\n"
        + md(head, body)
        + "\n\n"
        + para(
            "Per-step training time in these races differs between runs of the same command: the"
            " median of `ppo_brax.py`'s ratio is"
            f" {f(np.median(col(jax, 'train_cost_vs_brax')), '.2f')} here, and"
            f" {', '.join(others[:-1])} and {others[-1]} with `--trainers brax,ours_jax` in"
            " `out/brax_ppo_race_jax_only.csv`, `out/brax_ppo_race_jax_only_2.csv` and"
            " `out/brax_ppo_race_jax_only_3.csv`. The compute comparison is `brax_parity.py`'s. At"
            " Brax's ant settings (`out/brax_ppo_race_ant.csv`: `--trainers brax,ours_jax --env"
            " ant`, swish 32x4 / 256x5, reward scaling 10, 128 envs x 5 steps, 64k steps, Gaussian"
            " policies): ratio"
            f" {' / '.join(f(float(r['train_cost_vs_brax']), '.2f') for r in ant)}; 64k steps are"
            " too short to compare learning."
        )
    )


PARITY = [("brax_parity.csv", "`out/brax_parity.csv`", "pinned to one"),
          ("brax_parity_unpinned_idle.csv", "`out/brax_parity_unpinned_idle.csv` (`--cpu -1`)",
           "both"),
          ("brax_parity_unpinned_loaded.csv", "`out/brax_parity_unpinned_loaded.csv` (`--cpu -1`,"
           " another process on the second core)", "both")]  # fmt: skip


@table("brax-parity")
def brax_parity(read: Read) -> str:
    body = []
    for name, label, cpus in PARITY:
        rows = read(name)
        # every round's ours / Brax ratio, and per seed the median over its rounds
        rounds = col(rows_where(rows, trainer="ours_jax"), "ours_over_brax")
        seeds = parity_per_seed(rows)

        def k(t: str, rows: list = rows) -> str:
            v = col(rows_where(rows, trainer=t), "train_sps")
            return f"{min(v) / 1e3:.1f}-{max(v) / 1e3:.1f}k"

        body.append([label, cpus, span(min(rounds), max(rounds), ".3f"),
                     " / ".join(f(x, ".3f") for x in seeds), f(np.median(seeds), ".3f"),
                     f"{k('ours_jax')} / {k('brax')}"])  # fmt: skip
    return md(["CSV", "CPUs", "rounds", "per seed", "median", "ours / Brax env steps/s"], body)


@table("brax-threads")
def brax_threads(read: Read) -> str:
    body = []
    for name in ("brax_threads_race.csv", "brax_threads_ant.csv"):
        rows = [r for r in read(name) if r["status"] == "ok"]
        pin, unpin = rows_where(rows, mode="pinned"), rows_where(rows, mode="unpinned")
        scale, unit = (1e3, "s") if np.median(col(pin, "wall_ms")) > 1000 else (1.0, "ms")
        spec = ".2f" if unit == "s" else ".1f"

        def mr(rs: list, c: str, scale: float = scale, unit: str = unit, spec: str = spec) -> str:
            return med_range([x / scale for x in col(rs, c)], spec) + f" {unit}"

        ratio = paired_ratio(rows, "wall_ms", "unpinned", "pinned", key="mode")
        body.append([f"`out/{name}`", mr(pin, "wall_ms"), mr(unpin, "wall_ms"),
                     mr(unpin, "cpu_ms"), med_range(ratio, ".2f")])  # fmt: skip
    return md(["CSV", "pinned, wall = CPU", "unpinned, wall", "unpinned, CPU",
               "unpinned / pinned, wall"], body)  # fmt: skip


@table("population-control")
def population_control(read: Read) -> str:
    rows = [r for r in read("bench_control_population.csv")
            if r["status"] == "ok" and r["contender"].startswith("population-")]  # fmt: skip
    if not rows:
        raise ValueError("bench_control_population.csv has no population row")
    body = [
        [r["env_id"], r["seeds"], f(float(r["speedup"]), ".2f") + "x",
         f(float(r["us_per_seed_step"])), f(float(r["floor_ratio"]), ".2f") + "x",
         f(float(r["peak_rss_mb"]))]
        for r in rows
    ]  # fmt: skip
    header = ["env", "S", "per-seed rate / separate", "CPU us per seed-step", "/ floor",
              "peak RSS MB"]  # fmt: skip
    vector = read("bench_control_population_envs.csv")
    top = max(int(r["num_envs"]) for r in vector)
    ratios = [
        float(s["steps_per_cpu_s"]) / float(a["steps_per_cpu_s"])
        for s in vector for a in vector
        if (s["vectorization"], a["vectorization"]) == ("sync", "async")
        and s["env_id"] == a["env_id"] and int(s["num_envs"]) == int(a["num_envs"]) == top
    ]  # fmt: skip
    return (
        "Measured by `paper_figures/bench_control_population.py` (`paper_figures/out/"
        "bench_control_population.csv`, ppo.py at CleanRL's settings, one env per seed):\n\n"
        + md(header, body, ["---"] + ["---:"] * 5) + "\n\n"
        + para(f"With {top} envs, one process stepping them in turn (sync vector env, a "
               f"population's default) makes {spread(ratios, '.1f')}x the env steps per CPU "
               "second of a process per env (async), over the envs of "
               "`bench_control_population_envs.csv`.")
        + "\n\n" + _population_brax(read)
    )  # fmt: skip


def _population_brax(read: Read) -> str:
    """ppo_brax.py --num-seeds (vmap over seeds) against separate processes, per S."""
    rows = [r for r in read("bench_control_population_brax.csv")
            if r["status"] == "ok" and r["contender"].startswith("population-")]  # fmt: skip
    parts = ", ".join(f"S = {r['seeds']}: {f(float(r['speedup']), '.2f')}x" for r in rows)
    return para(
        "`algos/ppo_brax.py --num-seeds S` (PureJaxRL's `vmap(train)`; seed k as `--seed k` "
        "alone within float rounding) on "
        f"{rows[0]['env_id']} (CPU, 64 envs x 32 steps per seed, "
        f"`bench_control_population_brax.csv`): per-seed rate against separate processes {parts}."
    )
