"""Networks: init, fast forward, flat parameters."""

import torch

from controlrl.nets import (
    CategoricalPolicy,
    GaussianPolicy,
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
