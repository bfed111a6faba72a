r"""FPO vs Gaussian PPO (McAllister et al. 2025, "Flow Matching Policy Gradients", arXiv
2507.21053; reference akanazawa/fpo): the actions each policy samples on a continuous bandit with
two equally good, well-separated modes (the declared experiment paper_figures/fpo-bimodal-bandit;
FPO's MuJoCo return is paper_figures/fpo-hopper-300k).

    python paper_figures/fpo_multimodal.py --train     # runs what is missing, then plots
    python paper_figures/fpo_multimodal.py             # plots the runs under --sweep-dir
    python paper_figures/fpo_multimodal.py --replot    # the PNG from <out>/<name>*.csv alone

bandit:bimodal (one action in [-1, 1], reward exp(-d^2 / (2 0.1^2)), d the distance to the
nearer of -0.5 and +0.5): algos/fpo.py and algos/ppo.py, each with its own defaults except the
batch (--num-envs 64 --num-steps 8 --num-minibatches 4) and --no-norm-obs, --bandit-seeds seeds
of --bandit-steps steps, every --bandit-checkpoint-every iterations a kept checkpoint. From each
checkpoint, --samples actions are sampled (clipped to [-1, 1] as at execution) and the share
within +-0.2 (two bump widths) of each mode is measured. The metric: the minority share,
min(share(-0.5), share(+0.5)); a policy "keeps both modes" when it is >= 0.2 (an even split is
0.5), and "collapsed" when it is < 0.05 while the majority mode holds >= 0.5 of the samples.

Writes <out>/<name>.png and the CSVs behind it: <name>.csv (per bandit run: the final
checkpoint's shares, mean reward, keeps_both, collapsed), _shares.csv (per checkpoint) and
_hist.csv (the final actions' histogram per run, 40 bins on [-1, 1]).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import torch

from controlrl import checkpoint, experiment, plots
from controlrl.cli import ArgumentParser
from controlrl.experiment import SweepConfig
from controlrl.nets import GaussianPolicy
from paper_figures.lab import run_csvs, scripts
from paper_figures.lab.script_flags import add_sweep_flags, wrote

MODES = (-0.5, 0.5)
MODE_HALF_WIDTH = 0.2  # two bump widths (envs/bandits.py BUMP_WIDTH 0.1)
KEEP_BOTH, COLLAPSED = 0.2, 0.05
BINS = np.linspace(-1.0, 1.0, 41)
ALGOS = ("fpo", "ppo")
BANDIT_FLAGS = ["--num-envs", "64", "--num-steps", "8", "--num-minibatches", "4", "--no-norm-obs"]
TOY = {"bandit_seeds": 1, "bandit_steps": 1024, "bandit_checkpoint_every": 1, "samples": 500,
       "workers": 2}  # fmt: skip
SHARES = ("share_left", "share_right", "minority_share", "mean_reward")


def bandit_config(args) -> SweepConfig:
    extra = BANDIT_FLAGS + ["--keep-checkpoints", "--eval-every", "0", "--eval-episodes", "10"]
    extra += ["--checkpoint-every", str(args.bandit_checkpoint_every)]
    return SweepConfig(list(ALGOS), ["bandit:bimodal"], args.bandit_seeds, args.bandit_steps, extra)


def load_policy(run_dir: Path, ckpt: Path) -> torch.nn.Module:
    """The policy of a bandit run's checkpoint, rebuilt from its config.json."""
    config = json.loads((run_dir / "config.json").read_text())
    saved = config["args"]
    state = checkpoint.load(ckpt, ("policy",))["policy"]
    if config["algo"] == "fpo":
        from algos.fpo import Args, FlowPolicy

        flags = {k: tuple(v) if isinstance(v, list) else v for k, v in saved.items()}
        policy = FlowPolicy(1, 1, Args(**flags))
    else:
        policy = GaussianPolicy(1, 1, tuple(saved["hidden_sizes"]))
    policy.load_state_dict(state)
    return policy


def sampled_actions(policy, n: int, seed: int = 0) -> np.ndarray:
    """n actions at the bandit's constant observation 1, clipped to [-1, 1] as at execution."""
    torch.manual_seed(seed)
    with torch.no_grad():
        return policy.sample(torch.ones(n, 1)).clamp(-1.0, 1.0)[:, 0].numpy()


def mode_stats(actions: np.ndarray) -> dict[str, float]:
    """Share of actions within MODE_HALF_WIDTH of each mode, the minority share, the mean
    reward, and the keeps_both / collapsed verdicts."""
    left = float(np.mean(np.abs(actions - MODES[0]) < MODE_HALF_WIDTH))
    right = float(np.mean(np.abs(actions - MODES[1]) < MODE_HALF_WIDTH))
    d2 = np.min((actions[:, None] - np.array(MODES)) ** 2, axis=1)
    minority, reward = min(left, right), float(np.mean(np.exp(-d2 / (2 * 0.1**2))))
    return dict(zip(SHARES, (left, right, minority, reward))) | {
        "keeps_both": minority >= KEEP_BOTH,
        "collapsed": minority < COLLAPSED and max(left, right) >= 0.5,
    }


def checkpoint_step(path: Path) -> int:
    return int(path.stem.removeprefix("step_"))


def bandit_results(args) -> list[dict]:
    """Per finished bandit run: the final shares and histogram, and the shares along training."""
    out = []
    for algo in ALGOS:
        base = args.sweep_dir / "bandit" / "runs" / algo / "bandit_bimodal"
        for seed, run_dir, _ in run_csvs.finished(base):
            ckpts = sorted((run_dir / "checkpoints").glob("step_*.pt"), key=checkpoint_step)
            along = []
            for ckpt in ckpts:
                actions = sampled_actions(load_policy(run_dir, ckpt), args.samples)
                along.append((checkpoint_step(ckpt), mode_stats(actions), actions))
            step, final, actions = along[-1]
            row = {"algo": algo, "seed": seed, "steps": step, **final}
            out.append({"row": row, "along": along, "hist": np.histogram(actions, BINS)[0]})
    return out


