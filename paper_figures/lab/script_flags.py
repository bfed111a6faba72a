"""The command line the figure scripts of paper_figures/ share: the flags of a sweep-backed figure
(where its runs and outputs go, --train, --toy, --replot), the checks of a list flag and of a
MuJoCo env id (parser.error, exit 2, before anything runs), and the closing line naming what a
run wrote and the command that made it."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "paper_figures" / "out"


def add_sweep_flags(p, name: str, workers: int = 1, algo: str = "", replot: bool = True,
                    sweep_dir: bool = True) -> None:  # fmt: skip
    """--sweep-dir (runs/sweeps/<name>; with sweep_dir=False none: the script's default follows
    --name), --out, --name and --replot (with replot), --train, --workers, --toy, and with `algo`
    the positional flags passed on to algos/<algo>.py."""
    default = ROOT / "runs" / "sweeps" / name if sweep_dir else None
    where = f"runs/sweeps/{name}" if sweep_dir else "runs/sweeps/<--name>"
    p.add_argument("--sweep-dir", type=Path, default=default,
                   help=f"the runs' sweep directory (default: {where})")  # fmt: skip
    p.add_argument("--out", type=Path, default=OUT)
    if replot:
        p.add_argument("--name", default=name, help="stem of the PNG and CSVs in --out")
        p.add_argument("--replot", action="store_true", help="only the PNG, from <out>/<name>*.csv")
    p.add_argument("--train", action="store_true", help="run what is missing first")
    p.add_argument("--workers", type=int, default=workers, help="runs at once when training")
    p.add_argument("--toy", action="store_true", help="seconds-sized end-to-end run (tests)")
    if algo:
        p.add_argument("extra", nargs="*", help=f"flags passed to algos/{algo}.py (after --)")


def some_of(p, flag: str, text: str, allowed) -> list[str]:
    """The comma-separated values of --flag, each one of `allowed` (else parser.error)."""
    values = text.split(",")
    bad = [v for v in values if v not in allowed]
    if bad:
        p.error(f"--{flag}: unknown {bad}, expected some of {list(allowed)}")
    return values


def check_episodic_env(p, env_id: str, why: str) -> None:
    """parser.error for an unknown env id or a bandit (`why`: what needs episodes of many steps)."""
    from envs import UnknownEnvError, check_env_id

    try:
        check_env_id(env_id)
    except UnknownEnvError as exc:
        p.error(f"--env-id: {exc}")
    if env_id.startswith("bandit:"):
        p.error(f"--env-id: {env_id} is a bandit; {why}")


def wrote(what: str, script: str, argv: list[str] | None) -> None:
    """Print what a run of paper_figures/<script>.py wrote and the command that made it."""
    given = shlex.join(sys.argv[1:] if argv is None else argv)
    print(f"wrote {what}; command: python paper_figures/{script}.py {given}", flush=True)
