"""Sweep runner arms, seed lists, population tasks and per-env step budgets: planning, the
exact command of each run, refusals before anything is written, sweep.json round trips, old
configurations unchanged, and a small population sweep of algos/grpo.py end to end."""

import json
import sys
from pathlib import Path

import pytest

from controlrl import experiment
from controlrl.experiment import Arm, SweepConfig, SweepError, plan, run_sweep, task_command

BANDIT, BANDIT2 = "bandit:bernoulli-10", "bandit:gaussian-10"

# a fake algorithm with --num-seeds: records the argv it got, writes what a population writes
POP_SCRIPT = """
import argparse, json, sys
from pathlib import Path
p = argparse.ArgumentParser()
for f in ("--env-id", "--run-dir", "--resume", "--tag"):
    p.add_argument(f)
for f in ("--seed", "--num-seeds", "--total-timesteps"):
    p.add_argument(f, type=int)
p.add_argument("--no-progress", action="store_true")
a = p.parse_args()
run = Path(a.resume or a.run_dir)
run.mkdir(parents=True, exist_ok=True)
(run / "argv.json").write_text(json.dumps(sys.argv[1:]))
seeds = list(range(a.seed, a.seed + (a.num_seeds or 1)))
rows = "".join(f"{a.total_timesteps},{s}\\n" for s in seeds)
(run / "metrics.csv").write_text("step,seed\\n" + rows)
final = {"step": a.total_timesteps, "eval_return_mean": 1.0, "tag": a.tag}
if a.num_seeds is not None:
    final |= {"seeds": seeds, "eval_return_per_seed": [1.0] * len(seeds)}
(run / "final_eval.json").write_text(json.dumps(final))
"""
# the same without --num-seeds (an algorithm that trains one seed per process)
PLAIN_SCRIPT = POP_SCRIPT.replace('"--num-seeds", ', "").replace("a.num_seeds", "None")


@pytest.fixture
def fake_algos(tmp_path):
    algos = tmp_path / "algos"
    algos.mkdir()
    (algos / "pop.py").write_text(POP_SCRIPT)
    (algos / "plain.py").write_text(PLAIN_SCRIPT)
    return algos


def _argv(run_dir) -> list[str]:
    return json.loads((Path(run_dir) / "argv.json").read_text())


def test_arms_are_columns_named_by_the_arm_with_common_flags_then_their_own(tmp_path, fake_algos):
    out = tmp_path / "sweep"
    arms = [Arm("a", "pop", ("--tag", "A")), Arm("b.2", "plain", ["--tag", "B"])]
    config = SweepConfig([], ["CartPole-v1"], 2, 100, ["--tag", "common"], arms=arms)
    tasks = plan(config, out, fake_algos)
    assert [t.run_id for t in tasks] == [
        "a/CartPole-v1/seed1",
        "a/CartPole-v1/seed2",
        "b.2/CartPole-v1/seed1",
        "b.2/CartPole-v1/seed2",
    ]
    a1 = tasks[0]
    assert (a1.arm, a1.algo, a1.seed, a1.seeds) == ("a", "pop", 1, (1,))
    assert a1.run_dir == str(out.resolve() / "runs" / "a" / "CartPole-v1" / "seed1")
    assert a1.state == str(out.resolve() / "state" / "a" / "CartPole-v1" / "seed1.json")
    assert a1.script == str(fake_algos / "pop.py")
    assert tasks[3].extra == ("--tag", "common", "--tag", "B")
    assert task_command(a1) == [
        sys.executable,
        str(fake_algos / "pop.py"),
        "--env-id",
        "CartPole-v1",
        "--seed",
        "1",
        "--total-timesteps",
        "100",
        "--run-dir",
        a1.run_dir,
        "--no-progress",
        "--tag",
        "common",
        "--tag",
        "A",
    ]
    runs = run_sweep(config, out, workers=2, algos_dir=fake_algos)
    assert sorted(runs) == sorted(t.run_id for t in tasks)
    assert {v["status"] for v in runs.values()} == {"done"}
    for task in tasks:  # the arm's flag comes last, so it is the one the script keeps
        final = json.loads((Path(task.run_dir) / "final_eval.json").read_text())
        assert final["tag"] == ("A" if task.arm == "a" else "B")
        assert _argv(task.run_dir) == task_command(task)[2:]
        log = Path(task.run_dir).parent / f"seed{task.seed}.log"
        assert log.read_text().splitlines()[0] == "$ " + " ".join(task_command(task))
    assert experiment.summarize(out)["counts"]["done"] == 4


