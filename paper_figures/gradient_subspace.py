"""Gradient subspaces of PPO (Schneider et al., "Identifying Policy Gradient Subspaces", ICLR
2024), exact on small networks: algos/ppo.py unchanged on Pendulum-v1 with 16 x 16 actor and
critic; before the update of each analysed iteration a hook takes the whole rollout batch and
computes the full gradient g and Hessian (double backward, eigh) of ppo.py's actor and critic
losses, then the update runs as in ppo.py. The measures: the gradient fraction
||P_k g||^2 / ||g||^2 (P_k the projection onto the k eigenvectors of largest |eigenvalue|) and
the subspace overlap (1/k) sum_i ||P_k(t2) v_i(t1)||^2 of two iterations' top-k eigenspaces; a
random k-subspace gives k/P for both. The setting and claims are declared in
paper_figures/gradient-subspace/experiment.toml; its analysis.py reads this script's CSV.

    python -m paper_figures run gradient-subspace              # 8 seeds, through this script
    python paper_figures/gradient_subspace.py --toy --out runs/toy_fig

Writes gradient_subspace.csv: per seed, network, k and analysed iteration the gradient fraction,
that of one random k-subspace and k/P (kind "fraction"); per iteration pair the overlap, that of
one random k-subspace and k/P (kind "overlap"). Per-seed rows are kept under <out>/seeds and
reused when present.
"""

from __future__ import annotations

import tempfile
from argparse import ArgumentParser
from pathlib import Path

import numpy as np
import torch

from algos import ppo
from controlrl.experiment import read_rows, write_rows
from controlrl.losses import clipped_value_loss
from controlrl.nets import ValueNet, make_policy
from controlrl.training import Run
from controlrl.update import adam, normalize_advantages
from paper_figures.lab.script_flags import wrote

OUT = Path("runs") / "gradient_subspace"
ENV = "Pendulum-v1"
HIDDEN = (16, 16)
ITERATIONS = 20
ANALYSED = (5, 6, 10, 15, 20)
PAIRS = ((5, 6), (5, 10), (10, 15), (15, 20), (5, 20))
DT = 5  # iterations between the two eigenspaces of the declared overlap (the toy's pair too)
KS = ("1%", "5%")
FIELDS = (
    "seed", "net", "P", "k", "kind", "t1", "t2", "value", "random", "baseline", "grad_norm",
)  # fmt: skip


def flat_grad_hessian(loss: torch.Tensor, params: list[torch.Tensor]):
    """(g [P], H [P, P]) of a scalar loss in the flattened parameters, float64, H by
    double-backward (exact, symmetrised against rounding)."""
    grads = torch.autograd.grad(loss, params, create_graph=True)
    g = torch.cat([x.reshape(-1) for x in grads])
    eye, rows = torch.eye(g.numel()), []
    for start in range(0, g.numel(), 128):  # 128 Hessian rows per vectorised backward
        hs = torch.autograd.grad(
            g, params, eye[start : start + 128], retain_graph=True, is_grads_batched=True
        )
        rows.append(torch.cat([h.reshape(h.shape[0], -1) for h in hs], 1))
    h = torch.cat(rows).detach().double().numpy()
    return g.detach().double().numpy(), 0.5 * (h + h.T)


def top_eigenspace(h: np.ndarray, k: int) -> np.ndarray:
    """Orthonormal [P, k] eigenvectors of the symmetric h with the k largest |eigenvalues|."""
    w, v = np.linalg.eigh(h)
    return v[:, np.argsort(-np.abs(w), kind="stable")[:k]]


def random_subspace(p: int, k: int, rng: np.random.Generator) -> np.ndarray:
    """An orthonormal basis [P, k] of a uniformly random k-dimensional subspace."""
    q, _ = np.linalg.qr(rng.normal(size=(p, k)))
    return q


def gradient_fraction(g: np.ndarray, basis: np.ndarray) -> float:
    """||P g||^2 / ||g||^2, P the projection onto the orthonormal columns of basis."""
    return float(np.sum((basis.T @ g) ** 2) / np.sum(g**2))


def subspace_overlap(v1: np.ndarray, v2: np.ndarray) -> float:
    """(1/k) sum_i ||P_2 v1_i||^2 for orthonormal [P, k] bases v1, v2 (1: the same subspace)."""
    return float(np.sum((v2.T @ v1) ** 2) / v1.shape[1])


def k_of(spec, p: int) -> int:
    """k of a spec "n%" (n% of P, at least 1) or an integer."""
    if isinstance(spec, str):
        return max(1, round(p * float(spec[:-1]) / 100))
    return int(spec)


