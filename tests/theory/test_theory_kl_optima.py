"""theory/kl_optima.py's closed forms of KL-regularised RL, exactly (papers cited there).

REBEL: its least squares over all pairs is solved by the mirror-descent step pi_t exp(eta r)/Z
    (scipy minimisation over the logits; any full-support pair weighting).
CoPG (the claim, for a regularised-gap regression): off-policy pairs from any mu reach pi*; its
    own loss (controlrl.losses.copg_loss) has zero expected gradient at pi* under any mu, where
    an off-policy PG without importance weights needs the baseline V*.
DPO vs EXO: DPO's population loss (Bradley-Terry labels from r, all pairs) has the tabular
    optimum pi*; with quadratic logits EXO (reverse KL) seeks the better mode and DPO spreads,
    flatter even than the forward-KL fit (a finding on the direction).
VIMPO's implied value: along every root-to-leaf path of a tree, R - beta sum log(pi*/pi_ref) =
    V*(root), so its variance is 0 for pi* and > 0 for other policies.
Control as inference: with deterministic dynamics the soft-optimal policy's trajectory
    distribution is proportional to exp(sum r / alpha); with stochastic dynamics the exact
    posterior is optimistic (Q_post >= Q_soft) and differs from soft value iteration.
"""

import numpy as np
import pytest
from scipy.optimize import minimize

from theory import kl_optima as ko
from theory import policy_opt as po


def test_rebel_regression_solves_to_the_mirror_descent_step():
    rng = np.random.default_rng(0)
    for eta in (0.3, 1.0, 4.0):
        logits_t, r = rng.normal(size=6), rng.normal(size=6)
        pi_t = po.softmax(logits_t)
        target = po.mirror_descent_step(pi_t, r, eta)
        for weights in (np.ones((6, 6)), np.outer(pi_t, pi_t)):  # all pairs; on-policy pairs
            res = minimize(
                lambda z, lt=logits_t, r=r, eta=eta, w=weights: ko.rebel_loss(z, lt, r, eta, w),
                logits_t,
                method="BFGS",
                options={"gtol": 1e-12},
            )
            assert res.fun < 1e-12  # the regression is solved exactly (zero residual)
            np.testing.assert_allclose(po.softmax(res.x), target, atol=1e-6)
        assert ko.rebel_loss(np.log(target), logits_t, r, eta, np.ones((6, 6))) < 1e-20
        assert ko.rebel_loss(logits_t, logits_t, r, eta, np.ones((6, 6))) > 0.1


def test_off_policy_pairs_recover_the_regularised_optimum():
    """CoPG's claim (off-policy pairs from any mu, no importance weights, reach pi*), for
    the regression of regularised reward gaps r - beta log(pi / pi_ref) on pairs from mu, i.e.
    rebel_loss anchored at pi_ref with eta = 1 / beta. (CoPG's own loss: the next test.)"""
    rng = np.random.default_rng(6)
    logits_ref, r, beta = rng.normal(size=5), rng.normal(size=5), 0.5
    pi_star, _ = po.kl_regularized_optimum(po.softmax(logits_ref), r, beta)
    for mu in (rng.dirichlet(np.ones(5)), rng.dirichlet(0.2 * np.ones(5))):
        pairs = np.outer(mu, mu)  # both actions of a pair drawn from mu
        res = minimize(
            lambda z, w=pairs: ko.rebel_loss(z, logits_ref, r, 1 / beta, w),
            np.zeros(5),
            method="BFGS",
            options={"gtol": 1e-12},
        )
        np.testing.assert_allclose(po.softmax(res.x), pi_star, atol=1e-5)


def _expected_copg_gradient(logits, logits_ref, r, beta, mu):
    """d/dlogits of E_{a, a' ~ mu}[copg_loss on the pair (a, a')] (controlrl.losses)."""
    import torch

    from controlrl.losses import copg_loss

    z = torch.tensor(logits, requires_grad=True)
    logp, logp_ref = torch.log_softmax(z, -1), torch.log_softmax(torch.tensor(logits_ref), -1)
    K = len(r)
    a, b = np.divmod(np.arange(K * K), K)
    pairs = torch.tensor(np.stack([a, b], 1))
    losses = torch.stack([copg_loss(logp[p], logp_ref[p], torch.tensor(r)[p], beta) for p in pairs])
    (g,) = torch.autograd.grad((torch.tensor(np.outer(mu, mu).ravel()) * losses).sum(), z)
    return g.numpy()


def test_copg_needs_no_importance_weights_and_a_fixed_baseline_would():
    """CoPG's claim: from pairs of any behaviour mu, with no importance weights, its expected
    gradient vanishes at pi* (and not elsewhere); the off-policy PG without importance weights,
    E_mu[(R - b) grad log pi] with R = r - beta log(pi / pi_ref), vanishes at pi* only for the
    baseline b = V* = beta log E_ref[exp(r / beta)] ("the right state baseline")."""
    rng = np.random.default_rng(7)
    logits_ref, r, beta = rng.normal(size=5), rng.normal(size=5), 0.5
    pi_ref = po.softmax(logits_ref)
    pi_star, v_star = po.kl_regularized_optimum(pi_ref, r, beta)
    z_star = np.log(pi_star)
    for mu in (rng.dirichlet(np.ones(5)), rng.dirichlet(0.2 * np.ones(5))):
        g = _expected_copg_gradient(z_star, logits_ref, r, beta, mu)
        np.testing.assert_allclose(g, 0, atol=1e-12)
        g_off = _expected_copg_gradient(z_star + rng.normal(size=5), logits_ref, r, beta, mu)
        assert np.abs(g_off).max() > 1e-3

        def pg(z, b, mu=mu):
            pi = po.softmax(z)
            R = r - beta * (np.log(pi) - np.log(pi_ref))
            return mu * (R - b) - (mu @ (R - b)) * pi  # E_mu[(R - b)(e_a - pi)]

        np.testing.assert_allclose(pg(z_star, v_star), 0, atol=1e-12)
        for b in (0.0, v_star + 0.5):
            assert np.abs(pg(z_star, b)).max() > 1e-2
    # on-policy (mu = pi*) any baseline is fine: E_pi[grad log pi] = 0
    np.testing.assert_allclose(pg(z_star, 3.0, mu=pi_star), 0, atol=1e-12)


def _tree(depth=3, A=3, seed=1):
    rng = np.random.default_rng(seed)
    pi_ref = [rng.dirichlet(np.ones(A), size=A**h) for h in range(depth)]
    return pi_ref, rng.normal(size=A**depth)


def test_vimpo_implied_value_is_path_independent_at_the_optimum():
    pi_ref, R = _tree()
    for beta in (0.2, 1.0, 5.0):
        values, pi_star = ko.soft_tree(pi_ref, R, beta)
        implied = ko.implied_values(pi_star, pi_ref, R, beta)
        np.testing.assert_allclose(implied, values[0][0], atol=1e-12)
        # V*(root) = beta log E_ref[exp(R / beta)] over the leaf distribution of pi_ref
        leaf_prob = np.ones(1)
        for h in range(3):
            leaf_prob = (leaf_prob[:, None] * pi_ref[h]).reshape(-1)
        assert values[0][0] == pytest.approx(beta * np.log(leaf_prob @ np.exp(R / beta)), abs=1e-12)
        # any other policy: the implied value varies across paths
        rng = np.random.default_rng(2)
        for pi in (pi_ref, [rng.dirichlet(np.ones(3), size=3**h) for h in range(3)]):
            assert np.var(ko.implied_values(pi, pi_ref, R, beta)) > 1e-3
        mixed = [0.9 * a + 0.1 * b for a, b in zip(pi_star, pi_ref)]
        assert np.var(ko.implied_values(mixed, pi_ref, R, beta)) > 1e-8


def _finite_mdp(rng, S=3, A=2, H=3, deterministic=False):
    if deterministic:
        P = np.eye(S)[rng.integers(0, S, size=(H, S, A))]
    else:
        P = rng.dirichlet(0.5 * np.ones(S), size=(H, S, A))
    return P, rng.normal(size=(H, S, A))


def test_control_as_inference_with_deterministic_dynamics():
    rng = np.random.default_rng(3)
    for alpha in (0.3, 1.0):
        P, R = _finite_mdp(rng, deterministic=True)
        _, pi_soft = ko.soft_value_iteration(P, R, alpha)
        states, actions = ko.trajectories(3, 2, 3)
        p_soft = ko.trajectory_probabilities(P, pi_soft, 0, states, actions)
        feasible = ko.trajectory_probabilities(P, np.full((3, 3, 2), 0.5), 0, states, actions) > 0
        weights = np.where(feasible, np.exp(ko.trajectory_returns(R, states, actions) / alpha), 0)
        np.testing.assert_allclose(p_soft, weights / weights.sum(), atol=1e-14)
        Q_post, _, _ = ko.posterior_backward(P, R, alpha)
        Q_soft, _ = ko.soft_value_iteration(P, R, alpha)
        np.testing.assert_allclose(Q_post, Q_soft, atol=1e-12)


