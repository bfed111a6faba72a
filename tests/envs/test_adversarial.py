"""envs/adversarial.py: the adversary's forces reach the simulation (and zero force is the plain
env), the adversary's reward is minus the protagonist's, and the dynamics scales take effect at
reset without compounding."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from envs.adversarial import AdversarialForces, ScaledDynamics

ENV = "InvertedPendulum-v5"


def trajectory(env: gym.Env, steps: int = 20, seed: int = 3) -> np.ndarray:
    """Observations under a fixed action sequence from the seeded reset (no early stop)."""
    obs, _ = env.reset(seed=seed)
    rng = np.random.default_rng(0)
    out = [obs]
    for _ in range(steps):
        obs, *_ = env.step(rng.uniform(-0.3, 0.3, size=(1,)).astype(np.float32))
        out.append(obs)
    return np.array(out)


def test_zero_force_is_the_plain_env():
    plain = trajectory(gym.make(ENV))
    none = trajectory(AdversarialForces(gym.make(ENV), force_limit=50.0))
    zeros = trajectory(AdversarialForces(gym.make(ENV), 50.0, opponent=lambda o: np.zeros(2)))
    np.testing.assert_array_equal(none, plain)
    np.testing.assert_array_equal(zeros, plain)


def test_a_force_on_the_pole_changes_the_dynamics_in_its_direction():
    plain = trajectory(gym.make(ENV))
    right = AdversarialForces(gym.make(ENV), 5.0, opponent=lambda o: np.array([1.0, 0.0]))
    left = AdversarialForces(gym.make(ENV), 5.0, opponent=lambda o: np.array([-1.0, 0.0]))
    pushed_right, pushed_left = trajectory(right), trajectory(left)
    assert np.abs(pushed_right - plain).max() > 1e-3
    # the pole angle (obs[1]) moves one way under +x and the other way under -x
    d_right, d_left = pushed_right[1:, 1] - plain[1:, 1], pushed_left[1:, 1] - plain[1:, 1]
    assert np.all(np.sign(d_right) == -np.sign(d_left)) and np.all(d_right != 0)
    # the force written is force limit x the clipped action, on the pole's x and z components
    xfrc = right.unwrapped.data.xfrc_applied
    pole = right.unwrapped.model.body("pole").id
    np.testing.assert_array_equal(xfrc[pole], [5.0, 0, 0, 0, 0, 0])
    right.apply_forces(np.array([3.0, -0.5]))
    np.testing.assert_array_equal(xfrc[pole], [5.0, 0, -2.5, 0, 0, 0])


def test_the_adversary_plays_through_its_action_space_for_minus_the_reward():
    protagonist = AdversarialForces(gym.make(ENV), 5.0, opponent=lambda o: np.array([0.7, 0.2]))
    adversary = AdversarialForces(
        gym.make(ENV), 5.0, role="adversary", opponent=lambda o: np.array([0.1], np.float32)
    )
    assert adversary.action_space.shape == (2,) and adversary.action_space.high.max() == 1.0
    protagonist.reset(seed=1)
    adversary.reset(seed=1)
    for _ in range(10):
        p = protagonist.step(np.array([0.1], np.float32))
        a = adversary.step(np.array([0.7, 0.2], np.float32))
        np.testing.assert_array_equal(p[0], a[0])  # the same game seen from either side
        assert a[1] == -p[1] != 0


def test_an_unknown_body_is_named():
    with pytest.raises(ValueError, match="'mast'.*pole"):
        AdversarialForces(gym.make(ENV), 5.0, bodies=("mast",))


def test_scaled_dynamics_take_effect_at_reset_and_do_not_compound():
    env = ScaledDynamics(gym.make(ENV), mass_scale=2.0, friction_scale=0.5)
    model = env.unwrapped.model
    mass, inertia = model.body_mass.copy(), model.body_inertia.copy()
    damping = model.dof_damping.copy()
    for _ in range(2):  # a second reset scales the nominal values again, not the scaled ones
        env.reset(seed=0)
        np.testing.assert_allclose(model.body_mass[1:], 2.0 * mass[1:])  # cart and pole
        np.testing.assert_allclose(model.body_inertia[1:], 2.0 * inertia[1:])
        np.testing.assert_allclose(model.dof_damping, 0.5 * damping)
    assert model.body_mass[0] == mass[0]  # the world is not a body that moves
    nominal = trajectory(ScaledDynamics(gym.make(ENV)))
    np.testing.assert_array_equal(nominal, trajectory(gym.make(ENV)))
    assert np.abs(trajectory(env) - nominal).max() > 1e-3
    heavier_pole = trajectory(ScaledDynamics(gym.make(ENV), mass_scale=2.0, bodies=("pole",)))
    assert np.abs(heavier_pole - nominal).max() > 1e-3
    stickier = trajectory(ScaledDynamics(gym.make(ENV), friction_scale=2.0))
    assert np.abs(stickier - nominal).max() > 1e-3
