"""Behaviour cloning on an offline dataset before fine-tuning, and the pretrained.pt file that
hands its network to a later run. As DPPO pre-trains (Ren et al. 2024, arXiv 2409.00588;
irom-lab/dppo agent/pretrain/train_agent.py: an EMA of the weights, a cosine learning rate to
min_lr; cfg/gym/pretrain/hopper-medium-v2/pre_diffusion_mlp.yaml), whatever the network and its
loss: the caller passes both.

    saved = load_pretrained(args.pretrained, "dppo-pretrained")  # in validate(): exit 2 on a
    require_same_flags(args, saved)                              # foreign file, other flags
    start_from_clone(run, net, loss_fn, dataset, args, "dppo-pretrained", ("hidden_sizes",))

start_from_clone pre-trains (the normaliser set to dataset_normalizer_state, then pretrain,
save_pretrained) or loads (load_pretrained, load_into) --pretrained or a resumed run's own
file; a resumed run that had no checkpoint yet restarts from step 0 and pre-trains again.

pretrained.pt holds "kind" (what wrote it: a training checkpoint or another algorithm's file is
refused), whatever else the writer adds (its env id, ...), "config" (the values of the flags the
network's shape depends on: a run that loads the file must have the same), "network" (a
state_dict) and "obs_normalizer" (a state_dict or None).
"""

from __future__ import annotations

import copy
import csv
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from torch import nn

from controlrl import checkpoint, rundir
from controlrl.buffers import OfflineBuffer
from controlrl.cli import ArgError, fail, require

BCLoss = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]  # (obs, actions) -> scalar


def dataset_normalizer_state(observations: np.ndarray) -> dict[str, torch.Tensor]:
    """An ObsNormalizer state of the dataset's mean and variance (count: the dataset size)."""
    obs = np.asarray(observations, np.float64)
    return {
        "mean": torch.from_numpy(obs.mean(0)),
        "var": torch.from_numpy(obs.var(0) + 1e-6),  # a constant column stays finite
        "count": torch.tensor(float(len(obs)), dtype=torch.float64),
    }


def cosine_lr(step: int, steps: int, lr: float, min_lr: float) -> float:
    """lr at step 0, cosine-decayed to min_lr at step `steps` (no warm-up, no restart)."""
    cos = 0.5 * (1 + math.cos(math.pi * step / steps))
    return min_lr + (lr - min_lr) * cos


def pretrain(
    net: nn.Module, loss_fn: BCLoss, dataset, obs_normalizer, args, log_path: Path
) -> list[tuple[int, float]]:
    """args.pretrain_steps Adam steps on net's parameters of loss_fn(obs, actions), on
    minibatches of args.pretrain_batch_size rows of the dataset (observations through the frozen
    normaliser, sampled with args.seed); lr cosine-decayed from args.pretrain_lr to
    args.pretrain_min_lr; an EMA (args.ema_decay) of net updated every step is copied into net
    at the end. Returns [(step, mean loss)] every 1% of the steps, also written to log_path
    (step,bc_loss)."""
    obs = np.asarray(dataset.observations, np.float32)
    if obs_normalizer is not None:
        obs = obs_normalizer(obs, update=False)
    buffer = OfflineBuffer(
        obs, dataset.actions, dataset.rewards, obs, dataset.terminals, seed=args.seed
    )
    ema = copy.deepcopy(net).requires_grad_(False)
    optimizer = torch.optim.Adam(net.parameters(), lr=args.pretrain_lr)
    steps, every = args.pretrain_steps, max(1, args.pretrain_steps // 100)
    history, running = [], 0.0
    for step in range(steps):
        lr = cosine_lr(step, steps, args.pretrain_lr, args.pretrain_min_lr)
        optimizer.param_groups[0]["lr"] = lr
        batch = buffer.sample(args.pretrain_batch_size)
        loss = loss_fn(batch["obs"], batch["actions"])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        with torch.no_grad():
            for p_ema, p in zip(ema.parameters(), net.parameters()):
                p_ema.lerp_(p, 1 - args.ema_decay)
        running += loss.item()
        if (step + 1) % every == 0:
            history.append((step + 1, running / every))
            running = 0.0
    if steps:
        net.load_state_dict(ema.state_dict())
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "w", newline="") as f:
        csv.writer(f).writerows([("step", "bc_loss"), *history])
    return history


def save_pretrained(
    path: Path, kind: str, net: nn.Module, obs_normalizer, args, shape_flags, **meta
) -> None:
    """pretrained.pt (atomic): kind, meta, config (args' values of shape_flags, the flags the
    network's shape depends on), the network and the normaliser."""
    state = {
        "kind": kind,
        **meta,
        "config": {name: getattr(args, name) for name in shape_flags},
        "network": net.state_dict(),
        "obs_normalizer": None if obs_normalizer is None else obs_normalizer.state_dict(),
    }
    checkpoint.save(path, state)


