r"""DPPO vs Gaussian PPO fine-tuning from behaviour clones of the same data (Ren et al., "Diffusion
Policy Policy Optimization", arXiv 2409.00588, Gym fine-tuning figure): evaluation return against
env steps per dataset, the seeds (thin) and their mean with its band (95% bootstrap CI from >= 5
seeds, the min-max range below). The declared experiments dppo-finetune-100k and -60k run it and
judge its <name>.csv (`python -m paper_figures run dppo-finetune-100k`).

    python paper_figures/dppo_finetune.py --train      # runs what is missing, then plots
    python paper_figures/dppo_finetune.py              # plots the runs under --sweep-dir
    python paper_figures/dppo_finetune.py --replot     # the PNG from <out>/<name>*.csv alone

Per dataset (--datasets: generated ids in envs.offline's cache, e.g. hopper-medium-v5-s0, or
D4RL-layout HDF5 paths) and policy (diffusion, gaussian), one algos/dppo.py run behaviour-clones
the data (--pretrain-steps) into pretrained.pt, and every fine-tuning seed starts from that clone
(--pretrained). The clone's deterministic return (normaliser frozen) is each curve's step 0,
cached in clone_eval.json. Both policies share dppo.py's PPO settings, critic, env count and
rollout length; only the actor differs (a DDPM of --hidden widths, K = 20 steps with the last 10
fine-tuned, or a Gaussian MLP of the same widths).

Writes <out>/<name>.png (top: evaluation; bottom: training episodes), <name>.csv (per run: final
evaluation return, clone return, steps, seconds) and <name>_curves.csv (per run: the evaluation
return by step, step 0 the clone's, and the mean return of the training episodes by step).
"""

from __future__ import annotations

import collections
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

from controlrl import experiment, plots
from controlrl.cli import ArgumentParser
from controlrl.experiment import SweepConfig, read_rows
from paper_figures.lab import run_csvs, scripts
from paper_figures.lab.script_flags import ROOT, add_sweep_flags, wrote

POLICIES = ("diffusion", "gaussian")
CSV_FIELDS = ("dataset", "env", "policy", "seed", "steps", "final_return", "clone_return")
CSV_FIELDS += ("train_s",)  # the fine-tuning run's seconds collecting and updating
KEY, CURVES = ("dataset", "policy", "seed"), {"curve": "eval_return", "train": "train_return"}
# the declared experiments' toy: the CSVs of `--toy --train` on a 200-step random Hopper-v5
# dataset, one seed per policy (its four runs and two clone evaluations take tens of seconds)
TOY_FIXTURE = ROOT / "paper_figures" / "dppo-finetune-100k" / "toy"
# --toy: a tiny dataset file, tiny nets, a few hundred steps; end to end in well under a minute
TOY = {"seeds": 1, "steps": 64, "pretrain_steps": 20, "num_envs": 2, "num_steps": 16,
       "hidden": 16, "eval_every": 32, "eval_episodes": 1, "workers": 1}  # fmt: skip


def dataset_label(dataset: str) -> str:
    """The dataset's id, or a file's stem."""
    return Path(dataset).stem if dataset.endswith((".hdf5", ".h5")) else dataset


def dataset_env(dataset: str) -> str:
    """The env id the dataset names."""
    from envs.offline import load

    return load(dataset).env_id


def common_flags(args) -> list[str]:
    """The flags every run of the figure shares (both policies, clone and fine-tuning)."""
    width = str(args.hidden)
    flags = ["--hidden-sizes", width, width, width, "--num-envs", str(args.num_envs)]
    flags += ["--num-steps", str(args.num_steps), "--eval-episodes", str(args.eval_episodes)]
    flags += ["--no-tensorboard", "--no-progress"]
    return flags + args.extra


def clone_dir(args, label: str, policy: str) -> Path:
    return args.sweep_dir / label / f"{policy}_clone"


def clone_file(args, label: str, env: str, policy: str) -> Path:
    return clone_dir(args, label, policy) / "runs" / "dppo" / env / "seed1" / "pretrained.pt"


def finetune_dir(args, label: str, policy: str) -> Path:
    return args.sweep_dir / label / policy


def clone_config(args, dataset: str, env: str, policy: str) -> SweepConfig:
    """Behaviour cloning, then one fine-tuning batch (dppo.py always fine-tunes)."""
    extra = ["--dataset", dataset, "--policy", policy, "--pretrain-steps", str(args.pretrain_steps)]
    extra += ["--eval-every", "0", *common_flags(args)]
    return SweepConfig(["dppo"], [env], 1, args.num_envs * args.num_steps, extra)


def finetune_config(args, label: str, env: str, policy: str) -> SweepConfig:
    extra = ["--pretrained", str(clone_file(args, label, env, policy)), "--policy", policy]
    extra += ["--eval-every", str(args.eval_every), *common_flags(args)]
    return SweepConfig(["dppo"], [env], args.seeds, args.steps, extra)


