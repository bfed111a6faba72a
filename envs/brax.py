"""Brax backend: ids 'brax:<name>' as a Gymnasium VectorEnv over one jitted, vmapped batch.

The per-step call is brax's step under jax.vmap and nothing else (so the adapter runs at the
raw jitted rate: paper_figures/bench_brax.py). The step counter for the time limit lives on the
host: reaching it is truncation, flagged as such; brax's done is termination. After a step in
which some episode ended, a second jitted function draws a fresh random initial state for each
ended env (brax's own AutoResetWrapper restarts every env from its first initial state) and the
true final observations go to info['final_obs']. reset/step/autoreset are compiled once per
(env, pipeline, num_envs) in a process; the compile is reported (compile_seconds, and
'compiling...' on the training progress bar), and JAX's persistent cache under
~/.cache/controlrl/jax (CONTROLRL_JAX_CACHE) lets later processes skip most of it.

Rewards, flags and, with copy=False (what training asks for), observations reach numpy without a
copy (np.asarray of a CPU jax array is a read-only view of its buffer; nothing is donated, so the
buffer stays valid); actions go to the device in one transfer per step.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import gymnasium as gym
import numpy as np

from envs.errors import check_known

PIPELINES = ("spring", "positional", "generalized", "mjx")
# paper_figures/bench_brax.py: 'spring' is fastest on CPU, but a PD controller cannot balance
# brax:inverted_pendulum on it (paper_figures/brax_pipeline_check.py) and PPO plateaus there;
# 'positional' is the fastest of the three that pass (with 'generalized', ahead on halfcheetah,
# behind on ant; 'mjx' is fast on ant, slowest on halfcheetah) and compiles quickest
DEFAULT_PIPELINE = "positional"
DEFAULT_EPISODE_LENGTH = 1000  # brax's training default
CACHE_DIR = Path(os.environ.get("CONTROLRL_JAX_CACHE", Path.home() / ".cache/controlrl/jax"))

_compiled: dict[tuple, tuple] = {}  # (name, pipeline, num_envs) -> (env, reset, step, autoreset)


def configured_jax():
    """The jax module, with this project's persistent compilation cache (CACHE_DIR) switched on;
    every JAX user of the project (envs, algos, benchmarks) imports jax through this."""
    import jax

    if not getattr(configured_jax, "configured", False):
        jax.config.update("jax_compilation_cache_dir", str(CACHE_DIR))
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
        configured_jax.configured = True
    return jax


def known_ids() -> list[str]:
    from brax import envs as brax_envs  # optional extra 'brax'

    return sorted(brax_envs._envs)


def check_id(name: str) -> None:
    """Raise if brax registers no env `name`, naming the closest ones."""
    check_known(name, known_ids, "brax", extra="brax")


def batched_functions(env, num_envs: int):
    """Pure batched reset(key), step(state, action) and autoreset(state, ended, key).

    step is brax's step under vmap and nothing else, so the common path costs what the raw
    jitted step costs; the step counter and flags live on the host (they are needed there
    anyway), and autoreset runs only after a step in which some episode ended."""
    jax = configured_jax()
    jnp = jax.numpy

    def strong(tree):
        # brax's reset and step outputs differ in JAX weak types (reward, done, ...): make every
        # leaf strongly typed so that reset's and step's states are the same type and step
        # compiles once (and a lax.scan carry keeps its type)
        return jax.tree_util.tree_map(lambda x: jax.lax.convert_element_type(x, x.dtype), tree)

    def reset(key):
        return strong(jax.vmap(env.reset)(jax.random.split(key, num_envs)))

    def step(state, action):
        return strong(jax.vmap(env.step)(state, action))

    def autoreset(state, ended, key):
        fresh = strong(jax.vmap(env.reset)(jax.random.split(key, num_envs)))

        def pick(a, b):
            return jnp.where(ended.reshape(ended.shape + (1,) * (a.ndim - 1)), a, b)

        return jax.tree_util.tree_map(pick, fresh, state)

    return reset, step, autoreset


def compiled(name: str, pipeline: str, num_envs: int):
    """(env, reset, step, autoreset, seconds): jitted and compiled once per configuration in a
    process (seconds is 0 when they already were).

    Compiled by calling them once, so that every step takes jit's C++ dispatch path (a call of an
    ahead-of-time jax.stages.Compiled goes through Python)."""
    config = (name, pipeline, num_envs)
    if config in _compiled:
        return (*_compiled[config], 0.0)
    jax = configured_jax()
    from brax import envs as brax_envs

    t0 = time.perf_counter()
    env = brax_envs.get_environment(name, backend=pipeline)
    reset, step, autoreset = (jax.jit(f) for f in batched_functions(env, num_envs))
    key = jax.random.PRNGKey(0)
    state = reset(key)
    state = step(state, jax.numpy.zeros((num_envs, env.action_size), jax.numpy.float32))
    state = autoreset(state, jax.numpy.zeros(num_envs, bool), key)
    jax.block_until_ready(state)
    _compiled[config] = (env, reset, step, autoreset)
    return env, reset, step, autoreset, time.perf_counter() - t0


class BraxVectorEnv(gym.vector.VectorEnv):
    """num_envs copies of a brax env with same-step autoreset, as a Gymnasium VectorEnv."""

    def __init__(
        self,
        name: str,
        num_envs: int,
        pipeline: str = DEFAULT_PIPELINE,
        episode_length: int = DEFAULT_EPISODE_LENGTH,
        copy: bool = True,
    ) -> None:
        if pipeline not in PIPELINES:
            raise ValueError(f"brax pipeline must be one of {PIPELINES}, got {pipeline!r}")
        self.name, self.pipeline = name, pipeline
        self.num_envs, self.episode_length = num_envs, episode_length
        self.copy = copy  # False: observations are read-only views of the jax buffers
        from brax import envs as brax_envs

        # spaces come from the env object alone; compilation waits for compile()/reset()
        env = brax_envs.get_environment(name, backend=pipeline)
        obs_dim, act_dim = env.observation_size, env.action_size
        self.single_observation_space = gym.spaces.Box(-np.inf, np.inf, (obs_dim,), np.float32)
        self.single_action_space = gym.spaces.Box(-1.0, 1.0, (act_dim,), np.float32)
        self.observation_space = gym.vector.utils.batch_space(
            self.single_observation_space, num_envs
        )
        self.action_space = gym.vector.utils.batch_space(self.single_action_space, num_envs)
        self.metadata = {"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP}
        self.compile_seconds: float | None = None
        self._fns = None
        self._state = self._steps = self._key = None

    def compile(self) -> float:
        """Compile reset and step (a no-op when this process already has them); seconds spent."""
        if self._fns is None:
            *fns, seconds = compiled(self.name, self.pipeline, self.num_envs)
            self._fns = fns[1:]
            self.compile_seconds = seconds
        return self.compile_seconds

    def reset(self, *, seed: int | None = None, options=None):
        jax = configured_jax()
        self.compile()
        self._key = jax.random.PRNGKey(0 if seed is None else seed)
        self._key, sub = jax.random.split(self._key)
        self._state = self._fns[0](sub)
        self._steps = np.zeros(self.num_envs, np.int64)
        obs = np.asarray(self._state.obs)
        return (obs.copy() if self.copy else obs), {}

    def step(self, actions):
        if self._state is None:
            raise RuntimeError("call reset() before step()")
        jax = configured_jax()
        _, step, autoreset = self._fns
        self._state = step(self._state, jax.numpy.asarray(np.asarray(actions, np.float32)))
        obs, reward = np.asarray(self._state.obs), np.asarray(self._state.reward)
        terminated = np.asarray(self._state.done) > 0
        self._steps += 1
        truncated = (self._steps >= self.episode_length) & ~terminated
        ended = terminated | truncated
        info = {}
        if ended.any():
            # obs keeps the ended state's buffer alive: nothing is donated or overwritten
            info = {"final_obs": obs, "_final_obs": ended}
            self._key, sub = jax.random.split(self._key)
            self._state = autoreset(self._state, jax.numpy.asarray(ended), sub)
            obs = np.asarray(self._state.obs)
            self._steps[ended] = 0
        return (obs.copy() if self.copy else obs), reward, terminated, truncated, info


def make(
    name: str,
    num_envs: int,
    vectorization: str = "sync",
    render_mode: str | None = None,
    copy: bool = True,
    pipeline: str | None = None,
    episode_length: int = DEFAULT_EPISODE_LENGTH,
) -> gym.vector.VectorEnv:
    """One jitted batch; `vectorization` does not apply (the batch is vmapped). copy=False hands
    out observations as read-only views of the device buffers (the Collector copies them once)."""
    if render_mode is not None:
        raise ValueError("brax: ids do not render here (no video); drop --capture-video")
    return BraxVectorEnv(name, num_envs, pipeline or DEFAULT_PIPELINE, episode_length, copy)
