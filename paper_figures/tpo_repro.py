r"""Target Policy Optimization (Kaddour 2026, arXiv 2604.06159; github.com/JeanKaddour/tpo) in
its own small settings: the tabular bandits of its sections 3.1-3.2 and the terminal-reward
token reversal of section 3.6 with the zero-variance masking ablation of section 4.2.

    python paper_figures/tpo_repro.py --train    # runs what is missing, then CSVs and figure
    python paper_figures/tpo_repro.py            # CSVs and figure from the runs under --run-root
    python paper_figures/tpo_repro.py --train --only ppo,dg,seq-9/tpo --reuse-tabular  # only these
    python paper_figures/tpo_repro.py --toy --train --run-root runs/toy/tr --out runs/toy/tro

1. Tabular bandits, the paper's own setting (reference src/tpo/experiments/tabular.py and
   config.py): explicit logit tables, no network and no optimiser; each update is a normalised
   logit step theta += alpha g / |g| with alpha = 0.1, g the method's ascent direction, here the
   negative autograd gradient of the method's loss (float64). PG: advantage r - 0.5; DG
   (Delightful PG): the same advantage gated by sigmoid(A * surprisal / eta); GRPO: rewards
   standardised over the batch (controlrl.group.group_advantages: unbiased std + 1e-4, the
   reference population std + 1e-8 under the root; under a normalised step both give the same
   step); TPO: algos/tpo.py's tpo_target and tpo_loss.
   - single context: K = 100 arms, one correct, logits 0, B = 100 sampled pulls per step, 150
     steps. TPO as the reference's tabular runner: the score vector is the batch mean of
     (r - 0.5) e_a over the K arms, standardised over the K arms, target over all K arms.
     Error 1 - pi(y*) before each step; misalignment 1 - cos(g, g*_PG), g*_PG = pi(y*)(e_y* - pi)
     the exact policy gradient.
   - multi context: N = 100 contexts of K = 10 arms, logits ~ N(0, 1), exact population updates
     (no sampling), 1000 steps, CE (cross-entropy to the correct arm, the oracle) as well.
     Error: mean over contexts of 1 - pi_n(y_n) after each step; misalignment to g_CE.
     The exact-gradient check: every method's autograd direction against Appendix B's closed
     form beta(p_n)(e_y - pi_n) (beta_CE = 1, beta_PG = p, beta_DG = p / (1 + p),
     beta_GRPO = sqrt(p / (1 - p)), beta_TPO = p (lam - 1) / (1 - p + lam p), lam =
     exp(K / sqrt(K - 1))) at every step of every seed, and the paper's quoted numbers (lam ~ 28,
     beta at p = 0.1: TPO 0.73, DG 0.09, GRPO 0.33) against ours.
   Seeds: --tabular-seeds (200) single-context and --multi-seeds (100) multi-context runs (the
   paper 100 each), numpy default_rng(seed) per seed for the initial logits and the pulls
   (every method the same seed).

2. The same two bandits with our network implementations (what differs from the paper: a
   64-64 tanh MLP policy and Adam 1e-3 with 4 epochs and gradient clip 1.0 instead of logit
   tables and normalised steps; our TPO's target lives on the sampled group, duplicates
   included, not on all K arms; contexts sampled, not exact population updates): population
   runs (--num-seeds, controlrl/population.py) of algos/tpo.py, algos/grpo.py (--kl-coef 0, as
   the paper's tabular GRPO has no KL) and PG (algos/grpo.py --adv-norm mean --update-epochs 1
   --kl-coef 0, the bandit suite's PG) on bandit:sparse-100 (one group of B = 100 pulls per
   update, 150 updates) and bandit:onehot-100-10 (20 groups of K = 10 pulls per update, 100
   updates; the paper runs 1000 exact steps). Error: 1 - the rollout's success rate.

3. Token reversal (bandit:sequence-reverse-2-L, exact-match reward at the end; the paper's V = 2, L
   = H in 7..10, B = 100 prompts, K = 8 answers per prompt, 4 epochs): TPO, GRPO without KL
   (--kl-coef 0) and GRPO with its k3 KL 0.04 (both --ratio sequence: the reference's ratio is the
   sequence's), PG as above, and the zero-variance ablation GRPO (masked) = GRPO
   --filter-zero-variance; and the paper's single-sample baselines, prompt-matched as its Table 3
   (one answer for each of the B = 100 prompts, the reference's src/tpo/experiments/_trial.py:
   advantage = reward - the batch's mean): PPO = the clipped per-token ratio over 4 epochs
   (algos/grpo.py --adv-norm batch-mean --group-size 1 --kl-coef 0; the reference's PPO has no
   critic) and DG = the Delightful PG gate in one gradient step (--policy-loss dpg, eta 1,
   --update-epochs 1); and both interaction-matched (ppo-im, dg-im: 800 prompts of one answer an
   update, the learning rate times sqrt(8), the reference's match="interactions"). Differs from the
   paper: a 64-64 MLP on the one-hot [prompt | answer so far | position] observation instead of a
   2-layer causal transformer; Adam 1e-3 (clip 1.0) instead of Muon 1e-3; our GRPO's KL is to the
   initial policy (the reference's to the rollout snapshot); the masking ablation at the main
   setting (paper: L = 8, K = 32, B = 256); budget --seq-updates updates (60; the paper 2000
   episodes) and --seq-seeds seeds (200; the paper 20; a cell committed from an earlier
   population of 30, --seq-seeds 30, says so in the seeds column of tpo_repro_runs.csv); PPO
   and DG at H = 7-10 prompt-matched, at H = 7, 8 interaction-matched; our loss
   averages over an answer's tokens (the reference sums them; under Adam a constant scale, up to
   its epsilon and the clip). Error: 1 - the rollout's exact-match rate (the paper's training-batch
   error).

Writes <out>/tpo_repro_tabular.csv (per setting, method, seed: final error, area under the error
curve = its mean over steps, mean log10 error, final and mean misalignment, steps to 1% error),
tpo_repro_tabular_curves.csv (per setting, method, step: mean over seeds), tpo_repro_exact.csv
(closed-form checks), tpo_repro_runs.csv (per network or sequence cell and seed: final error =
mean over the last 10 updates, area = mean over all updates, final evaluation error),
tpo_repro_runs_curves.csv (per cell and update: mean error over seeds) and tpo_repro.png.
"""

