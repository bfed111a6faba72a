"""Gradient updates/s of our IQL against d3rlpy's, side by side on one D4RL-layout file, and with
--eval the normalised score of both over seeds.

    python paper_figures/bench_iql.py --out paper_figures/out/bench_iql.csv --updates 5000 \\
        --warmup 1000 --repeats 3                      # speed, a HalfCheetah-sized dataset
    python paper_figures/bench_iql.py --dataset hopper-medium-v5-s0 --eval --seeds 1,2,3 \\
        --updates 1000000 --out paper_figures/out/bench_iql_eval.csv    # score, 3 seeds

Contenders, each in its own fresh process (controlrl.bench), the order rotated in every repeat:
ours (algos/iql.py's main; time/update_s of its timing.csv) and d3rlpy
(paper_figures/peers/d3rlpy_iql.py run by the python of d3rlpy's own venv, which `make
bench-iql` builds). Both get tinkoff-ai/CORL algorithms/offline/iql.py's settings, written once
in the peer file's SETTINGS, and 1 torch thread; the first --warmup updates are not timed; ratios
ours/d3rlpy paired per repeat, by wall clock and by process CPU time. Without --dataset a
HalfCheetah-sized file of random data is written once to runs/bench_iql/. With --eval, repeat k
trains seed --seeds[k] and both score --eval-episodes deterministic episodes at the end (D4RL
normalised where the dataset has reference scores); --workers N runs N processes at once (scores
only); --resume keeps --out's finished runs at the same settings. Writes one CSV row per process.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from controlrl import bench
from paper_figures.lab import scripts
from paper_figures.peers.d3rlpy_iql import SETTINGS  # a plain dict: reading it needs no d3rlpy

ROOT = Path(__file__).resolve().parents[1]
PEER = ROOT / "paper_figures" / "peers" / "d3rlpy_iql.py"
CONTENDERS = ("ours", "d3rlpy")
D3RLPY_VENV = Path("~/.cache/controlrl/venvs/d3rlpy").expanduser()
D3RLPY_PLACEHOLDER = "$D3RLPY_VENV/bin/python"  # the CSV's command names no machine's paths
SYNTHETIC = dict(rows=1_000_000, obs_dim=17, act_dim=6, episode=1000)  # HalfCheetah's sizes
FIELDS = [  # CSV columns; controlrl.bench's 'command' comes last
    *"contender repeat slot seed dataset env_id updates warmup threads".split(),
    *"timed_updates update_s updates_per_s cpu_s updates_per_cpu_s transitions".split(),
    *"d3rlpy_sample_ms d3rlpy_update_ms".split(),
    *"eval_episodes eval_return normalized_score process_s status".split(),
]


def ours_kwargs(s: dict = SETTINGS) -> dict:
    """The peer's SETTINGS under algos/iql.py's Args names (max_weight: iql.EXP_ADV_MAX)."""
    out = {k: s[k] for k in ("batch_size", "actor_lr", "critic_lr", "beta", "gamma", "polyak")}
    out |= dict(hidden_sizes=tuple(s["hidden_sizes"]), tau=s["expectile"])
    out["value_lr"] = s["critic_lr"]  # d3rlpy trains Q and V with one optimiser at critic_lr
    out |= dict(anneal_actor_lr=s["cosine_actor_lr"], normalize_obs=s["normalize_obs"])
    return out | dict(normalize_reward=s["reward_scale"] == 1000.0)  # 1000 / return range


# --------------------------------------------------------------------------------------------
# workers: each runs in its own process (controlrl.bench)


def work(contender: str, **cfg) -> dict:
    """Train one contender for cfg['updates'] updates; its timing (and evaluation)."""
    return {"ours": _ours, "d3rlpy": _d3rlpy}[contender](cfg)


def _ours(cfg: dict) -> dict:
    import torch

    from algos import iql

    if iql.EXP_ADV_MAX != SETTINGS["max_weight"]:
        raise ValueError(f"algos/iql.py clips weights at {iql.EXP_ADV_MAX}, d3rlpy's run at 100")
    torch.set_num_threads(cfg["threads"])
    iql.Timer = bench.cpu_timer(iql.Timer)  # this process only: timing.csv gains CPU seconds too
    kw = {k: cfg[k] for k in ("dataset", "env_id", "seed", "log_every")}
    kw |= dict(total_timesteps=cfg["updates"], torch_threads=cfg["threads"])
    kw["eval_episodes"] = max(cfg["eval_episodes"], 1)  # evaluated once, at the end
    with bench.trained(iql, **kw, **ours_kwargs()) as (_, rows, final_return):
        pass
    if len(rows) * cfg["log_every"] != cfg["updates"]:
        raise ValueError(f"timing.csv has {len(rows)} rows, expected updates / log_every")
    timed = rows[cfg["warmup"] // cfg["log_every"] :]
    n = len(timed) * cfg["log_every"]
    out = {"timed_updates": n, "update_s": sum(float(r["time/update_s"]) for r in timed)}
    out["updates_per_s"] = n / out["update_s"]
    if "time/update_s_cpu" in rows[0]:
        out["cpu_s"] = sum(float(r["time/update_s_cpu"]) for r in timed)
        out["updates_per_cpu_s"] = n / out["cpu_s"]
    if cfg["eval_episodes"]:
        out["eval_return"] = float(final_return)
    return out


def _d3rlpy(cfg: dict) -> dict:
    out_path = Path.cwd() / "d3rlpy_result.json"  # the bench's own temporary directory for this run
    argv = [cfg["d3rlpy_python"], str(PEER), "--dataset", cfg["dataset"], "--out", str(out_path)]
    argv += ["--updates", str(cfg["updates"]), "--warmup", str(cfg["warmup"])]
    argv += ["--seed", str(cfg["seed"]), "--threads", str(cfg["threads"])]
    if cfg["eval_episodes"]:
        argv += ["--eval-episodes", str(cfg["eval_episodes"]), "--env-id", cfg["env_id"]]
    env = {**os.environ, "OMP_NUM_THREADS": str(cfg["threads"])}
    env.pop("PYTHONPATH", None)  # nothing of this project's venv leaks into d3rlpy's
    proc = subprocess.run(argv, env=env, capture_output=True, text=True)
    sys.stdout.write(proc.stdout[-2000:] + proc.stderr[-2000:])
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {proc.returncode}")
    return json.loads(out_path.read_text())


# --------------------------------------------------------------------------------------------
# the dataset, what is compared, rows and summary


def write_synthetic(path: Path, rows: int, obs_dim: int, act_dim: int, episode: int) -> Path:
    """A D4RL-layout file of random data (seeded) with env_id HalfCheetah-v5: episodes of
    `episode` rows, each ending in a timeout, s' the next row inside an episode."""
    import h5py
    import numpy as np

    rng = np.random.default_rng(0)
    episodes = -(-rows // episode)
    obs = rng.standard_normal((episodes, episode + 1, obs_dim), dtype=np.float32)
    timeouts = np.zeros((episodes, episode), dtype=bool)
    timeouts[:, -1] = True
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    with h5py.File(tmp, "w") as f:
        f["observations"] = obs[:, :-1].reshape(-1, obs_dim)[:rows]
        f["next_observations"] = obs[:, 1:].reshape(-1, obs_dim)[:rows]
        f["actions"] = rng.uniform(-1, 1, (rows, act_dim)).astype(np.float32)
        f["rewards"] = rng.standard_normal(rows, dtype=np.float32)
        f["terminals"] = np.zeros(rows, dtype=bool)
        f["timeouts"] = timeouts.reshape(-1)[:rows]
        f.attrs["env_id"] = "HalfCheetah-v5"
    tmp.replace(path)  # a killed write leaves no half file under the real name
    return path


def contenders(args: argparse.Namespace, repeat: int) -> list[bench.Contender]:
    """The contenders asked for, with this repeat's seed."""
    cfg = {k: getattr(args, k) for k in ("updates", "warmup", "log_every", "threads", "env_id")}
    cfg |= dict(dataset=str(args.dataset), d3rlpy_python=str(args.d3rlpy_python))
    cfg |= dict(seed=args.seeds[repeat], eval_episodes=args.eval_episodes if args.eval else 0)
    worker = f"{Path(__file__).resolve()}:work"
    return bench.contenders(args.contenders, worker, cfg, args.timeout, args.threads)


def kept_runs(args: argparse.Namespace) -> list[dict]:
    """--resume: the finished runs of --out (status ok) of this call's contenders and seeds;
    an error if --out holds a run at other settings (one CSV, one setting)."""
    if not Path(args.out).exists():
        return []
    want = dict(updates=args.updates, warmup=args.warmup, threads=args.threads)
    want |= dict(dataset=portable(args.dataset), eval_episodes=args.eval_episodes * args.eval)
    kept = []
    for r in bench.read_csv(args.out):
        other = {k: r[k] for k in want if r[k] != want[k]}
        if other:
            raise SystemExit(
                f"error: --resume: {args.out} holds a run of {r['contender']} seed {r['seed']} at "
                f"{other} (this call: { {k: want[k] for k in other} }); write another --out"
            )
        if r["status"] == "ok" and r["contender"] in args.contenders and r["seed"] in args.seeds:
            kept.append(r)
    return kept


def portable(path: str | Path) -> str:
    """A path as a CSV cell: relative to the repository inside it, else the file's name."""
    path = Path(path)
    if not path.is_absolute():
        return str(path)
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return path.name


def public_command(argv: list[str]) -> str:
    """The command line for the CSV: --d3rlpy-python as $D3RLPY_VENV/bin/python, --dataset and
    --out through portable(), so the command column holds no absolute path of this machine."""
    words = list(argv)
    for i, word in enumerate(words):
        flag, eq, value = word.partition("=") if word.startswith("--") else ("", "", word)
        if not eq:  # the value of the word before, if that is a flag
            flag, value = (words[i - 1] if i else ""), word
        if flag in ("--d3rlpy-python", "--dataset", "--out"):
            value = D3RLPY_PLACEHOLDER if flag == "--d3rlpy-python" else portable(value)
            words[i] = f"{flag}={value}" if eq else value
    command = bench.command_line("paper_figures/bench_iql.py", words)
    return command.replace(f"'{D3RLPY_PLACEHOLDER}'", D3RLPY_PLACEHOLDER)  # the shell expands it


def row(run: bench.Run, score=None) -> dict:
    """One CSV row; score maps a return to a normalised score (None: not known)."""
    cfg = run.contender.config
    out = {k: cfg[k] for k in ("contender", "seed", "updates", "warmup", "threads", "env_id")}
    out |= dict(repeat=run.repeat, slot=run.slot, dataset=portable(cfg["dataset"]))
    out |= dict(eval_episodes=cfg["eval_episodes"], process_s=run.wall_s, status=run.status)
    if run.ok:
        out |= {k: v for k, v in run.result.items() if k in FIELDS}
        if score is not None and "eval_return" in out:
            out["normalized_score"] = score(out["eval_return"])
    return {k: out.get(k, "") for k in FIELDS}


def summarize(rows: list[dict]) -> str:
    """Markdown table: updates/s per contender, the paired ratio ours/d3rlpy, scores if any."""
    ok = [r for r in rows if r["status"] == "ok"]

    def col(name: str, key: str) -> list[float]:
        return [r[key] for r in ok if r["contender"] == name and r[key] != ""]

    def mean_sd(key: str):
        return lambda name, _: _mean_sd(col(name, key))

    by = {(r["contender"], r["repeat"]): r for r in ok}
    paired = sorted(k for c, k in by if c == "ours" and ("d3rlpy", k) in by)
    ratios = bench.row_ratios(rows, "ours", "d3rlpy", "updates_per_s")
    cpu_ratios = bench.row_ratios(rows, "ours", "d3rlpy", "updates_per_cpu_s")
    m = bench.median_of
    columns = {
        "updates/s": m("updates_per_s", ",.1f"),
        "updates/CPU s": m("updates_per_cpu_s", ",.1f"),
    }
    columns |= {"process s": m("process_s", ".0f"), "eval return": mean_sd("eval_return")}
    lines = bench.per_contender(rows, columns | {"normalised score": mean_sd("normalized_score")})
    lines.append(f"\nspeed ours/d3rlpy (paired per repeat): {bench.median_range(ratios)}")
    lines.append(f"speed ours/d3rlpy by CPU time: {bench.median_range(cpu_ratios)}")
    if col("ours", "eval_return") and col("d3rlpy", "eval_return"):
        what = "normalised score" if col("ours", "normalized_score") else "eval return"
        per_seed = ", ".join(
            f"seed {by['ours', k]['seed']}: {_score(by['ours', k])} vs {_score(by['d3rlpy', k])}"
            for k in paired
        )
        lines.append(f"{what} ours vs d3rlpy per seed: {per_seed}")
    return "\n".join(lines + bench.failures(rows))


def _score(r: dict) -> str:
    value = r["normalized_score"] if r["normalized_score"] != "" else r["eval_return"]
    return "n/a" if value == "" else f"{value:.1f}"


def _mean_sd(values: list[float]) -> str:
    if not values:
        return "-"
    if len(values) == 1:
        return f"{values[0]:.1f}"
    sd = statistics.stdev(values)
    return f"{statistics.mean(values):.1f} (sample SD {sd:.1f}, n={len(values)})"


def scorer(dataset: Path):
    """Return -> D4RL normalised score with the dataset's reference scores, or None."""
    from envs.offline import load

    data = load(dataset)
    if data.ref_min_score is None or data.ref_max_score is None:
        return None
    return lambda ret: float(data.normalized_score(ret))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = bench.parser(__doc__, "paper_figures/out/bench_iql.csv", 7200.0, CONTENDERS)
    p.add_argument("--dataset", help="D4RL-layout HDF5 file (default: a synthetic HalfCheetah one)")
    p.add_argument("--env-id", help="Gymnasium id to evaluate in (default: the file's env_id)")
    p.add_argument("--updates", type=int, help="gradient updates per process (5000; 40 --toy)")
    p.add_argument("--warmup", type=int, help="leading updates not timed (1000; 20 --toy)")
    p.add_argument("--log-every", type=int, help="ours: updates per timing row (1000; 10 --toy)")
    p.add_argument("--repeats", type=int, help="repeats (3; 1 --toy); with --eval: len(--seeds)")
    p.add_argument("--seeds", help="comma-separated seeds, one per repeat (default 1,2,3,...)")
    p.add_argument("--eval", action="store_true", help="evaluate both at the end of each run")
    p.add_argument("--eval-episodes", type=int, default=10, help="episodes with --eval (CORL 10)")
    what = "python of d3rlpy's venv (make bench-iql builds it; env D3RLPY_PYTHON)"
    peer = os.environ.get("D3RLPY_PYTHON", str(D3RLPY_VENV / "bin" / "python"))
    p.add_argument("--d3rlpy-python", default=peer, help=what)
    p.add_argument("--workers", type=int, default=1, help="with --eval: processes at once (1)")
    what = "keep the finished runs of --out at this call's settings and run only the others"
    p.add_argument("--resume", action="store_true", help=what)
    args = p.parse_args(argv)
    toy = dict(updates=40, warmup=20, log_every=10, repeats=1)
    bench.fill(args, dict(updates=5000, warmup=1000, log_every=1000, repeats=3), toy)
    default = ",".join(str(k) for k in range(1, args.repeats + 1))
    args.seeds = bench.ints(p, args.seeds or default, "--seeds")
    args.repeats = len(args.seeds)
    args.contenders = bench.subset(p, args.contenders, CONTENDERS, "--contenders")
    if args.workers > 1 and not args.eval:  # a speed measurement runs alone
        p.error(
            "--workers > 1 needs --eval: runs side by side share the CPU, so their updates/s "
            "would measure the sharing, not the speed"
        )
    scripts.at_least(
        p, args, ("updates", "log_every", "repeats", "threads", "eval_episodes", "workers")
    )
    if not 0 <= args.warmup < args.updates:
        p.error(f"--warmup must be in [0, --updates {args.updates}), got {args.warmup}")
    for name in ("updates", "warmup"):  # ours times whole iterations of --log-every updates
        if getattr(args, name) % args.log_every:
            p.error(f"--log-every {args.log_every} must divide --{name} {getattr(args, name)}")
    if "d3rlpy" in args.contenders and not Path(args.d3rlpy_python).is_file():
        p.error(
            f"--d3rlpy-python {args.d3rlpy_python} does not exist: `make bench-iql` builds "
            "d3rlpy's venv, or leave d3rlpy out: --contenders ours"
        )
    if args.dataset is not None and not Path(args.dataset).is_file():
        from envs.offline.store import data_root, hdf5_path

        generated = hdf5_path(data_root(), str(args.dataset))  # a generated dataset's id
        if not generated.is_file():
            p.error(
                f"--dataset {args.dataset}: no such file (a D4RL-layout HDF5 file) and no "
                f"generated dataset {generated}"
            )
        args.dataset = generated
    return args


def dataset_and_env(args: argparse.Namespace) -> None:
    """Fill args.dataset (the synthetic file, written once) and args.env_id (the file's)."""
    if args.dataset is None:
        s = SYNTHETIC
        name = f"synthetic_{s['obs_dim']}x{s['act_dim']}x{s['rows']}.hdf5"
        args.dataset = ROOT / "runs" / "bench_iql" / name
        if not args.dataset.exists():
            print(f"writing {args.dataset} (random data, HalfCheetah's sizes)", flush=True)
            write_synthetic(args.dataset, **s)
    args.dataset = Path(args.dataset).resolve()
    if args.env_id is None:
        import h5py

        with h5py.File(args.dataset, "r") as f:
            env_id = f.attrs.get("env_id")
        if not env_id:
            sys.exit(f"{args.dataset} has no env_id attribute: pass --env-id")
        args.env_id = env_id.decode() if isinstance(env_id, bytes) else str(env_id)


def main(argv: list[str] | None = None) -> list[dict]:
    args = parse_args(argv)
    dataset_and_env(args)
    command = public_command(sys.argv[1:] if argv is None else argv)
    score = scorer(args.dataset) if args.eval else None
    rows: list[dict] = kept_runs(args) if args.resume else []
    done = {(r["contender"], r["seed"]) for r in rows}
    jobs = [
        (c, repeat, slot)
        for repeat in range(args.repeats)
        for slot, c in enumerate(bench.rotation(contenders(args, repeat), repeat))
        if (c.name, args.seeds[repeat]) not in done
    ]
    if done:
        print(f"--resume: kept {len(done)} finished runs of {args.out}, {len(jobs)} to run")

    def describe(r: dict) -> str:
        what = f"seed {r['seed']}: {r['updates_per_s']:8.1f} updates/s over {r['timed_updates']}"
        return what + (f", eval return {r['eval_return']:.1f}" if r["eval_return"] != "" else "")

    # --workers: runs finish in threads of their own (the recorder writes one at a time)
    report = bench.Recorder(args.out, command, lambda run: row(run, score), describe, rows, True)
    with concurrent.futures.ThreadPoolExecutor(args.workers) as pool:
        running = [pool.submit(lambda j: report(bench.run_one(*j)), job) for job in jobs]
        for future in running:
            future.result()
    rows = sorted(report.rows, key=lambda r: (r["repeat"], r["slot"]))
    bench.write_csv(args.out, rows, command, keep_commands=True)
    bench.report(summarize(rows), args.repeats, command, args.out)
    return rows


if __name__ == "__main__":
    main()
