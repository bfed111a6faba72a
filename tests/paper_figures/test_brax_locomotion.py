"""paper_figures/brax_locomotion.py: Brax's published settings scaled and mapped onto
algos/ppo_brax.py's flags, the summary, the non-inferiority verdict, the resumable sweep and the
runs it keeps, and (slow) the whole script at toy size."""

import csv
import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from timeouts import scaled

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "paper_figures" / "brax_locomotion.py"
spec = importlib.util.spec_from_file_location("brax_locomotion", SCRIPT)
fig = importlib.util.module_from_spec(spec)
spec.loader.exec_module(fig)


@pytest.mark.parametrize(
    "env, envs, batch, steps, epochs, gamma, ent, scale",
    [("ant", 256, 128, 80, 4, 0.97, 1e-2, 10.0), ("halfcheetah", 128, 32, 160, 8, 0.95, 1e-3, 1.0)],
)
def test_scaled_settings_map_one_to_one_onto_ours(
    env, envs, batch, steps, epochs, gamma, ent, scale
):
    """Scale 16 divides num_envs and batch_size only; ours' rollout is one brax training step
    (num_envs x num_steps = batch_size x num_minibatches x unroll_length = 20,480 env steps) and
    every other flag parses into ppo_brax.py's Args with brax's value."""
    from algos.ppo_brax import Args
    from controlrl.cli import parse

    s = fig.settings(env, 16)
    assert (s["num_envs"], s["batch_size"], s["num_minibatches"]) == (envs, batch, 32)
    assert fig.rollout_steps(s) == steps
    args_ns = fig.parse_args(["--total-timesteps", "100000", "--num-evals", "3"])
    a = parse(Args, fig.our_flags(env, s, "spring", 7, args_ns))
    assert a.num_envs * a.num_steps == 20_480 == s["batch_size"] * 32 * s["unroll_length"]
    assert (a.num_envs, a.num_steps, a.num_minibatches) == (envs, steps, 32)
    assert (a.update_epochs, a.gamma, a.gae_lambda) == (epochs, gamma, 0.95)
    assert (a.clip_coef, a.ent_coef, a.vf_coef) == (0.3, ent, 0.5)
    assert a.reward_scale == scale and not a.norm_reward and a.norm_obs and a.norm_adv
    assert not a.anneal_lr and not a.clip_vloss and a.learning_rate == 3e-4
    assert a.hidden_sizes == (32,) * 4 and a.critic_hidden_sizes == (256,) * 5
    assert a.activation == "swish" and not a.clip_grad and a.adam_eps == 1e-8
    assert a.policy == "tanh_normal"  # Brax's make_ppo_networks distribution
    gaussian = parse(Args, fig.our_flags(env, s, "spring", 7, args_ns, "gaussian"))
    assert gaussian.policy == "gaussian" and gaussian.num_steps == steps
    assert (a.env_id, a.brax_pipeline, a.seed) == (f"brax:{env}", "spring", 7)
    assert a.episode_length == 1000
    # 100k steps in 2 epochs of ceil(100000 / (2 x 20480)) = 3 training steps, as brax runs them
    assert fig.schedule(s, 100_000, 3) == (61_440, 122_880)
    assert (a.eval_every, a.total_timesteps) == (61_440, 122_880)


def test_bad_flags_exit_2(capsys):
    """A scale that does not divide the published sizes, an env without published settings, an
    unknown trainer."""
    for argv in (
        ["--scale", "3"],
        ["--envs", "humanoid"],
        ["--num-evals", "1"],
        ["--trainers", "x"],
    ):
        with pytest.raises(SystemExit) as exc:
            fig.parse_args(argv)
        assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "--num-evals" in err and "--trainers: unknown ['x']" in err
    assert "--envs: unknown ['humanoid'], expected some of ['ant', 'halfcheetah']" in err


def _res(returns, sps=1000.0, status="ok"):
    pts = [
        {"step": 100 * (i + 1), "wall_s": 2.0 + i, "train_s": 100 * (i + 1) / sps, "return": r}
        for i, r in enumerate(returns)
    ]
    return {"points": pts, "startup_s": 1.5, "train_compile_s": 0.0, "status": status} | {
        "wall_s": 9.0
    }


def test_summary_rows():
    """Return at the budget is the last evaluation, steps/s its step over its train seconds,
    the time to the stated return the first evaluation at or above it."""
    results = {
        ("ant", "brax", 1): _res([10, 500, 900], sps=500.0),
        ("ant", "brax", 2): _res([10, 700, 1100]),
        ("ant", "ours", 1): _res([10, 1200, 950]),
        ("ant", "ours", 2): _res([10, 300, 880]),
    }
    rows = fig.summarise(results, {"ant": 1000.0})
    first = rows[0]
    assert (first["return_at_budget"], first["best_return"], first["steps"]) == (900, 900, 300)
    assert first["train_sps"] == pytest.approx(500.0)
    assert first["step_to_target"] == "" and math.isnan(first["wall_to_target_s"])
    ours1 = rows[2]
    assert (ours1["step_to_target"], ours1["wall_to_target_s"], ours1["train_to_target_s"]) == (
        200,
        3.0,
        0.2,
    )