from __future__ import annotations

import csv
import math
import shlex
import sys
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch

from algos.tpo import standardized_scores, tpo_loss, tpo_target
from controlrl.experiment import kept_rows, write_rows
from controlrl.group import group_advantages

ROOT = Path(__file__).resolve().parents[1]

ALPHA, ETA = 0.1, 1.0  # the reference's normalised logit step and temperature
SINGLE = {"K": 100, "B": 100, "steps": 150}  # reference TabularSingleConfig
MULTI = {"N": 100, "K": 10, "steps": 1000}  # reference TabularMultiConfig
SINGLE_METHODS = ("pg", "dg", "grpo", "tpo")
MULTI_METHODS = ("pg", "dg", "grpo", "tpo", "ce")
LABELS = {"pg": "PG", "dg": "DG", "grpo": "GRPO", "tpo": "TPO", "ce": "CE (oracle)"}
LABELS |= {"grpo-nokl": "GRPO (no KL)", "grpo-masked": "GRPO (masked)", "ppo": "PPO"}
LABELS |= {"ppo-im": "PPO (interaction-matched)", "dg-im": "DG (interaction-matched)"}
PG = ["--adv-norm", "mean", "--update-epochs", "1", "--kl-coef", "0"]
SEQ_GRPO = ["--ratio", "sequence"]
# cell -> (algo, flags); the network bandits and the token-reversal lengths run these
NET_METHODS = {"tpo": ("tpo", []), "grpo": ("grpo", ["--kl-coef", "0"]), "pg": ("grpo", PG)}
SEQ_METHODS = {
    "tpo": ("tpo", []),
    "grpo-nokl": ("grpo", ["--kl-coef", "0", *SEQ_GRPO]),
    "pg": ("grpo", PG),
    "grpo": ("grpo", ["--kl-coef", "0.04", *SEQ_GRPO]),
    "grpo-masked": ("grpo", ["--kl-coef", "0.04", *SEQ_GRPO, "--filter-zero-variance"]),
    # the reference's single-sample baselines (src/tpo/experiments/_trial.py): the batch-mean
    # baseline, PPO's clipped per-token ratio over 4 epochs, DG's gate in one gradient step
    "ppo": ("grpo", ["--adv-norm", "batch-mean", "--kl-coef", "0"]),
    "dg": ("grpo", ["--policy-loss", "dpg", "--adv-norm", "batch-mean", "--kl-coef", "0",
                    "--update-epochs", "1"]),
}  # fmt: skip
# interaction-matched (the reference's match="interactions"): B * K = 800 prompts of one answer
# an update, the learning rate times sqrt(K)
IM_LR = ["--learning-rate", f"{1e-3 * math.sqrt(8):.6g}"]
SEQ_METHODS |= {f"{m}-im": (SEQ_METHODS[m][0], SEQ_METHODS[m][1] + IM_LR) for m in ("ppo", "dg")}
# one answer per prompt: answers an update (prompt-matched 100, interaction-matched 800)
SINGLE_SAMPLE = {"ppo": 100, "dg": 100, "ppo-im": 800, "dg-im": 800}
# (bandit, num_envs, group_size, updates); the paper's B = 100 pulls, K = 10 per context
NET_BANDITS = (("sparse-100", 100, 100, 150), ("onehot-100-10", 200, 10, 100))
# L = 7 every method; 8-10 the comparisons of Table 3 and PG (the masking ablation at 7 only)
SEQ_CELLS = {7: tuple(SEQ_METHODS), 8: ("tpo", "grpo-nokl", "ppo", "dg", "ppo-im", "dg-im")}
SEQ_CELLS[8] += ("grpo", "pg")
SEQ_CELLS |= {L: ("tpo", "grpo", "ppo", "dg", "grpo-nokl", "pg") for L in (9, 10)}
FINAL_WINDOW = 10  # updates averaged for a run's final error
TAB_FIELDS = ("setting", "method", "seed", "steps", "final_error", "auc_error")
TAB_FIELDS += ("mean_log10_error", "final_misalignment", "mean_misalignment", "steps_to_1pct")
RUN_FIELDS = ("task", "method", "algo", "seed", "updates", "samples_per_update")
RUN_FIELDS += ("final_error", "auc_error", "eval_error")
# the paper's numbers (Appendix B; section 3.6 Table 3 prompt-matched, 2000 episodes; 4.2)
PAPER_BETA = {"lambda": 28.0, "tpo": 0.73, "dg": 0.09, "grpo": 0.33}
PAPER_TABLE3 = {7: {"tpo": 6.9, "grpo": 14.5, "grpo-nokl": 66.6}, 8: {"tpo": 8.6, "grpo": 27.6}}
PAPER_TABLE3[8]["grpo-nokl"] = 92.5