def load_pretrained(path: str, kind: str) -> dict:
    """A pretrained.pt of this kind (weights only); a missing or foreign file raises ArgError
    naming --pretrained (one line, exit 2)."""
    try:
        saved = checkpoint.load(path)
    except checkpoint.CheckpointError as exc:
        raise ArgError(f"--pretrained: {exc}") from None
    if saved.get("kind") != kind:
        raise ArgError(
            f"--pretrained: {path} is not a pretrained.pt of kind {kind!r} (a training "
            "checkpoint continues with --resume)"
        )
    return saved


def require_same_flags(args, saved: dict) -> None:
    """Every flag of the pretrained.pt's config must have its value in args (ArgError naming the
    first that differs)."""
    for name, value in saved["config"].items():
        require(
            value == getattr(args, name),
            name,
            f"must match --pretrained ({value}), got {getattr(args, name)}",
        )


def load_into(net: nn.Module, obs_normalizer, saved: dict) -> None:
    """Restore a pretrained.pt into net and the normaliser; one that does not fit (other shapes,
    a normaliser missing) exits 2 naming --pretrained."""
    try:
        net.load_state_dict(saved["network"])
        if obs_normalizer is not None:
            obs_normalizer.load_state_dict(saved["obs_normalizer"])
    except (KeyError, RuntimeError, ValueError) as exc:
        fail(f"--pretrained: does not fit this env ({str(exc).splitlines()[0][:160]})")


def start_from_clone(
    run, net: nn.Module, loss_fn: BCLoss, dataset, args, kind: str, shape_flags, **meta
) -> None:
    """The start of a fine-tuning run (controlrl.training.Run) from a behaviour clone:
    pre-train net on the dataset and write <run_dir>/pretrained.pt (with args.env_id, meta and
    config), or load args.pretrained (or a resumed run's own pretrained.pt) into net. The run's
    observation normaliser (None: not normalised) holds the dataset's statistics, frozen,
    either way: the clone's inputs."""
    normalizer = run.obs_normalizer
    if normalizer is not None:
        normalizer.frozen = True
    path = Path(run.run_dir) / "pretrained.pt"
    # a resumed run's own clone; a run killed before its first checkpoint starts again from
    # step 0 and so pre-trains again: the same draws, the same clone, the run byte for byte
    restart = getattr(run, "restart_from_scratch", False)
    resumed = args.resume is not None and path.exists() and not restart
    source = args.pretrained or (str(path) if resumed else None)
    if source is not None:
        load_into(net, normalizer, load_pretrained(source, kind))
        return
    shape = (dataset.observations.shape[1:], dataset.actions.shape[1:])
    if shape != (run.obs_space.shape, run.act_space.shape):
        fail(f"--dataset: obs x action shapes {shape} do not fit {args.env_id}")
    if normalizer is not None:
        normalizer.load_state_dict(dataset_normalizer_state(dataset.observations))
    with rundir.on_disk_fault(run.run_dir):  # a full or read-only disk: one line, exit 1
        pretrain(net, loss_fn, dataset, normalizer, args, path.parent / "pretrain.csv")
        meta = {**meta, "env_id": args.env_id}
        save_pretrained(path, kind, net, normalizer, args, shape_flags, **meta)


def load_demos(path: str) -> tuple[np.ndarray, np.ndarray]:
    """(observations [n, d] float32, actions [n] or [n, a]) of a demonstration .npz with keys
    "obs" and "actions" (never unpickled); ArgError naming --bc-demos and the key at fault."""
    try:
        with np.load(path, allow_pickle=False) as data:
            found = {k: data[k] for k in data.files}
    except (OSError, ValueError) as exc:
        raise ArgError(f"--bc-demos: {path} is not a readable .npz ({exc})") from None
    for key in ("obs", "actions"):
        require(key in found, "bc_demos", f"{path} has no key {key!r}")
    obs, actions = found["obs"], found["actions"]
    require(obs.ndim == 2 and len(obs) > 0, "bc_demos", f"{path} [obs] must be [n >= 1, d]")
    require(len(actions) == len(obs), "bc_demos", f"{path} [actions] must have {len(obs)} rows")
    require(np.isfinite(obs).all(), "bc_demos", f"{path} [obs] holds nan or inf")
    return obs.astype(np.float32), actions


def behaviour_clone(
    policy: nn.Module, obs: np.ndarray, actions: np.ndarray, steps: int, lr: float, obs_normalizer
) -> list[float]:
    """`steps` full-batch Adam steps (learning rate lr) on the negative log-likelihood
    -mean log pi(a|s) of the demonstrations, a short behaviour clone before RL; the observation
    normaliser (None: raw observations) first takes the demonstrations into its running
    statistics. Returns the loss before each step."""
    obs = np.asarray(obs, np.float32)
    if obs_normalizer is not None:
        obs = obs_normalizer(obs, update=True)
    x = torch.as_tensor(obs, dtype=torch.float32)
    a = torch.as_tensor(actions)
    optimizer = torch.optim.Adam(policy.parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        loss = -policy.log_prob_entropy(x, a, entropy_grad=False)[0].mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses
