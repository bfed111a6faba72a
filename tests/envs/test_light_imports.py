"""Importing the statistics, the plots and the bandits imports no simulator: MuJoCo, brax and
dm_control (and the backend modules of envs that wrap them) come in only when an id of their
backend is first checked or made."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from timeouts import scaled

ROOT = Path(__file__).parents[2]
HEAVY = ("mujoco", "brax", "dm_control", "jax", "envpool")


def imported_after(code: str) -> set[str]:
    """The modules sys.modules holds after code runs in a fresh interpreter."""
    script = f"import json, sys\n{code}\nprint(json.dumps(sorted(sys.modules)))"
    proc = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=scaled(120),
    )
    assert proc.returncode == 0, proc.stderr
    return set(json.loads(proc.stdout.splitlines()[-1]))


def heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if m.split(".")[0] in HEAVY or m.startswith("envs.brax"))


def test_stats_plots_and_bandits_import_no_simulator():
    modules = imported_after("import controlrl.stats, controlrl.plots, envs.bandits")
    assert not heavy(modules), heavy(modules)
    assert "gymnasium.envs.mujoco" not in modules
    assert not {"envs.gym_mujoco", "envs.dmc", "envs.envpool"} & modules


def test_a_backend_is_imported_when_its_first_id_is_made():
    modules = imported_after(
        "import envs\n"
        "envs.make('bandit:bernoulli-10', 2, 0).close()\n"
        "assert 'envs.gym_mujoco' not in sys.modules\n"
        "envs.check_env_id('CartPole-v1')"
    )
    assert "envs.gym_mujoco" in modules
    assert not {"envs.dmc", "envs.envpool", "envs.brax"} & modules
    assert "gymnasium.envs.mujoco" not in modules  # a classic-control id needs no MuJoCo


def test_the_registered_ids_need_no_backend_import():
    pytest.importorskip("mujoco")
    modules = imported_after(
        "import gymnasium as gym, envs\n"
        "assert 'ReacherPartialGoal-v5' in gym.registry\n"
        "assert 'SparseMountainCar-v0' in gym.registry\n"
        "assert 'mujoco' not in sys.modules\n"
        "env = gym.make('ReacherPartialGoal-v5')\n"
        "assert env.observation_space.shape == (8,), env.observation_space\n"
        "env.close()"
    )
    assert "mujoco" in modules  # made on demand