@pytest.mark.parametrize(
    "arms, algos, fragment",
    [
        ([Arm("a/b", "pop")], [], "arm name 'a/b' must be"),
        ([Arm("..", "pop")], [], "arm name '..' must be"),
        ([Arm("", "pop")], [], "arm name '' must be"),
        ([Arm("a", "pop"), Arm("a", "plain")], [], "arms name a more than once"),
        ([Arm("a", "nope")], [], "unknown algorithm 'nope'"),
        ([Arm("a", "pop")], ["pop"], "give algos or arms, not both"),
        ([], [], "at least one arm"),
    ],
)
def test_bad_arms_are_refused_before_anything_is_written(
    arms, algos, fragment, tmp_path, fake_algos
):
    out = tmp_path / "sweep"
    config = SweepConfig(algos, ["CartPole-v1"], 1, 100, arms=arms)
    with pytest.raises(SweepError, match=fragment.replace(".", r"\.")):
        run_sweep(config, out, algos_dir=fake_algos)
    assert not out.exists()


def test_seed_list_plans_its_seeds_in_order(tmp_path, fake_algos):
    config = SweepConfig(["plain"], ["CartPole-v1"], 0, 100, seed_list=[7, 3, 5])
    experiment.check_config(config, fake_algos)
    tasks = plan(config, tmp_path, fake_algos)
    assert [t.run_id for t in tasks] == [f"plain/CartPole-v1/seed{k}" for k in (3, 5, 7)]
    assert [task_command(t)[5] for t in tasks] == ["3", "5", "7"]  # --seed k
    assert all(t.seeds == (t.seed,) and not t.population for t in tasks)
    same = SweepConfig(["plain"], ["CartPole-v1"], 3, 100, seed_list=[7, 3, 5])
    experiment.check_config(same, fake_algos)  # seeds: 0 or the list's length


@pytest.mark.parametrize(
    "seeds, seed_list, fragment",
    [
        (0, [], "non-empty list"),
        (0, [-1, 1], "seeds must be integers in 0.."),
        (0, [1, True], "seeds must be integers in 0.."),
        (0, [2, 1, 2], "seed_list names 2 more than once"),
        (2, [1, 2, 3], "seeds must be 0 or the length of seed_list"),
    ],
)
def test_bad_seed_lists_are_refused(seeds, seed_list, fragment, tmp_path, fake_algos):
    config = SweepConfig(["plain"], ["CartPole-v1"], seeds, 100, seed_list=seed_list)
    with pytest.raises(SweepError, match=fragment):
        run_sweep(config, tmp_path / "sweep", algos_dir=fake_algos)
    assert not (tmp_path / "sweep").exists()


