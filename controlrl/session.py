"""What every run needs, whatever the algorithm or backend: seeding, the run directory and
config.json, resume, the logger and progress bar, evaluation and checkpoint cadence, the NaN
guard and the final evaluation. Torch on-policy, JAX, off-policy and offline files all use it.

    session = Session(args, steps_per_iteration=batch_size)
    for iteration in session.start(policy=policy, optimizer=optimizer):  # restored on --resume
        ...                                       # collect and update; then
        session.step += batch_size                 # env steps (or gradient steps) done so far
        session.end_iteration(iteration, metrics, timing, evaluate=lambda: ...)
    session.finish(evaluate=lambda: ...)

Anything with state_dict()/load_state_dict() can be registered; the checkpoint also holds the
algorithm's name (another algorithm's run refuses it), the step, the iteration and the torch RNG
state, and is written atomically. --resume restores them
and drops the rows logged after the checkpoint; a run directory without a checkpoint yet (killed
before the first) starts again from step 0 with its config.json, its rows dropped. What the
envs do on resume is the caller's (training.Run: the envs as saved where envs.state captures
them, else fresh episodes; see rollout.Collector).
The session holds the run directory's lock from its construction to finish() (controlrl.rundir:
a second run or resume of the directory is refused naming this pid); a full or read-only disk
stops the run with one line (exit 1), the last good checkpoint left in place.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import torch

from controlrl import checkpoint, rundir
from controlrl.cli import CommonArgs, config_dict, fail
from controlrl.diagnostics import NonFiniteError
from controlrl.logger import RunLogger, default_run_dir
from controlrl.seeding import rng_state, seed_everything, set_rng_state


def algo_name(args: CommonArgs) -> str:
    """The algorithm's name: the file stem of the module that defines type(args) ('ppo')."""
    module = sys.modules[type(args).__module__]
    return Path(module.__file__).stem


