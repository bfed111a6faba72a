"""FlatAdam is torch.optim.Adam(fused=True) bit for bit, in steps and in checkpoints, and
building and stepping it leaves torch._dynamo unimported (the point of it)."""

import subprocess
import sys

import pytest
import torch

from controlrl.optim import FlatAdam


def _pair(n=37, lr=0.01, eps=1e-5):
    torch.manual_seed(0)
    init = torch.randn(n)
    ours = torch.nn.Parameter(init.clone())
    theirs = torch.nn.Parameter(init.clone())
    return (
        ours,
        FlatAdam(ours, lr=lr, eps=eps),
        theirs,
        torch.optim.Adam([theirs], lr=lr, eps=eps, fused=True),
    )


def _step(param, opt, grad, lr=None):
    if lr is not None:
        opt.param_groups[0]["lr"] = lr
    param.grad = grad.clone()
    opt.step()


def test_steps_are_torch_fused_adam_bit_for_bit():
    ours, opt, theirs, ref = _pair()
    gen = torch.Generator().manual_seed(1)
    for i in range(25):
        grad = torch.randn(ours.shape, generator=gen) * (10.0 ** (i % 5 - 2))
        lr = 0.01 * (1 - i / 25)  # a schedule, as anneal_lr sets it
        _step(ours, opt, grad, lr)
        _step(theirs, ref, grad, lr)
        assert torch.equal(ours, theirs), i
    assert torch.equal(opt.state["exp_avg_sq"], ref.state[theirs]["exp_avg_sq"])
    assert opt.state["step"].item() == 25


def test_checkpoint_round_trips_both_ways():
    ours, opt, theirs, ref = _pair()
    gen = torch.Generator().manual_seed(2)
    grads = [torch.randn(ours.shape, generator=gen) for _ in range(10)]
    for g in grads[:4]:
        _step(ours, opt, g)
        _step(theirs, ref, g)
    # swap optimisers through their state dicts, then continue: still identical
    ours2, opt2, theirs2, ref2 = _pair(lr=0.5, eps=1e-8)  # overwritten by the load
    ours2.data.copy_(ours.data)
    theirs2.data.copy_(theirs.data)
    opt2.load_state_dict(ref.state_dict())
    ref2.load_state_dict(opt.state_dict())
    assert opt2.param_groups[0]["lr"] == 0.01 and opt2.param_groups[0]["eps"] == 1e-5
    for g in grads[4:]:
        _step(ours2, opt2, g)
        _step(theirs2, ref2, g)
        _step(ours, opt, g)
        assert torch.equal(ours2, theirs2) and torch.equal(ours2, ours)


def test_fresh_state_dict_matches_torch_and_loads():
    ours, opt, theirs, ref = _pair()
    assert opt.state_dict()["state"] == ref.state_dict()["state"] == {}
    assert opt.state_dict()["param_groups"] == ref.state_dict()["param_groups"]
    opt.load_state_dict(ref.state_dict())
    assert opt.state["step"].item() == 0


def test_zero_grad_in_place_keeps_views_and_none_skips_step():
    param = torch.nn.Parameter(torch.ones(4))
    param.grad = torch.full((4,), 3.0)
    view = param.grad[:2]
    opt = FlatAdam(param, lr=0.1, eps=1e-8)
    opt.zero_grad(set_to_none=False)
    assert param.grad is not None and torch.equal(view, torch.zeros(2))
    opt.zero_grad()
    opt.step()  # no gradient: no step, as torch.optim
    assert torch.equal(param, torch.ones(4)) and opt.state["step"].item() == 0


def test_rejects_what_the_fused_path_would_treat_differently():
    with pytest.raises(ValueError, match="^param"):
        FlatAdam(torch.nn.Parameter(torch.ones(3, dtype=torch.float64)), lr=0.1, eps=1e-8)


def test_update_adam_does_not_import_dynamo():
    code = (
        "import sys, torch\n"
        "from controlrl.update import adam\n"
        "net = torch.nn.Linear(3, 2)\n"
        "opt = adam(net, lr=0.1)\n"
        "net(torch.randn(5, 3)).sum().backward()\n"
        "opt.step(); opt.state_dict()\n"
        "print('torch._dynamo' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
