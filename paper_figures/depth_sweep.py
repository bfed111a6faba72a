"""SPO vs PPO as the networks get deeper (Xie et al., "Simple Policy Optimization": SPO's advantage
grows with depth while PPO's ratio deviation |r - 1| grows): final return and ratio deviation
against the number of hidden layers.

    python paper_figures/depth_sweep.py --train     # sweeps what is missing, then plots
    python paper_figures/depth_sweep.py             # plots the sweeps under --sweep-dir
    python paper_figures/depth_sweep.py --from-csv  # redraws the PNG from <out>/depth_sweep.csv
                                                    # alone

Depths (hidden layers, tanh): 2 = 64-64 (SPO's '3-layer' option), 4 = 128-128-64-64,
7 = 256-256-128-128-64-64 plus one 64 (SPO's '7-layer' net is these six hidden layers and the
output layer; --depths 6 runs it exactly). Only the policy gets deeper; both critics stay 64-64
as in the SPO paper (--critic-too deepens them as well); otherwise both use the family figure's
common plumbing. One sweep per (depth, algorithm):
<sweep-dir>/d<depth>/<algo>/. With --shallow-from, depth 2 is the trust-region family's PPO and
SPO runs of that sweep directory (trust_region_family.py's common protocol gives the same flags:
each run's config.json is checked against this sweep's depth-2 flags, a difference refused).
Writes <out>/<name>.png and <name>.csv (one row per run; --name, default depth_sweep).
--keep-committed keeps the rows of <name>.csv that this sweep has no run of, so the study grows
by tasks; the committed study is the Hopper runs grown so: --train --keep-committed --envs
HalfCheetah-v5,Walker2d-v5 --depths 2,7 --seeds 7 --total-timesteps 300000 --sweep-dir
runs/sweeps/depth_sweep_300k_more --shallow-from runs/sweeps/trust_region_family_300k_more --
--eval-episodes 10. The PPO paper's budget on Hopper is depth_sweep_1m.csv (.png): --train --envs
Hopper-v5 --depths 2,7 --seeds 7 --total-timesteps 1000000 --workers 2 --sweep-dir
runs/sweeps/depth_sweep_1m --shallow-from runs/sweeps/trust_region_family_1m --name
depth_sweep_1m -- --eval-episodes 10.
The PNG: per depth the seeds as dots and their mean; the 95% bootstrap CI (controlrl.stats) only
from 5 seeds on, no interval below.
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import numpy as np

from controlrl import plots, stats
from controlrl.cli import ArgumentParser
from controlrl.experiment import SweepConfig, differing_flags, env_tag, read_rows, run_sweep

ROOT = Path(__file__).resolve().parents[1]

NETS = {
    2: (64, 64),
    4: (128, 128, 64, 64),
    6: (256, 256, 128, 128, 64, 64),
    7: (256, 256, 128, 128, 64, 64, 64),
}
COMMON = ["--num-envs", "1", "--num-steps", "2048", "--num-minibatches", "32"]
COMMON += ["--update-epochs", "10", "--eval-every", "0", "--eval-episodes", "5"]


def flags(algo: str, depth: int, critic_too: bool = False) -> list[str]:
    """Script flags of one (algorithm, depth) sweep: the policy gets NETS[depth]; the critic
    stays 64-64 as in the SPO paper, or gets the same depth with critic_too."""
    sizes = [str(h) for h in NETS[depth]]
    critic = sizes if critic_too else ["64", "64"]
    return [*COMMON, "--hidden-sizes", *sizes, "--critic-hidden-sizes", *critic]


def main(argv: list[str] | None = None) -> None:
    p = ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--algos", default="ppo,spo")
    p.add_argument("--envs", default="Hopper-v5,Walker2d-v5")
    p.add_argument("--depths", default="2,4,7", help=f"comma-separated, from {sorted(NETS)}")
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--total-timesteps", type=int, default=1_000_000)
    p.add_argument("--sweep-dir", type=Path, default=ROOT / "runs" / "sweeps" / "depth_sweep")
    p.add_argument("--out", type=Path, default=ROOT / "paper_figures" / "out")
    p.add_argument("--name", default="depth_sweep", help="the output files' stem")
    p.add_argument("--final-window", type=int, default=20_480)
    p.add_argument("--train", action="store_true", help="run missing runs first (sweeps)")
    p.add_argument("--workers", type=int, default=1, help="runs at once when training")
    p.add_argument("--critic-too", action="store_true", help="deepen the critics as well")
    p.add_argument(
        "--shallow-from",
        type=Path,
        default=None,
        help="a trust_region_family.py sweep dir: its PPO and SPO runs are the depth-2 runs "
        "(refused unless their configs equal this sweep's depth-2 flags)",
    )
    p.add_argument(
        "--from-csv", action="store_true", help="redraw the PNG from <out>/<name>.csv alone"
    )
    p.add_argument(
        "--keep-committed",
        action="store_true",
        help="(algorithm, env, depth) runs of --algos x --depths without a finished run here: "
        "take their rows from <out>/<name>.csv, envs outside --envs included",
    )
    p.add_argument("extra", nargs="*", help="flags passed to every algorithm script (after --)")
    args = p.parse_args(argv)
    csv_path, png_path = args.out / f"{args.name}.csv", args.out / f"{args.name}.png"
    algos, env_ids = args.algos.split(","), args.envs.split(",")
    depths = [int(d) for d in args.depths.split(",")]
    unknown = [d for d in depths if d not in NETS]
    if unknown:
        raise SystemExit(f"error: --depths {unknown} not in {sorted(NETS)}")
    if args.train:
        for depth in depths:
            if depth == 2 and args.shallow_from is not None:
                continue  # the family's runs are these
            for algo in algos:
                config = SweepConfig(
                    [algo],
                    env_ids,
                    args.seeds,
                    args.total_timesteps,
                    flags(algo, depth, args.critic_too) + args.extra,
                )
                run_sweep(
                    config,
                    args.sweep_dir / f"d{depth}" / algo,
                    workers=args.workers,
                    on_update=lambda r, d=depth: print(f"[{r['status']}] d{d} {r['run_id']}"),
                )

    if args.from_csv:
        wanted = {(a, e, d) for a in algos for e in env_ids for d in depths}
        rows = [r for r in read_csv(csv_path) if (r["algo"], r["env_id"], r["depth"]) in wanted]
        if not rows:
            raise SystemExit(f"error: no rows of {algos} x {env_ids} x {depths} in {csv_path.name}")
    else:
        rows = collect(args, algos, env_ids, depths)
        if args.keep_committed:
            kept = keep(csv_path, rows, algos, depths)
            rows = kept + rows  # committed tasks first
            env_ids = list(dict.fromkeys([r["env_id"] for r in kept] + env_ids))
            print(f"kept from {csv_path.name}: {len(kept)} runs")
        env_ids = [e for e in env_ids if any(r["env_id"] == e for r in rows)]  # no empty panels
        if not rows:
            raise SystemExit(f"error: no finished runs under {args.sweep_dir} (use --train)")
        args.out.mkdir(parents=True, exist_ok=True)
        with csv_path.open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    plot(png_path, rows, algos, env_ids, depths, sorted({int(r["steps"]) for r in rows}))
    report(rows, algos, env_ids, depths)
    wrote = "" if args.from_csv else f" and {csv_path.name}"
    print(
        f"wrote {png_path}{wrote}; command: python "
        f"paper_figures/depth_sweep.py {' '.join(argv if argv is not None else sys.argv[1:])}"
    )


def collect(args, algos: list[str], env_ids: list[str], depths: list[int]) -> list[dict]:
    """One row per finished run under --sweep-dir (depth 2's under --shallow-from, if given)."""
    rows = []
    for depth in depths:
        for algo in algos:
            root = args.sweep_dir / f"d{depth}" / algo
            if depth == 2 and args.shallow_from is not None:
                root = args.shallow_from / algo
            for env_id in env_ids:
                runs = root / "runs" / algo / env_tag(env_id)
                for done in sorted(runs.glob("seed*/final_eval.json")):
                    run_dir = done.parent
                    if depth == 2 and args.shallow_from is not None:
                        check_shallow(run_dir, algo, args)
                    _, dev = plots.read_metrics(run_dir, "train/ratio_dev_mean")
                    _, dev_max = plots.read_metrics(run_dir, "train/ratio_dev_max")
                    _, kl_max = plots.read_metrics(run_dir, "train/kl_max")
                    rows.append(
                        {
                            "algo": algo,
                            "env_id": env_id,
                            "depth": depth,
                            "hidden_sizes": "-".join(map(str, NETS[depth])),
                            "seed": run_dir.name.removeprefix("seed"),
                            "steps": json.loads(done.read_text())["step"],
                            "final_train_return": plots.final_return(run_dir, args.final_window),
                            "final_eval_return": json.loads(done.read_text())["eval_return_mean"],
                            "ratio_dev_mean": float(dev.mean()),
                            "ratio_dev_max": float(dev_max.mean()),
                            "kl_max": float(kl_max.mean()),
                            "train_s": plots.train_seconds(run_dir),
                        }
                    )
    return rows


def read_csv(path: Path) -> list[dict]:
    """A depth sweep CSV's rows with depth and steps as ints and the returns as floats."""
    floats = ("final_train_return", "final_eval_return", "ratio_dev_mean")
    return read_rows(path, ints=("depth", "steps"), floats=floats)


def keep(path: Path, rows: list[dict], algos: list[str], depths: list[int]) -> list[dict]:
    """--keep-committed: the committed rows of each (algorithm, env, depth) of algos x depths
    that `rows` (this sweep's) has none of, envs outside --envs included, so the study grows by
    tasks; an (algorithm, depth) kept at other steps than its swept runs is refused."""
    swept = {(r["algo"], r["env_id"], r["depth"]) for r in rows}
    kept = [
        r
        for r in read_csv(path)
        if r["algo"] in algos and r["depth"] in depths
        and (r["algo"], r["env_id"], r["depth"]) not in swept
    ]  # fmt: skip
    for key in {(r["algo"], r["depth"]) for r in kept}:
        ours = {r["steps"] for r in rows if (r["algo"], r["depth"]) == key}
        theirs = {r["steps"] for r in kept if (r["algo"], r["depth"]) == key}
        if ours and ours != theirs:
            raise SystemExit(
                f"error: --keep-committed: {path.name} holds {key[0]} at depth {key[1]} with "
                f"{sorted(theirs)} steps, the sweep's runs have {sorted(ours)}"
            )
    return kept


def check_shallow(run_dir: Path, algo: str, args) -> None:
    """Exit unless the run's config is what this sweep's depth-2 flags give: the same nets
    (a critic of None is the actor's sizes), plumbing, budget and evaluation."""
    argv = ["--total-timesteps", str(args.total_timesteps), *flags(algo, 2), *args.extra]
    differ = differing_flags(run_dir, algo, argv, ignore=("critic_hidden_sizes",))
    saved = json.loads((run_dir / "config.json").read_text())["args"]
    if (saved["critic_hidden_sizes"] or saved["hidden_sizes"]) != list(NETS[2]):
        differ.append("critic_hidden_sizes")
    if differ:
        raise SystemExit(f"error: --shallow-from {run_dir}: its {', '.join(differ)} differ")


def plot(png: Path, rows: list[dict], algos: list[str], env_ids: list[str], depths: list[int],
         steps: list[int]) -> None:  # fmt: skip
    """Per env the final training return by depth, and |r - 1| over all envs: seeds as dots,
    their mean, the 95% bootstrap CI only from 5 seeds (plots.plot_points); the title gives
    `steps`, the steps the runs took (from the rows: a redraw says what was run)."""
    import matplotlib.pyplot as plt

    panels = [(e, "final_train_return") for e in env_ids] + [(None, "ratio_dev_mean")]
    with plt.rc_context(plots.STYLE):
        fig, axes = plt.subplots(1, len(panels), figsize=(3.6 * len(panels), 3), squeeze=False)
        counts = []
        for ax, (env_id, col) in zip(axes[0], panels):
            for i, algo in enumerate(algos):
                xs, means, kinds = [], [], set()
                for depth in depths:
                    sel = [
                        r
                        for r in rows
                        if r["algo"] == algo
                        and r["depth"] == depth
                        and (env_id is None or r["env_id"] == env_id)
                    ]
                    if not sel:
                        continue
                    x = depth + 0.12 * (i - 0.5)
                    vals = [r[col] for r in sel]
                    # pooled over envs (dots: runs): an interval needs 5 seeds in every env
                    n = min(sum(r["env_id"] == e for r in sel) for e in {r["env_id"] for r in sel})
                    kinds.add(plots.plot_points(ax, x, vals, f"C{i}", 0.04, n >= stats.MIN_SEEDS))
                    counts.append(n)
                    xs.append(x)
                    means.append(float(np.mean(vals)))
                what = "mean, 95% CI, dots: seeds" if kinds == {"95% CI"} else "mean, dots: seeds"
                ax.plot(xs, means, "-", color=f"C{i}", label=f"{algo} ({what})")
            ax.set_xticks(depths)
            ax.set_xlabel("hidden layers")
            ax.set_title(env_id or "all envs (dots: runs)", fontsize=9)
            ax.set_ylabel("final training return" if env_id else "mean |r - 1| after update")
            ax.legend(fontsize=7)
        per_run = " / ".join(f"{s:,}" for s in steps)
        fig.suptitle(
            f"SPO vs PPO by depth, {per_run} steps, {plots.points_words(counts)}", fontsize=9
        )
        fig.tight_layout()
        png.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(png, dpi=80)
        plt.close(fig)


def report(rows: list[dict], algos: list[str], env_ids: list[str], depths: list[int]) -> None:
    """Per env and depth: final training return, mean (sample SD) over seeds, and |r - 1|."""
    print("mean over seeds: final training return | mean |r - 1| after update")
    for env_id in env_ids:
        for depth in depths:
            cells = []
            for algo in algos:
                sel = [
                    r for r in rows if (r["algo"], r["env_id"], r["depth"]) == (algo, env_id, depth)
                ]
                if sel:
                    ret = [r["final_train_return"] for r in sel]
                    dev = np.mean([r["ratio_dev_mean"] for r in sel])
                    sd = stats.sample_sd(ret)
                    cells.append(f"{algo} {np.mean(ret):.0f} (sample SD {sd:.0f}) | {dev:.3f}")
            print(f"  {env_id} depth {depth}: " + ", ".join(cells))


if __name__ == "__main__":
    main()
