"""Population sweeps on control ids: an algorithm batches seeds on the backends its Args list
(ppo.py: bandit, Gymnasium, envpool), every other pairing is refused in one line before anything
is written; a MuJoCo population sweep of ppo.py runs end to end."""

import json
from pathlib import Path

import pytest

from controlrl import experiment
from controlrl.experiment import Arm, SweepConfig, SweepError, plan, run_sweep


def test_population_backends_are_read_from_each_algorithms_args():
    assert experiment.population_backends("ppo") == ("bandit", "gym", "envpool")
    assert experiment.population_backends("spo") == ("bandit", "gym", "envpool")
    assert experiment.population_backends("grpo") == ("bandit",)


@pytest.mark.parametrize(
    "algo, env_id, fragment",
    [
        ("grpo", "Hopper-v5", "population needs bandit: envs for algos/grpo.py (arms a), got"),
        ("ppo", "dmc:cheetah-run", "needs bandit: or Gymnasium or envpool: envs for algos/ppo.py"),
        ("trpo", "Hopper-v5", "algos/trpo.py has no --num-seeds"),
    ],
)
def test_a_population_its_algorithm_cannot_batch_is_refused(algo, env_id, fragment, tmp_path):
    config = SweepConfig([], [env_id], 2, 128, arms=[Arm("a", algo)], population=True)
    with pytest.raises(SweepError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        run_sweep(config, tmp_path / "sweep")
    assert not (tmp_path / "sweep").exists()


def test_a_mujoco_population_of_ppo_runs_end_to_end(tmp_path):
    out = tmp_path / "sweep"
    common = ["--hidden-sizes", "8", "--num-steps", "32", "--num-minibatches", "2"]
    common += ["--update-epochs", "1", "--eval-episodes", "1", "--eval-every", "0"]
    common += ["--no-tensorboard"]
    config = SweepConfig([], ["Hopper-v5"], 2, 64, common, arms=[Arm("p", "ppo")], population=True)
    runs = run_sweep(config, out, workers=1)
    assert {k: v["status"] for k, v in runs.items()} == {"p/Hopper-v5/seeds1-2": "done"}, runs
    (task,) = plan(config, out)
    final = json.loads((Path(task.run_dir) / "final_eval.json").read_text())
    assert final["seeds"] == [1, 2] and len(final["eval_return_per_seed"]) == 2
