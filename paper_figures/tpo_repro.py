r"""Target Policy Optimization (Kaddour 2026, arXiv 2604.06159; github.com/JeanKaddour/tpo) in
its own small settings: the runs of the declared experiments tpo-tabular-single,
tpo-tabular-multi, tpo-appendix-b and tpo-single-sample, whose declarations state each setting
beside the paper's (`python -m paper_figures run ID` runs this script with their flags).

    python paper_figures/tpo_repro.py --part single --seeds 200 --out DIR
    python paper_figures/tpo_repro.py --part single-sample --seeds 2 --updates 3 --toy --out DIR

--part single | multi: the tabular bandits of sections 3.1-3.2 as the reference runs them
(src/tpo/experiments/tabular.py, config.py): logit tables, each update the normalised step theta
+= alpha g / |g| along g, the negative autograd gradient of the method's loss (PG, DG, GRPO, TPO
through algos/tpo.py's tpo_target and tpo_loss; CE on multi). Writes tpo_repro_tabular.csv: per
method and seed the final error, and the mean error and misalignment over the first quarter of
the steps (early_*) and over every step.
--part appendix-b: every method's autograd direction on the multi-context runs against Appendix
B's closed form beta(p_n)(e_y - pi_n) (closed_form_beta), and lam and beta(0.1) from autograd:
writes tpo_repro_exact.csv.
--part single-sample: token reversal (bandit:sequence-reverse-2-L) as population runs of TPO and
the reference's single-sample baselines (src/tpo/experiments/_trial.py; SEQ_METHODS, SEQ_CELLS):
writes tpo_repro_runs.csv, per cell and seed final_error, 1 - the exact-match rate over the last
10 updates.
"""

from __future__ import annotations

import importlib
import math
import shlex
import shutil
from pathlib import Path

import numpy as np
import torch

from algos.tpo import standardized_scores, tpo_loss, tpo_target
from controlrl.experiment import read_rows, write_rows
from controlrl.group import group_advantages
from envs.errors import ArgumentParser
from paper_figures.lab import scripts
from paper_figures.lab.script_flags import some_of

ALPHA, ETA = 0.1, 1.0  # the reference's normalised logit step and temperature
SINGLE = {"K": 100, "B": 100, "steps": 150}  # reference TabularSingleConfig
MULTI = {"N": 100, "K": 10, "steps": 1000}  # reference TabularMultiConfig
TABULAR_METHODS = {"single": ("pg", "dg", "grpo", "tpo")}
TABULAR_METHODS["multi"] = (*TABULAR_METHODS["single"], "ce")
EARLY = 0.25  # the early_* metrics: the first quarter of a tabular run's steps
# the reference's single-sample baselines (src/tpo/experiments/_trial.py): the batch-mean
# baseline, PPO's clipped per-token ratio over 4 epochs, DG's gate in one gradient step
SEQ_METHODS = {
    "tpo": ("tpo", []),
    "ppo": ("grpo", ["--adv-norm", "batch-mean", "--kl-coef", "0"]),
    "dg": ("grpo", ["--policy-loss", "dpg", "--adv-norm", "batch-mean", "--kl-coef", "0",
                    "--update-epochs", "1"]),
}  # fmt: skip
# interaction-matched (the reference's match="interactions"): B * K = 800 prompts of one answer
# an update, the learning rate times sqrt(K)
IM_LR = ["--learning-rate", f"{1e-3 * math.sqrt(8):.6g}"]
SEQ_METHODS |= {f"{m}-im": (SEQ_METHODS[m][0], SEQ_METHODS[m][1] + IM_LR) for m in ("ppo", "dg")}
# answers an update: TPO B = 100 prompts x K = 8; one answer per prompt for the baselines
ANSWERS = {"tpo": 800, "ppo": 100, "dg": 100, "ppo-im": 800, "dg-im": 800}
# Table 3's comparisons: prompt-matched at L = 7-10, interaction-matched at L = 7, 8
SEQ_CELLS = {L: ("tpo", "ppo", "dg", "ppo-im", "dg-im") for L in (7, 8)}
SEQ_CELLS |= {L: ("tpo", "ppo", "dg") for L in (9, 10)}
FINAL_WINDOW = 10  # updates averaged for a run's final error
TAB_FIELDS = ("setting", "method", "seed", "steps", "final_error", "early_error")
TAB_FIELDS += ("mean_misalignment", "early_misalignment")
RUN_FIELDS = ("task", "method", "algo", "seed", "updates", "samples_per_update", "final_error")
PARTS = ("single", "multi", "appendix-b", "single-sample")


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
    curves = {"error": torch.stack(errors, 1).numpy(), "mis": torch.stack(mis, 1).numpy()}
    return curves | {"dev": dev}


