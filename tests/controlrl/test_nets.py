"""Networks: init, fast forward, flat parameters."""

import math

import torch

from controlrl.nets import (
    CategoricalPolicy,
    GaussianPolicy,
    TanhGaussianActor,
    TwinQ,
    ValueNet,
    fast_forward,
    flatten_parameters,
)


def test_fast_forward_equals_module_call():
    torch.manual_seed(0)
    policy = GaussianPolicy(5, 2, (32, 16))
    x = torch.randn(7, 5)
    torch.testing.assert_close(fast_forward(policy.mean, x), policy.mean(x), rtol=0, atol=0)
    cat = CategoricalPolicy(5, 3)
    torch.testing.assert_close(fast_forward(cat.logits, x), cat.logits(x), rtol=0, atol=0)


def test_flat_parameters_give_identical_gradients_and_updates():
    torch.manual_seed(0)
    ref_p, ref_v = GaussianPolicy(4, 2), ValueNet(4)
    p, v = GaussianPolicy(4, 2), ValueNet(4)
    p.load_state_dict(ref_p.state_dict())
    v.load_state_dict(ref_v.state_dict())
    flat = flatten_parameters(p, v)
    assert flat.numel() == sum(t.numel() for t in [*p.parameters(), *v.parameters()])
    ref_opt = torch.optim.Adam([*ref_p.parameters(), *ref_v.parameters()], lr=1e-2)
    opt = torch.optim.Adam([flat], lr=1e-2)
    x, a = torch.randn(16, 4), torch.randn(16, 2)
    for _ in range(3):
        for policy, value, o in ((ref_p, ref_v, ref_opt), (p, v, opt)):
            o.zero_grad(set_to_none=o is ref_opt)
            loss = policy.log_prob_entropy(x, a)[0].mean() + value(x).pow(2).mean()
            loss.backward()
            if o is opt:
                torch.nn.utils.clip_grad_norm_([flat], 0.5)
            else:
                torch.nn.utils.clip_grad_norm_([*ref_p.parameters(), *ref_v.parameters()], 0.5)
            o.step()
    for a_, b_ in zip(
        [*ref_p.parameters(), *ref_v.parameters()], [*p.parameters(), *v.parameters()]
    ):
        torch.testing.assert_close(a_, b_, rtol=1e-6, atol=1e-7)
    # module state dicts still load in place into the flat storage
    p.load_state_dict(ref_p.state_dict())
    assert p.log_std.data_ptr() >= flat.data_ptr()


def _loss_and_grads(policy, x, a, ent_coef, entropy_grad):
    policy.zero_grad(set_to_none=True)
    logp, entropy = policy.log_prob_entropy(x, a, entropy_grad)
    ent = entropy.mean()
    loss = -(logp * torch.linspace(-1, 1, len(x))).mean() - ent_coef * ent
    loss.backward()
    return loss.detach(), ent.detach(), [p.grad.clone() for p in policy.parameters()]


def test_entropy_without_graph_changes_no_bit_at_ent_coef_0():
    # PPO's loss with ent_coef 0 computes the entropy without a graph (entropy_grad=False, ~5%
    # of an update): the loss, the logged entropy and every gradient must stay bit-identical
    torch.manual_seed(0)
    for policy, a in (
        (GaussianPolicy(5, 3), torch.randn(64, 3)),
        (CategoricalPolicy(5, 4), torch.randint(0, 4, (64,))),
    ):
        x = torch.randn(64, 5)
        with_graph = _loss_and_grads(policy, x, a, 0.0, True)
        without = _loss_and_grads(policy, x, a, 0.0, False)
        assert torch.equal(with_graph[0], without[0]) and torch.equal(with_graph[1], without[1])
        for g1, g2 in zip(with_graph[2], without[2]):
            assert torch.equal(g1, g2)
        # with an entropy bonus the graph is kept: the gradient changes
        bonus = _loss_and_grads(policy, x, a, 0.5, True)
        assert not all(torch.equal(g1, g2) for g1, g2 in zip(bonus[2], with_graph[2]))
        assert not torch.is_grad_enabled() or without[1].requires_grad is False


