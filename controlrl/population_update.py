"""A population's optimiser and update loop (controlrl/population.py): one Adam per seed on
the rows of the population's [S, P] parameter, minibatch_update's loop for every seed at once
(per-seed shuffles, gradient-norm clip, target-KL stop, statistics), and the pool that runs
per-seed draws from the seeds' own generators on --torch-threads threads."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import numpy as np
import torch

from controlrl import diagnostics

if TYPE_CHECKING:
    from controlrl.population import PopulationPolicy

# a population's rows of parameters are padded to whole 64-byte cache lines of floats, so that
# one fused Adam call over all rows computes each element as a call on its row alone does
ROW_FLOATS = 16


class SeedPool:
    """Runs a function of a seed index for many seeds: in one thread, or split into contiguous
    chunks over torch.get_num_threads() threads (--torch-threads), so that the per-seed draws
    from the seeds' own generators (torch releases the GIL inside them) use every thread torch
    may use. Each seed is drawn by one thread into its own rows: the same numbers either way."""

    def __init__(self) -> None:
        self._executor: ThreadPoolExecutor | None = None
        self._threads = 0

    def map(self, fn, seeds) -> None:
        """fn(k) for every k of seeds."""
        seeds = list(seeds)
        threads = min(torch.get_num_threads(), len(seeds))
        if threads <= 1:
            for k in seeds:
                fn(k)
            return
        if self._threads != threads:
            self._executor, self._threads = ThreadPoolExecutor(threads), threads
        bounds = np.linspace(0, len(seeds), threads + 1).astype(int)
        chunks = [seeds[lo:hi] for lo, hi in zip(bounds[:-1], bounds[1:])]
        # the caller's autograd modes are thread-local: its worker threads take them on
        inference, grad = torch.is_inference_mode_enabled(), torch.is_grad_enabled()

        def run(chunk: list[int]) -> None:
            with torch.inference_mode(inference), torch.set_grad_enabled(grad):
                for k in chunk:
                    fn(k)

        for done in self._executor.map(run, chunks):
            del done  # map re-raises a chunk's exception here


def _gather_minibatch(batch: dict[str, torch.Tensor], idx: torch.Tensor) -> dict:
    """x[k, idx[k]] of every entry x [S, R, ...] of batch at idx [S, B] -> [S, B, ...]: one
    index_select of rows k * R + idx[k] on each entry's [S * R, ...] view (the same rows
    copied, ~5-10x cheaper than take_along_dim's broadcast index on CPU)."""
    S, R = next(iter(batch.values())).shape[:2]
    rows = (idx + torch.arange(0, S * R, R).unsqueeze(1)).reshape(-1)
    return {
        k: v.reshape(S * R, *v.shape[2:]).index_select(0, rows).reshape(*idx.shape, *v.shape[2:])
        for k, v in batch.items()
    }


