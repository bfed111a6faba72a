"""Adam on one flat parameter, stepped by torch's fused Adam kernel without torch.optim.

torch.optim's Optimizer imports torch._dynamo when it is built (about 1.4 s of every process
start here, more than a 100k-sample bandit run's updates take). FlatAdam is what
torch.optim.Adam([flat], lr, eps=eps, fused=True) does for one float32 CPU tensor (Kingma & Ba
2015, arXiv 1412.6980): the same kernel (torch._fused_adam_), the same float32 step counter, the
same state_dict layout, so runs and checkpoints are bit-identical either way
(tests/controlrl/test_optim.py compares them step by step and across a checkpoint).
"""

from __future__ import annotations

import torch

# torch.optim.Adam's param_group keys, so that state_dict() loads into either optimiser
_GROUP_DEFAULTS = {
    "betas": (0.9, 0.999),
    "weight_decay": 0,
    "amsgrad": False,
    "maximize": False,
    "foreach": None,
    "capturable": False,
    "differentiable": False,
    "fused": True,
    "decoupled_weight_decay": False,
}


class FlatAdam:
    """Adam (betas 0.9, 0.999, no weight decay) on one flat Parameter; param_groups[0]["lr"]
    is read at every step (schedules set it as with torch.optim)."""

    def __init__(self, param: torch.nn.Parameter, lr: float, eps: float) -> None:
        if param.dtype != torch.float32 or param.device.type != "cpu":
            raise ValueError("param: FlatAdam takes one float32 CPU tensor")
        self.param_groups = [{**_GROUP_DEFAULTS, "lr": lr, "eps": eps, "params": [param]}]
        self.state = {
            "step": torch.tensor(0.0),  # float32, as fused Adam's
            "exp_avg": torch.zeros_like(param),
            "exp_avg_sq": torch.zeros_like(param),
        }

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Zero the gradient; set_to_none=False keeps it in place (the modules' .grad are
        views of it, controlrl.nets.flatten_parameters)."""
        (param,) = self.param_groups[0]["params"]
        if set_to_none:
            param.grad = None
        elif param.grad is not None:
            param.grad.zero_()

    @torch.no_grad()
    def step(self) -> None:
        """One Adam step from param.grad (a no-op without a gradient, as torch.optim)."""
        group = self.param_groups[0]
        (param,) = group["params"]
        if param.grad is None:
            return
        state = self.state
        state["step"].add_(1)
        beta1, beta2 = group["betas"]
        torch._fused_adam_(
            [param],
            [param.grad],
            [state["exp_avg"]],
            [state["exp_avg_sq"]],
            [],
            [state["step"]],
            amsgrad=False,
            lr=group["lr"],
            beta1=beta1,
            beta2=beta2,
            weight_decay=0.0,
            eps=group["eps"],
            maximize=False,
        )

    def state_dict(self) -> dict:
        """torch.optim.Adam's layout: {"state": {0: step, exp_avg, exp_avg_sq}, "param_groups"}."""
        group = {k: v for k, v in self.param_groups[0].items() if k != "params"}
        state = {k: v.clone() for k, v in self.state.items()}
        return {
            "state": {0: state} if self.state["step"] > 0 else {},
            "param_groups": [{**group, "params": [0]}],
        }

    def load_state_dict(self, state_dict: dict) -> None:
        """Load what state_dict() (or torch.optim.Adam's, for one parameter) saved."""
        (group,) = state_dict["param_groups"]
        self.param_groups[0].update({k: v for k, v in group.items() if k != "params"})
        saved = state_dict["state"].get(0)
        if saved is None:
            return
        for key in ("exp_avg", "exp_avg_sq"):
            self.state[key] = saved[key].to(torch.float32).clone()
        self.state["step"] = torch.as_tensor(saved["step"], dtype=torch.float32).clone()
