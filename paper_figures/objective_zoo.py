r"""Every group objective of algos/grpo.py against GRPO on the same seeds: one population run
(--num-seeds, controlrl/population.py; seed k of it exactly the run --seed k) per (bandit,
objective), at the bandit suite's settings (paper_figures/bandit_suite.py: 256 samples per
update, groups of G = 8, Adam at 1e-3; 10,240 pulls on bernoulli-10, 20,480 samples on the
others), plus the variable-length sequence bandit for DAPO's overlong shaping.

    python paper_figures/objective_zoo.py --train    # the committed CSVs: runs what is missing
    python paper_figures/objective_zoo.py --train --bandits bandit:sparse-1000   # one bandit
    python paper_figures/objective_zoo.py --toy --train --sweep-dir runs/toy/z --out runs/toy/z

Per bandit (PLAN: samples, seeds, objectives; --samples / --seeds / --objectives replace them):
every objective on every bandit (those that apply, below) at 200 seeds, and sequence-stop-2-4
GRPO and DAPO's overlong shaping at 200 seeds. A sequence-reverse-2-6 seed costs about fifty
times a bernoulli-10 seed (a 200-seed cell about 8-9 CPU-minutes); sequence-stop-2-4's episodes
end at different steps, so it is no population bandit: its seeds are separate runs. Objectives that
need a bandit kind run only there: GSPO's sequence ratio on sequence bandits (on a one-step
bandit it is the per-step ratio, GSPO = GRPO), DAPO's overlong shaping on the variable-length
one.

Objectives (flags of algos/grpo.py beyond the common ones; every other flag at GRPO's default):
see OBJECTIVES below.

Samples are episodes (pulls, answers), counted from each iteration's train/episodes; a bandit
whose episodes vary in length gets its --samples as an env-step (token) budget, an LLM run's
compute. Per run (seed): final success = mean of train/episode_return over the last
--final-window samples divided by the bandit's optimal expected reward (envs/bandits.py), as
bandit_suite.py computes it; final_eval = the run's final evaluation (the greedy policy's mean
reward over --eval-episodes episodes, final_eval.json) over the optimum; auc = the mean over the
run's iterations of train/episode_return over the optimum (the area under the success curve per
iteration); clip_frac = the run's mean train/clip_frac (steps whose ratio the clip cut; empty for
a loss without one). Per (bandit, objective): the mean, sample SD and 95% percentile-bootstrap
CI over seeds (controlrl.stats.summarize) of each, and the paired difference objective - GRPO
over the same seeds (controlrl.stats.paired: bootstrap CI, sign-flip p, the effect detectable
at 80% power).

Writes <out>/objective_zoo.csv (one row per bandit, objective and seed) and
<out>/objective_zoo_summary.csv (one row per bandit and objective); the rows of cells that have
no run under --sweep-dir (another bandit's, run before) are kept from the existing CSV.
"""

from __future__ import annotations

import argparse
import csv
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from controlrl.cli import ArgumentParser
from controlrl.experiment import apply_toy, kept_rows, write_rows
from controlrl.stats import paired, summarize