class PopulationAdam:
    """One Adam (controlrl.optim.FlatAdam's: torch's fused kernel, eps, betas 0.9, 0.999) per
    seed on the rows of a PopulationPolicy's [S, P] parameter: each seed's row, moments, step
    count and learning rate (lrs[k]) are its own; population_update is minibatch_update's loop
    for all seeds at once."""

    def __init__(self, policy: PopulationPolicy, lr: float, eps: float) -> None:
        self.policy = policy
        flat = policy.flat
        S = self.num_seeds = flat.shape[0]
        self.lrs = [float(lr)] * S
        self.eps = eps
        self.exp_avg = torch.zeros_like(flat.detach())
        self.exp_avg_sq = torch.zeros_like(flat.detach())
        self.steps = torch.zeros(S)  # float32, as fused Adam's
        self.param_groups = [{"lr": lr, "eps": eps, "params": [flat]}]
        self._row_views: list[list[torch.Tensor]] | None = None
        # whole_rows: the fused kernel vectorises over cache lines of 16 floats and treats only
        # a tensor's last (numel mod vector width) elements apart; with every row a multiple of
        # 16 floats (PopulationPolicy pads them), 64-byte aligned, one call on the [S, P]
        # tensors gives each element the bits of the per-row call (a test checks it), at a
        # fraction of the per-tensor cost
        self.whole_rows = S > 1 and all(
            x.shape[1] % ROW_FLOATS == 0 and x.data_ptr() % 64 == 0
            for x in (flat.detach(), flat.grad, self.exp_avg, self.exp_avg_sq)
        )

    def step(self, active: torch.Tensor) -> None:
        """One Adam step of every active seed ([S] bool) from the gradient rows: one fused call
        per learning rate on the seeds' rows, each row its own tensor (so that the kernel's
        arithmetic on a seed's elements does not depend on the other seeds), or one call on
        the whole [S, P] tensors where that gives the same bits (see whole_rows)."""
        seeds = active.nonzero().flatten().tolist()
        if not seeds:
            return
        self.steps[active] += 1
        flat = self.policy.flat
        if (
            self.whole_rows
            and len(seeds) == self.num_seeds
            and len(set(self.lrs)) == 1
            and bool((self.steps == self.steps[0]).all())
        ):  # every seed at one learning rate and step count
            whole = [[flat.data], [flat.grad], [self.exp_avg], [self.exp_avg_sq]]
            return self._fused(whole, [self.steps[0]], self.lrs[0])
        rows = self._rows()
        everyone = len(seeds) == self.num_seeds
        for lr in sorted({self.lrs[k] for k in seeds}):
            ks = [k for k in seeds if self.lrs[k] == lr]
            picked = rows
            if not (everyone and len(ks) == len(seeds)):
                picked = [[x[k] for k in ks] for x in rows]
            self._fused(picked[:4], picked[4], lr)

    def _fused(self, tensors: list[list[torch.Tensor]], steps: list[torch.Tensor], lr: float):
        """torch's fused Adam on [params, grads, exp_avgs, exp_avg_sqs] at lr."""
        torch._fused_adam_(
            *tensors,
            [],
            steps,
            amsgrad=False,
            lr=lr,
            beta1=0.9,
            beta2=0.999,
            weight_decay=0.0,
            eps=self.eps,
            maximize=False,
        )

    def _rows(self) -> list[list[torch.Tensor]]:
        """Every seed's row of the parameter, its gradient, the two moments and its step count,
        as lists of views built once (the tensors behind them are only written in place)."""
        flat = self.policy.flat
        if self._row_views is None or self._row_views[1][0]._base is not flat.grad:
            self._row_views = [
                list(x.unbind(0))
                for x in (flat.data, flat.grad, self.exp_avg, self.exp_avg_sq, self.steps)
            ]
        return self._row_views

    def permutations(self, size: int, active: torch.Tensor | None) -> torch.Tensor:
        """torch.randperm(size) of every active seed from its generator (the others, and every
        seed where active is None: the rows in order) [S, size]."""
        S = self.num_seeds
        out = torch.arange(size).repeat(S, 1)
        if active is None:
            return out
        seeds = active.nonzero().flatten().tolist()
        generators = self.policy.generators

        def draw(k: int) -> None:
            torch.randperm(size, generator=generators[k], out=out[k])

        self.policy.seed_pool.map(draw, seeds)
        return out

    def clip_grad_norm(self, max_norm: float) -> torch.Tensor:
        """controlrl.update.clip_grad_norm on every seed's gradient row; the norms [S]."""
        grad = self.policy.flat.grad
        if self.num_seeds == 1:  # the single run's ops
            norms = torch.stack(torch._foreach_norm([grad[0]]))
            total = torch.linalg.vector_norm(norms).reshape(1)
        else:  # each row reduced alone: the bits of the per-row norm
            total = torch.linalg.vector_norm(grad, dim=1)
        grad.mul_(torch.clamp(max_norm / (total + 1e-6), max=1.0).unsqueeze(1))
        return total

    def population_update(
        self, batch, loss_fn, args, after_step, after_epoch, ratios, skip, shuffle=True
    ):
        """controlrl.update.minibatch_update for every seed: batch entries [S, rows, ...]; each
        seed shuffles with its generator (rows in order without shuffle), steps its own Adam,
        stops on its own target KL; seeds in skip [S] take no step (NaN statistics, 0
        grad_steps). Statistics [S] per name."""
        from controlrl.update import normalize_advantages

        if ratios is not None:
            raise ValueError("ratios: a population filters ratios in its loss_fn (RolloutRatios)")
        policy, S = self.policy, self.num_seeds
        size = batch["obs"].shape[1]
        mb_size = size // args.num_minibatches
        norm_adv = getattr(args, "norm_adv", False)
        target_kl = getattr(args, "target_kl", None)
        skip = torch.zeros(S, dtype=torch.bool) if skip is None else skip.reshape(S)
        active = ~skip
        logged: dict[str, list[torch.Tensor]] = {}
        masks: list[torch.Tensor] = []
        steps = torch.zeros(S, dtype=torch.int64)
        rows = torch.arange(size).expand(S, size)
        for epoch in range(args.update_epochs):
            if not bool(active.any()):
                break
            perms = self.permutations(size, active if shuffle else None)
            for idx in perms.split(mb_size, dim=1):  # [S, mb]
                if S > 1 and mb_size == size:  # every row: the rollout as it is (a
                    idx = rows  # permutation would change only the order of summation)
                    mb = dict(batch)
                else:
                    mb = _gather_minibatch(batch, idx)
                if norm_adv:
                    adv = mb["advantages"]
                    mb["advantages"] = (
                        normalize_advantages(adv[0]).unsqueeze(0)
                        if S == 1
                        else (adv - adv.mean(1, keepdim=True)) / (adv.std(1, keepdim=True) + 1e-8)
                    )
                loss, stats = policy.bound_losses(loss_fn, mb, idx)
                policy.backward(loss.sum())
                self.clip_grad_norm(args.max_grad_norm)
                self.step(active)
                steps += active
                if after_step is not None:
                    after_step()
                for k, v in stats.items():
                    logged.setdefault(k, []).append(v.detach())
                masks.append(active.clone())
            if after_epoch is not None:
                after_epoch(epoch)
            if target_kl is not None:
                active = active & ~(stats["approx_kl"] > target_kl)
        out = {k: _reduce(k, torch.stack(v), torch.stack(masks)) for k, v in logged.items()}
        for v in out.values():
            v[skip] = float("nan")
        bad = ~torch.isfinite(policy.flat.detach().abs().amax(1))  # NaN and inf propagate
        for v in out.values():
            bad |= ~torch.isfinite(v) & ~skip
        if bool(bad.any()):
            seeds = bad.nonzero().flatten().tolist()[:10]
            raise diagnostics.NonFiniteError(
                f"non-finite loss or parameters after update in seeds (indices) {seeds}"
            )
        out["grad_steps"] = steps
        return out

    def state_dict(self) -> dict:
        """Every seed's moments, step count and learning rate."""
        P = self.policy.num_params  # without the padding columns
        return {
            "exp_avg": self.exp_avg[:, :P].clone(),
            "exp_avg_sq": self.exp_avg_sq[:, :P].clone(),
            "steps": self.steps.clone(),
            "lrs": torch.tensor(self.lrs, dtype=torch.float64),
        }

    def load_state_dict(self, state: dict) -> None:
        """Restore what state_dict saved (in place)."""
        P = self.policy.num_params
        self.exp_avg[:, :P].copy_(state["exp_avg"])
        self.exp_avg_sq[:, :P].copy_(state["exp_avg_sq"])
        self.steps.copy_(state["steps"])
        self.lrs = [float(x) for x in state["lrs"]]