def train(args, jobs: list[tuple[str, str, str]]) -> None:
    """Every clone first (one run each), then the fine-tuning seeds."""
    for dataset, label, env in jobs:
        for policy in POLICIES:
            config = clone_config(args, dataset, env, policy)
            scripts.train(config, clone_dir(args, label, policy), f"{label} {policy} clone")
    for _, label, env in jobs:
        for policy in POLICIES:
            if not clone_file(args, label, env, policy).exists():
                print(f"warning: no clone for {label} {policy}; its fine-tuning is skipped")
                continue
            config = finetune_config(args, label, env, policy)
            scripts.train(config, finetune_dir(args, label, policy), f"{label} {policy}",
                          args.workers)  # fmt: skip


def clone_return(args, label: str, env: str, policy: str) -> float:
    """The clone's deterministic evaluation return (cached in clone_eval.json)."""
    path = clone_file(args, label, env, policy)
    cache = path.with_name("clone_eval.json")
    if cache.exists():
        saved = json.loads(cache.read_text())
        if saved["episodes"] == args.eval_episodes:
            return saved["return"]
    value = evaluate_clone(path, env, args.eval_episodes)
    cache.write_text(json.dumps({"episodes": args.eval_episodes, "return": value}) + "\n")
    return value


def evaluate_clone(path: Path, env: str, episodes: int) -> float:
    """Mean return of the pretrained policy's deterministic actions, as dppo.py evaluates."""
    import torch

    import envs
    from algos import dppo
    from controlrl.evaluate import evaluate
    from controlrl.normalize import ObsNormalizer
    from controlrl.pretrain import load_into, load_pretrained
    from controlrl.seeding import eval_seed

    config = json.loads((path.parent / "config.json").read_text())["args"]
    args = dppo.Args(**{k: tuple(v) if isinstance(v, list) else v for k, v in config.items()})
    saved = load_pretrained(str(path), dppo.PRETRAINED_KIND)
    probe = envs.make(env, 1, 0)
    obs_dim = probe.single_observation_space.shape[0]
    act_dim = probe.single_action_space.shape[0]
    probe.close()
    policy = dppo.make_policy(obs_dim, act_dim, args)
    normalizer = ObsNormalizer((obs_dim,)) if saved["obs_normalizer"] is not None else None
    load_into(dppo.cloned_net(policy), normalizer, saved)
    if isinstance(policy, dppo.DiffusionPolicy):
        policy.start_finetuning()  # ft = base: the clone
    torch.manual_seed(args.seed)
    returns = evaluate(policy.mode, env, normalizer, episodes, seed=eval_seed(args.seed))
    return float(returns.mean())


def collect(args, jobs: list[tuple[str, str, str]]) -> list[dict]:
    """Per finished fine-tuning run: its CSV row and its curve (the clone's return at 0)."""
    runs = []
    for _, label, env in jobs:
        for policy in POLICIES:
            done = run_csvs.finished(finetune_dir(args, label, policy) / "runs" / "dppo" / env)
            start = clone_return(args, label, env, policy) if done else None
            for seed, run_dir, final in done:
                steps, values = plots.read_metrics(run_dir, "eval/return")
                # the curve ends at the final evaluation (final_eval.json), in place of a
                # periodic one logged at the same step; the clone's return is its step 0
                keep = steps < final["step"]
                steps = np.concatenate([[0], steps[keep], [final["step"]]])
                values = np.concatenate([[start], values[keep], [final["eval_return_mean"]]])
                row = dict(dataset=label, env=env, policy=policy, seed=seed,
                           steps=int(final["step"]), final_return=final["eval_return_mean"],
                           clone_return=start, train_s=plots.train_seconds(run_dir))  # fmt: skip
                train = plots.read_metrics(run_dir, "train/episode_return")
                runs.append({"row": row, "curve": (steps, values), "train": train})
    return runs


