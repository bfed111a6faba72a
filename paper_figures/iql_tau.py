r"""IQL's expectile tau (Kostrikov et al., ICLR 2022, Implicit Q-Learning) on generated D4RL-style
datasets: D4RL-normalised score for tau in {0.5, 0.7, 0.9} against behaviour cloning (--bc) on
the medium and medium-replay datasets, and the offline-to-online curve on one of them. The
declared experiments iql-tau-5k and iql-vs-bc-20k run it (`python -m paper_figures run <id>`).

    python paper_figures/iql_tau.py --train        # generates missing datasets, runs missing runs
    python paper_figures/iql_tau.py                # plots the sweeps under --sweep-dir
    python paper_figures/iql_tau.py --replot [--name iql_vs_bc]   # the PNG from its CSVs alone

Datasets come from envs.offline's generator (PPO behaviour runs, D4RL's recipe; nothing is
downloaded), <env>-<kind>-v<version>-s<data seed> in --data-dir; --train generates a missing one.
Every configuration (dataset x {bc, iql tau...}, and iql --online-tau with --online-steps on
--online-kind) is one sweep of algos/iql.py under <sweep-dir>/<dataset>/<config>/, seeds 1..N,
counted in gradient steps (--steps offline, plus one per online env step). Default budget: 100k
gradient steps x 3 seeds (CORL and the paper: 1M).

Writes <out>/<name>.png, <name>.csv (per run: final_eval.json's normalised score and return, its
gradient steps and seconds updating) and <name>_curves.csv (each run's eval/normalized_score by
step). Bars: the seeds' mean, the seeds as dots, the 95% bootstrap CI from >= 5 seeds; the online
curve's band is that CI or the min-max range (its legend says which).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

from controlrl import experiment, plots, stats
from controlrl.cli import ArgumentParser
from controlrl.experiment import SweepConfig, read_rows
from envs.offline import store
from paper_figures.lab import run_csvs, scripts
from paper_figures.lab.script_flags import ROOT, add_sweep_flags, wrote

CSV_FIELDS = ("env", "dataset", "kind", "method", "tau", "online_steps", "seed", "steps")
CSV_FIELDS += ("final_normalized_score", "final_return", "train_s")
# --toy: a random-kind dataset of a few thousand rows and tiny nets, end to end in seconds
TOY = {"kinds": "random", "online_kind": "random", "taus": "0.5,0.9", "seeds": 1, "steps": 100,
       "online_steps": 100, "log_every": 50, "eval_every": 50, "eval_episodes": 1,
       "dataset_steps": 2000, "score_episodes": 2, "gen_args": "--num-envs 2 --no-minari",
       "workers": 2}  # fmt: skip
TOY_IQL = ["--hidden-sizes", "32", "32", "--batch-size", "32"]


def configs(args) -> list[dict]:
    """Every sweep: per dataset BC and IQL at each tau, plus the offline-to-online run."""
    out = []
    for env in args.envs.split(","):
        for kind in args.kinds.split(","):
            name = dataset_id(args, env, kind)
            base = dict(env=env, kind=kind, dataset=name, online_steps=0)
            out.append(dict(base, method="bc", tau=""))
            out += [dict(base, method="iql", tau=tau) for tau in args.taus.split(",")]
        if args.online_steps:
            name = dataset_id(args, env, args.online_kind)
            base = dict(env=env, kind=args.online_kind, dataset=name, method="iql")
            out.append(dict(base, tau=args.online_tau, online_steps=args.online_steps))
    return [dict(c, label=config_label(c)) for c in out]


def config_label(c: dict) -> str:
    """A configuration's name: bc or iql_tau<tau>, with _online<steps> for an online run."""
    name = "bc" if c["method"] == "bc" else f"iql_tau{c['tau']}"
    return name + (f"_online{c['online_steps']}" if c["online_steps"] else "")


def dataset_id(args, env: str, kind: str) -> str:
    steps, budget, scored = args.dataset_steps, args.ppo_budget, args.score_episodes
    return store.dataset_name(env, kind, args.data_seed, steps, budget, scored)


def dataset_file(args, name: str) -> Path:
    return args.data_dir / f"{name}.hdf5"