def test_population_runs_one_task_per_contiguous_block_of_seeds(tmp_path, fake_algos):
    assert experiment.seed_blocks([1, 2, 3, 7, 8, 10]) == [(1, 2, 3), (7, 8), (10,)]
    out = tmp_path / "sweep"
    config = SweepConfig(
        [], [BANDIT], 0, 100, arms=[Arm("p", "pop")], seed_list=[8, 1, 3, 2, 7], population=True
    )
    tasks = plan(config, out, fake_algos)
    assert [t.run_id for t in tasks] == [f"p/{BANDIT}/seeds1-3", f"p/{BANDIT}/seeds7-8"]
    assert [(t.seed, t.seeds, t.population) for t in tasks] == [
        (1, (1, 2, 3), True),
        (7, (7, 8), True),
    ]
    tag = experiment.env_tag(BANDIT)
    assert tasks[1].run_dir == str(out.resolve() / "runs" / "p" / tag / "seeds7-8")
    assert tasks[1].state == str(out.resolve() / "state" / "p" / tag / "seeds7-8.json")
    assert task_command(tasks[0])[4:8] == ["--seed", "1", "--num-seeds", "3"]
    assert task_command(tasks[1])[4:8] == ["--seed", "7", "--num-seeds", "2"]
    runs = run_sweep(config, out, algos_dir=fake_algos)
    assert {k: v["status"] for k, v in runs.items()} == {t.run_id: "done" for t in tasks}
    for task, seeds in zip(tasks, ([1, 2, 3], [7, 8]), strict=True):
        assert json.loads((Path(task.run_dir) / "final_eval.json").read_text())["seeds"] == seeds
    assert (out / "runs" / "p" / tag / "seeds1-3.log").exists()
    assert experiment.summarize(out)["counts"]["done"] == 2


@pytest.mark.parametrize(
    "arms, envs, fragment",
    [
        ([Arm("p", "pop"), Arm("q", "plain")], [BANDIT], "algos/plain.py has no --num-seeds"),
        ([Arm("p", "pop")], ["CartPole-v1"], "population needs bandit: envs"),
        ([Arm("p", "pop")], ["bandit:sequence-stop-2-4"], "population needs bandit: envs"),
    ],
)
def test_population_that_cannot_run_is_refused_before_anything_is_written(
    arms, envs, fragment, tmp_path, fake_algos
):
    out = tmp_path / "sweep"
    config = SweepConfig([], envs, 2, 100, arms=arms, population=True)
    with pytest.raises(SweepError, match=fragment):
        run_sweep(config, out, algos_dir=fake_algos)
    assert not out.exists()


def test_this_checkouts_algorithms_are_asked_for_num_seeds_by_their_args(tmp_path):
    assert experiment.takes_num_seeds("grpo") and experiment.takes_num_seeds("ppo")
    assert not experiment.takes_num_seeds("trpo")
    config = SweepConfig([], [BANDIT], 3, 100, arms=[Arm("t", "trpo")], population=True)
    with pytest.raises(SweepError, match="algos/trpo.py has no --num-seeds"):
        run_sweep(config, tmp_path / "sweep")
    assert not (tmp_path / "sweep").exists()


def test_steps_per_env_overrides_total_timesteps_for_the_envs_it_names(tmp_path, fake_algos):
    envs = ["CartPole-v1", "Acrobot-v1"]
    config = SweepConfig(["plain"], envs, 1, 10_240, steps_per_env={"Acrobot-v1": 20_480})
    out = tmp_path / "sweep"
    tasks = plan(config, out, fake_algos)
    assert [(t.env_id, t.total_timesteps) for t in tasks] == [
        ("CartPole-v1", 10_240),
        ("Acrobot-v1", 20_480),
    ]
    run_sweep(config, out, algos_dir=fake_algos)
    for task in tasks:
        argv = _argv(task.run_dir)
        assert argv[argv.index("--total-timesteps") + 1] == str(task.total_timesteps)
    for steps, fragment in (
        ({"Hopper-v5": 5}, "steps_per_env names 'Hopper-v5', which is not one of the envs"),
        ({"Acrobot-v1": 0}, r"steps_per_env\['Acrobot-v1'\] must be in 1..1e12"),
        ({"Acrobot-v1": 2.5}, r"steps_per_env\['Acrobot-v1'\] must be in 1..1e12"),
    ):
        bad = SweepConfig(["plain"], envs, 1, 10_240, steps_per_env=steps)
        with pytest.raises(SweepError, match=fragment):
            run_sweep(bad, tmp_path / "other", algos_dir=fake_algos)
        assert not (tmp_path / "other").exists()
    # an env added with a larger budget (the declarations' largest budget as total_timesteps):
    # the same sweep grown, its finished runs kept
    logs = sorted(out.glob("runs/*/*/*.log"))
    mtimes = [p.stat().st_mtime_ns for p in logs]
    grown = SweepConfig(["plain"], [*envs, "Pendulum-v1"], 1, 40_960,
                        steps_per_env={"CartPole-v1": 10_240, "Acrobot-v1": 20_480,
                                       "Pendulum-v1": 40_960})  # fmt: skip
    assert len(run_sweep(grown, out, algos_dir=fake_algos)) == 3
    assert [p.stat().st_mtime_ns for p in logs] == mtimes
    # another budget for an env that has runs: another sweep
    other = SweepConfig(["plain"], envs, 1, 10_240, steps_per_env={"Acrobot-v1": 40_960})
    with pytest.raises(SweepError, match="different sweep configuration"):
        run_sweep(other, out, algos_dir=fake_algos)


