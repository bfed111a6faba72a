"""paper_figures/brax_ppo_race.py at toy size: all trainers run and leave sane rows and curves."""

import csv
import math
import subprocess
import sys
from pathlib import Path

import pytest
from timeouts import scaled

SCRIPT = Path(__file__).resolve().parents[2] / "paper_figures" / "brax_ppo_race.py"


@pytest.mark.slow  # compiles brax's trainer (about a minute on 2 cores)
def test_brax_ppo_race_toy(tmp_path):
    pytest.importorskip("brax")
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--toy", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=scaled(900),
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    with (tmp_path / "brax_ppo_race.csv").open() as f:
        rows = {r["trainer"]: r for r in csv.DictReader(f)}
    assert set(rows) == {"brax", "ours", "ours_jax"}
    for row in rows.values():
        assert row["seed"] == "1" and row["env"] == "inverted_pendulum"
        assert row["status"] == "ok" and row["command"].endswith(
            "brax_ppo_race.py --toy --out " + str(tmp_path)
        )
        assert int(row["total_steps"]) == 2048  # 2 evaluation intervals of 4 rollouts of 16x16
        total, startup = float(row["total_wall_s"]), float(row["startup_s"])
        assert 0 < startup < total
        assert float(row["train_compile_s"]) >= 0 and float(row["train_sps"]) > 0
        assert 0 < float(row["final_return"]) <= 1000
        if row["step_at_target"]:  # a toy run rarely balances, but may
            assert float(row["train_to_target_s"]) <= float(row["wall_to_target_s"]) <= total
        else:
            assert math.isnan(float(row["wall_to_target_s"]))
    with (tmp_path / "brax_ppo_race_curves.csv").open() as f:
        curves = list(csv.DictReader(f))
    expected = {"brax": [0, 1024, 2048], "ours": [1024, 2048], "ours_jax": [1024, 2048]}
    for trainer, evals in expected.items():
        points = [r for r in curves if r["trainer"] == trainer]
        assert [int(r["step"]) for r in points] == evals
        walls = [float(r["wall_s"]) for r in points]
        trains = [float(r["train_s"]) for r in points]
        assert walls == sorted(walls) and trains == sorted(trains)
        assert all(0 <= t <= w for t, w in zip(trains, walls))
    assert (tmp_path / "brax_ppo_race.png").stat().st_size > 0
    assert "command: python paper_figures/brax_ppo_race.py --toy" in proc.stdout


def _race():
    import importlib.util

    spec = importlib.util.spec_from_file_location("brax_ppo_race", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_trainers_flag_keeps_brax_and_refuses_unknown_names(capsys):
    race = _race()
    assert race.parse_args(["--trainers", "ours_jax"]).trainers == ("brax", "ours_jax")
    assert race.parse_args([]).trainers == ("brax", "ours", "ours_jax")
    with pytest.raises(SystemExit) as exc:
        race.parse_args(["--trainers", "ours_jax,sb3"])
    assert exc.value.code == 2 and "--trainers must name only" in capsys.readouterr().err


def test_training_compute_ratio_is_brax_steps_per_second_over_ours():
    """train_cost_vs_brax: ours' training seconds per env step over brax's, per seed (paired)."""
    from controlrl import bench

    race = _race()
    args = race.parse_args(["--trainers", "ours_jax", "--target", "900"])
    run = bench.Run(bench.Contender("x", "x"), 0, 0, "ok", 0.0, 50.0)

    def points(train_s, returns):  # evaluations every 1000 steps
        return [
            {"step": 1000 * (i + 1), "wall_s": 10.0 + t, "train_s": t, "return": r}
            for i, (t, r) in enumerate(zip(train_s, returns))
        ]

    res = {"startup_s": 10.0, "train_compile_s": 0.0, "run": run}
    results = {
        ("brax", 1): res | {"points": points([1.0, 2.0, 3.0], [100, 950, 990])},
        ("ours_jax", 1): res | {"points": points([0.5, 1.0, 1.5], [100, 200, 920])},
    }
    rows = {r["trainer"]: r for r in race.summarise(args, results)}
    assert rows["brax"]["train_sps"] == pytest.approx(1000.0)
    assert rows["ours_jax"]["train_sps"] == pytest.approx(2000.0)
    assert rows["ours_jax"]["train_cost_vs_brax"] == pytest.approx(0.5)  # half the compute
    assert rows["brax"]["train_cost_vs_brax"] == pytest.approx(1.0)
    # time to target: ours needs more steps (3000 vs 2000) but less compute per step
    assert rows["ours_jax"]["train_ratio_vs_brax"] == pytest.approx(1.5 / 2.0)


def test_brax_network_and_scaling_settings_reach_both_trainers(tmp_path, capsys):
    """Brax-style settings (ant): the brax worker gets the sizes, swish, reward scaling and no
    grad clip; ours_jax gets the same as flags; the torch trainer, lacking them, is refused."""
    race = _race()
    argv = ["--trainers", "ours_jax", "--env", "ant", "--activation", "swish"]
    argv += ["--hidden-sizes", "32,32,32,32", "--critic-hidden-sizes", "256,256,256,256,256"]
    argv += ["--reward-scale", "10", "--max-grad-norm", "0", "--adam-eps", "1e-8"]
    args = race.parse_args([*argv, "--work-dir", str(tmp_path)])
    (brax, ours), _ = race.contenders(args, seed=1)
    network = brax.config["network"]  # brax_worker's, and ppo.train's keyword arguments
    assert network["hidden_sizes"] == [32] * 4 and network["critic_hidden_sizes"] == [256] * 5
    assert network["activation"] == "swish" and brax.config["reward_scaling"] == 10.0
    assert brax.config["max_grad_norm"] is None  # brax's "no clip"
    assert brax.config["batch_size"] * brax.config["num_minibatches"] == args.num_envs
    cmd = " ".join(ours.worker)
    assert "--hidden-sizes 32 32 32 32 --critic-hidden-sizes 256 256 256 256 256" in cmd
    assert "--activation=swish" in cmd and "--reward-scale=10.0" in cmd
    assert "--no-clip-grad" in cmd and "--max-grad-norm" not in cmd and "--adam-eps=1e-08" in cmd
    default = " ".join(
        race.contenders(race.parse_args(["--work-dir", str(tmp_path)]), 1)[0][2].worker
    )
    assert "--max-grad-norm=0.5" in default and "--critic-hidden-sizes" not in default
    for bad in (["--activation", "swish"], ["--max-grad-norm", "0"], ["--hidden-sizes", "64,x"]):
        with pytest.raises(SystemExit) as exc:
            race.parse_args(bad)
        assert exc.value.code == 2
    assert "need --trainers without ours" in capsys.readouterr().err
