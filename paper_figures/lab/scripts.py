"""What the figure scripts of paper_figures/ share around the sweep runner and matplotlib: train a
sweep with one progress line per run, save a figure, redraw one from a committed toy fixture."""

from __future__ import annotations

import shutil
from pathlib import Path

from controlrl.experiment import SweepConfig, run_sweep


def train(config: SweepConfig, out: Path, label: str = "", workers: int = 1, **kw) -> dict:
    """run_sweep (what is missing; resumable) printing one line per finished run and a warning
    naming the failed ones; returns every run's status."""

    def show(r: dict) -> None:
        print(f"[{r['status']}] {label + ' ' if label else ''}{r['run_id']}", flush=True)

    runs = run_sweep(config, Path(out), workers=workers, on_update=show, **kw)
    failed = [k for k, v in runs.items() if v["status"] == "failed"]
    if failed:
        print(f"warning: failed runs {failed}; see {Path(out) / 'sweep.json'}", flush=True)
    return runs


def save_figure(fig, path: Path, dpi: float = 100) -> None:
    """The figure laid out tightly and written as a PNG without the software's name in its
    metadata (so the bytes name no version of this machine), then closed."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=dpi, metadata={"Software": None})
    plt.close(fig)


def at_least(parser, args, names: tuple[str, ...], low: int = 1) -> None:
    """parser.error (exit 2) naming the first of the flags `names` whose value is below `low`."""
    for name in names:
        if getattr(args, name) < low:
            parser.error(f"--{name.replace('_', '-')} must be >= {low}, got {getattr(args, name)}")


def replot_fixture(main, argv: list[str], args, fixture: Path, parts: tuple, flag: str) -> None:
    """A declared experiment's toy that runs nothing: the committed `fixture`'s toy<part>.csv
    copied into args.out as <args.name><part>.csv (args: argv parsed), then main(argv + [flag])
    redraws the figure from them."""
    Path(args.out).mkdir(parents=True, exist_ok=True)
    for part in parts:
        shutil.copyfile(Path(fixture) / f"toy{part}.csv", Path(args.out) / f"{args.name}{part}.csv")
    main([*argv, flag])