def test_sweep_json_round_trips_the_new_fields_and_resumes_only_the_same_sweep(
    tmp_path, fake_algos
):
    out = tmp_path / "sweep"
    arms = [Arm("p", "pop", ("--tag", "P")), Arm("q", "pop")]
    config = SweepConfig(
        [],
        [BANDIT, BANDIT2],
        0,
        100,
        ["--tag", "x"],
        arms=arms,
        seed_list=[1, 2, 3, 7, 8],
        population=True,
        steps_per_env={BANDIT2: 200},
    )
    run_sweep(config, out, algos_dir=fake_algos)
    saved = experiment.load_status(out)["config"]
    assert saved["arms"] == [
        {"name": "p", "algo": "pop", "flags": ["--tag", "P"]},
        {"name": "q", "algo": "pop", "flags": []},
    ]
    assert (saved["seed_list"], saved["population"]) == ([1, 2, 3, 7, 8], True)
    assert saved["steps_per_env"] == {BANDIT2: 200}
    assert SweepConfig.from_dict(saved) == config
    assert SweepConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config
    logs = sorted(out.glob("runs/*/*/*.log"))
    assert len(logs) == 8  # 2 arms x 2 envs x 2 blocks
    mtimes = [p.stat().st_mtime_ns for p in logs]

    def variant(base=config, **change):
        return SweepConfig(**{**base.__dict__, **change})

    run_sweep(variant(), out, algos_dir=fake_algos)  # the same sweep: nothing runs again
    assert [p.stat().st_mtime_ns for p in logs] == mtimes
    grown = variant(seed_list=[1, 2, 3, 7, 8, 11, 12])  # a new block: the same sweep grown
    runs = run_sweep(grown, out, algos_dir=fake_algos)
    assert len(runs) == 12 and f"q/{BANDIT2}/seeds11-12" in runs
    assert [p.stat().st_mtime_ns for p in logs] == mtimes
    assert len(run_sweep(variant(grown), out, algos_dir=fake_algos)) == 12  # itself: accepted
    for change in (
        {"seed_list": [1, 2, 3, 4, 7, 8, 11, 12]},  # block 1-3 became 1-4
        {"arms": [Arm("p", "pop", ("--tag", "other")), Arm("q", "pop")]},
        {"arms": [Arm("p", "pop", ("--tag", "P"))]},  # an arm dropped
        {"population": False},
        {"steps_per_env": None},
    ):
        with pytest.raises(SweepError, match="different sweep configuration"):
            run_sweep(variant(grown, **change), out, algos_dir=fake_algos)


@pytest.mark.parametrize(
    "key, value",
    [
        ("arms", [{"name": "p", "algo": "pop"}]),
        ("arms", "p"),
        ("seed_list", [1, "2"]),
        ("population", "yes"),
        ("steps_per_env", {BANDIT: 1.5}),
    ],
)
def test_sweep_json_with_a_malformed_new_field_is_one_line(key, value, tmp_path):
    out = tmp_path / "sweep"
    out.mkdir()
    config = {"algos": [], "envs": [BANDIT], "seeds": 1, "total_timesteps": 100, "extra": []}
    (out / "sweep.json").write_text(json.dumps({"config": {**config, key: value}, "runs": {}}))
    with pytest.raises(SweepError, match=f"'config.{key}' has the wrong type or form"):
        experiment.load_status(out)


