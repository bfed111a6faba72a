"""python -m paper_figures list | declare | tune | run | collect | figure | report | check

list     the declared experiments, their claims and arms
declare  register a declaration before its runs: a header-only results table, its lines not run yet
tune     run a declaration's [tuning] grid on its tuning seeds, write results/tuning.csv
run      train what is missing (resumable), collect the results table, draw its figure, report
collect  write a script experiment's results table from its outputs already made (--from DIR)
figure   draw an experiment's results/figure.png from its results and the judged ledger
report   write CLAIMS.md, every experiment's page and the README blocks
check    exit 1 if any of them differs from what the declarations and results give
"""

from __future__ import annotations

import sys
from pathlib import Path

from envs.errors import ArgumentParser  # the one-line parser, without torch


def main(argv: list[str] | None = None) -> int:
    from paper_figures.lab.tables import TableError

    try:
        return _main(argv)
    except TableError as exc:  # a results table it cannot read: one line naming the file
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _main(argv: list[str] | None) -> int:
    from paper_figures.lab import figures, report, runner, spec, tuning

    parser = ArgumentParser(prog="python -m paper_figures", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="the declared experiments")
    dec = sub.add_parser("declare", help="a header-only results table before any run, then report")
    dec.add_argument("id", help="an experiment folder under paper_figures/ without results")
    run = sub.add_parser("run", help="train, collect and report one experiment")
    run.add_argument("id", help="an experiment folder under paper_figures/")
    run.add_argument("--toy", action="store_true", help="the declaration's toy size (tests)")
    run.add_argument("--workers", type=int, default=2, help="runs at once")
    run.add_argument("--backend", choices=("local", "ray"), default="local")
    run.add_argument("--address", default=None, help="a Ray cluster (with --backend ray)")
    run.add_argument("--envs", default="", help="comma-separated env ids: run only these (the "
                     "claims on the others stay 'not run yet')")  # fmt: skip
    tune = sub.add_parser("tune", help="run the [tuning] grid, write results/tuning.csv")
    tune.add_argument("id", help="an experiment folder under paper_figures/ with a [tuning] table")
    tune.add_argument("--toy", action="store_true", help="the toy's size, flags and tuning seeds")
    tune.add_argument("--workers", type=int, default=2, help="runs at once")
    tune.add_argument("--grid", default=None, help="one named [[tuning]] grid ('' the unnamed "
                      "one; default: every grid)")  # fmt: skip
    col = sub.add_parser("collect", help="a script's results table from its outputs in DIR")
    col.add_argument("id", help="an experiment folder under paper_figures/ with a [run] script")
    col.add_argument("--from", dest="source", required=True, help="the script's --out folder")
    fig = sub.add_parser("figure", help="draw one experiment's results/figure.png")
    fig.add_argument("id", help="an experiment folder under paper_figures/")
    sub.add_parser("report", help="write the ledger, pages and README blocks")
    sub.add_parser("check", help="compare them with what the results give")
    args = parser.parse_args(argv)
    if args.command == "list":
        for exp in spec.load_all():
            runs = "exact, no runs"
            if exp.arms:
                runs = f"arms {', '.join(exp.arms)}, {len(exp.envs)} envs, {len(exp.seeds)} seeds"
            print(f"{exp.id}: {exp.title} ({len(exp.claims)} claims; {runs})")
        return 0
    if args.command in ("run", "figure", "collect", "tune", "declare"):
        folders = {p.name: p for p in spec.discover()}
        if args.id not in folders:
            parser.error(f"unknown experiment {args.id!r} (known: {', '.join(folders)})")
        exp = spec.load(folders[args.id])
    if args.command == "tune":
        if not exp.tunings:
            parser.error(f"{exp.id} has no [tuning] table")
        grids = [t for t in exp.tunings if args.grid is None or t.name == args.grid]
        if not grids:
            names = ", ".join(repr(t.name) for t in exp.tunings)
            parser.error(f"--grid {args.grid!r}: not a grid of {exp.id} (its grids: {names})")
        spec.check_flags(exp)
        failed = []
        for t in grids:
            target, bad = tuning.run(exp, t, args.toy, runner.base(exp, args.toy), args.workers)
            print(f"wrote {target}" + (f"; failed runs: {', '.join(bad)}" if bad else ""))
            failed += bad
        return 1 if failed else 0
    if args.command == "collect":
        if not exp.script:
            parser.error(f"{exp.id} has no [run] script: `run` collects its sweeps")
        print(f"wrote {runner.write(exp, source=Path(args.source))}")
        report.write()
        return 0
    if args.command == "declare":
        spec.check_flags(exp)
        print(f"wrote {runner.declare(exp)}")
        report.write()
        return 0
    if args.command == "figure":
        print(f"wrote {figures.write(exp)}")
        return 0
    if args.command == "run":
        only = tuple(e for e in args.envs.split(",") if e)
        unknown = [e for e in only if e not in exp.envs]
        if unknown:
            parser.error(f"--envs {', '.join(unknown)}: not an env of {exp.id} (its envs: "
                         f"{', '.join(exp.envs)})")  # fmt: skip
        spec.check_flags(exp)
        failed = runner.run(exp, args.toy, args.workers, args.backend, args.address, only=only)
        target = runner.write(exp, args.toy)
        print(f"wrote {target}" + (f"; failed runs: {', '.join(failed)}" if failed else ""))
        if exp.arms:  # an exact experiment has no runs to draw
            drawn = figures.write_toy(exp, target) if args.toy else figures.write(exp)
            print(f"wrote {drawn}")
        if not args.toy:
            report.write()
        return 1 if failed else 0
    if args.command == "report":
        report.write()
        return 0
    problems = report.check()
    for p in problems:
        print(f"check: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
