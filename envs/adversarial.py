"""Two-player MuJoCo envs for robust adversarial RL (Pinto et al. 2017, arXiv 1703.02702), and
the dynamics perturbations that robustness is tested under.

AdversarialForces: the protagonist's action drives the env as usual; the adversary's action,
in [-1, 1]^(2 k), is a planar force (x and z, world frame, at the centre of mass) on each of k
named bodies, times force_limit, written to data.xfrc_applied before every step. One player
learns through the env's action space (`role`), the other acts through `opponent`, a function
of the raw observation (its policy, frozen while the first one learns). The adversary's reward
is minus the protagonist's (zero-sum).

ScaledDynamics: at every reset, the masses (and rotational inertias: a density scale) of named
bodies and the joints' friction set to scale factors times their nominal values. Friction here
is every joint's damping (viscous joint friction): the geoms of Gymnasium's InvertedPendulum
do not collide (contype 0), so a geom's friction coefficient acts nowhere in that model.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal

import gymnasium as gym
import mujoco
import numpy as np

Opponent = Callable[[np.ndarray], np.ndarray]


def body_ids(model, bodies: Sequence[str]) -> list[int]:
    """The MuJoCo ids of the named bodies; ValueError naming a body the model lacks."""
    ids = []
    for name in bodies:
        i = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, name)
        if i < 0:
            known = [model.body(j).name for j in range(model.nbody)]
            raise ValueError(f"no body {name!r} in the model (bodies: {', '.join(known)})")
        ids.append(i)
    return ids


class AdversarialForces(gym.Wrapper):
    """A MuJoCo env played by a protagonist and an adversary whose actions are planar forces of
    at most force_limit (newtons, per component) on `bodies`; see the module docstring."""

    def __init__(
        self,
        env: gym.Env,
        force_limit: float,
        bodies: Sequence[str] = ("pole",),
        role: Literal["protagonist", "adversary"] = "protagonist",
        opponent: Opponent | None = None,
    ) -> None:
        super().__init__(env)
        if role not in ("protagonist", "adversary"):
            raise ValueError(f"role must be 'protagonist' or 'adversary', got {role!r}")
        self.force_limit = float(force_limit)
        self.body_ids = body_ids(env.unwrapped.model, bodies)
        self.role = role
        self.protagonist_space = env.action_space
        self.adversary_space = gym.spaces.Box(-1.0, 1.0, (2 * len(bodies),), np.float32)
        self.action_space = (
            self.protagonist_space if role == "protagonist" else self.adversary_space
        )
        # None: the other player does nothing (zero force, or the protagonist's zero action)
        self.opponent = opponent
        self._obs: np.ndarray | None = None

    def apply_forces(self, adversary_action: np.ndarray) -> None:
        """xfrc_applied of each body: force limit x the action's (x, z) pair, clipped to +-1."""
        a = np.clip(np.asarray(adversary_action, np.float64), -1.0, 1.0).reshape(-1, 2)
        xfrc = self.env.unwrapped.data.xfrc_applied
        xfrc[self.body_ids, :] = 0.0
        xfrc[self.body_ids, 0] = self.force_limit * a[:, 0]
        xfrc[self.body_ids, 2] = self.force_limit * a[:, 1]

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        self.env.unwrapped.data.xfrc_applied[:] = 0.0
        self._obs = obs
        return obs, info

    def wrapper_state(self) -> dict:
        """What envs.state saves beside the simulator (whose state holds xfrc_applied): the
        observation the opponent acts on next."""
        return {"obs": None if self._obs is None else np.array(self._obs)}

    def load_wrapper_state(self, state: dict) -> None:
        """Put back what wrapper_state saved."""
        obs = state["obs"]
        self._obs = None if obs is None else np.asarray(obs).copy()

    def _other(self, space: gym.spaces.Box) -> np.ndarray:
        if self.opponent is None:
            return np.zeros(space.shape, np.float32)
        return np.asarray(self.opponent(self._obs), np.float32).reshape(space.shape)

    def step(self, action):
        if self.role == "protagonist":
            protagonist, adversary = action, self._other(self.adversary_space)
        else:
            protagonist, adversary = self._other(self.protagonist_space), action
            low, high = self.protagonist_space.low, self.protagonist_space.high
            protagonist = np.clip(protagonist, low, high)
        self.apply_forces(adversary)
        obs, reward, terminated, truncated, info = self.env.step(protagonist)
        self._obs = obs
        reward = reward if self.role == "protagonist" else -reward
        return obs, reward, terminated, truncated, info


class ScaledDynamics(gym.Wrapper):
    """Masses of `bodies` (with their inertias) x mass_scale and every joint's damping x
    friction_scale, applied to the model at every reset."""

    def __init__(
        self,
        env: gym.Env,
        mass_scale: float = 1.0,
        friction_scale: float = 1.0,
        bodies: Sequence[str] = ("pole", "cart"),
    ) -> None:
        super().__init__(env)
        model = env.unwrapped.model
        self.body_ids = body_ids(model, bodies)
        self.mass_scale, self.friction_scale = float(mass_scale), float(friction_scale)
        self.nominal = {
            "body_mass": model.body_mass.copy(),
            "body_inertia": model.body_inertia.copy(),
            "dof_damping": model.dof_damping.copy(),
        }

    def apply(self) -> None:
        """Write the scaled values into the model (from the nominal ones: no compounding)."""
        model, nominal, ids = self.env.unwrapped.model, self.nominal, self.body_ids
        model.body_mass[ids] = nominal["body_mass"][ids] * self.mass_scale
        model.body_inertia[ids] = nominal["body_inertia"][ids] * self.mass_scale
        model.dof_damping[:] = nominal["dof_damping"] * self.friction_scale

    def reset(self, **kwargs):
        self.apply()
        return self.env.reset(**kwargs)