ROOT = Path(__file__).resolve().parents[1]
BASELINE = "grpo"
REINFORCE = ["--policy-loss", "reinforce", "--update-epochs", "1"]
TEMPERATURE = ["--rollout-mismatch", "temperature"]
# objective -> (label, flags of algos/grpo.py, paper)
OBJECTIVES = {
    "grpo": ("GRPO", [], "arXiv 2402.03300"),
    "dapo-clip-higher": ("DAPO clip-higher", ["--eps-high", "0.28"], "arXiv 2503.14476"),
    "cispo": ("CISPO", ["--policy-loss", "cispo", "--eps-high", "0.28"], "arXiv 2506.13585"),
    "sapo": ("SAPO", ["--policy-loss", "sapo"], "arXiv 2511.20347"),
    "dpg": ("Delightful PG", ["--policy-loss", "dpg"], "arXiv 2603.14608"),
    "gpg": ("GPG", [*REINFORCE, "--adv-norm", "mean", "--kl-coef", "0"], "arXiv 2504.02546"),
    "rgra": ("RGRA", REINFORCE, "REINFORCE with group-relative advantage"),
    "rgra-no-negatives": ("RGRA, negatives off", [*REINFORCE, "--drop-negatives"], "RGRA"),
    # cov-frac 0.02 picks 5 of a 256-row minibatch; verl's 2e-4 would pick the minimum, one
    "clip-cov": ("Clip-Cov", ["--policy-loss", "clip-cov", "--cov-frac", "0.02"], "2505.22617"),
    "kl-cov": ("KL-Cov", ["--policy-loss", "kl-cov", "--cov-frac", "0.02"], "arXiv 2505.22617"),
    "kl-in-reward": ("k3 KL in the reward", ["--kl-in", "reward"], "verl use_kl_in_reward"),
    "rloo": ("RLOO", ["--adv-norm", "rloo"], "arXiv 2402.14740"),
    "reinforce++": ("REINFORCE++", ["--adv-norm", "reinforce++"], "arXiv 2501.03262"),
    "reinforce++-baseline": (
        "REINFORCE++ baseline",
        ["--adv-norm", "reinforce++-baseline"],
        "arXiv 2501.03262",
    ),
    "lite-ppo": ("LitePPO", ["--adv-norm", "lite-ppo"], "arXiv 2508.08221"),
    "bnpo": ("BNPO", ["--adv-norm", "bnpo"], "BNPO (Beta normalisation)"),
    "kl-k1": ("k1 KL", ["--kl-estimator", "k1"], "Schulman 2020"),
    "kl-k2": ("k2 KL", ["--kl-estimator", "k2"], "Schulman 2020"),
    "kl-k3-unbiased": ("unbiased k3 KL", ["--kl-estimator", "k3-unbiased"], "arXiv 2512.02556"),
    "kl-k1-reward": ("k1 KL in the reward", ["--kl-estimator", "k1", "--kl-in", "reward"], "-"),
    "mismatch-none": (
        "temperature mismatch, uncorrected",
        [*TEMPERATURE, "--mismatch-correction", "none"],
        "-",
    ),
    "mismatch-tis": (
        "temperature mismatch + TIS",
        [*TEMPERATURE, "--mismatch-correction", "tis"],
        "truncated IS",
    ),
    "mismatch-mis": (
        "temperature mismatch + MIS",
        [*TEMPERATURE, "--mismatch-correction", "mis"],
        "masked IS (IcePop)",
    ),
    "mismatch-bf16-tis": (
        "bf16 mismatch + TIS",
        ["--rollout-mismatch", "bf16", "--mismatch-correction", "tis"],
        "truncated IS",
    ),
    # the reference's TTRL scripts: clip 0.3 on both sides, temperature 1e-4
    "gbpo": (
        "GBPO",
        ["--policy-loss", "gbpo", "--clip-coef", "0.3", "--gbpo-temperature", "1e-4"],
        "arXiv 2604.18578",
    ),
    "nft": ("NFT", ["--policy-loss", "nft"], "arXiv 2505.18116"),
    # GSPO's sequence ratio (its clip range stays GRPO's 0.2): sequence bandits only
    "gspo": ("GSPO", ["--ratio", "sequence_mean"], "arXiv 2507.18071"),
    # sequence-stop-2-4: the cap 8, punished beyond the longest right answer (5 tokens)
    "dapo-overlong": (
        "DAPO overlong shaping",
        ["--overlong-max", "8", "--overlong-cache", "3"],
        "arXiv 2503.14476",
    ),
}
SEQUENCE_ONLY = ("gspo",)
VARIABLE_LENGTH_ONLY = ("dapo-overlong",)
EVERY = [o for o in OBJECTIVES if o not in SEQUENCE_ONLY + VARIABLE_LENGTH_ONLY]
# bandit -> (samples, seeds, objectives): the committed cells
PLAN = {
    "bandit:bernoulli-10": (10240, 200, EVERY),
    "bandit:contextual-16-10": (20480, 200, EVERY),
    "bandit:sparse-1000": (20480, 200, EVERY),
    "bandit:sequence-reverse-2-6": (20480, 200, [*EVERY, "gspo"]),
    "bandit:sequence-add-2-3": (20480, 200, [*EVERY, "gspo"]),
    "bandit:sequence-stop-2-4": (20480, 200, ["dapo-overlong"]),  # a budget of 20,480 tokens
}  # fmt: skip
RUN_FIELDS = ("bandit", "objective", "seed", "samples", "optimal_reward", "final_success")
RUN_FIELDS += ("final_eval", "auc", "clip_frac")
METRICS = ("final_success", "final_eval", "auc")
TOY = {"bandits": "bandit:bernoulli-10", "samples": "128", "seeds": "3", "num_envs": 64}
TOY["objectives"] = "grpo,rgra-no-negatives"
TOY["workers"] = 2
TOY_FLAGS = ["--hidden-sizes", "16", "--eval-episodes", "2"]