def plot(args, runs: list[dict]) -> None:
    import matplotlib.pyplot as plt

    labels = list(dict.fromkeys(r["row"]["dataset"] for r in runs))
    names = {"diffusion": "DPPO", "gaussian": "Gaussian PPO"}
    panels = (("curve", "evaluation return (deterministic)"), ("train", "training episodes"))
    with plt.rc_context(plots.STYLE):
        # at least two panels wide: the title fits above a single dataset too
        fig, axes = plt.subplots(2, len(labels), figsize=(4.2 * max(2, len(labels)), 6),
                                 squeeze=False, sharex="col")  # fmt: skip
        for col, label in enumerate(labels):
            mine = [r for r in runs if r["row"]["dataset"] == label]
            for ax, (key, ylabel) in zip(axes[:, col], panels):
                groups = {names[p]: [r[key] for r in mine if r["row"]["policy"] == p]
                          for p in POLICIES}  # fmt: skip
                plots.plot_curves(ax, groups)
                for r in mine:  # the seeds themselves, thin
                    color = "C0" if r["row"]["policy"] == "diffusion" else "C1"
                    ax.plot(*r[key], color=color, lw=0.5, alpha=0.5)
                ax.set_ylabel(ylabel)
                ax.legend(fontsize=7)
            axes[0, col].set_title(label, fontsize=8)
            axes[0, col].set_xlabel("")
        counts = collections.Counter((r["row"]["dataset"], r["row"]["policy"]) for r in runs)
        fig.suptitle("fine-tuning from behaviour clones of the same data (step 0: the clone)\n"
                     f"thin: seeds; {plots.band_words(counts.values())}", fontsize=9)  # fmt: skip
        scripts.save_figure(fig, args.out / f"{args.name}.png", 60)


def parser() -> ArgumentParser:
    p = ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--datasets", default="hopper-medium-v5-s0",
                   help="generated dataset ids or HDF5 paths, comma-separated")  # fmt: skip
    p.add_argument("--seeds", type=int, default=7)
    p.add_argument("--steps", type=int, default=100_000, help="fine-tuning env steps per run")
    p.add_argument("--pretrain-steps", type=int, default=10_000, help="BC gradient steps")
    p.add_argument("--num-envs", type=int, default=8)
    p.add_argument("--num-steps", type=int, default=250, help="steps per env per rollout")
    p.add_argument("--hidden", type=int, default=128, help="actor width (3 layers)")
    p.add_argument("--eval-every", type=int, default=10_000)
    p.add_argument("--eval-episodes", type=int, default=10)
    add_sweep_flags(p, "dppo_finetune", workers=2, algo="dppo", sweep_dir=False)
    return p


def table(exp, source: Path) -> list[dict]:
    """A declaration's results rows (its analysis.py's `table`): the runs of <source>/<name>.csv,
    <name> the one its [run] flags give, each run's arm its policy."""
    rows = read_rows(Path(source) / f"{parser().parse_args(list(exp.flags)).name}.csv")
    return [dict(r, arm=r["policy"]) for r in rows]


def run_script(exp, toy: bool, out: Path) -> None:
    """A declaration's run (its analysis.py's `run_script`): main with its flags, the generated
    datasets it names made first where missing (hours each the first time); the toy copies
    TOY_FIXTURE's CSVs into --out as <name>.csv and <name>_curves.csv and redraws the figure
    from them (--replot): no run."""
    from paper_figures.lab import runner

    argv = runner.script_argv(exp, toy, out)
    args = parser().parse_args(argv)
    if toy:
        return scripts.replot_fixture(main, argv, args, TOY_FIXTURE, ("", "_curves"), "--replot")
    from envs.offline.store import data_root, generate_hint, hdf5_path

    for name in args.datasets.split(","):  # a generated id missing from the data root: made
        hint = generate_hint(name)  # '; generate it: python -m envs.offline generate ...'
        if hint and not hdf5_path(data_root(), name).exists():
            cmd = [sys.executable, *hint.split(": ", 1)[1].split()[1:], "--no-progress"]
            subprocess.run(cmd, cwd=ROOT, check=True)
    main(argv)


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    # the runs start in the repository root: a relative --sweep-dir is taken from where we are
    args.sweep_dir = (args.sweep_dir or ROOT / "runs" / "sweeps" / args.name).resolve()
    if args.replot:  # the committed CSVs alone: no dataset, run or sweep is read
        plot(args, run_csvs.read(args.out, args.name, KEY, CURVES, "value", ("seed", "steps"),
                                 CSV_FIELDS[-3:]))  # fmt: skip
        return wrote(f"{args.out / args.name}.png from its CSVs", "dppo_finetune", argv)
    if args.toy:
        experiment.apply_toy(args, argv, TOY)
    jobs = []
    for dataset in args.datasets.split(","):
        try:
            jobs.append((dataset, dataset_label(dataset), dataset_env(dataset)))
        except ValueError as exc:  # envs.offline.DatasetError
            raise SystemExit(f"error: --datasets: {exc}") from None
    if args.train:
        train(args, jobs)
    runs = collect(args, jobs)
    if not runs:
        raise SystemExit(f"error: no finished runs under {args.sweep_dir} (use --train)")
    run_csvs.write(args.out, args.name, runs, CSV_FIELDS, KEY, CURVES, "value")
    plot(args, runs)
    wrote(f"{args.out / args.name}.png, {args.name}.csv and {args.name}_curves.csv",
          "dppo_finetune", argv)  # fmt: skip


if __name__ == "__main__":
    main()
