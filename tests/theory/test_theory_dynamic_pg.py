"""Dynamic (backward-in-time) vs simultaneous softmax PG on finite-horizon MDPs, exact gradients
(Klein, Weissmann, Doering, ICLR 2024): the gradient against finite differences, dynamic PG's
eps-optimality at every epoch and state, and the iteration counts on a chain against H."""

import numpy as np

from theory import dynamic_pg as dpg
from theory.mdp import chain, expected_return, random_mdp


def test_return_gradient_matches_finite_differences():
    rng = np.random.default_rng(0)
    mdp = random_mdp(4, 3, rng, horizon=4)
    mu = rng.dirichlet(np.ones(4))
    mdp_mu = type(mdp)(P=mdp.P, R=mdp.R, rho0=mu, horizon=mdp.horizon)
    theta = rng.normal(size=mdp.R.shape)
    g = dpg.return_gradient(mdp, theta, mu)
    fd = np.zeros_like(theta)
    h = 1e-6
    for idx in np.ndindex(theta.shape):
        e = np.zeros_like(theta)
        e[idx] = h
        up = expected_return(mdp_mu, dpg.softmax(theta + e))
        down = expected_return(mdp_mu, dpg.softmax(theta - e))
        fd[idx] = (up - down) / (2 * h)
    np.testing.assert_allclose(g, fd, atol=1e-8)


def test_dynamic_pg_is_eps_optimal_at_every_epoch_and_state():
    rng = np.random.default_rng(1)
    mdp = random_mdp(5, 3, rng, horizon=5)
    mu = np.full(5, 0.2)
    eps = 1e-2
    _, theta = dpg.dynamic_pg(mdp, mu, lr=32.0, eps=eps)
    gap = dpg.optimality_gap(mdp, dpg.softmax(theta))
    assert 0 <= gap <= eps
    _, theta_sim = dpg.simultaneous_pg(mdp, mu, lr=32.0, eps=eps)
    assert 0 <= dpg.optimality_gap(mdp, dpg.softmax(theta_sim)) <= eps


def test_dynamic_pg_needs_fewer_iterations_and_the_gap_grows_with_h():
    """Chain of 5 states (slip 0.1, a small reward at the left end): the ratio of simultaneous to
    dynamic iterations rises with H, below 1 at H = 2 and above 1 from H = 8 on."""
    ratios = []
    for H in [2, 4, 6, 8, 10]:
        mdp = chain(n=5, slip=0.1, horizon=H, small=0.1)
        mu = np.full(5, 0.2)
        n_sim, _ = dpg.simultaneous_pg(mdp, mu, lr=64.0, eps=0.01)
        n_dyn, _ = dpg.dynamic_pg(mdp, mu, lr=64.0, eps=0.01)
        ratios.append(n_sim / n_dyn)
    assert np.all(np.diff(ratios) > 0), ratios
    assert ratios[0] < 1 < ratios[-2] < ratios[-1], ratios