def bandit_truth(env_id: str) -> dict:
    """Episode length (the cap, where episodes end early), optimal expected reward, whether it
    is a sequence bandit and whether its envs end together, from envs/bandits.py."""
    from envs import bandits

    env = bandits.make(env_id.removeprefix("bandit:"), 1)
    truth = {"length": int(getattr(env, "length", 1)), "optimal": float(env.optimal_reward)}
    truth |= {"sequence": bool(env.sequence), "lockstep": bool(env.lockstep)}
    env.close()
    return truth


def applies(objective: str, truth: dict) -> bool:
    """GSPO only where an episode has several steps, overlong shaping only where they vary."""
    if objective in SEQUENCE_ONLY:
        return truth["sequence"]
    if objective in VARIABLE_LENGTH_ONLY:
        return not truth["lockstep"]
    return True


def run_dir(args, bandit: str, objective: str) -> Path:
    return args.sweep_dir / bandit.removeprefix("bandit:") / objective / "population"


def train_cell(args, bandit: str, samples: int, seeds: int, objective: str) -> None:
    """One population run of seeds 1..seeds for the cell (a bandit whose envs do not end
    together: one run per seed), unless it finished before."""
    truth = bandit_truth(bandit)
    steps = samples * truth["length"] if truth["lockstep"] else samples  # tokens: a budget
    cmd = [sys.executable, str(ROOT / "algos" / "grpo.py"), "--env-id", bandit]
    cmd += ["--total-timesteps", str(steps), "--num-envs", str(args.num_envs)]
    cmd += ["--eval-every", "0", "--no-tensorboard", "--no-progress"]
    cmd += OBJECTIVES[objective][1] + (TOY_FLAGS if args.toy else [])
    out = run_dir(args, bandit, objective)
    if truth["lockstep"]:
        runs = [(out, ["--seed", "1", "--num-seeds", str(seeds)])]
    else:
        runs = [(out.parent / f"seed_{k}", ["--seed", str(k)]) for k in range(1, seeds + 1)]
    t0 = time.perf_counter()
    for path, seed_flags in runs:
        if (path / "final_eval.json").exists():
            continue
        shutil.rmtree(path, ignore_errors=True)  # unfinished: started again
        done = subprocess.run([*cmd, *seed_flags, "--run-dir", str(path)],
                              capture_output=True, text=True, cwd=ROOT)  # fmt: skip
        if done.returncode:
            print(f"[failed (exit {done.returncode})] {bandit} {objective} {path.name}",
                  file=sys.stderr)  # fmt: skip
            print(done.stderr[-2000:], file=sys.stderr)
            return
    print(f"[done] {bandit} {objective} {seeds} seeds {time.perf_counter() - t0:.1f} s", flush=True)


def _float(row: dict, key: str) -> float:
    return float(row[key]) if row.get(key) else float("nan")


def read_run(path: Path, seed: int | None = None) -> tuple[dict, dict[int, list]]:
    """{seed: final evaluation} and {seed: [(episodes, return, clip_frac) per iteration]} of a
    run directory (a population's, or one seed's run)."""
    final_eval = json.loads((path / "final_eval.json").read_text())
    if seed is None:
        evals = dict(zip(final_eval["seeds"], final_eval["eval_return_per_seed"], strict=True))
    else:
        evals = {seed: final_eval["eval_return_mean"]}
    by_seed: dict[int, list] = {}
    with (path / "metrics.csv").open() as f:
        for r in csv.DictReader(f):
            if r["train/episode_return"]:
                by_seed.setdefault(int(r.get("seed", seed)), []).append(
                    (float(r["train/episodes"]), float(r["train/episode_return"]),
                     _float(r, "train/clip_frac"))
                )  # fmt: skip
    return evals, by_seed


