"""The trust-region family side by side: PPO (Schulman et al. 2017), TRPO (Schulman et al. 2015),
SPO (Xie et al. 2024), FixPO (Zentner et al. 2023), BPO (Ao et al. 2026) and DPO's discovered
drift (Lu et al. 2022) on MuJoCo (v5), learning
curves with bootstrap CIs, an IQM aggregate, and the diagnostics that tell them apart (per-state
KL, ratio deviation |r - 1|, FixPO's fixup share).

    python paper_figures/trust_region_family.py --train        # sweeps what is missing, then plots
    python paper_figures/trust_region_family.py                # plots the sweeps under --sweep-dir

Protocol "common" (default) runs every algorithm on the same plumbing (1 env x 2048 steps,
32 minibatches, 10 epochs, 64-64 tanh nets, observation and reward normalisation) with its own
algorithm-specific settings at their reference defaults; "reference" runs each script's own
defaults (SPO's 7-layer policy, FixPO's 64 envs x 128 steps, BPO's un-normalised 256-256 ReLU).
TRPO takes its own defaults in both. (PPO and SPO in the SPO reference's own MuJoCo setting are
declared experiments: paper_figures/spo-reference-*/, each arm's flags in its experiment.toml.)
Each algorithm is one sweep: <sweep-dir>/<algo>/.

Writes <out>/<name>.png, <name>.csv (one row per run; --name, default trust_region_family),
<name>_curves.csv (the plotted per-run curves) and <name>_iqm.csv (IQM
of the normalised final return, 95% stratified-bootstrap CI). Normalised score per env: 0 = the
mean return of a uniformly random policy, 1 = the best algorithm's mean final return in this
figure.

The committed figure: --train --algos ppo,trpo,spo,fixpo,bpo --envs Hopper-v5 --seeds 7
--total-timesteps 300000 --sweep-dir runs/sweeps/trust_region_family_300k -- --eval-episodes 10,
grown by HalfCheetah-v5 and Walker2d-v5 with the --keep-committed command at the end of this text (7
seeds, as 5 pairs cannot reach p < 0.05 in the exact sign-flip test). The earlier figure, five tasks
x 5 seeds x 49,152 steps with DPO, is kept as trust_region_family_49k.csv (_curves, _iqm, .png):
--train --seeds 5 --total-timesteps 49152 --name trust_region_family_49k, redrawn from its CSVs
alone with --keep-committed --seeds 5 --total-timesteps 49152 --name trust_region_family_49k
--sweep-dir runs/none (a directory without runs). The PPO paper's budget, 1M steps, on Hopper-v5
alone is trust_region_family_1m.csv (_curves, _iqm, .png): --train --algos ppo,trpo,spo,fixpo,bpo
--envs Hopper-v5 --seeds 7 --total-timesteps 1000000 --workers 2 --sweep-dir
runs/sweeps/trust_region_family_1m --name trust_region_family_1m -- --eval-episodes 10. To rerun
one algorithm only and keep the others' committed results:

    python paper_figures/trust_region_family.py --train --algos fixpo --out runs/fixpo ...
    python paper_figures/trust_region_family.py --keep-committed ...   # same --sweep-dir

--keep-committed takes every (algorithm, env) pair of --algos that has no finished run under
--sweep-dir from the CSVs already in --out (its rows, and its curves where the curves CSV has
them), envs outside --envs included: a study grows by algorithms or by tasks, as the committed
figure grew by HalfCheetah and Walker2d beside its Hopper runs:

    python paper_figures/trust_region_family.py --train --keep-committed --algos \
        ppo,trpo,spo,fixpo,bpo --envs HalfCheetah-v5,Walker2d-v5 --seeds 7 --total-timesteps \
        300000 --workers 2 --sweep-dir runs/sweeps/trust_region_family_300k_more -- \
        --eval-episodes 10
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import numpy as np

import envs
from controlrl import plots, stats
from controlrl.cli import ArgumentParser
from controlrl.experiment import SweepConfig, env_tag, run_sweep

ROOT = Path(__file__).resolve().parents[1]
BAND = "95% bootstrap CI over seeds (min-max range below 5 seeds)"

ENVS = "Hopper-v5,HalfCheetah-v5,Walker2d-v5,Swimmer-v5,InvertedPendulum-v5"
COMMON = ["--num-envs", "1", "--num-steps", "2048", "--num-minibatches", "32"]
COMMON += ["--update-epochs", "10", "--hidden-sizes", "64", "64"]
PROTOCOLS = {
    "common": {
        "ppo": COMMON,
        "spo": [*COMMON, "--critic-hidden-sizes", "64", "64"],
        "fixpo": COMMON,
        "bpo": [*COMMON, "--activation", "tanh", "--norm-obs", "--norm-reward", "--anneal-lr"],
        "trpo": [],
        "dpo": COMMON,
    },
    "reference": {},
}
DIAGNOSTICS = ("kl_mean", "kl_max", "ratio_dev_frac", "ratio_dev_mean", "ratio_dev_max")
CURVES = ("episode_return", "kl_max", "ratio_dev_mean", "fixup_share")  # train/ columns plotted


def default_algos() -> str:
    """ppo, trpo, spo, fixpo, bpo, dpo (those whose script exists)."""
    names = ["ppo", "trpo", "spo", "fixpo", "bpo", "dpo"]
    return ",".join(a for a in names if (ROOT / "algos" / f"{a}.py").exists())


def setting_flags(extra: list[str]) -> str:
    """' + <flags>' for the flags after -- that change the training setting (evaluation's
    do not), so that a figure names what its runs changed from the protocol; else ''."""
    kept, skip = [], False
    for flag in extra:
        if skip or flag.startswith("--eval"):
            skip = not skip and flag.startswith("--eval") and "=" not in flag
            continue
        kept.append(flag)
    return f" + {' '.join(kept)}" if kept else ""


def column_mean(run_dir: Path, column: str, reduce=np.mean) -> float:
    """A metrics column reduced over all updates; nan when the run does not log it."""
    try:
        _, values = plots.read_metrics(run_dir, column)
    except KeyError:
        return float("nan")
    return float(reduce(values)) if len(values) else float("nan")


def column_sum(run_dir: Path, column: str) -> float:
    return column_mean(run_dir, column, np.sum)


def random_return(env_id: str, episodes: int = 5, seed: int = 0) -> float:
    """Mean return of uniformly random actions (the 0 of the normalised score)."""
    vec_env = envs.make(env_id, 1, seed)
    vec_env.action_space.seed(seed)
    vec_env.reset(seed=seed)
    returns, total = [], 0.0
    while len(returns) < episodes:
        _, reward, terminated, truncated, _ = vec_env.step(vec_env.action_space.sample())
        total += float(reward[0])
        if terminated[0] or truncated[0]:
            returns.append(total)
            total = 0.0
    vec_env.close()
    return float(np.mean(returns))


def train(args, algos: list[str], env_ids: list[str]) -> None:
    """One sweep per algorithm (the flags differ between scripts), one run at a time."""
    for algo in algos:
        extra = ["--eval-every", "0", "--eval-episodes", "5"]
        extra += PROTOCOLS[args.protocol].get(algo, []) + args.extra
        config = SweepConfig([algo], env_ids, args.seeds, args.total_timesteps, extra)
        runs = run_sweep(
            config,
            args.sweep_dir / algo,
            workers=args.workers,
            on_update=lambda r: print(f"[{r['status']}] {r['run_id']}", flush=True),
        )
        failed = [k for k, v in runs.items() if v["status"] == "failed"]
        if failed:
            print(f"warning: failed runs {failed}; see {args.sweep_dir / algo}/sweep.json")


def collect(args, algos, env_ids) -> list[dict]:
    """Per finished run: its CSV row and its plotted curves {column: (steps, values)}."""
    runs = []
    for algo in algos:
        for env_id in env_ids:
            base = args.sweep_dir / algo / "runs" / algo / env_tag(env_id)
            for done in sorted(base.glob("seed*/final_eval.json")):
                run_dir = done.parent
                final = json.loads(done.read_text())
                row = {
                    "algo": algo,
                    "env_id": env_id,
                    "seed": run_dir.name.removeprefix("seed"),
                    "steps": int(final["step"]),
                    "final_train_return": plots.final_return(run_dir, args.final_window),
                    "final_eval_return": final["eval_return_mean"],
                    "train_s": plots.train_seconds(run_dir),
                }
                for col in DIAGNOSTICS:
                    row[col] = column_mean(run_dir, f"train/{col}")
                row["kl_max_max"] = column_mean(run_dir, "train/kl_max", np.max)
                row["ratio_dev_max_max"] = column_mean(run_dir, "train/ratio_dev_max", np.max)
                row["grad_steps"] = column_sum(run_dir, "train/grad_steps")
                fix = column_sum(run_dir, "train/fixup_steps")
                row["fixup_share"] = fix / row["grad_steps"] if fix == fix else float("nan")
                row["fixup_capped"] = column_sum(run_dir, "train/fixup_capped")
                curves = {}
                for col in CURVES:
                    try:
                        curves[col] = plots.read_metrics(run_dir, f"train/{col}")
                    except KeyError:  # e.g. fixup_share outside FixPO
                        continue
                runs.append({"row": row, "curves": curves})
    return runs


def committed(out: Path, algos: list[str], name: str = "trust_region_family") -> list[dict]:
    """The runs of `algos` as the CSVs in `out` hold them: rows from trust_region_family.csv,
    curves from trust_region_family_curves.csv where it has them (else none)."""
    with (out / f"{name}.csv").open() as f:
        table = [r for r in csv.DictReader(f) if r["algo"] in algos]
    curves: dict[tuple, dict] = {}
    path = out / f"{name}_curves.csv"
    if path.exists():
        with path.open() as f:
            for r in csv.DictReader(f):
                if r["algo"] not in algos:
                    continue
                run = curves.setdefault((r["algo"], r["env_id"], r["seed"]), {})
                for col in CURVES:
                    if r[col] != "":
                        run.setdefault(col, []).append((float(r["step"]), float(r[col])))
    runs = []
    for r in table:
        row = {k: (v if k in ("algo", "env_id", "seed") else float(v)) for k, v in r.items()}
        row["steps"] = int(row["steps"])
        points = curves.get((r["algo"], r["env_id"], r["seed"]), {})
        runs.append(
            {
                "row": row,
                "curves": {c: tuple(np.array(v).T) for c, v in points.items()},
            }
        )
    return runs


def keep(runs: list[dict], out: Path, algos: list[str], name: str) -> list[dict]:
    """--keep-committed: the committed runs (committed()) of each (algorithm, env) pair of
    `algos` that `runs` (the sweep's) has none of, envs outside --envs included, so a study
    grows by tasks or algorithms; a kept pair must have the swept runs' steps of its algorithm
    (one budget per figure)."""
    swept = {(r["row"]["algo"], r["row"]["env_id"]) for r in runs}
    kept = [
        r
        for r in committed(out, algos, name)
        if (r["row"]["algo"], r["row"]["env_id"]) not in swept
    ]
    for algo in algos:
        ours = {r["row"]["steps"] for r in runs if r["row"]["algo"] == algo}
        theirs = {r["row"]["steps"] for r in kept if r["row"]["algo"] == algo}
        if ours and theirs and ours != theirs:
            raise SystemExit(
                f"error: --keep-committed: {name}.csv holds {algo} runs of {sorted(theirs)} steps, "
                f"the sweep's have {sorted(ours)}"
            )
    return kept


def write_curves(path: Path, runs: list[dict]) -> None:
    """One line per (run, step): the plotted columns, empty where a run has no value."""
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["algo", "env_id", "seed", "step", *CURVES])
        for run in runs:
            row, curves = run["row"], run["curves"]
            by_step: dict[float, dict] = {}
            for col, (steps, values) in curves.items():
                for step, value in zip(steps, values):
                    by_step.setdefault(float(step), {})[col] = f"{value:.6g}"
            for step in sorted(by_step):
                cells = [by_step[step].get(col, "") for col in CURVES]
                writer.writerow([row["algo"], row["env_id"], row["seed"], int(step), *cells])


def normalised_scores(rows, algos, env_ids) -> tuple[dict[str, np.ndarray], list[dict]]:
    """{algo: [runs, envs]} normalised final returns (envs with runs of every algo only)."""
    lows = {e: random_return(e) for e in env_ids}
    scores, ref = {}, []
    for env_id in env_ids:
        means = [
            np.mean(
                [r["final_train_return"] for r in rows if (r["algo"], r["env_id"]) == (a, env_id)]
            )
            for a in algos
        ]
        ref.append({"env_id": env_id, "random": lows[env_id], "best_mean": float(np.max(means))})
    n = min(sum((r["algo"], r["env_id"]) == (a, e) for r in rows) for a in algos for e in env_ids)
    for algo in algos:
        cols = []
        for env_id, r in zip(env_ids, ref):
            vals = [
                x["final_train_return"] for x in rows if (x["algo"], x["env_id"]) == (algo, env_id)
            ]
            cols.append((np.array(vals[:n]) - r["random"]) / (r["best_mean"] - r["random"]))
        scores[algo] = np.stack(cols, axis=1)
    return scores, ref


def main(argv: list[str] | None = None) -> None:
    p = ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--algos", default=default_algos(), help="comma-separated algorithm scripts")
    p.add_argument("--envs", default=ENVS)
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--total-timesteps", type=int, default=1_000_000)
    p.add_argument("--protocol", choices=sorted(PROTOCOLS), default="common")
    p.add_argument(
        "--sweep-dir", type=Path, default=ROOT / "runs" / "sweeps" / "trust_region_family"
    )
    p.add_argument("--out", type=Path, default=ROOT / "paper_figures" / "out")
    p.add_argument("--name", default="trust_region_family", help="the output files' stem")
    p.add_argument("--final-window", type=int, default=20_480)
    p.add_argument("--train", action="store_true", help="run missing runs first (sweeps)")
    p.add_argument("--workers", type=int, default=1, help="runs at once when training")
    p.add_argument(
        "--keep-committed",
        action="store_true",
        help="algorithms without finished runs under --sweep-dir: take their rows (and curves) "
        "from the CSVs already in --out",
    )
    p.add_argument("extra", nargs="*", help="flags passed to every algorithm script (after --)")
    args = p.parse_args(argv)
    algos, env_ids = args.algos.split(","), args.envs.split(",")
    if args.train:
        train(args, algos, env_ids)
    runs = collect(args, algos, env_ids)
    if args.keep_committed:
        kept = keep(runs, args.out, algos, args.name)
        runs += kept
        pairs = dict.fromkeys(f"{r['row']['algo']} on {r['row']['env_id']}" for r in kept)
        print(f"kept from {args.out}: {', '.join(pairs) or 'nothing'}")
        env_ids = list(dict.fromkeys([r["row"]["env_id"] for r in kept] + env_ids))
        # committed tasks first, each algorithm's runs together (a stable sort keeps seed order)
        runs.sort(key=lambda r: (algos.index(r["row"]["algo"]), env_ids.index(r["row"]["env_id"])))
    if not runs:
        raise SystemExit(f"error: no finished runs under {args.sweep_dir} (use --train)")
    rows = [r["row"] for r in runs]
    algos = [a for a in algos if any(r["algo"] == a for r in rows)]
    pairs = {(r["algo"], r["env_id"]) for r in rows}
    env_ids = [e for e in env_ids if all((a, e) in pairs for a in algos)]
    curves = {e: {} for e in env_ids}  # {env: {algo: runs}}
    diag: dict[str, dict] = {}  # {column: {algo: runs}}, all envs
    for run in runs:
        algo, env_id = run["row"]["algo"], run["row"]["env_id"]
        for col, curve in run["curves"].items():
            if col == "episode_return" and env_id in curves:
                curves[env_id].setdefault(algo, []).append(curve)
            elif col != "episode_return":
                diag.setdefault(col, {}).setdefault(algo, []).append(curve)
    no_curves = [a for a in algos if not any(curves[e].get(a) for e in env_ids)]
    scores, ref = normalised_scores(rows, algos, env_ids)
    iqm_rows = []
    for algo in algos:
        value, lo, hi, _ = plots.iqm_band(scores[algo])
        iqm_rows.append({"algo": algo, "iqm": value, "ci_lo": lo, "ci_hi": hi})
    args.out.mkdir(parents=True, exist_ok=True)
    for name, table in (("", rows), ("_iqm", iqm_rows)):
        with (args.out / f"{args.name}{name}.csv").open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(table[0]))
            writer.writeheader()
            writer.writerows(table)
    write_curves(args.out / f"{args.name}_curves.csv", runs)

    import matplotlib.pyplot as plt

    ncols = max(len(env_ids), 5)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    with plt.rc_context(plots.STYLE):
        fig, axes = plt.subplots(2, ncols, figsize=(3.2 * ncols, 5.6), squeeze=False)
        for ax, env_id in zip(axes[0], env_ids):
            groups = {a: curves[env_id][a] for a in algos if curves[env_id].get(a)}
            ax.set_prop_cycle(color=[colours[algos.index(a) % len(colours)] for a in groups])
            plots.plot_curves(ax, groups, smooth_window=3)
            ax.set_title(env_id)
            ax.set_ylabel("training episode return")
        axes[0][0].legend(fontsize=6, loc="upper left")
        for ax in axes[0][len(env_ids) :]:
            ax.axis("off")
        plots.plot_aggregates(
            axes[1][:2],
            scores,
            np.linspace(0, 1.2, 49),
            "0 = random policy,\n1 = best algorithm's mean (per env)",
        )
        axes[1][0].set_title("IQM of the final training return, normalised", fontsize=8)
        for ax, (col, label) in zip(
            axes[1][2:],
            [
                ("kl_max", "max per-state KL(old||new)"),
                ("ratio_dev_mean", "mean |r - 1| after update"),
                ("fixup_share", "FixPO fixup share of grad steps"),
            ],
        ):
            groups = {a: c for a, c in diag.get(col, {}).items() if any(len(s) for s, _ in c)}
            if not groups:  # e.g. no FixPO in the figure: no empty panel
                ax.axis("off")
                continue
            # the same colour per algorithm as in the other panels
            ax.set_prop_cycle(color=[colours[algos.index(a) % len(colours)] for a in groups])
            plots.plot_curves(ax, groups, smooth_window=3, band_in_legend=False)
            ax.set_title(f"{label}, all envs' runs", fontsize=8)  # n counts runs, not seeds
            if col == "kl_max":
                ax.set_yscale("log")
            ax.legend(fontsize=6)
        note = f"; no curves on disk for {', '.join(no_curves)} (final rows only)" * bool(no_curves)
        fig.suptitle(
            f"trust-region family, {args.total_timesteps:,} steps, protocol {args.protocol}"
            f"{setting_flags(args.extra)}, mean and {BAND}{note}",
            fontsize=9,
        )
        fig.tight_layout()
        fig.savefig(args.out / f"{args.name}.png", dpi=80, metadata={"Software": None})

    print("mean final training return over seeds (normalised IQM below)")
    for env_id in env_ids:
        cells = []
        for algo in algos:
            vals = [
                r["final_train_return"] for r in rows if (r["algo"], r["env_id"]) == (algo, env_id)
            ]
            sd = stats.sample_sd(vals)
            cells.append(f"{algo} {np.mean(vals):.0f} (sample SD {sd:.0f}, n={len(vals)})")
        print(f"  {env_id}: " + ", ".join(cells))
    for r in iqm_rows:
        print(f"  IQM {r['algo']}: {r['iqm']:.2f} [{r['ci_lo']:.2f}, {r['ci_hi']:.2f}]")
    for algo in algos:
        sel = [r for r in rows if r["algo"] == algo]
        m = {k: np.mean([r[k] for r in sel]) for k in DIAGNOSTICS}
        m["fixup_share"] = np.mean([r["fixup_share"] for r in sel]) if algo == "fixpo" else 0
        print(
            f"  {algo}: kl_mean {m['kl_mean']:.4f}, kl_max {m['kl_max']:.4f} "
            f"(max {np.max([r['kl_max_max'] for r in sel]):.3f}), |r-1| mean "
            f"{m['ratio_dev_mean']:.3f}, frac>eps {m['ratio_dev_frac']:.3f}, max "
            f"{m['ratio_dev_max']:.2f}"
            + (f", fixup share {m['fixup_share']:.3f}" * (algo == "fixpo"))
        )
    print(
        f"wrote {args.out / args.name}.png, {args.name}.csv, {args.name}_curves.csv and "
        f"{args.name}_iqm.csv; "
        f"command: python paper_figures/trust_region_family.py "
        f"{' '.join(argv if argv is not None else sys.argv[1:])}"
    )


if __name__ == "__main__":
    main()