def test_an_old_style_config_is_what_it_was(tmp_path, fake_algos):
    config = SweepConfig(["pop", "plain"], ["CartPole-v1"], 2, 100, ["--tag", "x"])
    old = {
        "algos": ["pop", "plain"],
        "envs": ["CartPole-v1"],
        "seeds": 2,
        "total_timesteps": 100,
        "extra": ["--tag", "x"],
    }
    assert list(config.to_dict().items()) == list(old.items())  # keys and their order
    out = tmp_path / "sweep"
    tasks = plan(config, out, fake_algos)
    assert [t.run_id for t in tasks] == [
        f"{a}/CartPole-v1/seed{k}" for a in ("pop", "plain") for k in (1, 2)
    ]
    t = tasks[2]
    assert (t.arm, t.algo, t.seeds, t.population) == ("", "plain", (1,), False)
    assert t.run_dir == str(out.resolve() / "runs" / "plain" / "CartPole-v1" / "seed1")
    assert t.state == str(out.resolve() / "state" / "plain" / "CartPole-v1" / "seed1.json")
    assert task_command(t) == [sys.executable, t.script, "--env-id", "CartPole-v1", "--seed", "1",
                               "--total-timesteps", "100", "--run-dir", t.run_dir, "--no-progress",
                               "--tag", "x"]  # fmt: skip
    assert task_command(t, resume=True) == [sys.executable, t.script, "--resume", t.run_dir]
    direct = experiment.Task("ok", "CartPole-v1", 5, 100, "d", "s")  # as older callers build it
    assert (direct.seeds, direct.arm, direct.run_id) == ((5,), "", "ok/CartPole-v1/seed5")
    # a sweep.json an older runner wrote (no new keys) is this sweep, resumed as before
    run_sweep(SweepConfig(["pop", "plain"], ["CartPole-v1"], 1, 100, ["--tag", "x"]), out,
              algos_dir=fake_algos)  # fmt: skip
    data = json.loads((out / "sweep.json").read_text())
    assert list(data["config"]) == list(old)
    assert SweepConfig.from_dict(data["config"]) == SweepConfig(
        ["pop", "plain"], ["CartPole-v1"], 1, 100, ["--tag", "x"]
    )
    runs = run_sweep(config, out, algos_dir=fake_algos)  # grown by a seed, as before
    assert sorted(runs) == sorted(t.run_id for t in tasks)
    assert json.loads((out / "sweep.json").read_text())["config"] == old


def test_two_grpo_arms_as_populations_end_to_end(tmp_path):
    out = tmp_path / "sweep"
    common = ["--hidden-sizes", "16", "--eval-episodes", "2", "--eval-every", "0"]
    common += ["--num-envs", "64", "--no-tensorboard"]
    arms = [
        Arm("grpo", "grpo"),
        Arm("rgra", "grpo", ("--policy-loss", "reinforce", "--update-epochs", "1")),
    ]
    config = SweepConfig([], [BANDIT], 3, 256, common, arms=arms, population=True)
    runs = run_sweep(config, out, workers=2)
    assert {k: v["status"] for k, v in runs.items()} == {
        f"grpo/{BANDIT}/seeds1-3": "done",
        f"rgra/{BANDIT}/seeds1-3": "done",
    }, runs
    for task in plan(config, out):
        run_dir = Path(task.run_dir)
        final = json.loads((run_dir / "final_eval.json").read_text())
        assert final["seeds"] == [1, 2, 3] and len(final["eval_return_per_seed"]) == 3
        saved = json.loads((run_dir / "config.json").read_text())["args"]
        assert (saved["seed"], saved["num_seeds"], saved["total_timesteps"]) == (1, 3, 256)
        assert saved["policy_loss"] == ("reinforce" if task.arm == "rgra" else "clip")
        rows = (run_dir / "metrics.csv").read_text().splitlines()
        assert rows[0].split(",")[:2] == ["step", "seed"]
        assert {r.split(",")[1] for r in rows[1:]} == {"1", "2", "3"}