def seed_rows(args, bandit: str, objective: str, truth: dict) -> list[dict]:
    """Per seed of a finished cell: final success, final evaluation and AUC over the optimum."""
    out = run_dir(args, bandit, objective)
    if truth["lockstep"]:
        if not (out / "final_eval.json").exists():
            return []
        evals, by_seed = read_run(out)
    else:
        evals, by_seed = {}, {}
        for path in sorted(out.parent.glob("seed_*"), key=lambda p: int(p.name[5:])):
            if (path / "final_eval.json").exists():
                e, b = read_run(path, int(path.name[5:]))
                evals, by_seed = evals | e, by_seed | b
    rows = []
    for seed, points in sorted(by_seed.items()):
        episodes, returns, clip = np.array(points).T
        samples = np.cumsum(episodes)
        success = returns / truth["optimal"]
        final = success[samples > samples[-1] - args.final_window]
        rows.append(
            {
                "bandit": bandit,
                "objective": objective,
                "seed": seed,
                "samples": int(samples[-1]),
                "optimal_reward": truth["optimal"],
                "final_success": float(final.mean()),
                "final_eval": float(evals[seed]) / truth["optimal"],
                "auc": float(success.mean()),
                "clip_frac": float(np.nanmean(clip)) if np.isfinite(clip).any() else float("nan"),
            }
        )
    return rows


