"""Environment steps per second: our Brax adapter vs the raw jitted Brax step, per physics
pipeline and batch size, next to Gymnasium MuJoCo (SyncVectorEnv) and EnvPool. Random actions,
no learning. References: google/brax brax/envs/__init__.py (the envs and pipelines) and
brax/envs/wrappers/training.py (brax's training wrappers); sail-sg/envpool.

    python paper_figures/bench_brax.py --out paper_figures/out/bench_brax.csv

Paths: brax raw (jax.jit(jax.vmap(env.step)), no resets: the limit to measure against), brax
raw+autoreset (brax's own training wrappers, what its trainers step), brax adapter
(envs.make('brax:<name>', n).step with numpy actions, as a training loop sees it), gymnasium and
envpool (envs.make of the v5 ids; 'envpool raw': EnvPool itself). Every (env, pipeline,
num_envs) runs in a fresh process with an empty JAX cache (compiles are cold, reported apart);
raw and adapter alternate in chunks of --chunk seconds; 'ratio' is each path / raw. Where
random-action episodes terminate (ant falls) raw never resets: compare the adapter with
raw+autoreset there. Writes one CSV row per path to --out.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np

from controlrl import bench
from controlrl.cli import ArgumentParser

ROOT = Path(__file__).resolve().parents[1]
GYM_IDS = {"ant": "Ant-v5", "halfcheetah": "HalfCheetah-v5"}
FIELDS = "env backend pipeline num_envs compile_s steps_per_s ratio_to_raw status".split()
BRAX_PATHS = ("raw", "raw+autoreset", "adapter")
ME = Path(__file__).resolve()


def timed_chunks(fns: dict, batch: int, chunk: float, chunks: int) -> dict[str, float]:
    """Alternate the step functions in chunks of `chunk` seconds; steps/s of each."""
    steps = dict.fromkeys(fns, 0)
    spent = dict.fromkeys(fns, 0.0)
    for _ in range(chunks):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            calls = 0
            while calls < 2 or time.perf_counter() - t0 < chunk:
                fn()
                calls += 1
            spent[name] += time.perf_counter() - t0
            steps[name] += calls * batch
    return {name: steps[name] / spent[name] for name in fns}


def brax_rows(name: str, pipeline: str, n: int, chunk: float, chunks: int) -> list[dict]:
    """Raw jitted step and our adapter at batch n, in one process (cold compiles)."""
    from envs import brax as brax_backend

    jax = brax_backend.configured_jax()  # this process's empty persistent cache, for all paths
    from brax import envs as brax_envs

    env = brax_envs.get_environment(name, backend=pipeline)
    act_np = np.random.default_rng(0).uniform(-1, 1, (n, env.action_size)).astype(np.float32)
    act = jax.numpy.asarray(act_np)
    states, compile_s, fns = {}, {}, {}

    def path(key: str, reset, step) -> None:  # compile (timed) and a stepper of one brax path
        t0 = time.perf_counter()
        state = reset(jax.random.split(jax.random.PRNGKey(0), n))
        for _ in range(2):  # the 2nd call compiles again (reset's state types differ)
            state = step(state, act)
            jax.block_until_ready(state.obs)
        states[key], compile_s[key] = state, time.perf_counter() - t0

        def stepper() -> None:
            states[key] = step(states[key], act)
            jax.block_until_ready(states[key].obs)

        fns[key] = stepper

    from brax.envs.wrappers import training

    path("raw", jax.jit(jax.vmap(env.reset)), jax.jit(jax.vmap(env.step)))
    wrapped = training.wrap(env, episode_length=1000)
    path("raw+autoreset", jax.jit(wrapped.reset), jax.jit(wrapped.step))
    vec = brax_backend.BraxVectorEnv(name, n, pipeline, copy=False)  # as training uses it
    t0 = time.perf_counter()
    vec.compile()
    vec.reset(seed=0)
    vec.step(act_np)
    compile_s["adapter"] = time.perf_counter() - t0
    fns["adapter"] = lambda: vec.step(act_np)
    rates = timed_chunks(fns, n, chunk, chunks)
    row = dict(env=name, pipeline=pipeline, num_envs=n)
    return [row | dict(backend=f"brax {p}", compile_s=round(compile_s[p], 2),
                       steps_per_s=round(rates[p]), ratio_to_raw=round(rates[p] / rates["raw"], 3))
            for p in BRAX_PATHS]  # fmt: skip


def host_rows(name: str, n: int, chunk: float, chunks: int) -> list[dict]:
    """Gymnasium SyncVectorEnv, our EnvPool adapter and EnvPool itself at batch n."""
    import envs

    gym_id = GYM_IDS[name]
    vec_gym = envs.make(gym_id, n, 0)
    shape = (n, *vec_gym.single_action_space.shape)
    act = np.random.default_rng(0).uniform(-1, 1, shape).astype(np.float32)
    vec_gym.reset(seed=0)
    fns = {"gymnasium": lambda: vec_gym.step(act)}
    try:
        vec_pool = envs.make(f"envpool:{gym_id}", n, 0)
        vec_pool.reset(seed=0)
        fns["envpool"] = lambda: vec_pool.step(act)
        fns["envpool raw"] = lambda: vec_pool._pool.step(act)  # without the same-step adapter
    except envs.UnknownEnvError:  # EnvPool not installed
        pass
    rates = timed_chunks(fns, n, chunk, chunks)
    vec_gym.close()
    row = dict(env=name, pipeline="", num_envs=n, compile_s="")

    def ratio(backend: str, rate: float):  # EnvPool's paths against EnvPool itself
        return round(rate / rates["envpool raw"], 3) if backend.startswith("envpool") else ""

    return [row | dict(backend=b, steps_per_s=round(r), ratio_to_raw=ratio(b, r))
            for b, r in rates.items()]  # fmt: skip


def worker(kind: str, env: str, pipeline: str, n: int, chunk: float, chunks: int) -> dict:
    """In its own process: the rows of one (env, pipeline, num_envs) or host (env, num_envs)."""
    if kind == "brax":
        rows = brax_rows(env, pipeline, n, chunk, chunks)
    else:
        rows = host_rows(env, n, chunk, chunks)
    return {"rows": [r | {"status": "ok"} for r in rows]}


def jobs(args, cache_root: Path) -> list[bench.Contender]:
    """One contender per env and batch size: host backends, then every brax pipeline."""
    out = []
    for env in args.envs.split(","):
        sizes = [("host", "", int(n)) for n in args.host_envs.split(",") if n.strip()]
        for pipeline in args.pipelines.split(","):
            sizes += [("brax", pipeline, int(n)) for n in args.num_envs.split(",")]
        for kind, pipeline, n in sizes:
            name = f"{env}-{pipeline or kind}-{n}"
            config = dict(kind=kind, env=env, pipeline=pipeline, n=n)
            config |= dict(chunk=args.chunk, chunks=args.chunks)
            cache = {"CONTROLRL_JAX_CACHE": str(cache_root / name), "MUJOCO_GL": "egl"}
            out.append(bench.Contender(name, f"{ME}:worker", config, args.timeout, cache))
    return out


def rows_of(run: bench.Run) -> list[dict]:
    """The rows a worker measured, or one failed row per path it did not finish."""
    if run.ok:
        return run.result["rows"]
    c = run.contender.config
    backends = [f"brax {p}" for p in BRAX_PATHS] if c["kind"] == "brax" else ["gymnasium"]
    base = dict(env=c["env"], pipeline=c["pipeline"], num_envs=c["n"], status=run.status)
    return [{k: "" for k in FIELDS} | base | {"backend": b} for b in backends]


def plot(rows: list[dict], path: Path, command: str) -> None:
    import matplotlib.pyplot as plt

    from controlrl import plots

    envs_ = sorted({r["env"] for r in rows})
    with plt.rc_context(plots.STYLE):
        fig, axes = plt.subplots(1, len(envs_), figsize=(5 * len(envs_), 3.4), squeeze=False)
        for ax, env in zip(axes[0], envs_):
            series: dict[tuple[str, str], list] = {}
            for r in rows:
                if r["env"] == env and r["status"] == "ok":
                    group = r["pipeline"] or r["backend"].split()[0]  # pipeline or host backend
                    kind = r["backend"].split()[-1] if r["pipeline"] else r["backend"]
                    series.setdefault((group, kind), []).append((r["num_envs"], r["steps_per_s"]))
            groups = sorted({g for g, _ in series})
            for (group, kind), pts in sorted(series.items()):
                pts.sort()
                style = ":" if "autoreset" in kind else "--" if "raw" in kind else "-"
                color = f"C{groups.index(group)}"
                label = kind if kind.startswith(group) else f"{group} {kind}"
                ax.plot(*zip(*pts), style, color=color, marker="o", ms=3, label=label)
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel("num_envs")
            ax.set_ylabel("env steps / s (random actions)")
            ax.set_title(f"brax:{env} vs {GYM_IDS[env]}")
            ax.legend(fontsize=6, ncol=2)
        fig.suptitle(f"2-core CPU; {command}", fontsize=7)
        fig.tight_layout()
        fig.savefig(path)


def main(argv: list[str] | None = None) -> None:
    p = ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=ROOT / "paper_figures" / "out" / "bench_brax.csv")
    p.add_argument("--envs", default="ant,halfcheetah")
    p.add_argument("--pipelines", default="spring,positional,generalized,mjx")
    p.add_argument("--num-envs", default="1,64,1024", help="brax batch sizes")
    p.add_argument("--host-envs", default="1,8,64", help="Gymnasium / EnvPool sizes ('': none)")
    p.add_argument("--chunk", type=float, default=1.0, help="seconds per timing chunk")
    p.add_argument("--chunks", type=int, default=3, help="chunks per path")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per worker process")
    p.add_argument("--replot", action="store_true", help="only redraw the PNG from --out's CSV")
    args = p.parse_args(argv)
    command = bench.command_line("paper_figures/bench_brax.py", argv)
    if args.replot:
        rows = bench.read_csv(args.out)
        made_by = rows[0].get("command", command) if rows else command
        plot(rows, args.out.with_suffix(".png"), made_by.replace(" --replot", ""))
        return
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="bench_brax_cache_") as cache_root:
        for run in bench.run(jobs(args, Path(cache_root)), repeats=1):
            print(f"  {run.name}: {run.status} in {run.wall_s:.0f} s", flush=True)
            if not run.ok:
                print(run.log[-1500:], flush=True)
            rows += rows_of(run)
    bench.write_csv(args.out, [{k: r[k] for k in FIELDS} for r in rows], command)
    plot(rows, args.out.with_suffix(".png"), command)
    for r in rows:
        print(
            f"  {r['env']:12s} {r['backend']:13s} {r['pipeline']:12s} n={r['num_envs']:5d} "
            f"{r['steps_per_s']!s:>9} steps/s  compile {r['compile_s']!s:>6} s  "
            f"ratio {r['ratio_to_raw']}  {r['status']}"
        )
    print(f"wrote {args.out} and .png; command: {command}")


if __name__ == "__main__":
    main()