def test_table_reads_the_named_csv_and_refuses_an_unfinished_run(tmp_path):
    """A declaration's table: the runs of the CSV its flags name, each run's arm its trainer."""
    rows = [{"env": "ant", "trainer": t, "seed": 1, "return_at_budget": 900.0, "status": "ok"}
            for t in ("brax", "ours")]  # fmt: skip
    fig.bench.write_csv(tmp_path / "b2m.csv", rows, "python make")
    got = fig.table(SimpleNamespace(flags=["--seeds", "1", "--name", "b2m"]), tmp_path)
    assert [(r["arm"], r["return_at_budget"]) for r in got] == [("brax", 900.0), ("ours", 900.0)]
    rows[1]["status"] = "timeout after 1 s"
    fig.bench.write_csv(tmp_path / "b2m.csv", rows, "python make")
    with pytest.raises(ValueError, match="ant ours seed 1: timeout"):
        fig.table(SimpleNamespace(flags=["--name", "b2m"]), tmp_path)


def test_merged_keeps_the_committed_runs_a_call_did_not_make(tmp_path):
    """A call that runs seeds 4-5 keeps the committed seeds 1-3 with their own command and
    replaces a committed run it made again."""
    path = tmp_path / "brax_locomotion.csv"
    old = [{"env": "h", "trainer": "brax", "seed": s, "return_at_budget": 1.0} for s in (1, 2, 3)]
    fig.bench.write_csv(path, old, "python paper_figures/brax_locomotion.py")
    new = [{"env": "h", "trainer": "brax", "seed": s, "return_at_budget": 2.0} for s in (3, 4)]
    rows = fig.merged(path, new)
    assert [(r["seed"], r["return_at_budget"]) for r in rows] == [(1, 1.0), (2, 1.0), (3, 2.0),
                                                                  (4, 2.0)]  # fmt: skip
    assert rows[0]["command"] == "python paper_figures/brax_locomotion.py"
    assert fig.merged(tmp_path / "none.csv", new) == new


def test_figure_starts_at_zero_with_the_standing_reference(tmp_path):
    """Returns that stay a few percent around the standing return (ant) are drawn on an axis
    from 0 with the standing return as a dashed, labelled line on both panels; an env whose
    curves dip below 0 keeps its lower limit."""
    args = fig.parse_args(["--envs", "ant,halfcheetah", "--seeds", "1,2", "--out", str(tmp_path)])
    results = {}
    for t in fig.TRAINERS:
        for s in (1, 2):
            results[("ant", t, s)] = _res([990 + s, 1020 - s, 1040])
            results[("halfcheetah", t, s)] = _res([-50.0 * s, 300, 900])
    f = fig.figure(args, results, {"ant": 1000.5, "halfcheetah": -1.0})
    (ant_steps, ant_wall), (hc_steps, _) = f.axes[:2], f.axes[2:4]
    for ax in (ant_steps, ant_wall):
        assert ax.get_ylim()[0] == 0.0 and ax.get_ylim()[1] > 1040
        ref = [line for line in ax.get_lines() if line.get_linestyle() == "--"]
        assert len(ref) == 1 and list(ref[0].get_ydata()) == [1000.5, 1000.5]
    assert "standing still, zero action (1000)" in [
        t.get_text() for t in ant_steps.get_legend().get_texts()
    ]
    assert hc_steps.get_ylim()[0] < -100
    assert ant_steps.get_ylabel() == "evaluation return, ant (spring)"
    # a figure grown on one env only: the other env's runs lack the new seed, and the mean says
    # how many seeds it averages
    args = fig.parse_args(["--envs", "ant,halfcheetah", "--seeds", "1,2,3", "--out", str(tmp_path)])
    for t in fig.TRAINERS:
        results[("halfcheetah", t, 3)] = _res([0.0, 300, 900])
    f = fig.figure(args, results)
    labels = [t.get_text() for t in f.axes[0].get_legend().get_texts()]
    assert "brax.training PPO (tanh-normal) (mean of 2)" in labels
    assert "brax.training PPO (tanh-normal) (mean of 3)" in [
        t.get_text() for t in f.axes[2].get_legend().get_texts()
    ]