def summary(rows: list[dict]) -> list[dict]:
    """Per (bandit, objective): summaries over seeds and the paired difference to GRPO."""
    cells: dict[tuple[str, str], dict[int, dict]] = {}
    for r in rows:
        cells.setdefault((r["bandit"], r["objective"]), {})[r["seed"]] = r
    out = []
    for (bandit, objective), by_seed in cells.items():
        base = cells.get((bandit, BASELINE), {})
        seeds = sorted(set(by_seed) & set(base)) if objective != BASELINE else sorted(by_seed)
        row = {"bandit": bandit, "objective": objective, "label": OBJECTIVES[objective][0]}
        row |= {"flags": " ".join(OBJECTIVES[objective][1]), "seeds": len(by_seed)}
        for key in METRICS:
            s = summarize([by_seed[k][key] for k in sorted(by_seed)])
            row |= {key: s.mean, f"{key}_sd": s.sd, f"{key}_lo": s.lo, f"{key}_hi": s.hi}
            row[f"{key}_interval"] = s.kind
            if objective == BASELINE or len(seeds) < 2:
                row |= dict.fromkeys([f"{key}_diff", f"{key}_diff_lo", f"{key}_diff_hi"], "")
                row |= {f"{key}_p": "", f"{key}_detectable": ""}
                continue
            d = paired([by_seed[k][key] for k in seeds], [base[k][key] for k in seeds])
            row |= {f"{key}_diff": d.diff.mean, f"{key}_diff_lo": d.diff.lo}
            row |= {f"{key}_diff_hi": d.diff.hi, f"{key}_p": d.p}
            row[f"{key}_detectable"] = d.detectable
        row["paired_seeds"] = len(seeds) if objective != BASELINE else ""
        row["clip_frac"] = float(np.mean([by_seed[k]["clip_frac"] for k in by_seed]))
        out.append(row)
    return out


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bandits", default=",".join(PLAN), help="bandit: ids, comma-separated")
    p.add_argument("--samples", default="", help="samples per seed, one or one per bandit "
                   "(default: PLAN's; a variable-length bandit's: env steps)")  # fmt: skip
    p.add_argument("--objectives", default="", help="OBJECTIVES keys (default: PLAN's per bandit)")
    p.add_argument("--seeds", default="", help="seeds per cell, one or one per bandit (PLAN's)")
    p.add_argument("--num-envs", type=int, default=256, help="samples per update")
    p.add_argument("--final-window", type=int, default=1280, help="samples of final_success")
    p.add_argument("--sweep-dir", type=Path, default=ROOT / "runs" / "sweeps" / "objective_zoo")
    p.add_argument("--out", type=Path, default=ROOT / "paper_figures" / "out")
    p.add_argument("--train", action="store_true", help="run the missing cells first")
    p.add_argument("--workers", type=int, default=1, help="cells trained at once")
    p.add_argument("--toy", action="store_true", help="seconds-sized end-to-end run (tests)")
    args = p.parse_args(argv)
    if args.toy:  # toy sizes replace the defaults, not what was given on the command line
        apply_toy(args, argv, TOY)
    from envs import UnknownEnvError, check_env_id

    args.bandits = args.bandits.split(",")
    for env_id in args.bandits:
        try:
            check_env_id(env_id)
        except UnknownEnvError as exc:
            p.error(f"--bandits: {exc}")
        if not env_id.startswith("bandit:"):
            p.error(f"--bandits: {env_id!r} is not a bandit: id")
    for name in ("samples", "seeds"):
        given = getattr(args, name)
        try:
            values = [int(v) for v in given.split(",")] if given else []
        except ValueError:
            p.error(f"--{name} must be integers, got {given!r}")
        if len(values) == 1:
            values *= len(args.bandits)
        if not values:
            unplanned = [b for b in args.bandits if b not in PLAN]
            if unplanned:
                p.error(f"--{name}: needed for {unplanned} (not in PLAN)")
            values = [PLAN[b][0 if name == "samples" else 1] for b in args.bandits]
        if len(values) != len(args.bandits):
            p.error(f"--{name}: one count per bandit, got {values}")
        setattr(args, name, values)
    if min(args.samples) < args.num_envs:
        p.error(f"--samples: one count >= --num-envs per bandit, got {args.samples}")
    if min(args.seeds) < 2:
        p.error(f"--seeds must be >= 2, got {args.seeds}")
    chosen = args.objectives.split(",") if args.objectives else None
    bad = [o for o in chosen or [] if o not in OBJECTIVES]
    if bad:
        p.error(f"--objectives: unknown {bad}, expected some of {list(OBJECTIVES)}")
    args.cells = []  # (bandit, samples, seeds, objectives that apply there, GRPO first)
    for bandit, samples, seeds in zip(args.bandits, args.samples, args.seeds, strict=True):
        names = chosen if chosen is not None else PLAN.get(bandit, (0, 0, EVERY))[2]
        truth = bandit_truth(bandit)
        names = [BASELINE] + [o for o in names if o != BASELINE and applies(o, truth)]
        args.cells.append((bandit, samples, seeds, names))
    if args.num_envs % 8 or args.num_envs < 8:
        p.error(f"--num-envs must be a multiple of the group size 8, got {args.num_envs}")
    if args.workers < 1:
        p.error(f"--workers must be >= 1, got {args.workers}")
    if args.final_window < 2:
        p.error(f"--final-window must be >= 2, got {args.final_window}")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    if args.train:
        from concurrent.futures import ThreadPoolExecutor

        jobs = [(b, n, k, o) for b, n, k, names in args.cells for o in names]
        with ThreadPoolExecutor(args.workers) as pool:
            list(pool.map(lambda c: train_cell(args, *c), jobs))
    rows = []
    for bandit, _, _, names in args.cells:
        truth = bandit_truth(bandit)
        for objective in names:
            rows += seed_rows(args, bandit, objective, truth)
    if not rows:
        raise SystemExit(f"error: no finished runs under {args.sweep_dir} (use --train)")
    fresh = {(r["bandit"], r["objective"]) for r in rows}
    numeric = ("optimal_reward", "final_success", "final_eval", "auc", "clip_frac")
    old = kept_rows(args.out / "objective_zoo.csv", ("bandit", "objective"), fresh,
                    ints=("seed", "samples"), floats=numeric)  # fmt: skip
    rows = old + rows
    order = {b: i for i, b in enumerate(PLAN)} | {o: i for i, o in enumerate(OBJECTIVES)}
    rows.sort(key=lambda r: (order.get(r["bandit"], len(order)), r["bandit"],
                             order[r["objective"]], r["seed"]))  # fmt: skip
    args.out.mkdir(parents=True, exist_ok=True)
    write_rows(args.out / "objective_zoo.csv", rows, RUN_FIELDS)
    table = summary(rows)
    write_rows(args.out / "objective_zoo_summary.csv", table, table[0])
    print("final success / AUC: mean over seeds; paired difference to GRPO [95% CI] (p)")
    for t in table:
        line = f"  {t['bandit']} {t['objective']}: {t['final_success']:.3f} / {t['auc']:.3f}"
        if t["objective"] != BASELINE and t["final_success_diff"] != "":
            line += (
                f"  final {t['final_success_diff']:+.3f} [{t['final_success_diff_lo']:+.3f},"
                f" {t['final_success_diff_hi']:+.3f}] (p {t['final_success_p']:.2g}),"
                f" auc {t['auc_diff']:+.3f} [{t['auc_diff_lo']:+.3f}, {t['auc_diff_hi']:+.3f}]"
            )
        print(line + f" (n={t['seeds']})")
    print(f"wrote {args.out / 'objective_zoo.csv'} and objective_zoo_summary.csv")


if __name__ == "__main__":
    main()
