"""Ledger rows of E10 (robust adversarial RL, paper_figures/rarl_robustness.py): RARL's
protagonist against PPO alone on InvertedPendulum-v5, paired over seeds, on the mean return of
the final deterministic policy over the mass x friction grid and on the nominal model."""

from __future__ import annotations

import numpy as np

from paper_figures.claims import Row, paired_verdict

PAPER = "Robust Adversarial Reinforcement Learning (RARL, arXiv 1703.02702)"
PAPER_SETTING = (
    "TRPO protagonist and adversary in alternation on MuJoCo tasks (InvertedPendulum among "
    "them; the adversary applies 2D forces to bodies), tested over mass and friction ranges"
)


def _per_seed(data, variant: str, nominal: bool) -> dict[str, float]:
    """seed -> mean_return of the variant over the whole grid, or at mass 1 and friction 1."""
    out: dict[str, list[float]] = {}
    for r in data:
        if r["variant"] != variant:
            continue
        if nominal and (float(r["mass_scale"]) != 1 or float(r["friction_scale"]) != 1):
            continue
        out.setdefault(r["seed"], []).append(float(r["mean_return"]))
    return {s: float(np.mean(v)) for s, v in out.items()}


def rows(read) -> list[Row]:
    """E10 (over the perturbation grid), E10-nominal (the unperturbed model) and, where the
    CSV has the zero-force control, E10-adversary (RARL against RARL at 0 N over the grid)."""
    data = read("rarl_robustness.csv")
    steps = int(data[0]["steps"])
    force = next(float(r["adversary_force"]) for r in data if r["variant"] == "rarl")
    masses = sorted({float(r["mass_scale"]) for r in data})
    frictions = sorted({float(r["friction_scale"]) for r in data})
    episodes = data[0]["episodes"]
    grid = (
        f"pole and cart mass x {{{', '.join(f'{m:g}' for m in masses)}}}, joint damping x "
        f"{{{', '.join(f'{f:g}' for f in frictions)}}}"
    )
    ours = (
        f"transplant: PPO (CleanRL defaults, 1024-step rollouts) instead of TRPO for both "
        f"players, on Gymnasium's InvertedPendulum-v5; the adversary pushes the pole with x and "
        f"z forces of at most {force:g} N; one protagonist and one adversary update per "
        f"iteration; friction is the joints' damping (the model's geoms do not collide); "
        f"baseline: algos/ppo.py with the same flags and seeds; the grid was widened to "
        f"larger factors after a first grid (mass up to x 2, damping up to x 2) on which every "
        f"PPO policy scored the maximum"
    )
    if not any(r["variant"] == "rarl-no-force" for r in data):
        ours += (
            "; no control run with a zero adversary force, so the adversary's effect is not "
            "separated from that of the alternating training scheme"
        )
    budget = (
        f"{steps:,} protagonist env steps per run (RARL's adversary samples as many again); "
        "the paper trains TRPO for far more"
    )
    specs = [
        ("E10", False,
         "training against an adversary makes policies robust to mass and friction changes",
         f"final deterministic policy: return ({episodes} episodes per cell) averaged over the "
         f"{len(masses) * len(frictions)} perturbations ({grid})"),
        ("E10-nominal", True,
         "RARL's protagonist is better than the baseline even without the adversary "
         "(unperturbed test)",
         f"final deterministic policy: return ({episodes} episodes) on the nominal model"),
    ]  # fmt: skip
    specs = [(*spec, "ppo") for spec in specs]
    if any(r["variant"] == "rarl-no-force" for r in data):  # the control: the same scheme at 0 N
        specs.append(
            ("E10-adversary", False,
             "the adversary's forces, not the alternating training itself, make the protagonist "
             "robust",
             f"final deterministic policy: return averaged over the {len(masses) * len(frictions)}"
             f" perturbations, against rarl.py at --adversary-force 0 (same scheme and data)",
             "rarl-no-force")
        )  # fmt: skip
    names = {"ppo": "PPO", "rarl-no-force": "RARL at 0 N"}
    out = []
    for rid, nominal, claim, metric, base in specs:
        a, b = _per_seed(data, "rarl", nominal), _per_seed(data, base, nominal)
        d = np.array([a[s] - b[s] for s in sorted(a, key=int) if s in b])
        stat, verdict, detectable = paired_verdict(d, claim_sign=1)
        mean_a = np.mean([a[s] for s in a])
        mean_b = np.mean([b[s] for s in b])
        out.append(
            Row(
                rid,
                PAPER,
                claim,
                PAPER_SETTING,
                ours,
                budget,
                f"{d.size} pairs",
                f"{metric}, RARL minus {names[base]} per seed",
                f"RARL {mean_a:.4g} vs {names[base]} {mean_b:.4g} (means); {stat}",
                verdict,
                detectable,
                "rarl_robustness.csv",
            )
        )
    return out
