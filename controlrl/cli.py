"""Common flags of every algorithm script, tyro parsing, validation before anything runs (and
the --dataset an offline script validates, loaded once). Every parse error is one line on
stderr and exit status 2: tyro's through its parse-error hook (cli), argparse's through
ArgumentParser (the figure scripts)."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import math
import os
import re
import sys
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TypeVar

import tyro
from tyro import _errors as tyro_errors  # tyro's parse-error hook; tyro is pinned exactly

from controlrl import checkpoint
from envs.errors import ArgumentParser, closest_flags

__all__ = ["ArgumentParser", "ArgError", "CommonArgs", "cli", "fail", "parse", "require"]

T = TypeVar("T", bound="CommonArgs")


class ArgError(ValueError):
    """A flag has a value outside its allowed range."""


def require(condition: bool, flag: str, message: str) -> None:
    """Raise ArgError('--flag: message') unless condition holds."""
    if not condition:
        raise ArgError(f"--{flag.replace('_', '-')} {message}")


def require_positive(args, *names: str) -> None:
    """Every named flag must be > 0."""
    for name in names:
        value = getattr(args, name)
        require(value > 0, name, f"must be > 0, got {value}")


def require_nonnegative(args, *names: str) -> None:
    """Every named flag must be >= 0."""
    for name in names:
        value = getattr(args, name)
        require(value >= 0, name, f"must be >= 0, got {value}")


def require_unit_interval(args, *names: str) -> None:
    """Every named flag must lie in [0, 1] (discounts, lambdas)."""
    for name in names:
        value = getattr(args, name)
        require(0 <= value <= 1, name, f"must be in [0, 1], got {value}")


def require_choice(args, name: str, choices) -> None:
    """The named flag must be one of choices (a registry's names; listed sorted)."""
    value = getattr(args, name)
    names = ", ".join(sorted(choices))
    require(value in choices, name, f"must be one of {names}, got {value!r}")


def require_batch(args, num_steps: int, num_minibatches: int = 1) -> int:
    """num_steps * num_envs must split into minibatches (of >= 2 rows where advantages are
    normalised per minibatch, args.norm_adv) and fit in total_timesteps; returns it."""
    batch = num_steps * args.num_envs
    require(
        batch % num_minibatches == 0,
        "num_minibatches",
        f"must divide the batch num_steps * num_envs = {batch}, got {num_minibatches}",
    )
    require(
        not getattr(args, "norm_adv", False) or batch // num_minibatches >= 2,
        "num_minibatches",
        f"must leave minibatches of >= 2 rows (advantages are normalised per minibatch; "
        f"batch {batch}), got {num_minibatches}; or add --no-norm-adv",
    )
    require(
        args.total_timesteps >= batch,
        "total_timesteps",
        f"must be >= one batch (num_steps * num_envs = {batch}), got {args.total_timesteps}",
    )
    return batch


def require_finite(args) -> None:
    """Every float flag (and every number of a tuple flag) is finite: no nan or inf."""
    for f in dataclasses.fields(args):
        value = getattr(args, f.name)
        values = value if isinstance(value, tuple) else (value,)
        for v in values:
            if isinstance(v, float):
                require(math.isfinite(v), f.name, f"must be finite, got {v}")


SEED_MAX = 2**32 - 1  # numpy's legacy seed range (np.random.seed, dm_control's RandomState)


def require_seed(args, *names: str) -> None:
    """Every named seed flag (default: seed) lies in [0, SEED_MAX]."""
    for name in names or ("seed",):
        value = getattr(args, name)
        require(0 <= value <= SEED_MAX, name, f"must be in [0, {SEED_MAX}], got {value}")


def available_memory() -> int | None:
    """Bytes of memory the machine can still give a process (MemAvailable); None if unknown."""
    with contextlib.suppress(OSError, ValueError, StopIteration):
        with open("/proc/meminfo") as f:
            line = next(line for line in f if line.startswith("MemAvailable:"))
        return int(line.split()[1]) * 1024
    with contextlib.suppress(OSError, ValueError, AttributeError):
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    return None


def require_memory(flag: str, nbytes: float, what: str) -> None:
    """Refuse --flag when what it allocates (nbytes, an estimate from below) exceeds the memory
    the machine has available: a one-line refusal instead of swapping the machine away."""
    free = available_memory()
    require(
        free is None or nbytes <= free,
        flag,
        f"needs at least {nbytes / 2**30:.1f} GiB for {what}, more than the "
        f"{(free or 0) / 2**30:.1f} GiB of memory available",
    )


def require_minibatch_memory(
    flag: str, rows: int, obs_dim: int, act_dim: int, hidden_sizes=(), what: str = "a minibatch"
) -> None:
    """Refuse --flag when `rows` transitions (obs, action, next obs, reward, done as float32)
    and, for a minibatch, their activations through the hidden layers cannot fit in memory."""
    per_row = 4 * (2 * obs_dim + act_dim + 2 + sum(hidden_sizes or ()))
    require_memory(flag, rows * per_row, f"{what} of {rows} rows")


def require_sizes(args, *names: str) -> None:
    """Every named tuple flag (hidden layer sizes; None allowed) holds only sizes > 0."""
    for name in names:
        require(all(h > 0 for h in getattr(args, name) or ()), name, "must all be > 0")


def require_minibatch_flags(args) -> None:
    """The flags of every minibatch on-policy algorithm (ppo, spo, bpo, fixpo): learning_rate,
    num_steps, num_minibatches, update_epochs, max_grad_norm > 0; gamma, gae_lambda in [0, 1];
    ent_coef, vf_coef >= 0; hidden_sizes > 0; the batch splits into the minibatches and fits
    in total_timesteps."""
    require_positive(
        args, "learning_rate", "num_steps", "num_minibatches", "update_epochs", "max_grad_norm"
    )
    require_unit_interval(args, "gamma", "gae_lambda")
    require_nonnegative(args, "ent_coef", "vf_coef")
    require_sizes(args, "hidden_sizes")
    require_batch(args, args.num_steps, args.num_minibatches)


def require_ratio_flags(args) -> None:
    """The RatioArgs flags: --ratio one of controlrl.ratios.KINDS; the Kalman noises >= 0."""
    from controlrl.ratios import KINDS

    require(args.ratio in KINDS, "ratio", f"must be one of {', '.join(KINDS)}, got {args.ratio!r}")
    require_nonnegative(args, "kalman_q", "kalman_v", "kalman_p0")


def require_start_states(args) -> None:
    """--start-states (None: the env's own starts): an .npy state array the Gymnasium id
    --env-id can start from (envs.start_states), with sync vectorization."""
    if args.start_states is None:
        return
    from envs import split_id, start_states

    require(
        split_id(args.env_id)[0] == "gym",
        "start_states",
        f"needs a Gymnasium id (classic control), got {args.env_id}",
    )
    require(args.vectorization == "sync", "start_states", "needs --vectorization sync")
    try:
        start_states.check(args.env_id, start_states.load(args.start_states))
    except ValueError as exc:
        raise ArgError(f"--start-states: {exc}") from None


def fail(message: str) -> None:
    """Print one line to stderr and exit with status 2 (bad input; nothing was written: a run
    directory this process made and wrote no run into is removed, controlrl.rundir)."""
    from controlrl import rundir

    rundir.discard_unused()
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(2)


_DATASETS: dict = {}  # what validate() loaded, for main() to take: one load per process


def load_dataset(path_or_id: str):
    """The envs.offline dataset --dataset names (a file, a directory or a generated id), loaded
    once per process: validate() reads its env id, main() trains on it. A bad one raises
    ArgError naming --dataset."""
    from envs.offline import DatasetError, load  # the loader only where a dataset is used

    if path_or_id not in _DATASETS:
        try:
            _DATASETS[path_or_id] = load(path_or_id)
        except DatasetError as exc:
            raise ArgError(f"--dataset: {exc}") from None
    return _DATASETS[path_or_id]


def forget_datasets() -> None:
    """Drop the datasets load_dataset holds (main() keeps its own reference, no second copy)."""
    _DATASETS.clear()


@dataclass
class CommonArgs:
    env_id: str = "HalfCheetah-v5"
    """environment id: a Gymnasium id (Hopper-v5, CartPole-v1), brax:<name> (brax:ant),
    dmc:<domain>-<task> (dmc:cheetah-run), envpool:<id> (envpool:HalfCheetah-v5) or
    bandit:<name> (bandit:bernoulli-10, bandit:sequence-reverse-2-8; names: envs/bandits.py)"""
    brax_pipeline: Literal["spring", "positional", "generalized", "mjx"] | None = None
    """physics pipeline of brax: ids (default: envs/brax.py DEFAULT_PIPELINE)"""
    seed: int = 1
    """seed of python, numpy, torch and the environments"""
    total_timesteps: int = 1_000_000
    """environment steps to train for, summed over all envs"""
    num_envs: int = 1
    """parallel environments in the vector env"""
    vectorization: Literal["sync", "async"] = "sync"
    """sync steps envs in this process (fastest on 2 cores); async uses one process per env"""
    run_dir: str | None = None
    """where the run writes; default runs/<algo>/<env>__seed<seed>__<time>"""
    resume: str | None = None
    """a run directory to continue from its last checkpoint (its config.json is used); one
    killed before its first checkpoint starts again from step 0. Every other flag is the
    run's own: one given with --resume must have the value in its config.json (another value
    is refused), except --progress / --no-progress, which applies"""
    checkpoint_every: int = 10
    """iterations between checkpoints (one is always written at the end)"""
    keep_checkpoints: bool = False
    """keep every checkpoint as checkpoints/step_<step>.pt beside latest.pt (the policies along
    training, e.g. behaviour policies for envs.offline's dataset generator)"""
    eval_every: int = 100_000
    """env steps between deterministic evaluations (0: only at the end)"""
    eval_episodes: int = 10
    """episodes per evaluation, normaliser frozen"""
    capture_video: bool = False
    """record the first evaluation episode of each evaluation to MP4 in the run directory"""
    truncation_as_terminal: bool = False
    """treat time-limit ends as terminal (no bootstrap): CleanRL's convention, to match it"""
    torch_threads: int = 1
    """torch intra-op threads; one is fastest for small MLPs (see make bench)"""
    torch_deterministic: bool = True
    """torch.use_deterministic_algorithms"""
    tensorboard: bool = True
    """write TensorBoard events to <run_dir>/tb"""
    progress: bool = True
    """show a progress bar"""

    def validate(self) -> None:
        """Check every flag; raise ArgError naming the first bad one."""
        from envs import (
            UnknownEnvError,
            check_env_id,
            check_supported,
            missing_render_package,
            renders,
            split_id,
        )

        require_finite(self)
        require_seed(self)
        require_positive(
            self,
            "total_timesteps",
            "num_envs",
            "checkpoint_every",
            "eval_episodes",
        )
        cpus = os.cpu_count() or 1
        require(
            1 <= self.torch_threads <= cpus,
            "torch_threads",
            f"must be in [1, {cpus}] (the CPUs of this machine), got {self.torch_threads}",
        )
        require_nonnegative(self, "eval_every")
        try:
            check_env_id(self.env_id)
            check_supported(self.env_id)
        except UnknownEnvError as exc:
            raise ArgError(f"--env-id: {exc}") from None
        require(
            not self.capture_video or renders(self.env_id),
            "capture_video",
            f"is not supported for {split_id(self.env_id)[0]}: ids (Gymnasium and dmc: only)",
        )
        missing = missing_render_package(self.env_id) if self.capture_video else None
        require(
            missing is None,
            "capture_video",
            f"needs {missing} to render {self.env_id}, which is not installed "
            "(pip install -e . installs it)",
        )
        if self.run_dir is not None and self.resume is None:
            from controlrl.rundir import holder

            pid = holder(self.run_dir)
            live = f" (running now: pid {pid})" if pid else ""
            require(
                not (Path(self.run_dir) / "config.json").exists(),
                "run_dir",
                f"{self.run_dir} already holds a run{live}; continue it with --resume "
                f"{self.run_dir} or choose another directory",
            )


_NO_VALUE = object()


def _config_value(value, hint):
    """value (from JSON) as the type hint of an Args field wants it; _NO_VALUE if it is not one:
    bool, int (not bool), float (an int too), str, None, Literal[...], tuple[X, ...] (a list)
    and unions of those."""
    origin, members = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        for member in members:
            got = _config_value(value, member)
            if got is not _NO_VALUE:
                return got
        return _NO_VALUE
    if origin is Literal:
        ok = any(type(value) is type(m) and value == m for m in members)
        return value if ok else _NO_VALUE
    if origin is tuple:
        if not isinstance(value, list | tuple):
            return _NO_VALUE
        if len(members) == 2 and members[1] is Ellipsis:
            wanted = [members[0]] * len(value)
        elif len(members) == len(value):
            wanted = list(members)
        else:
            return _NO_VALUE
        items = [_config_value(v, h) for v, h in zip(value, wanted)]
        return _NO_VALUE if any(v is _NO_VALUE for v in items) else tuple(items)
    if hint is type(None):
        return None if value is None else _NO_VALUE
    if hint is bool:
        return value if isinstance(value, bool) else _NO_VALUE
    if hint is int:
        return value if isinstance(value, int) and not isinstance(value, bool) else _NO_VALUE
    if hint is float:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        return float(value) if ok else _NO_VALUE
    if hint is str:
        return value if isinstance(value, str) else _NO_VALUE
    return value if isinstance(value, hint) else _NO_VALUE  # any other class: as it is


def _type_name(hint) -> str:
    return getattr(hint, "__name__", None) or str(hint).replace("typing.", "")


def _json_name(value) -> str:
    if value is None:
        return "null"
    kinds = {bool: "a boolean", int: "a number", float: "a number", str: "a string"}
    kinds.update({list: "a list", dict: "an object"})
    return f"{kinds.get(type(value), type(value).__name__)} ({json.dumps(value)[:40]})"


def _saved_values(cls: type[T], saved, config_path: Path) -> dict:
    """The flag values of a config.json, checked against cls: a JSON object with 'algo' (this
    script's name) and 'args' (every field of cls, each of its type; no other key). ArgError
    naming the key at fault."""
    where = f"--resume: {config_path}"
    if not isinstance(saved, dict):
        raise ArgError(f"{where} holds {_json_name(saved).split(' (')[0]}, not a JSON object")
    algo = Path(sys.modules[cls.__module__].__file__).stem  # "ppo", also when run as __main__
    if "algo" not in saved:
        raise ArgError(f"{where} [algo] missing: cannot tell which algorithm wrote the run")
    if saved["algo"] != algo:
        raise ArgError(f"{where} [algo]: that run is {str(saved['algo'])[:40]!r}, not {algo!r}")
    values = saved.get("args", _NO_VALUE)
    if not isinstance(values, dict):
        got = "missing" if values is _NO_VALUE else f"is {_json_name(values)}"
        raise ArgError(f"{where} [args] {got}, expected a JSON object of flags")
    hints = typing.get_type_hints(cls)
    fields = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - fields)
    if unknown:
        raise ArgError(f"{where} [args.{unknown[0]}]: not a flag of {algo}")
    out = {}
    for name in sorted(fields - {"resume", "run_dir"}):  # those two are the resumed directory
        if name not in values:
            raise ArgError(f"{where} [args.{name}] missing")
        got = _config_value(values[name], hints[name])
        if got is _NO_VALUE:
            raise ArgError(
                f"{where} [args.{name}] is {_json_name(values[name])}, expected "
                f"{_type_name(hints[name])}"
            )
        out[name] = got
    return out


def _load_resume_config(cls: type[T], args: T) -> T:
    """cls built from the config.json of the --resume directory, checked against cls (one line
    naming the key at fault), its checkpoint checked to load."""
    run_dir = Path(args.resume)
    config_path = run_dir / "config.json"
    if not config_path.is_file():
        raise ArgError(f"--resume {run_dir}: no config.json there (not a run directory)")
    try:
        saved = json.loads(config_path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ArgError(f"--resume {run_dir}: config.json is corrupt ({exc})") from None
    values = _saved_values(cls, saved, config_path)
    resumed = cls(**{**values, "resume": str(run_dir), "run_dir": str(run_dir)})
    latest = run_dir / "checkpoints" / "latest.pt"
    try:
        if latest.exists():  # none yet (killed before the first one): restarts from step 0
            state = checkpoint.load(latest, required=("step",))
            checkpoint.check_run_state(state, latest, saved["algo"])
    except checkpoint.CheckpointError as exc:
        raise ArgError(f"--resume: {exc}") from None
    return resumed


class _ParseError(Exception):
    """A tyro parse failure, already worded as one line."""


def _flags(cls: type) -> dict[str, bool]:
    """Every flag tyro makes of the dataclass cls -> whether it is a switch (takes no value)."""
    hints = typing.get_type_hints(cls)
    flags: dict[str, bool] = {}
    for f in dataclasses.fields(cls):
        flag = "--" + f.name.replace("_", "-")
        switch = hints.get(f.name) is bool
        flags[flag] = switch
        if switch:
            flags["--no-" + f.name.replace("_", "-")] = True
    return flags


def _values_after(flag: str, argv: list[str]) -> str:
    """The tokens given to flag on the command line (up to the next flag), space-joined."""
    for token in argv:
        if token.startswith(flag + "="):
            return token[len(flag) + 1 :]
    if flag not in argv:
        return ""
    rest = argv[argv.index(flag) + 1 :]
    values = []
    for token in rest:
        if token.startswith("--"):
            break
        values.append(token)
    return " ".join(values)


def _expects(metavar: str) -> str:
    """'an integer' for INT, 'integers' for [INT [INT ...]], 'a string or None' for
    {None}|STR: tyro's metavar in words."""
    words = {"INT": "an integer", "FLOAT": "a number", "STR": "a string", "{None}": "None"}
    plural = {"INT": "integers", "FLOAT": "numbers", "STR": "strings"}
    if metavar.startswith("["):  # a variable-length tuple: "[INT [INT ...]]"
        inner = metavar.strip("[]. ").split()[0]
        return f"{plural.get(inner, inner)} separated by spaces"
    parts = [words.get(p, p) for p in metavar.split("|")]
    return " or ".join(parts)


def _choices(argument, fallback: tuple[str, ...]) -> str:
    """The allowed values of a choice flag, in their declared order ({a,b} metavar)."""
    metavar = str(argument.lowered.metavar or "")
    if metavar.startswith("{") and metavar.endswith("}"):
        return ", ".join(metavar[1:-1].split(","))
    return ", ".join(fallback)


def _unrecognized(tokens: list[str], argv: list[str], flags: dict[str, bool]) -> str:
    """One line for tokens tyro did not recognise: the unknown flag and the closest known
    ones, or the stray value and the switch it follows."""
    for token in tokens:
        if not token.startswith("-"):
            continue
        name = token.partition("=")[0]
        return f"unknown flag {name}{closest_flags(name, flags)}"
    token = tokens[0]
    position = argv.index(token) if token in argv else -1
    before = argv[position - 1] if position > 0 else ""
    if flags.get(before):
        return f"{before} is a switch and takes no value, got {token!r}"
    return f"unexpected argument {token!r} (every value follows its --flag)"


def _one_line(event: tyro_errors.ParseErrorEvent, argv: list[str], cls: type) -> str:
    """One line, naming the flag and what it accepts, for a tyro parse-error event."""
    argument = getattr(event, "argument", None)
    flag = argument.display_name() if argument is not None else ""
    if isinstance(event, tyro_errors.InvalidChoice):
        return f"{flag} must be one of {_choices(argument, event.choices)}, got {event.value!r}"
    if isinstance(event, tyro_errors.UnrecognizedArgs):
        return _unrecognized(event.tokens, argv, _flags(cls))
    if isinstance(event, tyro_errors.InstantiationFailure):
        if argument is None:
            return event.message.splitlines()[0] if event.message else "bad command line"
        got = _values_after(flag, argv)
        return f"{flag} expects {_expects(str(argument.lowered.metavar))}, got {got!r}"
    if isinstance(event, tyro_errors.BadValue):
        metavar = str(argument.lowered.metavar)
        if event.reason == "too_few_values":
            return f"{flag} needs a value: {_expects(metavar)}"
        return f"{flag} takes no value, got {event.offending_value!r}"
    if isinstance(event, tyro_errors.MissingArgs):
        names = ", ".join(a.arg.display_name() for a in event.missing_arguments)
        return f"missing required flag(s): {names}"
    return f"bad command line ({type(event).__name__}); see --help"


def _squash_box(text: str) -> str:
    """The message of one of tyro's error boxes as one line (the fallback where an error
    reached tyro's own printer): the paragraph after the title, without the box drawing."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", text)  # colours, where tyro thinks it has a terminal
    paragraphs: list[list[str]] = [[]]
    for line in text.splitlines():
        inner = line.strip().strip("│╭╮╰╯ ").strip()
        if not inner.strip("─-"):  # a rule (or the box's edge): the paragraph ends
            paragraphs.append([])
            continue
        if line.lstrip().startswith("╭"):  # a boxed title: its own paragraph
            paragraphs += [[inner.strip("─ ")], []]
            continue
        paragraphs[-1].append(inner)
    found = [" ".join(p) for p in paragraphs if p]
    message = found[1] if len(found) > 1 else (found or ["bad command line; see --help"])[0]
    return " ".join(message.split())


def cli(cls: type[T], argv: list[str] | None = None, description: str | None = None) -> T:
    """tyro.cli(cls) whose every parse error (unknown flag, wrong type, bad choice, missing
    value) is one line on stderr naming the flag, exit status 2: no box, no traceback."""
    argv = sys.argv[1:] if argv is None else list(argv)

    def hook(event: tyro_errors.ParseErrorEvent) -> None:
        raise _ParseError(_one_line(event, argv, cls))

    captured = io.StringIO()  # what tyro prints on stderr: a box if an error escaped the hook
    try:
        with tyro_errors.on_parse_error(hook), contextlib.redirect_stderr(captured):
            args = tyro.cli(cls, args=argv, description=description)
    except _ParseError as exc:
        fail(str(exc))
    except SystemExit as exc:
        if exc.code == 2:
            fail(_squash_box(captured.getvalue()))
        sys.stderr.write(captured.getvalue())
        raise
    sys.stderr.write(captured.getvalue())
    return args


# the flags a resumed run takes from the command line (what it shows, not what it computes)
RESUME_APPLIES = ("progress",)


def _given(cls: type, argv: list[str]) -> list[str]:
    """The fields of cls named by a --flag (or --no-flag) on the command line, in order."""
    fields = {f.name for f in dataclasses.fields(cls)}
    given = []
    for token in argv:
        if not token.startswith("--"):
            continue
        name = token[2:].partition("=")[0].replace("-", "_")
        if name not in fields and name.startswith("no_") and name[3:] in fields:
            name = name[3:]
        if name in fields and name not in given:
            given.append(name)
    return given


def _apply_to_resumed(resumed: T, args: T, given: list[str]) -> T:
    """The resumed run's flags with those of RESUME_APPLIES given on the command line; any
    other flag given must have the run's value (ArgError naming the first that differs)."""
    for name in given:
        new, saved = getattr(args, name), getattr(resumed, name)
        if name in RESUME_APPLIES:
            setattr(resumed, name, new)
        elif name == "run_dir":
            require(
                Path(new).absolute() == Path(args.resume).absolute(),
                name,
                f"{new} is not the resumed directory {args.resume}: --resume continues a run "
                "where it is",
            )
        elif name != "resume" and new != saved:
            raise ArgError(
                f"--{name.replace('_', '-')} {new} conflicts with --resume {args.resume}, whose "
                f"run has {saved}: a resumed run keeps the flags of its config.json (only "
                "--progress may change); start a new run to change it"
            )
    return resumed


def parse(cls: type[T], argv: list[str] | None = None) -> T:
    """Parse the command line into cls with tyro, then validate; exit 2 with one line on error.
    With --resume the run's config.json gives every flag (see _apply_to_resumed)."""
    doc = sys.modules[cls.__module__].__doc__
    argv = sys.argv[1:] if argv is None else list(argv)
    args = cli(cls, argv, description=doc)
    try:
        if args.resume is not None:
            resumed = _load_resume_config(cls, args)
            args = _apply_to_resumed(resumed, args, _given(cls, argv))
        args.validate()
    except ArgError as exc:
        fail(str(exc))
    return args


def config_dict(args: CommonArgs, algo: str) -> dict:
    """What config.json holds: the algorithm name and every flag."""
    return {"algo": algo, "args": dataclasses.asdict(args)}


@dataclass
class RatioArgs:
    """The importance-ratio option of the on-policy family (ppo, spo, grpo;
    controlrl/ratios.py): a mixin listed before CommonArgs, `class Args(RatioArgs, CommonArgs)`,
    so that its flags follow the common ones; validate with require_ratio_flags."""

    ratio: str = "step"
    """importance ratio in the loss, along each episode of the rollout: step (per step, PPO's),
    sequence (the product over the episode), sequence_mean (its geometric mean, GSPO arXiv
    2507.18071) or kalman (KPO's causal Kalman-filtered log-ratio, arXiv 2602.10609)"""
    kalman_q: float = 1e-6
    """--ratio kalman: process noise q of the latent log-ratio (KPO's reported 1e-6)"""
    kalman_v: float = 1.0
    """--ratio kalman: measurement noise v (KPO's reported 1; 0 gives the per-step ratio)"""
    kalman_p0: float = 1.0
    """--ratio kalman: variance at an episode start (not given by KPO; 1 makes the first gain
    1/2)"""