def beta_at(method: str, p: float, K: int = 10) -> float:
    """beta(p) from the autograd direction at a context with pi = (p, (1-p)/(K-1), ...)."""
    probs = torch.full((1, 1, K), (1 - p) / (K - 1), dtype=torch.float64)
    probs[..., 0] = p
    logits = probs.log().requires_grad_()
    (grad,) = torch.autograd.grad(multi_loss(method, logits), logits)
    return float(-grad[0, 0, 0] / (1 - p))


def exact_rows(devs: dict[str, float]) -> list[dict]:
    """The closed-form checks: lambda and beta at p = 0.1 from autograd, and the largest
    autograd-vs-closed-form deviation of every method over the runs."""
    u = standardized_scores(torch.eye(MULTI["K"], dtype=torch.float64)[0])
    lam = {"check": "lambda", "method": "tpo", "ours": float((u[0] - u[1]).exp())}
    rows = [lam | {"closed_form": tpo_lambda(MULTI["K"])}]
    for m in ("tpo", "dg", "grpo"):
        beta = float(closed_form_beta(m, torch.tensor(0.1), MULTI["K"]))
        rows.append({"check": "beta(0.1)", "method": m, "ours": beta_at(m, 0.1),
                     "closed_form": beta})  # fmt: skip
    for m, dev in devs.items():
        rows.append({"check": "max deviation", "method": m, "ours": dev, "closed_form": 0.0})
    return rows


def summary_rows(setting: str, method: str, seeds: list[int], curves: dict) -> list[dict]:
    """Per-seed rows of one tabular (setting, method)."""
    err, mis = curves["error"], curves["mis"]
    early = max(1, round(EARLY * err.shape[1]))
    values = (err[:, -1], err[:, :early].mean(1), mis.mean(1), mis[:, :early].mean(1))
    return [dict(zip(TAB_FIELDS, (setting, method, seed, err.shape[1], *map(float, v))))
            for seed, *v in zip(seeds, *values)]  # fmt: skip


def tabular(args, out: Path) -> None:
    """One tabular bandit (--part single or multi), or Appendix B's checks on the multi-context
    runs (--part appendix-b): their CSV."""
    torch.set_num_threads(1)  # small tensors: one thread is as fast and wastes nothing
    seeds = list(range(args.seeds))
    setting = "single" if args.part == "single" else "multi"
    run = run_single if setting == "single" else run_multi
    steps = args.steps or (SINGLE if setting == "single" else MULTI)["steps"]
    rows, devs = [], {}
    for m in TABULAR_METHODS[setting]:
        c = run(m, seeds, steps)
        devs[m] = c.get("dev", math.nan)
        rows += summary_rows(setting, m, seeds, c)
        print(f"{setting} {m}: final error {c['error'][:, -1].mean():.3g}, mean misalignment"
              f" {c['mis'].mean():.3g}", flush=True)  # fmt: skip
    if args.part == "appendix-b":
        write_rows(out / "tpo_repro_exact.csv", exact_rows(devs))
    else:
        write_rows(out / "tpo_repro_tabular.csv", rows, TAB_FIELDS)


def table(exp, source: Path) -> list[dict]:
    """A tabular experiment's results rows (its analysis.py's `table`): the single env, one row
    per method and seed, with the final error's -log10 beside it."""
    (env,) = exp.envs
    rows = read_rows(Path(source) / "tpo_repro_tabular.csv")
    return [
        {"env": env, "arm": r["method"], "seed": int(r["seed"])}
        | {k: float(r[k]) for k in TAB_FIELDS[4:]}
        | {"neg_log10_final_error": -math.log10(float(r["final_error"]))}
        for r in rows
    ]


# ---------------------------------------------------------------- single-sample token reversal