def generate_command(args, env: str, kind: str) -> list[str]:
    """The generator call that writes the dataset of `kind` into --data-dir."""
    cmd = [sys.executable, "-m", "envs.offline", "generate", "--env", env, "--kind", kind]
    cmd += ["--seed", str(args.data_seed), "--steps", str(args.dataset_steps)]
    cmd += ["--ppo-budget", str(args.ppo_budget), "--score-episodes", str(args.score_episodes)]
    cmd += ["--out", str(args.data_dir), "--no-progress"]
    return cmd + args.gen_args.split()


def ensure_datasets(args, pairs: list[tuple[str, str]]) -> None:
    """Generate each missing dataset (a PPO behaviour run the first time: minutes to hours)."""
    for env, kind in pairs:
        if dataset_file(args, dataset_id(args, env, kind)).exists():
            continue
        cmd = generate_command(args, env, kind)
        print("generating: " + " ".join(cmd[1:]).replace("-m envs", "python -m envs"), flush=True)
        subprocess.run(cmd, cwd=ROOT, check=True)


def sweep_config(args, c: dict) -> SweepConfig:
    extra = ["--dataset", str(dataset_file(args, c["dataset"]))]
    extra += ["--log-every", str(args.log_every), "--eval-every", str(args.eval_every)]
    extra += ["--eval-episodes", str(args.eval_episodes)]
    extra += ["--bc"] if c["method"] == "bc" else ["--tau", c["tau"]]
    if c["online_steps"]:
        extra += ["--online-steps", str(c["online_steps"])]
    extra += (TOY_IQL if args.toy else []) + args.extra
    total = args.steps + c["online_steps"]
    return SweepConfig(["iql"], [c["env"]], args.seeds, total, extra)


def sweep_dir(args, c: dict) -> Path:
    return args.sweep_dir / c["dataset"] / c["label"]


def train(args, cfgs: list[dict]) -> None:
    ensure_datasets(args, list(dict.fromkeys((c["env"], c["kind"]) for c in cfgs)))
    for c in cfgs:
        scripts.train(sweep_config(args, c), sweep_dir(args, c), c["label"], args.workers)


def collect(args, cfgs: list[dict]) -> list[dict]:
    """Per finished run: its CSV row (from final_eval.json) and its eval curve."""
    runs = []
    for c in cfgs:
        base = sweep_dir(args, c) / "runs" / "iql" / c["env"]
        for seed, run_dir, final in run_csvs.finished(base):
            row = {k: c[k] for k in CSV_FIELDS[:6]} | {"seed": seed, "steps": int(final["step"])}
            row["final_normalized_score"] = final.get("eval_normalized_score", float("nan"))
            row["final_return"] = final["eval_return_mean"]
            timed = (run_dir / "timing.csv").exists()
            row["train_s"] = plots.train_seconds(run_dir) if timed else float("nan")
            try:
                curve = plots.read_metrics(run_dir, "eval/normalized_score")
            except KeyError:  # a dataset without reference scores
                curve = (np.array([]), np.array([]))
            runs.append({"row": row, "curve": curve, "label": c["label"]})
    return runs


CURVES = {"curve": "score"}  # the eval curve as <name>_curves.csv names it
KEY = ("dataset", "method", "tau", "online_steps", "seed")


def read_csvs(out: Path, name: str) -> list[dict]:
    """The runs as run_csvs.write left them in `out`, each labelled as configs() names it."""
    runs = run_csvs.read(out, name, KEY, CURVES, "score", KEY[3:] + ("steps",), CSV_FIELDS[-3:])
    return [dict(r, label=config_label(r["row"])) for r in runs]


def summary(runs: list[dict]) -> list[tuple]:
    """(dataset, label, mean, lo, hi, n) of the final normalised score: the 95% bootstrap CI from
    >= 5 seeds, the min-max range below."""
    groups: dict[tuple, list[float]] = {}
    for r in runs:
        score = r["row"]["final_normalized_score"]
        groups.setdefault((r["row"]["dataset"], r["label"]), []).append(score)
    rows = []
    for (name, label), scores in groups.items():
        mean, lo, hi = plots.band(np.array(scores)[:, None])[:3]
        rows.append((name, label, float(mean[0]), float(lo[0]), float(hi[0]), len(scores)))
    return rows