def write_csvs(args, bandit: list[dict]) -> None:
    args.out.mkdir(parents=True, exist_ok=True)

    def write(part: str, header: list[str], rows) -> None:
        with (args.out / f"{args.name}{part}.csv").open("w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(header)
            writer.writerows([f"{v:.4g}" if isinstance(v, float) else v for v in r] for r in rows)

    keys = ["algo", "seed", "steps", *SHARES, "keeps_both", "collapsed"]
    write("", keys, ([r["row"][k] for k in keys] for r in bandit))
    write("_shares", ["algo", "seed", "step", *SHARES],
          ([r["row"]["algo"], r["row"]["seed"], step, *(s[k] for k in SHARES)]
           for r in bandit for step, s, _ in r["along"]))  # fmt: skip
    write("_hist", ["algo", "seed", "bin_low", "bin_high", "count"],
          ([r["row"]["algo"], r["row"]["seed"], f"{lo:.2f}", f"{hi:.2f}", int(c)]
           for r in bandit for lo, hi, c in zip(BINS[:-1], BINS[1:], r["hist"])))  # fmt: skip


def plot(args, bandit: list[dict]) -> None:
    import matplotlib.pyplot as plt

    with plt.rc_context(plots.STYLE):
        fig, axes = plt.subplots(1, 3, figsize=(12, 3.6))
        centers = (BINS[:-1] + BINS[1:]) / 2
        for ax, algo in zip(axes[:2], ALGOS):
            runs = [r for r in bandit if r["row"]["algo"] == algo]
            for i, r in enumerate(runs):
                density = r["hist"] / max(r["hist"].sum(), 1)
                ax.step(centers, density, where="mid", lw=1, color=f"C{i}",
                        label=f"seed {r['row']['seed']}")  # fmt: skip
            for m in MODES:
                ax.axvspan(m - MODE_HALF_WIDTH, m + MODE_HALF_WIDTH, color="0.85", zorder=0)
            n_both = sum(r["row"]["keeps_both"] for r in runs)
            reward = np.mean([r["row"]["mean_reward"] for r in runs]) if runs else float("nan")
            ax.set_title(f"{algo}: final actions ({n_both}/{len(runs)} seeds keep both modes, "
                         f"mean reward {reward:.2f})", fontsize=7)  # fmt: skip
            ax.set_xlabel("action")
            ax.set_ylabel("share of samples")
            ax.legend(fontsize=6)
        ax = axes[2]
        for j, algo in enumerate(ALGOS):
            for i, r in enumerate(r for r in bandit if r["row"]["algo"] == algo):
                steps, shares = zip(*[(step, s["minority_share"]) for step, s, _ in r["along"]])
                ax.plot(steps, shares, color=f"C{j}", lw=1, alpha=0.8,
                        label=algo if i == 0 else None)  # fmt: skip
        ax.axhline(KEEP_BOTH, color="k", ls=":", lw=1)
        ax.set_xlabel("environment steps")
        ax.set_ylabel("minority-mode share")
        ax.set_title("bandit:bimodal, share of the less-used mode", fontsize=8)
        ax.legend(fontsize=7)
        fig.suptitle("FPO (flow policy) vs Gaussian PPO on bandit:bimodal", fontsize=9)
        fig.tight_layout()
        fig.savefig(args.out / f"{args.name}.png", dpi=60)


def read_csvs(out: Path, name: str) -> list[dict]:
    """The bandit runs as write_csvs left them in `out` (the shares along training, the final
    histogram); the sampled actions themselves are not kept."""
    from controlrl.bench import read_csv

    paths = {k: out / f"{name}{k}.csv" for k in ("", "_shares", "_hist")}
    for path in paths.values():
        if not path.exists():
            raise SystemExit(f"error: --replot needs {path} (written by a run of this script)")
    shares: dict[tuple, list] = {}
    for r in read_csv(paths["_shares"]):
        shares.setdefault((r["algo"], r["seed"]), []).append((r["step"], r, None))
    hists: dict[tuple, list] = {}
    for r in read_csv(paths["_hist"]):
        hists.setdefault((r["algo"], r["seed"]), []).append(r["count"])
    bandit = []
    for row in read_csv(paths[""]):
        row.update({k: row[k] == "True" for k in ("keeps_both", "collapsed")})
        key = (row["algo"], row["seed"])
        bandit.append({"row": row, "along": shares[key], "hist": np.array(hists[key])})
    return bandit


def main(argv: list[str] | None = None) -> None:
    p = ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bandit-seeds", type=int, default=5)
    p.add_argument("--bandit-steps", type=int, default=61_440)
    p.add_argument("--bandit-checkpoint-every", type=int, default=10, help="iterations")
    p.add_argument("--samples", type=int, default=4000, help="actions sampled per checkpoint")
    add_sweep_flags(p, "fpo_multimodal")
    args = p.parse_args(argv)
    if args.toy:
        experiment.apply_toy(args, argv, TOY)
    if args.replot:  # the committed CSVs alone: no run directory or checkpoint is read
        plot(args, read_csvs(args.out, args.name))
        return wrote(f"{args.out / args.name}.png from its CSVs", "fpo_multimodal", argv)
    if args.train:
        scripts.train(bandit_config(args), args.sweep_dir / "bandit", workers=args.workers)
    bandit = bandit_results(args)
    if not bandit:
        raise SystemExit(f"error: no finished runs under {args.sweep_dir} (use --train)")
    write_csvs(args, bandit)
    plot(args, bandit)
    for algo in ALGOS:
        rows = [r["row"] for r in bandit if r["row"]["algo"] == algo]
        shares = ", ".join(f"{r['minority_share']:.2f}" for r in rows)
        print(f"{algo} bandit:bimodal: keeps both {sum(r['keeps_both'] for r in rows)}/"
              f"{len(rows)}, collapsed {sum(r['collapsed'] for r in rows)}/{len(rows)}, "
              f"minority shares {shares}")  # fmt: skip
    wrote(f"{args.out / args.name}.png and its CSVs", "fpo_multimodal", argv)


if __name__ == "__main__":
    main()
