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

'mjx' batches hang on jaxlib 0.10.x (found with brax:halfcheetah at 1024 envs, where
paper_figures/bench_brax.py's worker hung with every thread waiting): its CPU LAPACK kernels split
a batch over XLA:CPU's intra-op thread pool and block until the pieces are done, from inside that
same pool. mjx factorises the mass matrix and the Newton solver's Hessian with a batched Cholesky
(jax.scipy.linalg.cho_factor -> lapack_spotrf_ffi); once every pool thread (one per core)
waits inside such a kernel, nothing is left to run the pieces. Native stacks (gdb) of the hung
process: both 'tf_XLAEigen' threads in lapack_spotrf_ffi -> jax::ParallelBatchMap ->
BlockingCounter::Wait, no CPU used. Smallest reproduction: jax.jit(jax.vmap(mjx.step)) on brax's
half_cheetah.xml at 1024 envs, mujoco-mjx 3.17.0, jax/jaxlib 0.10.2: hung at its 4th call, and
after ~200 calls with XLA_FLAGS=--xla_cpu_multi_thread_eigen=false (that flag does not reach the
LAPACK kernels). jaxlib 0.9.2, the brax extra's pin, has no such split (no ParallelBatchMap in its
jaxlib/cpu/_lapack.so) and ran the same worker to the end. So an mjx batch that such a jaxlib
would split raises a ValueError naming the cause and the ways out (check_no_pool_deadlock)
instead of hanging; halfcheetah (nv 9) is split from 825 envs on, ant (nv 14) from 220.
"""

from __future__ import annotations

import importlib.metadata
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


# jaxlib releases whose batched CPU LAPACK kernels wait on XLA:CPU's pool from inside it (module
# docstring). In jax's jaxlib/cpu/lapack_kernels.cc the batch split (ParallelBatchMap) came with
# "Add support for parallelizing lapack invocations on the batch dimension" (0.10.0 to 0.11.0)
# and left open-source builds with "Don't try to parallelize LAPACK kernels in opensource builds"
# (after 0.11.0, so in 0.11.1). GetLapackBatchChunkSize there splits a batch only
# when it carries at least kMinWorkPerTask = 200,000 FLOP, a Cholesky counting n^3 / 3 a matrix.
LAPACK_POOL_SPLIT = ((0, 10, 0), (0, 11, 1))  # [first with the split, first without it)
LAPACK_MIN_WORK = 200_000


def lapack_blocks_pool(jaxlib_version: str) -> bool:
    """Whether this jaxlib version's batched CPU LAPACK kernels can deadlock XLA:CPU's pool."""
    release = []
    for part in jaxlib_version.split(".")[:3]:
        digits = part[: len(part) - len(part.lstrip("0123456789"))]  # "2rc1" -> "2"
        release.append(int(digits or 0))
    first, fixed = LAPACK_POOL_SPLIT
    return first <= tuple(release + [0] * (3 - len(release))) < fixed


def installed_jaxlib() -> str:
    """The installed jaxlib's version."""
    return importlib.metadata.version("jaxlib")


def max_unsplit_envs(nv: int) -> int:
    """The largest batch whose nv x nv Cholesky (or triangular solve with one right-hand side)
    such a jaxlib still runs serially: it cuts a batch of B >= 2 into chunks of
    max(ceil(B / threads), ceil(200,000 / cost)) matrices, so it splits from ceil(200,000 / cost)
    + 1 on."""
    return -(-LAPACK_MIN_WORK // max(nv**3 // 3, nv**2))


def check_no_pool_deadlock(
    name: str, pipeline: str, num_envs: int, nv: int, jaxlib: str | None = None
) -> None:
    """Raise, instead of hanging later, where an 'mjx' batch of num_envs models with nv degrees of
    freedom would have its Cholesky split by a jaxlib (default: the installed one) that can
    deadlock XLA:CPU's thread pool that way."""
    if pipeline != "mjx" or num_envs <= max_unsplit_envs(nv):
        return
    jaxlib = jaxlib or installed_jaxlib()
    if lapack_blocks_pool(jaxlib):
        raise ValueError(
            f"brax:{name} on pipeline 'mjx' with num_envs={num_envs} would hang on jaxlib "
            f"{jaxlib}: it splits mjx's batched {nv}x{nv} Cholesky over XLA:CPU's thread pool "
            "from inside that pool and deadlocks (all threads waiting); install jaxlib 0.9.2 "
            f"(the brax extra's pin) or >= 0.11.1, or use num_envs <= {max_unsplit_envs(nv)} or "
            "another --brax-pipeline"
        )


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
    check_no_pool_deadlock(type(env).__name__.lower(), env.backend, num_envs, env.sys.nv)
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
        check_no_pool_deadlock(name, pipeline, num_envs, env.sys.nv)  # fail here, not hang later
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