def test_plot_only_redraws_from_the_csvs(tmp_path, monkeypatch):
    """--plot-only reads the curves CSV back into the sweep's results and the standing returns
    from brax_locomotion_standing.csv (its mean per env); an env the CSV lacks is computed and
    appended, the rows already there keeping their command."""
    results = {("ant", "brax", 1): _res([990, 1010]), ("ant", "ours", 1): _res([995, 1030])}
    curves = [{"env": e, "trainer": t, "seed": s, **p} for (e, t, s), r in results.items()
              for p in r["points"]]  # fmt: skip
    fig.bench.write_csv(tmp_path / "brax_locomotion_curves.csv", curves, "python make")
    assert fig.load_results(tmp_path / "brax_locomotion_curves.csv") == {
        k: {"points": r["points"]} for k, r in results.items()
    }
    rows = [{"env": "ant", "pipeline": "spring", "episode": k, "return": r}
            for k, r in enumerate([998.0, 1004.0])]  # fmt: skip
    fig.bench.write_csv(tmp_path / "brax_locomotion_standing.csv", rows, "python earlier")
    computed = []
    monkeypatch.setattr(
        fig, "standing_returns", lambda env, pipe, n: computed.append(env) or [float(n), 0.0]
    )
    drawn = {}
    monkeypatch.setattr(fig, "plot", lambda a, r, path, st: drawn.update(st=st, r=r))
    fig.main(["--plot-only", "--out", str(tmp_path)])
    assert computed == [] and drawn["st"] == {"ant": 1001.0}
    assert drawn["r"] == fig.load_results(tmp_path / "brax_locomotion_curves.csv")
    args = fig.parse_args(["--envs", "ant,halfcheetah", "--out", str(tmp_path)])
    assert fig.standing(args, "python now") == {"ant": 1001.0, "halfcheetah": 8.0}
    assert computed == ["halfcheetah"]
    again = fig.bench.read_csv(tmp_path / "brax_locomotion_standing.csv")
    assert [r["command"] for r in again] == ["python earlier"] * 2 + ["python now"] * 2


def test_name_sets_every_output_stem_and_the_work_dir(tmp_path, monkeypatch):
    """--name: another budget writes its own CSVs and PNG and runs in its own work dir, so the
    committed brax_locomotion*.csv are never merged with it."""
    results = {("halfcheetah", "brax", 1): _res([10, 900])}
    curves = [{"env": e, "trainer": t, "seed": s, **p} for (e, t, s), r in results.items()
              for p in r["points"]]  # fmt: skip
    fig.bench.write_csv(tmp_path / "long_curves.csv", curves, "python make")
    rows = [{"env": "halfcheetah", "pipeline": "spring", "episode": 0, "return": 5.0}]
    fig.bench.write_csv(tmp_path / "long_standing.csv", rows, "python earlier")
    drawn = {}
    monkeypatch.setattr(fig, "plot", lambda a, r, path, st: drawn.update(path=path, st=st))
    fig.main(["--plot-only", "--envs", "halfcheetah", "--name", "long", "--out", str(tmp_path)])
    assert drawn == {"path": tmp_path / "long.png", "st": {"halfcheetah": 5.0}}
    args = fig.parse_args(["--name", "long", "--out", str(tmp_path)])
    assert args.work_dir == (fig.ROOT / "runs" / "long").resolve()
    assert fig.parse_args(["--out", str(tmp_path)]).work_dir.name == "brax_locomotion"


def test_a_call_for_one_trainer_draws_the_kept_runs_of_the_others(tmp_path, monkeypatch):
    """--trainers ours_gaussian beside a committed brax/ours sweep: the CSVs keep the other
    trainers' runs and the figure draws all three, not only the trainer this call ran."""
    kept = {("ant", "brax", 1): _res([990, 2100]), ("ant", "ours", 1): _res([995, 2030])}
    curves = [{"env": e, "trainer": t, "seed": s, **p} for (e, t, s), r in kept.items()
              for p in r["points"]]  # fmt: skip
    fig.bench.write_csv(tmp_path / "long_curves.csv", curves, "python earlier")
    fig.bench.write_csv(tmp_path / "long.csv", fig.summarise(kept, fig.TARGETS), "python earlier")
    rows = [{"env": "ant", "pipeline": "spring", "episode": 0, "return": 1000.0}]
    fig.bench.write_csv(tmp_path / "long_standing.csv", rows, "python earlier")
    monkeypatch.setattr(fig, "sweep", lambda a: {("ant", "ours_gaussian", 1): _res([980, 700])})
    drawn = {}
    monkeypatch.setattr(fig, "plot", lambda a, r, path, st: drawn.update(a=a, r=r))
    argv = ["--envs", "ant", "--trainers", "ours_gaussian", "--seeds", "1", "--name", "long"]
    fig.main([*argv, "--out", str(tmp_path)])
    assert drawn["a"].trainer_names == ["brax", "ours", "ours_gaussian"]
    assert {k[1] for k in drawn["r"]} == {"brax", "ours", "ours_gaussian"}
    assert {r["trainer"] for r in fig.bench.read_csv(tmp_path / "long.csv")} == {
        "brax",
        "ours",
        "ours_gaussian",
    }


