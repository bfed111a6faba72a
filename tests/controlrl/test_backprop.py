"""controlrl.backprop.MLPTape: outputs and parameter gradients equal autograd's (Sequential and
a TwinQ head), gradients overwritten not accumulated, inputs as strided views, and the
refusals (wrong batch size, non-ReLU nets, parameters without .grad, backward first)."""

import pytest
import torch
from torch import nn

from controlrl.backprop import MLPTape
from controlrl.nets import TwinQ, flatten_parameters, mlp

CLOSE = dict(rtol=1e-5, atol=1e-6)  # other summation orders than autograd's kernels


def autograd_grads(module, forward, x, g):
    """Output and parameter gradients of <forward(x), g> by autograd."""
    out = forward(x)
    grads = torch.autograd.grad(out, list(module.parameters()), g)
    return out.detach(), grads


@pytest.mark.parametrize("sizes", [[5, 8, 8, 1], [5, 7, 3], [4, 2]])
def test_sequential_tape_equals_autograd(sizes):
    torch.manual_seed(0)
    net = mlp(sizes, nn.ReLU)
    flatten_parameters(net)
    table = torch.randn(9, 12)
    x = table[:, 2 : 2 + sizes[0]]  # a strided view, as OfflineBuffer.sample gives
    g = torch.randn(9, sizes[-1])
    ref_out, ref_grads = autograd_grads(net, net, x, g)
    tape = MLPTape.of_sequential(net, 9)
    for _ in range(2):  # twice: the second backward overwrites, it does not add
        torch.testing.assert_close(tape.forward(x), ref_out, **CLOSE)
        tape.backward(g)
        for p, ref in zip(net.parameters(), ref_grads, strict=True):
            torch.testing.assert_close(p.grad, ref, **CLOSE)


def test_relu_gradient_is_masked_where_the_unit_is_off():
    net = mlp([1, 2, 1], nn.ReLU)
    flatten_parameters(net)
    with torch.no_grad():
        net[0].weight.copy_(torch.tensor([[1.0], [-1.0]]))  # unit 1 off for x > 0
        net[0].bias.zero_()
        net[2].weight.copy_(torch.tensor([[2.0, 3.0]]))
    tape = MLPTape.of_sequential(net, 1)
    tape.forward(torch.tensor([[1.5]]))
    tape.backward(torch.ones(1, 1))
    assert net[0].weight.grad.tolist() == [[3.0], [0.0]]  # 2 * 1.5 through unit 0 only
    assert net[0].bias.grad.tolist() == [2.0, 0.0]
    assert net[2].weight.grad.tolist() == [[1.5, 0.0]]


@pytest.mark.parametrize("k", [0, 1])
def test_twin_head_tape_equals_autograd_on_that_head(k):
    torch.manual_seed(1)
    twin = TwinQ(3, 2, (6, 5))
    flatten_parameters(twin)
    x = torch.randn(4, 5)
    g = torch.randn(4, 1)
    out = twin(x)[k]
    ref = torch.autograd.grad(out, list(twin.parameters()), g.squeeze(-1))
    tape = MLPTape.of_twin_head(twin, k, 4)
    torch.testing.assert_close(tape.forward(x), out.detach()[:, None], **CLOSE)
    for p in twin.parameters():
        p.grad.fill_(7.0)
    tape.backward(g)
    for p, r in zip(twin.parameters(), ref, strict=True):
        torch.testing.assert_close(p.grad[k], r[k], **CLOSE)
        assert (p.grad[1 - k] == 7.0).all()  # the other head's gradient is left alone


def test_refusals():
    net = mlp([3, 4, 1], nn.ReLU)
    with pytest.raises(ValueError, match="flatten"):
        MLPTape.of_sequential(net, 2)  # no .grad to write into
    flatten_parameters(net)
    tape = MLPTape.of_sequential(net, 2)
    with pytest.raises(RuntimeError, match="before forward"):
        tape.backward(torch.ones(2, 1))
    with pytest.raises(ValueError, match="3 rows, built for 2"):
        tape.forward(torch.ones(3, 3))
    tanh = mlp([3, 4, 1], nn.Tanh)
    flatten_parameters(tanh)
    with pytest.raises(ValueError, match="ReLU"):
        MLPTape.of_sequential(tanh, 2)
    twin = TwinQ(2, 1, (4,), nn.Tanh)
    flatten_parameters(twin)
    with pytest.raises(ValueError, match="ReLU"):
        MLPTape.of_twin_head(twin, 0, 2)