def test_log_prob_at_is_log_prob_entropy_from_one_forward():
    torch.manual_seed(1)
    for policy, a in (
        (GaussianPolicy(5, 3), torch.randn(32, 3)),
        (CategoricalPolicy(5, 4), torch.randint(0, 4, (32,))),
    ):
        x = torch.randn(32, 5)
        logp = policy.log_prob_at(policy.dist_params(x), a)
        assert torch.equal(logp, policy.log_prob_entropy(x, a)[0])
        if isinstance(policy, GaussianPolicy):
            dist = torch.distributions.Normal(policy.mean(x), policy.log_std.exp())
            ref = dist.log_prob(a).sum(-1)
        else:
            ref = torch.distributions.Categorical(logits=policy.logits(x)).log_prob(a)
        torch.testing.assert_close(logp, ref)


def test_gaussian_loss_gradient_bits_match_the_written_out_formula():
    # the formula as one expression, log-prob before entropy: reordering the graph changes the
    # order autograd sums log_std's gradients in, and so the bits of every later run
    torch.manual_seed(2)
    policy, x, a = GaussianPolicy(5, 3), torch.randn(64, 5), torch.randn(64, 3)
    mean = policy.mean(x)
    log_std = policy.log_std.expand_as(mean)
    z = (a - mean) * torch.exp(-log_std)
    logp = (-0.5 * z.pow(2) - log_std).sum(-1) - 0.5 * math.log(2 * math.pi) * 3
    entropy = (log_std + 0.5 * (1.0 + math.log(2 * math.pi))).sum(-1)
    policy.zero_grad(set_to_none=True)
    (-(logp * torch.linspace(-1, 1, 64)).mean() - 0.5 * entropy.mean()).backward()
    ref = [p.grad.clone() for p in policy.parameters()]
    got = _loss_and_grads(policy, x, a, 0.5, True)[2]
    for g1, g2 in zip(ref, got):
        assert torch.equal(g1, g2)


def test_fast_forward_with_autograd_gives_the_module_gradients_bit_exactly():
    # the training forwards (dist_params, ValueNet) run fast_forward with autograd on: the
    # same values and gradients as the modules' own calls, the input left untouched
    torch.manual_seed(3)
    for act in (torch.nn.Tanh, torch.nn.ReLU):
        net, x = GaussianPolicy(5, 2, (16, 8), act).mean, torch.randn(9, 5)
        grads = []
        for forward in (net, lambda x, net=net: fast_forward(net, x)):
            net.zero_grad(set_to_none=True)
            before = x.clone()
            out = forward(x)
            assert torch.equal(x, before)
            out.pow(2).sum().backward()
            grads.append((out.detach(), [p.grad.clone() for p in net.parameters()]))
        assert torch.equal(grads[0][0], grads[1][0])
        assert all(torch.equal(a, b) for a, b in zip(grads[0][1], grads[1][1]))
    value = ValueNet(5)
    x = torch.randn(4, 5)
    assert torch.equal(value(x), value.net(x).squeeze(-1))


def test_twin_q_is_two_plain_mlps_in_values_and_gradients():
    # the batched layers and the per-head matrix-vector output layer compute, up to float
    # rounding (other kernels sum in another order), what two separate heads do
    torch.manual_seed(4)
    twin = TwinQ(5, 2, (32, 16))
    heads = [twin.head(k) for k in range(2)]
    obs, act = torch.randn(64, 5), torch.randn(64, 2)
    y = torch.randn(2, 64)
    q = twin(obs, act)
    assert q.shape == (2, 64)
    ref = torch.stack([h(torch.cat([obs, act], -1)).squeeze(-1) for h in heads])
    torch.testing.assert_close(q, ref, rtol=1e-5, atol=1e-6)
    ((q - y).square() * torch.linspace(0.5, 2, 64)).mean().backward()
    ((ref - y).square() * torch.linspace(0.5, 2, 64)).mean().backward()
    for layer, (w, b) in enumerate(zip(twin.weights, twin.biases)):
        for k in range(2):
            lin = heads[k][2 * layer]
            torch.testing.assert_close(w.grad[k], lin.weight.grad.T, rtol=1e-5, atol=1e-7)
            torch.testing.assert_close(b.grad[k, 0], lin.bias.grad, rtol=1e-5, atol=1e-7)
    torch.testing.assert_close(twin(torch.cat([obs, act], -1)), q)  # [s, a] rows given at once


def test_tanh_gaussian_actor_mode_is_the_modules_forward_bit_exactly():
    torch.manual_seed(5)
    actor = TanhGaussianActor(5, 3, (16, 16), torch.tensor([1.0, 2.0, 0.5]))
    x = torch.randn(8, 5)
    assert torch.equal(actor.mode(x), torch.tanh(actor.net(x)) * actor.max_action)