@pytest.mark.slow  # compiles one brax episode scan (~20 s)
def test_standing_ant_earns_its_healthy_reward():
    """The zero-action ant stays healthy for the whole episode: healthy reward 1 per step, no
    control cost, ~0 forward reward, so ~1000 over 1000 steps."""
    pytest.importorskip("brax")
    returns = fig.standing_returns("ant", "spring", 4)
    assert len(returns) == 4 and all(990 < r < 1010 for r in returns)
    assert len(set(returns)) == 4  # each episode from its own reset key


def test_sweep_skips_finished_runs(tmp_path, monkeypatch):
    """A run with result.json is loaded, not run again; the others run (in rotated order per
    seed and env, ours with --policy tanh_normal, ours_gaussian with gaussian) and leave their
    result.json only when they succeed."""
    args = fig.parse_args(["--envs", "ant", "--seeds", "1,2", "--work-dir", str(tmp_path)])
    done = tmp_path / "ant" / "brax_seed1"
    done.mkdir(parents=True)
    (done / "result.json").write_text(json.dumps(_res([1.0, 2.0])))
    launched, policies = [], {}

    def fake_run_one(contender, repeat, slot):
        launched.append((contender.name, repeat))
        if contender.name != "brax":
            policies[contender.name] = [f for f in contender.worker if f.startswith("--policy")]
        status = "exit 1" if (contender.name, repeat) == ("ours", 2) else "ok"
        return fig.bench.Run(contender, repeat, slot, status, 0.0, 1.0)

    monkeypatch.setattr(fig.bench, "run_one", fake_run_one)
    monkeypatch.setattr(fig, "parse_brax", lambda run, log: _res([3.0]))
    monkeypatch.setattr(fig, "parse_ours", lambda run, d, stamps, jax_path: _res([4.0]))
    results = fig.sweep(args)
    # seed 1: brax (done), ours, ours_gaussian; seed 2 starts with ours
    assert launched == [
        ("ours", 1),
        ("ours_gaussian", 1),
        ("ours", 2),
        ("ours_gaussian", 2),
        ("brax", 2),
    ]
    assert policies == {"ours": ["--policy=tanh_normal"], "ours_gaussian": ["--policy=gaussian"]}
    assert results[("ant", "brax", 1)]["points"][-1]["return"] == 2.0
    assert results[("ant", "brax", 2)]["points"][-1]["return"] == 3.0
    assert (tmp_path / "ant" / "ours_seed1" / "result.json").exists()
    assert not (tmp_path / "ant" / "ours_seed2" / "result.json").exists()
    launched.clear()
    fig.sweep(args)
    assert launched == [("ours", 2)]


@pytest.mark.slow  # compiles brax's trainer and ours on two envs (minutes on 2 cores)
def test_brax_locomotion_toy(tmp_path):
    pytest.importorskip("brax")
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--toy", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=scaled(1800),
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    with (tmp_path / "brax_locomotion.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert {(r["env"], r["trainer"]) for r in rows} == {
        (e, t) for e in ("ant", "halfcheetah") for t in ("brax", "ours", "ours_gaussian")
    }
    for r in rows:
        assert r["status"] == "ok" and r["seed"] == "1"
        assert int(r["steps"]) == 2560  # 2 epochs of 2 training steps of 640 env steps
        assert float(r["train_sps"]) > 0 and 0 < float(r["train_s"]) < float(r["wall_s"])
        assert math.isfinite(float(r["return_at_budget"]))
    with (tmp_path / "brax_locomotion_curves.csv").open() as f:
        curves = list(csv.DictReader(f))
    for e in ("ant", "halfcheetah"):
        brax = [int(c["step"]) for c in curves if c["env"] == e and c["trainer"] == "brax"]
        for t in ("ours", "ours_gaussian"):
            ours = [int(c["step"]) for c in curves if c["env"] == e and c["trainer"] == t]
            assert ours == [1280, 2560]
        assert brax == [0, 1280, 2560]
    assert (tmp_path / "brax_locomotion.png").stat().st_size > 0
    assert "command: python paper_figures/brax_locomotion.py --toy" in proc.stdout
    # a second call runs nothing: every run is loaded from its result.json
    again = subprocess.run(
        [sys.executable, str(SCRIPT), "--toy", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=scaled(300),
    )
    assert again.returncode == 0 and again.stdout.count(", final return") == 6