def losses(policy, value_net, batch: dict, args) -> dict[str, tuple]:
    """{net: (loss, params)}: ppo.py's actor loss and critic loss on the whole batch."""
    adv = normalize_advantages(batch["advantages"]) if args.norm_adv else batch["advantages"]
    logp, _ = policy.log_prob_entropy(batch["obs"], batch["actions"], False)
    actor, _ = ppo.ppo_loss(logp, batch["logprobs"], adv, args.clip_coef)
    v_new = value_net(batch["obs"])
    critic = clipped_value_loss(
        v_new, batch["values"], batch["returns"], args.clip_coef, args.clip_vloss
    )
    return {
        "actor": (actor, list(policy.parameters())),
        "critic": (critic, list(value_net.parameters())),
    }


def run_seed(seed: int, iterations: int, analysed, pairs, num_steps: int, run_dir: Path,
             **ppo_args):  # fmt: skip
    """Train ppo.py's PPO for one seed with the analysis hook; the CSV rows of that seed."""
    args = ppo.Args(
        env_id=ENV, seed=seed, num_steps=num_steps, total_timesteps=iterations * num_steps,
        hidden_sizes=HIDDEN, run_dir=str(run_dir), tensorboard=False, progress=False,
        eval_every=0, eval_episodes=2, checkpoint_every=10**6, **ppo_args,
    )  # fmt: skip
    args.validate()
    run = Run(args)
    policy = make_policy(run.obs_space, run.act_space, args.hidden_sizes)
    value_net = ValueNet(run.obs_dim, args.hidden_sizes)
    optimizer = adam(policy, value_net, lr=args.learning_rate)
    rng = np.random.default_rng(10_000 + seed)
    bases, rows, count = {}, [], [0]

    def update_fn(batch):
        count[0] += 1
        t = count[0]
        if t in analysed:
            for net, (loss, params) in losses(policy, value_net, batch, args).items():
                g, h = flat_grad_hessian(loss, params)
                p = g.size
                top = top_eigenspace(h, max(k_of(spec, p) for spec in KS))
                for spec in KS:
                    k = k_of(spec, p)
                    basis = top[:, :k]
                    bases[(net, spec, t)] = basis
                    rows.append(dict(
                        seed=seed, net=net, P=p, k=k, kind="fraction", t1=t, t2=t,
                        value=gradient_fraction(g, basis),
                        random=gradient_fraction(g, random_subspace(p, k, rng)),
                        baseline=k / p, grad_norm=float(np.linalg.norm(g)),
                    ))  # fmt: skip
        return ppo.update(policy, value_net, optimizer, batch, args, run.buffer.ended)

    run.train(update_fn, policy, value_net, ratio_eps=args.clip_coef, optimizer=optimizer)
    for net in ("actor", "critic"):
        for spec in KS:
            for t1, t2 in pairs:
                v1, v2 = bases[(net, spec, t1)], bases[(net, spec, t2)]
                rows.append(dict(
                    seed=seed, net=net, P=v1.shape[0], k=v1.shape[1], kind="overlap", t1=t1,
                    t2=t2, value=subspace_overlap(v1, v2),
                    random=subspace_overlap(
                        random_subspace(v1.shape[0], v1.shape[1], rng), v2
                    ),
                    baseline=v1.shape[1] / v1.shape[0], grad_norm="",
                ))  # fmt: skip
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--toy", action="store_true", help="6 iterations of 64 steps, 2 analysed")
    parser.add_argument("--out", type=Path, default=OUT)
    a = parser.parse_args(argv)
    torch.set_num_threads(1)
    ppo_args = {}
    if a.toy:  # the declared pair dt apart, on a tiny update
        iterations, analysed, pairs, steps = DT + 1, (1, DT + 1), ((1, DT + 1),), 64
        ppo_args = {"update_epochs": 1, "num_minibatches": 2}
    else:
        iterations, analysed, pairs, steps = ITERATIONS, ANALYSED, PAIRS, 2048
    cache = a.out / "seeds"
    cache.mkdir(parents=True, exist_ok=True)
    rows = []
    for seed in range(1, a.seeds + 1):
        part = cache / f"seed{seed}.csv"
        if not part.exists():
            with tempfile.TemporaryDirectory() as tmp:
                run = Path(tmp) / "run"
                mine = run_seed(seed, iterations, analysed, pairs, steps, run, **ppo_args)
            write_rows(part, mine, FIELDS)
            print(f"seed {seed} done", flush=True)
        rows += read_rows(part)
    write_rows(a.out / "gradient_subspace.csv", rows, FIELDS)
    wrote(f"{a.out / 'gradient_subspace.csv'} ({len(rows)} rows)", "gradient_subspace", argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