def test_control_as_inference_is_optimistic_with_stochastic_dynamics():
    rng = np.random.default_rng(4)
    alpha = 0.5
    P, R = _finite_mdp(rng)
    states, actions = ko.trajectories(3, 2, 3)
    prior = ko.trajectory_probabilities(P, np.full((3, 3, 2), 0.5), 0, states, actions)
    posterior = prior * np.exp(ko.trajectory_returns(R, states, actions) / alpha)
    posterior /= posterior.sum()
    Q_post, pi_post, V_post = ko.posterior_backward(P, R, alpha)
    # the backward messages are the exact posterior once the dynamics are tilted by exp(V / alpha)
    tilted = P * np.exp(V_post[1:, None, None, :] / alpha)
    tilted /= tilted.sum(axis=-1, keepdims=True)
    np.testing.assert_allclose(
        ko.trajectory_probabilities(tilted, pi_post, 0, states, actions), posterior, atol=1e-14
    )
    # soft value iteration differs: Q_post >= Q_soft (Jensen), strictly somewhere, and its
    # trajectory distribution under the true dynamics is not the posterior
    Q_soft, pi_soft = ko.soft_value_iteration(P, R, alpha)
    assert np.all(Q_post >= Q_soft - 1e-12) and np.max(Q_post - Q_soft) > 1e-2
    p_soft = ko.trajectory_probabilities(P, pi_soft, 0, states, actions)
    assert np.max(np.abs(p_soft - posterior)) > 1e-3


def test_dpo_tabular_optimum_is_the_kl_regularised_one():
    rng = np.random.default_rng(5)
    for beta in (0.3, 1.0):
        logits_ref, r = rng.normal(size=6), rng.normal(size=6)
        res = minimize(
            lambda z, lr=logits_ref, r=r, b=beta: ko.dpo_population_loss(z, lr, r, b),
            logits_ref,
            method="BFGS",
            options={"gtol": 1e-10},
        )
        pi_star, _ = po.kl_regularized_optimum(po.softmax(logits_ref), r, beta)
        np.testing.assert_allclose(po.softmax(res.x), pi_star, atol=1e-6)


def _fit(loss, starts):
    return min((minimize(loss, s, method="BFGS") for s in starts), key=lambda res: res.fun).x


def test_dpo_and_exo_differ_in_a_restricted_class():
    """Finding (the direction): a bimodal pi* fitted with quadratic logits over arms on a line.
    EXO's reverse KL locks onto the better mode (entropy below pi*'s); DPO spreads over both,
    flatter even than the forward-KL fit (so DPO is not the forward-KL projection either)."""
    x = np.linspace(-1, 1, 21)
    r = np.exp(-(((x - 0.6) / 0.15) ** 2)) + 0.8 * np.exp(-(((x + 0.6) / 0.15) ** 2))
    beta, logits_ref = 0.2, np.zeros(21)
    pi_star, _ = po.kl_regularized_optimum(po.softmax(logits_ref), r, beta)
    feats = np.stack([x, x**2], axis=1)

    def policy(theta):
        return po.softmax(feats @ theta)

    starts = [np.zeros(2), np.array([5.0, -5.0]), np.array([-5.0, -5.0]), np.array([10.0, -10.0])]
    dpo = policy(_fit(lambda t: ko.dpo_population_loss(feats @ t, logits_ref, r, beta), starts))
    exo = policy(_fit(lambda t: po.kl(policy(t), pi_star), starts))
    fwd = policy(_fit(lambda t: po.kl(pi_star, policy(t)), starts))

    def entropy(p):
        return -np.sum(p * np.log(np.maximum(p, 1e-300)))

    assert po.tv(dpo, exo) > 0.3
    assert entropy(exo) < entropy(pi_star) < entropy(fwd) < entropy(dpo)
    assert exo[x > 0].sum() > 0.99 and dpo[x > 0].sum() < fwd[x > 0].sum() < 0.7
    assert exo @ r > pi_star @ r > fwd @ r > dpo @ r
