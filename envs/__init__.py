"""make(env_id, num_envs, seed) -> gymnasium VectorEnv, whatever the backend.

Plain ids ("Hopper-v5", "CartPole-v1", and the two registered here: SparseMountainCar-v0 and
ReacherPartialGoal-v5) use Gymnasium (envs/gym_mujoco.py); "brax:<name>"
(envs/brax.py), "dmc:<domain>-<task>" (envs/dmc.py), "envpool:<id>" (envs/envpool.py) and
"bandit:<name>" (envs/bandits.py: K-armed, contextual, continuous-action and verifiable-sequence
bandits, numpy only) use their backends. Each backend module (and its heavy library: MuJoCo,
brax, dm_control, envpool) is imported only when one of its ids is first checked or made:
importing envs, or envs.bandits, imports none of them.
"""

from __future__ import annotations

import importlib
from types import ModuleType

import gymnasium as gym

from envs import partial_goal_reacher, sparse_mountain_car
from envs.errors import UnknownEnvError

__all__ = [
    "UnknownEnvError",
    "check_env_id",
    "check_supported",
    "eval_num_envs",
    "make",
    "missing_render_package",
    "renders",
    "spaces",
    "split_id",
]

# backend prefix -> its module under envs/, imported by backend_module() when first used
BACKENDS = {
    "gym": "gym_mujoco",
    "brax": "brax",
    "dmc": "dmc",
    "envpool": "envpool",
    "bandit": "bandits",
}

# SparseMountainCar-v0 and ReacherPartialGoal-v5 are plain Gymnasium ids from here on (their
# entry points are strings: registering them imports neither MuJoCo nor the envs)
sparse_mountain_car.register()
partial_goal_reacher.register()


def backend_module(prefix: str) -> ModuleType:
    """The backend module of an id prefix ('gym', 'brax', ...), imported on first use."""
    return importlib.import_module(f"envs.{BACKENDS[prefix]}")


def __getattr__(name: str) -> ModuleType:
    """envs.brax, envs.gym_mujoco, ...: the backend modules, imported when first named."""
    if name in BACKENDS.values():
        return importlib.import_module(f"envs.{name}")
    raise AttributeError(f"module 'envs' has no attribute {name!r}")


def split_id(env_id: str) -> tuple[str, str]:
    """('gym', 'Hopper-v5') for plain ids, (prefix, name) for 'prefix:name'."""
    if ":" in env_id:
        prefix, name = env_id.split(":", 1)
        return prefix, name
    return "gym", env_id


def check_env_id(env_id: str) -> None:
    """Raise UnknownEnvError naming the backend and the closest known ids; starts nothing."""
    backend, name = split_id(env_id)
    if backend not in BACKENDS:
        known = ", ".join(sorted(BACKENDS))
        raise UnknownEnvError(f"unknown env backend '{backend}' in '{env_id}' (available: {known})")
    backend_module(backend).check_id(name)


def check_supported(env_id: str) -> None:
    """Raise UnknownEnvError if the algorithm scripts cannot serve the known id env_id (a
    package not installed, observations that are not a flat Box); the other backends' ids are
    all served."""
    backend, name = split_id(env_id)
    if backend == "gym":
        backend_module("gym").check_supported(name)


def missing_render_package(env_id: str) -> str | None:
    """The package recording videos of env_id needs and this install lacks, or None."""
    backend, name = split_id(env_id)
    if backend != "gym":
        return None
    return backend_module("gym").missing_render_package(name)


def make(
    env_id: str,
    num_envs: int,
    seed: int,
    vectorization: str = "sync",
    brax_pipeline: str | None = None,
    **kwargs,
) -> gym.vector.VectorEnv:
    """A VectorEnv with same-step autoreset and infos['final_obs'] for ended episodes.

    brax_pipeline only applies to brax: ids (None: that backend's default)."""
    check_env_id(env_id)
    backend, name = split_id(env_id)
    if backend == "brax":
        kwargs["pipeline"] = brax_pipeline
    envs = backend_module(backend).make(name, num_envs, vectorization=vectorization, **kwargs)
    envs.action_space.seed(seed)
    return envs


def spaces(env_id: str, brax_pipeline: str | None = None) -> tuple[gym.Space, gym.Space]:
    """(observation space, action space) of one env of env_id: what a script checks before its
    run directory is made. Builds one env and closes it; compiles and steps nothing."""
    vec = make(env_id, 1, 0, brax_pipeline=brax_pipeline)
    try:
        return vec.single_observation_space, vec.single_action_space
    finally:
        vec.close()


def eval_num_envs(env_id: str, episodes: int) -> int:
    """Envs to run evaluation episodes on: brax batches them (one compiled batch, each env's
    first episode counts); the other backends run them one after another in one env."""
    return episodes if split_id(env_id)[0] == "brax" else 1


def renders(env_id: str) -> bool:
    """Whether the backend can record evaluation videos."""
    return split_id(env_id)[0] in ("gym", "dmc")
