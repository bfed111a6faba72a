"""ReLU MLPs run with their backward pass written out: the forward keeps each layer's output in
a buffer allocated once, the backward writes every parameter gradient in place into the
parameters' .grad (views of an optimiser's flat gradient, controlrl.nets.flatten_parameters).

Why: an IQL step is ~15 matrix products of 256 x 256 at this CPU's rate plus ~250 small ops;
under autograd the small ops and fresh activation tensors (cache-cold, from malloc) cost ~8%
of the step, which buffers reused every step and no graph avoid (paper_figures/bench_iql.py).
The products are the ones autograd runs (x W + b forward; x^T g, g W^T backward), so the
numbers equal autograd's up to float rounding (tests/controlrl/test_backprop.py)."""

from __future__ import annotations

import torch
from torch import nn

_relu_grad_ = torch.ops.aten.threshold_backward.grad_input  # g * (h > 0), into a buffer


class MLPTape:
    """A ReLU MLP of fixed batch size: forward(x) -> [B, out] (a buffer, overwritten by the
    next forward), then backward(g) with g = dLoss/d(output) [B, out] writes dLoss/dW and
    dLoss/db of every layer into the parameters' .grad (overwriting, no zeroing needed).
    Layer i computes h_i = x_i W_i + b_i with W_i an [in, out] view, ReLU between layers."""

    def __init__(self, weights, biases, weight_grads, bias_grads, batch_size: int) -> None:
        self.w = [w.detach() for w in weights]  # the same memory, outside autograd
        self.b = [b.detach() for b in biases]
        self.gw, self.gb = list(weight_grads), list(bias_grads)
        self.batch_size = batch_size
        self.out = [torch.empty(batch_size, w.shape[1]) for w in self.w]  # h_i after ReLU
        self.grad = [torch.empty(batch_size, w.shape[1]) for w in self.w[:-1]]
        self.x: torch.Tensor | None = None

    @classmethod
    def of_sequential(cls, net: nn.Sequential, batch_size: int) -> MLPTape:
        """The tape of a Sequential of Linear and ReLU layers (nn.Linear keeps W^T: views)."""
        linears = [m for m in net if isinstance(m, nn.Linear)]
        acts = [type(m) for m in net if not isinstance(m, nn.Linear)]
        if acts != [nn.ReLU] * (len(linears) - 1):
            raise ValueError(f"MLPTape takes Linear layers with ReLU between them, got {net}")
        _require_grads(linears)
        return cls(
            [lin.weight.T for lin in linears],
            [lin.bias for lin in linears],
            [lin.weight.grad.T for lin in linears],
            [lin.bias.grad for lin in linears],
            batch_size,
        )

    @classmethod
    def of_twin_head(cls, twin: nn.Module, k: int, batch_size: int) -> MLPTape:
        """The tape of head k of a controlrl.nets.TwinQ (weights [2, in, out]: views [k])."""
        if twin.activation is not nn.ReLU:
            raise ValueError(f"MLPTape takes ReLU heads, got {twin.activation.__name__}")
        ws, bs = list(twin.weights), list(twin.biases)
        _require_grads([twin])
        return cls(
            [w[k] for w in ws],
            [b[k, 0] for b in bs],
            [w.grad[k] for w in ws],
            [b.grad[k, 0] for b in bs],
            batch_size,
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The MLP's output [B, out] (no graph); x [B, in] is kept for backward."""
        if x.shape[0] != self.batch_size:
            raise ValueError(f"MLPTape: batch of {x.shape[0]} rows, built for {self.batch_size}")
        self.x = x
        last = len(self.w) - 1
        for i, (w, b, out) in enumerate(zip(self.w, self.b, self.out)):
            x = torch.addmm(b, x, w, out=out)
            if i < last:
                x.relu_()
        return x

    def backward(self, g: torch.Tensor) -> None:
        """dLoss/dW_i = x_i^T g_i, dLoss/db_i = sum_rows g_i into .grad, layer by layer down,
        g_{i-1} = (g_i W_i^T) * (h_{i-1} > 0); the input's gradient is not formed."""
        if self.x is None:
            raise RuntimeError("MLPTape.backward before forward")
        for i in range(len(self.w) - 1, -1, -1):
            x_i = self.out[i - 1] if i > 0 else self.x
            torch.mm(x_i.T, g, out=self.gw[i])
            torch.sum(g, 0, out=self.gb[i])
            if i > 0:
                g = torch.mm(g, self.w[i].T, out=self.grad[i - 1])
                _relu_grad_(g, x_i, 0.0, grad_input=g)


def _require_grads(modules) -> None:
    """Every parameter needs its .grad tensor to write into (flatten_parameters gives one)."""
    if any(p.grad is None for m in modules for p in m.parameters()):
        raise ValueError("MLPTape writes into .grad: flatten the parameters first (adam())")
