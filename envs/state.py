"""Save and restore a vector env mid-episode, so a resumed run steps on as if never stopped.

Only where the whole state is known: a Gymnasium SyncVectorEnv whose envs are MuJoCo or
classic-control envs wrapped only by gym.make's own wrappers (TimeLimit, OrderEnforcing,
PassiveEnvChecker) and by wrappers that hand over their own state (wrapper_state() and
load_wrapper_state(state) of plain arrays and numbers: envs.adversarial.AdversarialForces);
and a vector env that saves itself (capture_state() and restore_state(state): the bandits,
their generators and episodes in progress). Anything else (EnvPool, Brax, dm_control, an async
vector env, a wrapper that keeps its own state and does not hand it over, such as
envs.start_states) gives None from capture, and the caller starts fresh episodes instead.

A MuJoCo env's state is the simulator's integration state (mujoco.mjSTATE_INTEGRATION: time,
qpos, qvel, act, warm start, controls, applied forces, mocap) plus the body positions its last
step left behind (xpos, xipos), which v5 rewards read before stepping (Ant, Humanoid, Reacher,
Pusher); every other derived quantity is recomputed by the next mj_step before anything reads
it. Each env's np_random and its TimeLimit counter come with it.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
from gymnasium.envs.classic_control import (
    AcrobotEnv,
    CartPoleEnv,
    Continuous_MountainCarEnv,
    MountainCarEnv,
    PendulumEnv,
)
from gymnasium.vector import SyncVectorEnv
from gymnasium.wrappers import OrderEnforcing, PassiveEnvChecker, TimeLimit

# wrappers whose state is the TimeLimit counter (saved) or flags a running env always has set
_KNOWN_WRAPPERS = (TimeLimit, OrderEnforcing, PassiveEnvChecker)
_CLASSIC = (AcrobotEnv, CartPoleEnv, Continuous_MountainCarEnv, MountainCarEnv, PendulumEnv)
_BODIES = ("xpos", "xipos")  # derived positions read before a step (see the module docstring)


def _mujoco_env():
    try:
        from gymnasium.envs.mujoco.mujoco_env import MujocoEnv
    except ImportError:  # mujoco not installed: no env can be one
        return None
    return MujocoEnv


def _stateful_wrapper(env: gym.Env) -> bool:
    return hasattr(env, "wrapper_state") and hasattr(env, "load_wrapper_state")


def _wrappers(env: gym.Env) -> list[gym.Wrapper]:
    """The wrappers that hand over their state, outermost first."""
    found = []
    while isinstance(env, gym.Wrapper):
        if _stateful_wrapper(env):
            found.append(env)
        env = env.env
    return found


def _capturable(env: gym.Env) -> bool:
    while isinstance(env, gym.Wrapper):
        if type(env) not in _KNOWN_WRAPPERS and not _stateful_wrapper(env):
            return False
        env = env.env
    if isinstance(env, _CLASSIC):
        return getattr(env, "state", None) is not None  # None before the first reset
    mujoco_env = _mujoco_env()
    return mujoco_env is not None and isinstance(env, mujoco_env)


def capture(envs: gym.vector.VectorEnv) -> list[dict] | dict | None:
    """Each env's state as plain arrays, ints and dicts (None when it cannot be captured); a
    vector env that saves itself (capture_state(), the bandits) gives its own dict."""
    if callable(getattr(envs, "capture_state", None)):
        return envs.capture_state()
    if not isinstance(envs, SyncVectorEnv) or not all(_capturable(e) for e in envs.envs):
        return None
    return [_capture_one(env) for env in envs.envs]


def _capture_one(env: gym.Env) -> dict:
    raw = env.unwrapped
    out = {
        "elapsed": int(env.get_wrapper_attr("_elapsed_steps") or 0),
        "rng": raw.np_random.bit_generator.state,
    }
    wrappers = [w.wrapper_state() for w in _wrappers(env)]
    if wrappers:
        out["wrappers"] = wrappers
    if hasattr(raw, "data"):  # MuJoCo
        import mujoco

        spec = mujoco.mjtState.mjSTATE_INTEGRATION
        sim = np.empty(mujoco.mj_stateSize(raw.model, spec))
        mujoco.mj_getState(raw.model, raw.data, sim, spec)
        out["mujoco"] = sim
        out.update({name: getattr(raw.data, name).copy() for name in _BODIES})
    else:
        out["state"] = np.array(raw.state)
        if getattr(raw, "steps_beyond_terminated", None) is not None:  # CartPole past the end
            out["steps_beyond_terminated"] = int(raw.steps_beyond_terminated)
    return out


def restore(envs: gym.vector.VectorEnv, states: list[dict] | dict) -> None:
    """Put back what capture returned into envs of the same ids (just made, or running). The
    vector env is reset first, so its wrappers' order checks pass; the states then overwrite
    every episode it started."""
    if isinstance(states, dict):  # a vector env's own (capture_state)
        if not callable(getattr(envs, "restore_state", None)):
            raise ValueError("the saved env state is a bandit's; these envs cannot take it")
        envs.restore_state(states)
        return
    if not isinstance(envs, SyncVectorEnv):
        raise ValueError("saved per-env states need a synchronous vector env")
    if len(states) != len(envs.envs):
        raise ValueError(f"{len(states)} saved env states for {len(envs.envs)} envs")
    envs.reset()
    for env, state in zip(envs.envs, states, strict=True):
        raw = env.unwrapped
        env.set_wrapper_attr("_elapsed_steps", int(state["elapsed"]))
        raw.np_random.bit_generator.state = state["rng"]
        if "mujoco" in state:
            import mujoco

            sim = np.asarray(state["mujoco"], dtype=np.float64).copy()
            mujoco.mj_setState(raw.model, raw.data, sim, mujoco.mjtState.mjSTATE_INTEGRATION)
            for name in _BODIES:
                getattr(raw.data, name)[:] = np.asarray(state[name])
        else:
            raw.state = np.array(state["state"])
            if hasattr(raw, "steps_beyond_terminated"):
                raw.steps_beyond_terminated = state.get("steps_beyond_terminated")
        wrappers = _wrappers(env)
        if len(wrappers) != len(state.get("wrappers", [])):
            raise ValueError("the saved env states do not fit these envs' wrappers")
        for wrapper, saved in zip(wrappers, state.get("wrappers", []), strict=True):
            wrapper.load_wrapper_state(saved)