@dataclass
class Args:
    out: str = "paper_figures/out"
    """output directory for the PNG and the CSVs"""
    run_root: str = "runs/tpo_repro"
    """where the network and token-reversal runs live (one population run per cell)"""
    train: bool = False
    """run the cells that are missing under --run-root (otherwise only read them)"""
    toy: bool = False
    """tiny run for tests: 3 tabular seeds and short runs; one network cell per bandit and two
    L = 3 token-reversal cells (PG, DG), 2 seeds, 3 updates each"""
    tabular_seeds: int = 200
    """seeds per method on the single-context bandit (the paper 100)"""
    multi_seeds: int = 100
    """seeds per method on the multi-context bandit (the paper 100; exact updates, the seed
    only draws the initial logits)"""
    net_seeds: int = 200
    """seeds per network bandit cell (population runs)"""
    seq_seeds: int = 200
    """seeds per token-reversal cell (population runs)"""
    seq_updates: int = 60
    """updates per token-reversal run (the paper 2000 episodes)"""
    only: str = ""
    """comma-separated methods (ppo,dg: every cell of theirs) or cells as their directories
    under --run-root (seq-9/tpo): only those are trained and read; every other cell keeps its
    committed rows ("": every cell)"""
    reuse_tabular: bool = False
    """read the tabular CSVs already under --out instead of recomputing them"""