def plot(args, runs: list[dict], bars: list[tuple]) -> None:
    import matplotlib.pyplot as plt

    offline = [t for t in bars if "online" not in t[1]]
    names = list(dict.fromkeys(t[0] for t in offline))
    labels = list(dict.fromkeys(t[1] for t in offline))
    online = [r for r in runs if r["row"]["online_steps"]]
    with plt.rc_context(plots.STYLE):
        curve_axes = []
        if online:
            fig, (ax_bar, ax_on) = plt.subplots(1, 2, figsize=(10, 3.8))
        elif args.curves:  # bars on top, below them one panel of curves per dataset
            fig = plt.figure(figsize=(max(10, 2.8 * len(names)), 7))
            grid = fig.add_gridspec(2, len(names))
            ax_bar = fig.add_subplot(grid[0, :])
            curve_axes = [fig.add_subplot(grid[1, i]) for i in range(len(names))]
        else:  # the bars alone, full width (several envs' datasets)
            fig, ax_bar = plt.subplots(figsize=(10, 4.2))
        width = 0.8 / max(len(labels), 1)
        for j, label in enumerate(labels):
            named = False  # the legend names a label at its first bar (not every dataset has it)
            for i, name in enumerate(names):
                hit = [t for t in offline if t[:2] == (name, label)]
                if not hit:
                    continue
                _, _, mean, lo, hi, n = hit[0]
                x = i + (j - (len(labels) - 1) / 2) * width
                ax_bar.bar(x, mean, width, color=f"C{j}", label=None if named else label)
                named = True
                if n >= stats.MIN_SEEDS:  # an interval only from 5 seeds
                    ax_bar.errorbar(x, mean, yerr=[[mean - lo], [hi - mean]], color="k", capsize=2)
                for r in runs:  # the seeds themselves
                    if (r["row"]["dataset"], r["label"]) == (name, label):
                        ax_bar.plot(x, r["row"]["final_normalized_score"], "k.", ms=3)
        tilt = 0 if online or len(names) < 4 else 15
        ax_bar.set_xticks(range(len(names)), names, fontsize=7, rotation=tilt)
        ax_bar.set_ylabel("final D4RL-normalised score")
        steps = max((r["row"]["steps"] for r in runs if not r["row"]["online_steps"]), default=0)
        ax_bar.set_title(f"offline, {steps:,} gradient steps", fontsize=8)
        ax_bar.legend(fontsize=7)
        if online:
            plots.plot_curves(ax_on, {online[0]["label"]: [r["curve"] for r in online]})
            ax_on.axvline(steps, color="k", ls=":", lw=1, label="online phase starts")
            ax_on.set_title(f"offline-to-online, {online[0]['row']['dataset']}", fontsize=8)
            ax_on.legend(fontsize=7)
            ax_on.set(xlabel="gradient steps", ylabel="D4RL-normalised score (eval)")
        for ax, name in zip(curve_axes, names):  # each configuration's evaluations along its runs
            mine = [r for r in runs if r["row"]["dataset"] == name]
            # the bars' order, so each label keeps its bar's colour
            groups = {label: hit for label in labels
                      if (hit := [r["curve"] for r in mine if r["label"] == label])}  # fmt: skip
            cycle = plt.rcParams["axes.prop_cycle"].by_key()["color"]
            ax.set_prop_cycle(color=[cycle[labels.index(label) % len(cycle)] for label in groups])
            plots.plot_curves(ax, groups, band_in_legend=False)
            ax.set_title(name.rsplit("-", 2)[0], fontsize=8)
            ax.set_xlabel("gradient steps")
            ax.legend(fontsize=6)
        if curve_axes:
            curve_axes[0].set_ylabel("D4RL-normalised score (eval)")
            words = plots.band_words([t[5] for t in offline])
            middle = names[len(names) // 2].rsplit("-", 2)[0]
            title = f"evaluations along the runs ({words})\n{middle}"
            curve_axes[len(names) // 2].set_title(title, fontsize=8)
        envs = dict.fromkeys(r["row"].get("env") or r["row"]["dataset"].split("-")[0] for r in runs)
        shown = plots.points_words([t[5] for t in bars])
        fig.suptitle(f"IQL expectile tau vs BC on {', '.join(envs)} datasets, bars: {shown}",
                     fontsize=9)  # fmt: skip
        scripts.save_figure(fig, args.out / f"{args.name}.png", 80)


def table(exp, source: Path) -> list[dict]:
    """A declared experiment's results rows (its analysis.py's `table`) of <name>.csv: env the
    dataset's env and kind (hopper-medium-replay, whatever the generator's suffixes), arm bc or
    iql-tau<tau> (with -online for an offline-to-online run)."""
    out = []
    for r in read_rows(Path(source) / f"{parser().parse_args(list(exp.flags)).name}.csv"):
        arm = "bc" if r["method"] == "bc" else f"iql-tau{r['tau']}"
        out.append({"env": r["dataset"].split("-v")[0], "seed": r["seed"],
                    "arm": arm + ("-online" if int(r["online_steps"]) else ""),
                    "final_eval_normalized_score": r["final_normalized_score"],
                    "final_eval_return": r["final_return"]})  # fmt: skip
    return out


def run_script(exp, toy: bool, out: Path) -> None:
    """A declared experiment's run (its analysis.py's `run_script`): main with its flags, its
    sweeps and the toy's datasets under out/sweeps."""
    from paper_figures.lab import runner

    main([*runner.script_argv(exp, toy, out), "--sweep-dir", str(Path(out) / "sweeps")])


def print_table(table: list[tuple]) -> None:
    print("final D4RL-normalised score, mean [95% bootstrap CI from >= 5 seeds, range below]")
    for name, label, mean, lo, hi, n in table:
        kind = "95% CI" if n >= stats.MIN_SEEDS else "range"
        print(f"  {name} {label}: {mean:.1f} [{kind} {lo:.1f}, {hi:.1f}] (n={n})")


def parser() -> ArgumentParser:
    p = ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--envs", default="Hopper-v5", help="Gymnasium ids, comma-separated")
    p.add_argument("--kinds", default="medium,medium-replay", help="dataset kinds, comma-separated")
    p.add_argument("--taus", default="0.5,0.7,0.9")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--steps", type=int, default=100_000, help="offline gradient steps per run")
    p.add_argument("--online-kind", default="medium-replay")
    p.add_argument("--online-tau", default="0.7")
    p.add_argument("--online-steps", type=int, default=100_000,
                   help="online steps after --steps; 0: none")  # fmt: skip
    p.add_argument("--log-every", type=int, default=1000)
    p.add_argument("--eval-every", type=int, default=10_000)
    p.add_argument("--eval-episodes", type=int, default=10)
    p.add_argument("--data-dir", type=Path, default=None, help="default: envs.offline's cache")
    p.add_argument("--data-seed", type=int, default=0, help="the generator's --seed")
    p.add_argument("--dataset-steps", type=int, default=store.DEFAULT_STEPS,
                   help="generator --steps")  # fmt: skip
    p.add_argument("--ppo-budget", type=int, default=store.DEFAULT_PPO_BUDGET)
    p.add_argument("--score-episodes", type=int, default=store.DEFAULT_SCORE_EPISODES,
                   help="generator --score-episodes (the references' episodes)")  # fmt: skip
    p.add_argument("--gen-args", default="", help="more generator flags (the id stays)")
    p.add_argument("--curves", action="store_true", help="a panel per dataset: its eval curves")
    add_sweep_flags(p, "iql_tau", algo="iql")
    return p


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    # --replot: the committed CSVs alone, no dataset, run or sweep is read
    runs = read_csvs(args.out, args.name) if args.replot else run(args, argv)
    bars = summary(runs)
    plot(args, runs, bars)
    print_table(bars)
    what = " from its CSVs" if args.replot else f", {args.name}.csv and {args.name}_curves.csv"
    wrote(f"{args.out / args.name}.png{what}", "iql_tau", argv)


def run(args, argv: list[str] | None) -> list[dict]:
    """Generate and train what is missing (--train), then collect and write the runs' CSVs."""
    if args.toy:  # toy sizes replace the defaults, not what was given on the command line
        experiment.apply_toy(args, argv, TOY)
        args.data_dir = args.data_dir or args.sweep_dir / "data"
    args.data_dir = args.data_dir or store.data_root()
    cfgs = configs(args)
    if args.train:
        train(args, cfgs)
    runs = collect(args, cfgs)
    if not runs:
        missing = [c for c in cfgs if not dataset_file(args, c["dataset"]).exists()]
        for c in {c["dataset"]: c for c in missing}.values():
            cmd = generate_command(args, c["env"], c["kind"])
            print("missing dataset; generate it: " + " ".join(cmd))
        raise SystemExit(f"error: no finished runs under {args.sweep_dir} (use --train)")
    run_csvs.write(args.out, args.name, runs, CSV_FIELDS, KEY, CURVES, "score")
    return runs


if __name__ == "__main__":
    main()