class Session:
    """One run's directory, logger, resume state, cadences and checkpoints."""

    # a checkpoint's fsync and rename in a thread while training goes on (its state is
    # serialised first, in the caller's thread); the next save and finish() wait for it
    background_checkpoints = False

    def __init__(self, args: CommonArgs, steps_per_iteration: int) -> None:
        self.args = args
        self.algo = algo_name(args)
        torch.set_num_threads(args.torch_threads)
        seed_everything(args.seed, args.torch_deterministic)
        self.resume_state: dict | None = None
        self.steps_per_iteration = steps_per_iteration
        self.num_iterations = args.total_timesteps // steps_per_iteration
        self.run_dir = Path(args.run_dir or default_run_dir(self.algo, args.env_id, args.seed))
        self._take_run_dir()
        # a run killed before its first checkpoint has config.json and maybe metrics rows but
        # nothing to continue from: resuming it starts it again from step 0 (rows dropped)
        self.restart_from_scratch = False
        if args.resume is not None:  # read before anything is started or written
            path = self.checkpoint_path(args.resume)
            self.restart_from_scratch = not path.exists()
            try:
                if not self.restart_from_scratch:
                    self.resume_state = checkpoint.load(path, ("step",))
                    checkpoint.check_run_state(self.resume_state, path, self.algo)
            except checkpoint.CheckpointError as exc:
                fail(str(exc))
        self.stateful: dict = {}
        self._checkpoint_io: ThreadPoolExecutor | None = None
        self._pending_checkpoint: Future | None = None
        self.logger: RunLogger | None = None
        self.step = 0
        self.start_iteration = 0
        self.next_eval: int | None = None

    def _take_run_dir(self) -> None:
        """Hold the run directory's lock for the life of the process (a second run or resume
        of it is refused naming this pid), then remove the temp files a killed writer left."""
        try:
            rundir.lock(self.run_dir)
        except rundir.RunDirBusy as exc:
            fail(str(exc))
        except OSError as exc:
            print(f"error: {rundir.disk_fault(exc, self.run_dir)}", file=sys.stderr)
            raise SystemExit(1) from None
        if self.args.run_dir is not None and self.args.resume is None:
            # checked again under the lock: a run that started and ended since validate()
            if (self.run_dir / "config.json").exists():
                rundir.unlock(self.run_dir)
                fail(
                    f"--run-dir {self.run_dir} already holds a run; continue it with --resume "
                    f"{self.run_dir} or choose another directory"
                )
        with rundir.on_disk_fault(self.run_dir):
            rundir.remove_stale_temporaries(self.run_dir)

    def release(self) -> None:
        """Close the logger's files and give the run directory's lock back."""
        with contextlib.suppress(Exception):  # the error being handled is the one to report
            self.wait_checkpoint()
        if self.logger is not None:
            with contextlib.suppress(OSError):
                self.logger.close()
        rundir.unlock(self.run_dir)

    @staticmethod
    def checkpoint_path(run_dir: str | Path) -> Path:
        """Where a run directory keeps its latest checkpoint."""
        return Path(run_dir) / "checkpoints" / "latest.pt"

    def start(self, **stateful) -> Iterator[int]:
        """Register what checkpoints hold, restore it when resuming, open the run directory;
        returns the iterations still to run (1-based)."""
        self.stateful = stateful
        state = self.resume_state
        if state is not None:
            try:
                missing = [k for k in ("iteration", "rng", *stateful) if k not in state]
                if missing:
                    raise checkpoint.CheckpointError(f"checkpoint lacks keys: {', '.join(missing)}")
                for name, obj in stateful.items():
                    obj.load_state_dict(state[name])
                set_rng_state(state["rng"])
            except (checkpoint.CheckpointError, KeyError, RuntimeError, ValueError) as exc:
                fail(f"cannot resume from {self.args.resume}: {exc}")
            self.start_iteration, self.step = int(state["iteration"]), int(state["step"])
        args = self.args
        with rundir.on_disk_fault(self.run_dir, self.release):
            if self.restart_from_scratch:  # the same run from step 0: its rows would come twice
                for name in ("metrics.csv", "timing.csv"):
                    (self.run_dir / name).unlink(missing_ok=True)
                shutil.rmtree(self.run_dir / "tb", ignore_errors=True)
            self.logger = RunLogger(
                self.run_dir,
                config_dict(args, self.algo),
                args.total_timesteps,
                self.step,
                args.tensorboard,
                args.progress,
            )
        if self.restart_from_scratch:
            self.write(f"no checkpoint in {self.run_dir} yet: starting it again from step 0")
        every = args.eval_every
        self.next_eval = (self.step // every + 1) * every if every else None
        return iter(range(self.start_iteration + 1, self.num_iterations + 1))

    @contextlib.contextmanager
    def status(self, text: str) -> Iterator[None]:
        """Show text on the progress bar while the block runs (e.g. 'compiling...')."""
        self.logger.bar.set_description_str(text, refresh=True)
        try:
            yield
        finally:
            self.logger.bar.set_description_str("", refresh=False)

    def write(self, line: str) -> None:
        """A line of text above the progress bar."""
        self.logger.bar.write(line)

    @contextlib.contextmanager
    def guard(self) -> Iterator[None]:
        """Stop with a message (exit 1) if the block raised NonFiniteError (see check_finite);
        the last good checkpoint stays on disk."""
        try:
            yield
        except NonFiniteError as exc:
            self.release()
            print(
                f"error: {exc}; the last good checkpoint stays in {self.run_dir}", file=sys.stderr
            )
            raise SystemExit(1) from None

    def end_iteration(
        self,
        iteration: int,
        metrics: dict,
        timing: dict | None = None,
        evaluate: Callable[[], float | dict] | None = None,
    ) -> None:
        """Log one row at self.step (plus eval/return, or the eval/* metrics of a dict that
        evaluate returns, when an evaluation is due), then write a
        checkpoint when due (every checkpoint_every iterations and after the last)."""
        metrics = {**metrics, "eval/return": float("nan")}  # a fixed column, NaN between evals
        if self.eval_due() and evaluate is not None:
            metrics.update(eval_metrics(evaluate()))
            self.next_eval += self.args.eval_every
        with rundir.on_disk_fault(self.run_dir, self.release):
            self.logger.log(self.step, metrics, timing)
            if iteration % self.args.checkpoint_every == 0 or iteration == self.num_iterations:
                self.save_checkpoint(iteration)

    def eval_due(self) -> bool:
        """Whether self.step has reached the next evaluation."""
        return self.next_eval is not None and self.step >= self.next_eval

    def save_checkpoint(self, iteration: int) -> None:
        """Everything needed to resume, written atomically."""
        state = {
            "algo": self.algo,  # resumed only by the algorithm that wrote it
            "step": self.step,
            "iteration": iteration,
            "rng": rng_state(),
            **{name: obj.state_dict() for name, obj in self.stateful.items()},
        }
        path = self.checkpoint_path(self.run_dir)
        self.wait_checkpoint()  # checkpoints land in order
        tmp = checkpoint.write_temp(path, state)  # the state copied out before training goes on
        kept = path.with_name(f"step_{self.step:09d}.pt") if self.args.keep_checkpoints else None

        def land() -> None:
            checkpoint.commit(tmp, path)
            if kept is not None:  # latest.pt is renamed over, never rewritten: a link
                kept.unlink(missing_ok=True)
                try:
                    os.link(path, kept)
                except OSError:  # a filesystem without hard links
                    shutil.copyfile(path, kept)

        if self.background_checkpoints:
            if self._checkpoint_io is None:
                self._checkpoint_io = ThreadPoolExecutor(1)
            self._pending_checkpoint = self._checkpoint_io.submit(land)
        else:
            land()

    def wait_checkpoint(self) -> None:
        """Until the checkpoint being landed in the background (if any) is on disk; re-raises
        its error."""
        pending, self._pending_checkpoint = self._pending_checkpoint, None
        if pending is not None:
            pending.result()

    def finish(self, evaluate: Callable[[], float | dict]) -> float:
        """Final evaluation into final_eval.json (eval_return_mean, plus eval_<name> for each
        further eval/<name> the evaluation returned); close the logger; returns the mean return."""
        with rundir.on_disk_fault(self.run_dir, self.release):
            self.wait_checkpoint()  # on disk before final_eval.json says the run is done
        results = eval_metrics(evaluate())
        final = results["eval/return"]
        extra = {f"eval_{k[5:]}": v for k, v in results.items() if k != "eval/return"}
        with rundir.on_disk_fault(self.run_dir, self.release):
            rundir.write_text_atomic(
                self.run_dir / "final_eval.json",
                json.dumps({"step": self.step, "eval_return_mean": final, **extra}) + "\n",
            )
        self.write(
            f"final evaluation ({self.args.eval_episodes} episodes, normaliser frozen): "
            f"{final:.1f}   run dir: {self.run_dir}"
        )
        with rundir.on_disk_fault(self.run_dir, self.release):
            self.logger.close()
        rundir.unlock(self.run_dir)
        return final


class Timer:
    """Wall-clock phases of one iteration: timer.lap('rollout_s') ... timer.timing(batch)."""

    def __init__(self) -> None:
        self.t = time.perf_counter()
        self.t0 = self.t
        self.laps: dict[str, float] = {}

    def lap(self, name: str) -> None:
        """Seconds since the previous lap (or the start) under time/<name>."""
        now = time.perf_counter()
        self.laps[f"time/{name}"] = now - self.t
        self.t = now

    def timing(self, steps: int) -> dict[str, float]:
        """{'time/sps': steps per second since the start, then each lap}."""
        return {"time/sps": steps / max(self.t - self.t0, 1e-9), **self.laps}


def eval_metrics(result: float | dict) -> dict:
    """An evaluation's result as metrics: a float is eval/return; a dict (eval/return plus
    others, e.g. eval/normalized_score, whose columns the caller's metrics hold as NaN from the
    first row on) is taken as it is."""
    return dict(result) if isinstance(result, dict) else {"eval/return": result}


def all_finite(values) -> bool:
    """Every number is finite."""
    return all(math.isfinite(v) for v in values)
