"""Brax backend: ids 'brax:<name>' as a Gymnasium VectorEnv over one jitted, vmapped batch.

One compiled function steps all num_envs environments: brax's step under jax.vmap, a step
counter for the time limit (truncation, flagged as such), and same-step autoreset that draws a
fresh random initial state for every ended env (brax's own AutoResetWrapper reuses each env's first
initial state) while returning the true final observation in info['final_obs']. Reset and step
are compiled ahead of time once per (env, pipeline, num_envs, episode length) in a process, the
compile is reported (compile_seconds, and a 'compiling...' progress bar in training), and JAX's
persistent cache under ~/.cache/controlrl/jax makes later processes start in seconds.

Observations reach numpy without a copy (np.asarray of a CPU jax array is a view); actions go
to the device in one transfer per step.
"""

from __future__ import annotations

import difflib
import os
import time
from pathlib import Path

import gymnasium as gym
import numpy as np

from envs.errors import UnknownEnvError

PIPELINES = ("spring", "positional", "generalized", "mjx")
DEFAULT_PIPELINE = "spring"  # fastest on CPU in paper_figures/bench_brax.py (see its CSV)
DEFAULT_EPISODE_LENGTH = 1000  # brax's training default
CACHE_DIR = Path(os.environ.get("CONTROLRL_JAX_CACHE", Path.home() / ".cache/controlrl/jax"))

_compiled: dict[tuple, tuple] = {}  # (name, pipeline, num_envs, episode_length) -> (reset, step)


def _jax():
    import jax

    if not getattr(_jax, "configured", False):
        jax.config.update("jax_compilation_cache_dir", str(CACHE_DIR))
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
        _jax.configured = True
    return jax


def known_ids() -> list[str]:
    from brax import envs as brax_envs  # optional extra 'brax'

    return sorted(brax_envs._envs)


def check_id(name: str) -> None:
    try:
        ids = known_ids()
    except ImportError as e:
        raise UnknownEnvError(
            f"backend 'brax' needs brax: pip install -e '.[brax]' ({e})"
        ) from None
    if name in ids:
        return
    close = difflib.get_close_matches(name, ids, n=3, cutoff=0.5)
    hint = f"; closest: {', '.join(close)}" if close else ""
    raise UnknownEnvError(f"unknown env id '{name}' for backend 'brax'{hint}")


def _build(env, num_envs: int, episode_length: int):
    """Pure batched reset(key) and step(state, steps, key, action) functions."""
    jax = _jax()
    jnp = jax.numpy

    def strong(tree):
        # reset's outputs carry weak types that step's do not: make them equal so that step
        # compiles once for both
        return jax.tree_util.tree_map(lambda x: jax.lax.convert_element_type(x, x.dtype), tree)

    def reset(key):
        state = jax.vmap(env.reset)(jax.random.split(key, num_envs))
        return strong(state), jnp.zeros(num_envs, jnp.int32)

    def step(state, steps, key, action):
        nxt = jax.vmap(env.step)(state, action)
        steps = steps + 1
        terminated = nxt.done > 0
        truncated = (steps >= episode_length) & ~terminated
        ended = terminated | truncated
        key, sub = jax.random.split(key)

        def with_resets(_):
            fresh = jax.vmap(env.reset)(jax.random.split(sub, num_envs))

            def pick(a, b):
                mask = ended.reshape(ended.shape + (1,) * (a.ndim - 1))
                return jnp.where(mask, a, b)

            return jax.tree_util.tree_map(pick, strong(fresh), nxt)

        new = jax.lax.cond(ended.any(), with_resets, lambda _: nxt, None)
        steps = jnp.where(ended, 0, steps)
        return new, steps, key, nxt.obs, nxt.reward, terminated, truncated

    return reset, step


def compiled(name: str, pipeline: str, num_envs: int, episode_length: int):
    """(env, reset, step, seconds): ahead-of-time compiled once per configuration in a process."""
    config = (name, pipeline, num_envs, episode_length)
    if config in _compiled:
        return (*_compiled[config][:3], 0.0)
    jax = _jax()
    from brax import envs as brax_envs

    t0 = time.perf_counter()
    env = brax_envs.get_environment(name, backend=pipeline)
    reset, step = _build(env, num_envs, episode_length)
    key = jax.random.PRNGKey(0)
    reset_c = jax.jit(reset).lower(key).compile()
    state, steps = jax.eval_shape(reset, key)
    action = jax.ShapeDtypeStruct((num_envs, env.action_size), jax.numpy.float32)
    step_c = jax.jit(step).lower(state, steps, key, action).compile()
    _compiled[config] = (env, reset_c, step_c)
    return env, reset_c, step_c, time.perf_counter() - t0


class BraxVectorEnv(gym.vector.VectorEnv):
    """num_envs copies of a brax env with same-step autoreset, as a Gymnasium VectorEnv."""

    def __init__(
        self,
        name: str,
        num_envs: int,
        pipeline: str = DEFAULT_PIPELINE,
        episode_length: int = DEFAULT_EPISODE_LENGTH,
    ) -> None:
        if pipeline not in PIPELINES:
            raise ValueError(f"brax pipeline must be one of {PIPELINES}, got {pipeline!r}")
        self.name, self.pipeline = name, pipeline
        self.num_envs, self.episode_length = num_envs, episode_length
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
            _, reset, step, seconds = compiled(
                self.name, self.pipeline, self.num_envs, self.episode_length
            )
            self._fns = (reset, step)
            self.compile_seconds = seconds
        return self.compile_seconds

    def reset(self, *, seed: int | None = None, options=None):
        jax = _jax()
        self.compile()
        self._key = jax.random.PRNGKey(0 if seed is None else seed)
        self._key, sub = jax.random.split(self._key)
        self._state, self._steps = self._fns[0](sub)
        return np.asarray(self._state.obs), {}

    def step(self, actions):
        if self._state is None:
            raise RuntimeError("call reset() before step()")
        action = _jax().numpy.asarray(np.asarray(actions, np.float32))
        self._state, self._steps, self._key, final_obs, reward, term, trunc = self._fns[1](
            self._state, self._steps, self._key, action
        )
        terminated, truncated = np.asarray(term), np.asarray(trunc)
        ended = terminated | truncated
        info = {"final_obs": np.asarray(final_obs), "_final_obs": ended} if ended.any() else {}
        return np.asarray(self._state.obs), np.asarray(reward), terminated, truncated, info


def make(
    name: str,
    num_envs: int,
    vectorization: str = "sync",
    render_mode: str | None = None,
    copy: bool = True,
    pipeline: str | None = None,
    episode_length: int = DEFAULT_EPISODE_LENGTH,
) -> gym.vector.VectorEnv:
    """One jitted batch; `vectorization` does not apply (the batch is vmapped)."""
    if render_mode is not None:
        raise ValueError("brax: ids do not render here (no video); drop --capture-video")
    return BraxVectorEnv(name, num_envs, pipeline or DEFAULT_PIPELINE, episode_length)
