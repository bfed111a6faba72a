"""Run directory: config.json, metrics.csv, timing.csv, TensorBoard events, progress bar."""

from __future__ import annotations

import csv
import json
import time
from pathlib import Path

from tqdm import tqdm

from controlrl.rundir import write_text_atomic


def default_run_dir(algo: str, env_id: str, seed: int) -> Path:
    """runs/<algo>/<env>__seed<seed>__<timestamp>."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return Path("runs") / algo / f"{env_id.replace(':', '_')}__seed{seed}__{stamp}"


def truncate_csv(path: Path, max_step: int) -> None:
    """Keep the header and the complete rows with step <= max_step (after a kill and resume)."""
    if not path.exists():
        return
    lines = path.read_text().splitlines(keepends=True)
    if not lines:
        return
    kept = [lines[0]]
    ncols = len(lines[0].rstrip("\n").split(","))
    for line in lines[1:]:
        if not line.endswith("\n") or len(line.rstrip("\n").split(",")) != ncols:
            break  # a row cut by the kill
        if int(float(line.split(",", 1)[0])) > max_step:
            break
        kept.append(line)
    write_text_atomic(path, "".join(kept))  # a full disk keeps the rows as they were


class _CsvLog:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.fields: list[str] | None = None
        if path.exists() and path.stat().st_size > 0:
            with path.open() as f:
                self.fields = next(csv.reader(f))
        self.file = path.open("a", newline="")

    def write(self, row: dict) -> None:
        if self.fields is None:
            self.fields = list(row)
            self.file.write(",".join(self.fields) + "\n")
        self.file.write(",".join(_fmt(row.get(k, "")) for k in self.fields) + "\n")
        self.file.flush()


def _fmt(x) -> str:
    if isinstance(x, float):
        return repr(float(x))  # round-trips exactly, so identical runs give identical files
    return str(x)


class RunLogger:
    """Everything a run writes besides checkpoints and videos.

    metrics.csv holds only what is deterministic given the seed (so two runs can be compared
    byte for byte); wall-clock quantities (steps/s) go to timing.csv and TensorBoard.
    """

    def __init__(
        self,
        run_dir: Path,
        config: dict,
        total_steps: int,
        start_step: int = 0,
        tensorboard: bool = True,
        progress: bool = True,
    ) -> None:
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        config_path = self.run_dir / "config.json"
        if not config_path.exists():  # written whole: a full disk must not leave a 0-byte file
            write_text_atomic(config_path, json.dumps(config, indent=2, default=str) + "\n")
        if start_step > 0:
            truncate_csv(self.run_dir / "metrics.csv", start_step)
            truncate_csv(self.run_dir / "timing.csv", start_step)
        self.metrics = _CsvLog(self.run_dir / "metrics.csv")
        self.timing = _CsvLog(self.run_dir / "timing.csv")
        self.writer = None
        if tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            self.writer = SummaryWriter(str(self.run_dir / "tb"), purge_step=start_step or None)
        self.bar = tqdm(
            total=total_steps,
            initial=start_step,
            unit="step",
            unit_scale=True,
            disable=not progress,
            dynamic_ncols=True,
            mininterval=1.0,
        )
        self.step = start_step

    def log(self, step: int, metrics: dict, timing: dict | None = None) -> None:
        """One row per iteration: metrics.csv (deterministic), timing.csv, TensorBoard, bar."""
        self.metrics.write({"step": step, **metrics})
        if timing:
            self.timing.write({"step": step, **timing})
        if self.writer is not None:
            for key, value in {**metrics, **(timing or {})}.items():
                if isinstance(value, int | float) and value == value:
                    self.writer.add_scalar(key, value, step)
        self.bar.update(step - self.step)
        self.step = step
        post = {k: f"{metrics[k]:.4g}" for k in ("train/episode_return",) if k in metrics}
        if timing and "time/sps" in timing:
            post["sps"] = f"{timing['time/sps']:.0f}"
        if post:
            self.bar.set_postfix(post, refresh=False)

    def close(self) -> None:
        """Flush and close files, writer and bar."""
        self.bar.close()
        self.metrics.file.close()
        self.timing.file.close()
        if self.writer is not None:
            self.writer.close()