# ---------------------------------------------------------------- tabular, the paper's setting


def normalised_step(logits: torch.Tensor, loss: torch.Tensor, lead: int) -> tuple:
    """(new logits, ascent direction g): theta + alpha g / |g| per seed, g = -dloss/dtheta
    (the norm over every axis after the first `lead`)."""
    (grad,) = torch.autograd.grad(loss, logits)
    g = -grad
    dims = tuple(range(lead, g.ndim))
    norm = (g.pow(2).sum(dims, keepdim=True) + 1e-30).sqrt()  # the reference's 1e-30
    return (logits + ALPHA * g / norm).detach().requires_grad_(), g


def misalignment(g: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    """1 - cos(g, ref) per seed (flattened after the first axis), the reference's 1e-12."""
    g, ref = g.flatten(1), ref.flatten(1)
    dot = (g * ref).sum(1)
    return 1 - dot / ((g.pow(2).sum(1) + 1e-12).sqrt() * (ref.pow(2).sum(1) + 1e-12).sqrt())


def single_loss(method: str, logits: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
    """Loss of one sampled batch, logits [S, K], actions [S, B] (arm 0 correct), summed over
    seeds so that each seed's gradient is its own."""
    S, K = logits.shape
    logp = torch.log_softmax(logits, -1)
    logp_a = logp.gather(1, actions)  # [S, B]
    reward = (actions == 0).double()
    adv = reward - 0.5  # the reference's constant baseline (PG, DG and TPO's scores)
    if method == "pg":
        return -(adv * logp_a).mean(1).sum()
    if method == "dg":
        gate = torch.sigmoid(adv * -logp_a.detach() / ETA)
        return -(gate * adv * logp_a).mean(1).sum()
    if method == "grpo":
        return -(group_advantages(reward) * logp_a).mean(1).sum()
    if method == "tpo":
        scores = torch.zeros(S, K, dtype=logits.dtype).scatter_add(1, actions, adv)
        q = tpo_target(logits.detach(), scores / actions.shape[1], ETA)
        return tpo_loss(logits, q)[0] * S
    raise ValueError(method)


def run_single(method: str, seeds: list[int], steps: int) -> dict[str, np.ndarray]:
    """Error and misalignment curves [S, steps] of one method on the K = 100 one-hot bandit."""
    K, B = SINGLE["K"], SINGLE["B"]
    gens = [np.random.default_rng(s) for s in seeds]
    logits = torch.zeros(len(seeds), K, dtype=torch.float64, requires_grad=True)
    e_y = torch.zeros(K, dtype=torch.float64)
    e_y[0] = 1
    errors, mis = [], []
    for _ in range(steps):
        pi = torch.softmax(logits.detach(), -1)
        errors.append(1 - pi[:, 0])
        u = torch.from_numpy(np.stack([g.random(B) for g in gens]))
        actions = torch.searchsorted(pi.cumsum(-1), u).clamp(max=K - 1)
        logits, g = normalised_step(logits, single_loss(method, logits, actions), 1)
        mis.append(misalignment(g, pi[:, :1] * (e_y - pi)))
    return {"error": torch.stack(errors, 1).numpy(), "mis": torch.stack(mis, 1).numpy()}


def multi_loss(method: str, logits: torch.Tensor) -> torch.Tensor:
    """Exact population loss of logits [S, N, K] (arm 0 correct in every context), summed over
    seeds and contexts: its negative gradient is the method's exact expected update."""
    logp = torch.log_softmax(logits, -1)
    pi = logp.exp().detach()
    r = torch.zeros_like(pi)
    r[..., 0] = 1
    if method == "ce":
        return -logp[..., 0].sum()
    if method == "pg":
        return -(pi * r * logp).sum()
    if method == "dg":
        return -(pi * r * torch.sigmoid(r * -logp.detach() / ETA) * logp).sum()
    if method == "grpo":
        p = pi[..., :1]
        return -(pi * (r - p) / (p * (1 - p)).sqrt() * logp).sum()
    if method == "tpo":
        q = tpo_target(logits.detach(), r, ETA)
        return tpo_loss(logits, q)[0] * pi.shape[0] * pi.shape[1]
    raise ValueError(method)


def tpo_lambda(K: int) -> float:
    """lam = exp(u_y - u_other) of the standardised one-hot score over K arms (Appendix B)."""
    return math.exp(K / math.sqrt(K - 1))


def closed_form_beta(method: str, p: torch.Tensor, K: int) -> torch.Tensor:
    """Appendix B's beta(p): every exact update is beta(p_n) (e_y - pi_n)."""
    if method == "ce":
        return torch.ones_like(p)
    if method == "pg":
        return p
    if method == "dg":
        return p / (1 + p)
    if method == "grpo":
        return (p / (1 - p)).sqrt()
    lam = tpo_lambda(K)
    return p * (lam - 1) / (1 - p + lam * p)


def run_multi(method: str, seeds: list[int], steps: int) -> dict[str, np.ndarray]:
    """Error and misalignment curves [S, steps] and the largest deviation of the autograd
    direction from the closed form over all steps, on the N x K exact bandit."""
    N, K = MULTI["N"], MULTI["K"]
    init = np.stack([np.random.default_rng(s).standard_normal((N, K)) for s in seeds])
    logits = torch.from_numpy(init).requires_grad_()
    errors, mis, dev = [], [], 0.0
    for _ in range(steps):
        pi = torch.softmax(logits.detach(), -1)
        v = -pi
        v[..., 0] += 1  # e_y - pi, the CE direction
        logits, g = normalised_step(logits, multi_loss(method, logits), 1)
        closed = closed_form_beta(method, pi[..., 0], K)[..., None] * v
        dev = max(dev, float((g - closed).abs().max()))
        errors.append(1 - torch.softmax(logits.detach(), -1)[..., 0].mean(1))
        mis.append(misalignment(g, v))
    return {"error": torch.stack(errors, 1).numpy(), "mis": torch.stack(mis, 1).numpy()} | {
        "dev": dev
    }


def beta_at(method: str, p: float, K: int = 10) -> float:
    """beta(p) from the autograd direction at a context with pi = (p, (1-p)/(K-1), ...)."""
    probs = torch.full((1, 1, K), (1 - p) / (K - 1), dtype=torch.float64)
    probs[..., 0] = p
    logits = probs.log().requires_grad_()
    (grad,) = torch.autograd.grad(multi_loss(method, logits), logits)
    return float(-grad[0, 0, 0] / (1 - p))


def exact_rows(devs: dict[str, float]) -> list[dict]:
    """The closed-form checks: lambda, beta at p = 0.1 against the paper's quoted values, and
    the largest autograd-vs-closed-form deviation of every method over the runs."""
    u = standardized_scores(torch.eye(MULTI["K"], dtype=torch.float64)[0])
    rows = [
        {
            "check": "lambda = exp(u_y - u_other), K = 10",
            "method": "tpo",
            "ours": float((u[0] - u[1]).exp()),
            "closed_form": tpo_lambda(MULTI["K"]),
            "paper": PAPER_BETA["lambda"],
        }
    ]
    for m in ("tpo", "dg", "grpo"):
        rows.append(
            {
                "check": "beta(p = 0.1), K = 10, from the autograd direction",
                "method": m,
                "ours": beta_at(m, 0.1),
                "closed_form": float(closed_form_beta(m, torch.tensor(0.1), MULTI["K"])),
                "paper": PAPER_BETA[m],
            }
        )
    for m, dev in devs.items():
        rows.append(
            {
                "check": "max |autograd direction - beta(p)(e_y - pi)| over every step and seed",
                "method": m,
                "ours": dev,
                "closed_form": 0.0,
                "paper": "",
            }
        )
    return rows


def summary_rows(setting: str, method: str, seeds: list[int], curves: dict) -> list[dict]:
    """Per-seed rows of one tabular (setting, method)."""
    err, mis = curves["error"], curves["mis"]
    rows = []
    for i, seed in enumerate(seeds):
        below = np.flatnonzero(err[i] < 0.01)
        rows.append(
            {
                "setting": setting,
                "method": method,
                "seed": seed,
                "steps": err.shape[1],
                "final_error": float(err[i, -1]),
                "auc_error": float(err[i].mean()),
                "mean_log10_error": float(np.log10(np.maximum(err[i], 1e-300)).mean()),
                "final_misalignment": float(mis[i, -1]),
                "mean_misalignment": float(mis[i].mean()),
                "steps_to_1pct": int(below[0]) if below.size else -1,
            }
        )
    return rows


def tabular(args: Args, out: Path) -> dict:
    """Both tabular bandits: CSVs, and the mean curves for the figure."""
    torch.set_num_threads(1)  # small tensors: one thread is as fast and wastes nothing
    s_seeds = list(range(3 if args.toy else args.tabular_seeds))
    m_seeds = list(range(3 if args.toy else args.multi_seeds))
    s_steps, m_steps = (20, 30) if args.toy else (SINGLE["steps"], MULTI["steps"])
    rows, curve_rows, devs, curves = [], [], {}, {}
    for setting, methods, run, steps, seeds in (
        ("single K=100", SINGLE_METHODS, run_single, s_steps, s_seeds),
        ("multi N=100 K=10", MULTI_METHODS, run_multi, m_steps, m_seeds),
    ):
        for m in methods:
            c = run(m, seeds, steps)
            if "dev" in c:
                devs[m] = c["dev"]
            rows += summary_rows(setting, m, seeds, c)
            curves[(setting, m)] = (c["error"].mean(0), c["mis"].mean(0))
            for t in range(steps):
                curve_rows.append(
                    {
                        "setting": setting,
                        "method": m,
                        "step": t,
                        "mean_error": float(c["error"][:, t].mean()),
                        "mean_misalignment": float(c["mis"][:, t].mean()),
                    }
                )
            print(
                f"{setting} {m}: final error {c['error'][:, -1].mean():.3g}, mean misalignment"
                f" {c['mis'].mean():.3g}",
                flush=True,
            )
    write_rows(out / "tpo_repro_tabular.csv", rows, TAB_FIELDS)
    write_rows(out / "tpo_repro_tabular_curves.csv", curve_rows)
    write_rows(out / "tpo_repro_exact.csv", exact_rows(devs))
    return curves


def read_tabular(out: Path) -> dict:
    """The mean curves of tpo_repro_tabular_curves.csv, as tabular() returns them."""
    curves: dict = {}
    with open(out / "tpo_repro_tabular_curves.csv", newline="") as f:
        for r in csv.DictReader(f):
            err, mis = curves.setdefault((r["setting"], r["method"]), ([], []))
            err.append(float(r["mean_error"]))
            mis.append(float(r["mean_misalignment"]))
    return {k: (np.array(e), np.array(m)) for k, (e, m) in curves.items()}


# ---------------------------------------------------------------- population runs


def cells(args: Args) -> list[dict]:
    """Every network-bandit and token-reversal population run."""
    out = []
    toy = ["--hidden-sizes", "16", "--eval-episodes", "1"] if args.toy else []
    for bandit, envs, group, updates in NET_BANDITS:
        if args.toy:
            envs, group, updates = (20, 10, 3) if "onehot" in bandit else (10, 10, 3)
        for method, (algo, flags) in NET_METHODS.items():
            out.append(
                dict(
                    task=bandit,
                    env_id=f"bandit:{bandit}",
                    method=method,
                    algo=algo,
                    flags=flags + toy,
                    num_envs=envs,
                    group=group,
                    updates=updates,
                    length=1,
                    seeds=2 if args.toy else args.net_seeds,
                )
            )
    seq = {3: ("pg", "dg")} if args.toy else SEQ_CELLS
    for L, methods in seq.items():
        for method in methods:
            algo, flags = SEQ_METHODS[method]
            single = method in SINGLE_SAMPLE
            out.append(
                dict(
                    task=f"sequence-reverse-2-{L}",
                    env_id=f"bandit:sequence-reverse-2-{L}",
                    method=method,
                    algo=algo,
                    flags=flags + toy,
                    num_envs=(2 if single else 16) if args.toy else SINGLE_SAMPLE.get(method, 800),
                    group=1 if single else 8,
                    updates=3 if args.toy else args.seq_updates,
                    length=L,
                    seeds=2 if args.toy else args.seq_seeds,
                )
            )
    if args.only:
        only = set(args.only.split(","))
        names = {c["method"] for c in out} | {cell_name(c) for c in out}
        if only - names:
            raise SystemExit(f"error: --only: no such cell or method {sorted(only - names)}")
        out = [c for c in out if c["method"] in only or cell_name(c) in only]
    if args.toy:  # one cell of each kind: the test's budget
        keep = {("sparse-100", "tpo"), ("onehot-100-10", "grpo"), ("sequence-reverse-2-3", "pg")}
        keep.add(("sequence-reverse-2-3", "dg"))  # a single-sample cell: groups of 1
        out = [c for c in out if (c["task"], c["method"]) in keep]
    return out


def cell_name(c: dict) -> str:
    """<bandit or seq-L>/<method>: a cell's directory under --run-root."""
    task = f"seq-{c['length']}" if c["task"].startswith("sequence") else c["task"]
    return f"{task}/{c['method']}"


def run_dir(args: Args, c: dict) -> Path:
    """<run-root>/<bandit or seq-L>/<method>: one population run."""
    return Path(args.run_root) / cell_name(c)


def argv(args: Args, c: dict) -> list[str]:
    """The algorithm's command line of a cell (one population run of c['seeds'] seeds)."""
    steps = c["num_envs"] * c["length"] * c["updates"]
    return [
        *("--env-id", c["env_id"], "--num-envs", str(c["num_envs"])),
        *("--group-size", str(c["group"]), "--total-timesteps", str(steps)),
        *("--num-seeds", str(c["seeds"]), "--seed", "0", "--no-tensorboard", "--no-progress"),
        *("--run-dir", str(run_dir(args, c)), *c["flags"]),
    ]


def train(args: Args, c: dict) -> None:
    """Run a missing cell in this process (its algorithm's main with its own parser)."""
    import importlib
    import shutil

    from controlrl.cli import parse

    if (run_dir(args, c) / "final_eval.json").exists():
        return
    shutil.rmtree(run_dir(args, c), ignore_errors=True)
    module = importlib.import_module(f"algos.{c['algo']}")
    cmd = argv(args, c)
    print("running: python " + shlex.join([f"algos/{c['algo']}.py", *cmd]), flush=True)
    module.main(parse(module.Args, cmd))


def read_cell(args: Args, c: dict) -> tuple[list[dict], np.ndarray] | None:
    """Per-seed rows and the mean error curve of a finished cell (None when not run)."""
    import json

    d = run_dir(args, c)
    if not (d / "final_eval.json").exists():
        return None
    final = json.loads((d / "final_eval.json").read_text())
    evals = dict(zip(final["seeds"], final["eval_return_per_seed"], strict=True))
    err: dict[int, list[float]] = {}
    with open(d / "metrics.csv", newline="") as f:
        for r in csv.DictReader(f):
            err.setdefault(int(r["seed"]), []).append(1 - float(r["train/episode_return"]))
    rows = []
    for seed, e in sorted(err.items()):
        rows.append(
            {
                "task": c["task"],
                "method": c["method"],
                "algo": c["algo"],
                "seed": seed,
                "updates": len(e),
                "samples_per_update": c["num_envs"],
                "final_error": float(np.mean(e[-FINAL_WINDOW:])),
                "auc_error": float(np.mean(e)),
                "eval_error": 1 - float(evals[seed]),
            }
        )
    return rows, np.mean([err[s] for s in sorted(err)], axis=0)


# ---------------------------------------------------------------- figure


def plot(tab: dict, runs: dict, path: Path) -> None:
    """Tabular error and misalignment (single, multi), network bandits, token reversal."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = sorted(
        {task for task, _ in runs}, key=lambda t: (t.startswith("seq"), len(t), t)
    )  # L = 10 after 9
    cols = max(4, len(tasks))
    fig, axes = plt.subplots(2, cols, figsize=(4 * cols, 7.5), squeeze=False)
    colors = {"pg": "tab:cyan", "dg": "tab:red", "grpo": "tab:orange", "tpo": "tab:blue"}
    colors |= {"ce": "gray", "grpo-nokl": "tab:green", "grpo-masked": "tab:purple"}
    colors |= {"ppo": "tab:brown", "ppo-im": "tab:pink", "dg-im": "tab:olive"}
    for j, setting in enumerate(("single K=100", "multi N=100 K=10")):
        for (s, m), (err, mis) in tab.items():
            if s != setting:
                continue
            axes[0, 2 * j].semilogy(err, color=colors[m], label=LABELS[m])
            axes[0, 2 * j + 1].semilogy(np.maximum(mis, 1e-16), color=colors[m], label=LABELS[m])
        axes[0, 2 * j].set_title(f"tabular {setting}: error (mean of seeds)")
        axes[0, 2 * j + 1].set_title(f"tabular {setting}: 1 - cos(g, g*)")
        for a in axes[0, 2 * j : 2 * j + 2]:
            a.set_xlabel("normalised logit step")
            a.legend(fontsize=7)
    for a in axes[0, 4:]:
        a.axis("off")
    for k, task in enumerate(tasks):
        a = axes[1, k]
        for (t, m), curve in runs.items():
            if t == task:
                a.plot(curve, color=colors[m], label=LABELS[m])
        a.set_title(f"{task}: ours (MLP, Adam)", fontsize=9)
        a.set_xlabel("update")
        a.set_ylabel("error (1 - success of the rollout)")
        a.set_ylim(0, 1.02)
        a.legend(fontsize=7)
    for a in axes[1, len(tasks) :]:
        a.axis("off")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(args: Args) -> None:
    """Tabular runs, then the population cells (trained with --train), CSVs and figure."""
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tab = read_tabular(out) if args.reuse_tabular else tabular(args, out)
    rows, curve_rows, runs, fresh = [], [], {}, set()
    for c in cells(args):
        if args.train:
            train(args, c)
        got = read_cell(args, c)
        if got is None:
            print(f"not run here: {c['task']} {c['method']} (use --train)", flush=True)
            continue
        fresh.add((c["task"], c["method"]))
        cell_rows, curve = got
        rows += cell_rows
        runs[(c["task"], c["method"])] = curve
        curve_rows += [
            {"task": c["task"], "method": c["method"], "update": i, "mean_error": float(v)}
            for i, v in enumerate(curve)
        ]
        final = np.array([r["final_error"] for r in cell_rows])
        print(f"{c['task']} {c['method']}: final error {final.mean():.3g}", flush=True)
    # the cells without a run under --run-root keep their committed rows (a figure grown cell
    # by cell keeps what it ran before)
    key = ("task", "method")
    ints = ("seed", "updates", "samples_per_update")
    floats = ("final_error", "auc_error", "eval_error")
    rows = kept_rows(out / "tpo_repro_runs.csv", key, fresh, ints, floats) + rows
    kept = kept_rows(out / "tpo_repro_runs_curves.csv", key, fresh, ("update",), ("mean_error",))
    for task, method in dict.fromkeys((r["task"], r["method"]) for r in kept):
        curve = sorted((r["update"], r["mean_error"]) for r in kept if r["task"] == task
                       and r["method"] == method)  # fmt: skip
        runs[(task, method)] = np.array([v for _, v in curve])
    curve_rows = kept + curve_rows
    # in the cells' order (the figure's), whichever call ran them
    order = {(c["task"], c["method"]): i for i, c in enumerate(cells(replace(args, only="")))}

    def place(r):
        return order.get((r["task"], r["method"]), len(order))

    rows.sort(key=place)
    curve_rows.sort(key=place)
    if rows:
        write_rows(out / "tpo_repro_runs.csv", rows, RUN_FIELDS)
        write_rows(out / "tpo_repro_runs_curves.csv", curve_rows)
    plot(tab, runs, out / "tpo_repro.png")
    print("made by: " + " ".join(shlex.quote(a) for a in ["python", *sys.argv]))


if __name__ == "__main__":
    from controlrl.cli import cli

    main(cli(Args))