def _reduce(name: str, values: torch.Tensor, masks: torch.Tensor) -> torch.Tensor:
    """controlrl.update.reduce_stats per seed: values [M, S] over the minibatches each seed
    stepped in (masks [M, S]); mean, or max for names ending in '_max'. float64 [S]."""
    if values.shape[1] == 1:  # the single run's ops
        v = values[:, 0][masks[:, 0]]
        if v.numel() == 0:
            return torch.full((1,), float("nan"), dtype=torch.float64)
        return (v.max() if name.endswith("_max") else v.mean()).double().reshape(1)
    if name.endswith("_max"):
        out = torch.where(masks, values, -torch.inf).amax(0)
    else:
        out = torch.where(masks, values, 0.0).sum(0) / masks.sum(0)
    return out.double()


class SeedGenerators:
    """The torch generators of a population's seeds, as one checkpointable object."""

    def __init__(self, generators: list[torch.Generator]) -> None:
        self.generators = generators

    def state_dict(self) -> dict[str, torch.Tensor]:
        """Every generator's state [S, L] (uint8)."""
        return {"states": torch.stack([g.get_state() for g in self.generators])}

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        """Restore what state_dict saved."""
        for g, s in zip(self.generators, state["states"], strict=True):
            g.set_state(s.clone())