def cells(args) -> list[dict]:
    """Every token-reversal population run: (L, method) with its algorithm and sizes."""
    out = []
    toy = ["--hidden-sizes", "16", "--eval-episodes", "1"] if args.toy else []
    for L, methods in SEQ_CELLS.items():
        if args.lengths and L not in args.lengths:
            continue
        for method in (m for m in methods if not args.methods or m in args.methods):
            algo, flags = SEQ_METHODS[method]
            envs = ANSWERS[method] // (50 if args.toy else 1)
            out.append({"L": L, "method": method, "algo": algo, "flags": flags + toy,
                        "num_envs": envs, "group": 8 if method == "tpo" else 1})  # fmt: skip
    return out


def argv(args, c: dict, run_dir: Path) -> list[str]:
    """The algorithm's command line of a cell (one population run of --seeds seeds)."""
    steps = c["num_envs"] * c["L"] * args.updates
    return [
        *("--env-id", f"bandit:sequence-reverse-2-{c['L']}", "--num-envs", str(c["num_envs"])),
        *("--group-size", str(c["group"]), "--total-timesteps", str(steps)),
        *("--num-seeds", str(args.seeds), "--seed", "0", "--no-tensorboard", "--no-progress"),
        *("--run-dir", str(run_dir), *c["flags"]),
    ]


def single_sample(args, out: Path) -> None:
    """Train every cell not yet finished under <out>/runs (resumable), then its CSV."""
    from controlrl.cli import parse

    rows = []
    for c in cells(args):
        run_dir = out / "runs" / f"seq-{c['L']}" / c["method"]
        if not (run_dir / "final_eval.json").exists():
            module = importlib.import_module(f"algos.{c['algo']}")
            shutil.rmtree(run_dir, ignore_errors=True)  # an unfinished run starts again
            cmd = argv(args, c, run_dir)
            print("running: python " + shlex.join([f"algos/{c['algo']}.py", *cmd]), flush=True)
            module.main(parse(module.Args, cmd))
        if not (run_dir / "final_eval.json").exists():
            raise SystemExit(f"error: {run_dir} did not finish")
        err: dict[int, list[float]] = {}
        for r in read_rows(run_dir / "metrics.csv"):
            err.setdefault(int(r["seed"]), []).append(1 - float(r["train/episode_return"]))
        for seed, e in sorted(err.items()):
            rows.append({"task": f"sequence-reverse-2-{c['L']}", "method": c["method"],
                         "algo": c["algo"], "seed": seed, "updates": len(e),
                         "samples_per_update": c["num_envs"],
                         "final_error": float(np.mean(e[-FINAL_WINDOW:]))})  # fmt: skip
        final = np.mean([r["final_error"] for r in rows[-len(err) :]])
        print(f"L = {c['L']} {c['method']}: final error {final:.3g}", flush=True)
    write_rows(out / "tpo_repro_runs.csv", rows, RUN_FIELDS)


def parse_args(argv: list[str] | None):
    p = ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--part", choices=PARTS, required=True, help="what to compute (see above)")
    p.add_argument("--seeds", type=int, default=200, help="seeds 0..N-1 of every method")
    p.add_argument("--steps", type=int, default=0, help="tabular steps (0: the paper's)")
    p.add_argument("--updates", type=int, default=60, help="token-reversal updates a run")
    p.add_argument("--out", type=Path, default=Path("runs/tpo_repro"))
    p.add_argument("--lengths", default="", help="token reversal: only these L (7,8)")
    p.add_argument("--methods", default="", help="token reversal: only these methods (tpo,dg)")
    p.add_argument("--toy", action="store_true", help="token reversal: tiny networks, few envs")
    args = p.parse_args(argv)
    scripts.at_least(p, args, ("seeds", "updates"))
    scripts.at_least(p, args, ("steps",), 0)
    lengths = some_of(p, "lengths", args.lengths, list(map(str, SEQ_CELLS))) if args.lengths else []
    args.lengths = [int(L) for L in lengths]
    args.methods = some_of(p, "methods", args.methods, SEQ_METHODS) if args.methods else []
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.part == "single-sample":
        single_sample(args, args.out)
    else:
        tabular(args, args.out)


if __name__ == "__main__":
    main()
