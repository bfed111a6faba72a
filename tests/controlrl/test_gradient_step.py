"""controlrl.update.gradient_step: one optimiser step on the whole batch for an algorithm
without epochs (REINFORCE-style), the flat optimiser's in-place zero_grad kept inside it; the
same step for every seed of a population."""

from __future__ import annotations

import copy

import torch

from controlrl.nets import CategoricalPolicy
from controlrl.population import PopulationPolicy
from controlrl.update import adam, clip_grad_norm, gradient_step, params_of


def batch_of(n: int = 12, seed: int = 0) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return {
        "obs": torch.randn(n, 3, generator=gen),
        "actions": torch.randint(0, 4, (n,), generator=gen),
        "advantages": torch.randn(n, generator=gen),
    }


def reinforce(policy, seen=None):
    def loss_fn(mb, idx):
        if seen is not None:
            seen.append(idx.clone())
        logp, _ = policy.log_prob_entropy(mb["obs"], mb["actions"], False)
        loss = -(mb["advantages"] * logp).mean()
        return loss, {"loss": loss.detach()}

    return loss_fn


def test_two_steps_are_two_fresh_gradient_adam_steps_in_row_order():
    torch.manual_seed(0)
    policy = CategoricalPolicy(3, 4, (8,))
    manual = copy.deepcopy(policy)
    optimizer, manual_opt = adam(policy, lr=0.05), adam(manual, lr=0.05)
    seen = []
    state = torch.get_rng_state()
    for seed in (1, 2):
        batch = batch_of(seed=seed)
        stats = gradient_step(optimizer, batch, reinforce(policy, seen), max_grad_norm=0.5)
        assert stats["grad_steps"] == 1
        loss, _ = reinforce(manual)(batch, torch.arange(12))
        manual_opt.zero_grad(set_to_none=False)
        loss.backward()
        clip_grad_norm(params_of(manual_opt), 0.5)
        manual_opt.step()
        for a, b in zip(policy.parameters(), manual.parameters()):
            torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert all(torch.equal(idx, torch.arange(12)) for idx in seen)  # the whole batch, in order
    assert torch.equal(torch.get_rng_state(), state)  # no shuffle drawn


def test_population_gradient_step_is_each_seeds_own_step():
    policies = []
    for seed in (3, 4):
        torch.manual_seed(seed)
        policies.append(CategoricalPolicy(3, 4, (8,)))
    alone = [copy.deepcopy(p) for p in policies]
    population = PopulationPolicy.build(policies)
    population.generators = [torch.Generator().manual_seed(s) for s in (3, 4)]
    batches = [batch_of(seed=s) for s in (5, 6)]
    stacked = {k: torch.stack([b[k] for b in batches]) for k in batches[0]}
    states = [g.get_state() for g in population.generators]
    stats = gradient_step(
        adam(population, lr=0.05), stacked, reinforce(population), max_grad_norm=0.5
    )
    assert stats["grad_steps"].tolist() == [1, 1]
    assert all(torch.equal(g.get_state(), s) for g, s in zip(population.generators, states))
    for k, (policy, batch) in enumerate(zip(alone, batches)):
        gradient_step(adam(policy, lr=0.05), batch, reinforce(policy), max_grad_norm=0.5)
        mine = population.state_dict()
        for name, value in policy.state_dict().items():
            torch.testing.assert_close(mine[name][k], value, rtol=1e-6, atol=1e-7)
