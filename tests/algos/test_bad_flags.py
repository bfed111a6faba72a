"""Every script refuses a bad command line before anything starts, with exit status 2 and one
line naming the flag (and what it accepts): no traceback, no tyro or argparse box. Covered: parse
errors (unknown flag, wrong type, nan for an integer, a bad choice, a missing value), non-finite
floats, seeds outside numpy's range, values that would allocate the machine away or leave
nothing to train, and environments the scripts cannot serve."""

from __future__ import annotations

import dataclasses
import importlib
import subprocess
import sys
import typing
from pathlib import Path

import numpy as np
import pytest
from timeouts import scaled

import controlrl.cli
import envs.gym_mujoco
from controlrl.cli import CommonArgs, cli, parse

ROOT = Path(__file__).parents[2]
ALGOS = sorted(p.stem for p in (ROOT / "algos").glob("*.py"))
ALGOS.remove("__init__")
HUGE_SEED = str(2**64)  # 18446744073709551616: overflows torch.manual_seed


def load(name: str):
    if name == "ppo_brax":
        pytest.importorskip("brax")
    return importlib.import_module(f"algos.{name}")


def check_refusal(err: str) -> str:
    """The refusal's stderr is at most 3 lines, no traceback and no box; returns it."""
    assert "Traceback" not in err, err
    assert not set("╭│╰─") & set(err), err  # tyro's box
    assert "usage:" not in err, err  # argparse's usage block
    lines = err.strip().splitlines()
    assert 1 <= len(lines) <= 3 and lines[0].startswith("error: "), err
    return err


def refuse(module, argv: list[str], capsys) -> str:
    """Parse argv the way the script does; return stderr of the exit-2 refusal."""
    with pytest.raises(SystemExit) as exc:
        if issubclass(module.Args, CommonArgs):
            parse(module.Args, argv)
        else:  # the tabular script: the same tyro wrapper, then its own validate
            module.validate(cli(module.Args, argv))
    assert exc.value.code == 2
    return check_refusal(capsys.readouterr().err)


def float_flags(module) -> list[str]:
    """Every flag whose default is a float (or may be one: float | None)."""
    return [
        f.name
        for f in dataclasses.fields(module.Args)
        if isinstance(f.default, float) or "float" in str(f.type)
    ]


def choice_flags(module) -> dict[str, tuple[str, ...]]:
    """Every Literal[...] flag (or Literal[...] | None) -> its allowed values."""
    out = {}
    for name, hint in typing.get_type_hints(module.Args).items():
        literals = [hint] + list(typing.get_args(hint))
        for t in literals:
            if typing.get_origin(t) is typing.Literal:
                out[name] = typing.get_args(t)
    return out


def test_every_script_is_covered():
    assert {"ppo", "spo", "bpo", "fixpo", "trpo", "gae", "optimistic_po"} <= set(ALGOS)


@pytest.mark.parametrize("name", ALGOS)
@pytest.mark.parametrize("seed", ["-1", HUGE_SEED])
def test_seeds_outside_numpys_range_are_refused(name, seed, capsys):
    err = refuse(load(name), ["--seed", seed], capsys)
    assert "--seed" in err and "4294967295" in err


@pytest.mark.parametrize("name", ALGOS)
@pytest.mark.parametrize("bad", ["inf", "nan", "-inf"])
def test_every_float_flag_refuses_non_finite_values(name, bad, capsys):
    module = load(name)
    flags = float_flags(module)
    assert flags, f"{name} has no float flag?"
    for field in flags:
        flag = "--" + field.replace("_", "-")
        err = refuse(module, [flag, bad], capsys)
        assert flag in err, (flag, err)


@pytest.mark.parametrize("name", ALGOS)
def test_parse_errors_are_one_line_naming_the_flag(name, capsys):
    module = load(name)
    err = refuse(module, ["--no-such-flag", "3"], capsys)
    assert "unknown flag --no-such-flag" in err
    assert "closest: --seed" in refuse(module, ["--sed", "3"], capsys)
    assert "--seed expects an integer, got 'nan'" in refuse(module, ["--seed", "nan"], capsys)
    assert "--seed expects an integer, got '1.5'" in refuse(module, ["--seed", "1.5"], capsys)
    assert "--seed needs a value" in refuse(module, ["--seed"], capsys)
    assert "--seed expects an integer, got 'x'" in refuse(module, ["--seed=x"], capsys)
    err = refuse(module, ["--progress", "yes"], capsys)
    assert "--progress is a switch and takes no value, got 'yes'" in err


@pytest.mark.parametrize("name", ALGOS)
def test_bad_choices_name_the_flag_and_the_allowed_values(name, capsys):
    module = load(name)
    for field, allowed in choice_flags(module).items():
        flag = "--" + field.replace("_", "-")
        err = refuse(module, [flag, "foo"], capsys)
        assert f"{flag} must be one of" in err and "got 'foo'" in err, err
        assert all(str(a) in err for a in allowed), (allowed, err)


def test_choice_flags_are_found():
    assert choice_flags(load("grpo"))["loss_agg"][:2] == ("seq-mean-token-mean", "token-mean")
    assert {"vectorization", "brax_pipeline"} <= set(choice_flags(load("ppo")))


def test_an_error_that_escapes_the_hook_still_prints_one_line(monkeypatch, capsys):
    """Should tyro report an error without its hook, the box it prints is squashed to its
    first line of text."""
    import contextlib

    monkeypatch.setattr(controlrl.cli.tyro_errors, "on_parse_error", contextlib.nullcontext)
    err = refuse(load("grpo"), ["--loss-agg", "foo"], capsys)
    assert "invalid choice 'foo' for argument '--loss-agg'" in err


def test_tuple_flags_say_what_they_take(capsys):
    err = refuse(load("ppo"), ["--hidden-sizes", "a", "b"], capsys)
    assert "--hidden-sizes expects integers separated by spaces, got 'a b'" in err


# -- values that would allocate the machine away, or leave nothing to train --------------------


@pytest.fixture
def memory_8gib(monkeypatch):
    """A machine with 8 GiB available, whatever this one has."""
    monkeypatch.setattr(controlrl.cli, "available_memory", lambda: 8 * 2**30)
    monkeypatch.setattr(load("optimistic_po"), "available_memory", lambda: 8 * 2**30)


@pytest.fixture(scope="module")
def hopper_file(tmp_path_factory) -> str:
    """A 100-row Hopper-v5-shaped dataset file (random numbers: only its shapes are read)."""
    pytest.importorskip("h5py")
    from envs.offline.d4rl import write_hdf5
    from envs.offline.dataset import Dataset

    rng = np.random.default_rng(0)
    n = 100
    f32 = lambda *shape: rng.standard_normal((n, *shape)).astype(np.float32)  # noqa: E731
    ends = np.zeros(n, bool)
    ends[-1] = True
    data = Dataset(f32(11), f32(3), f32(), f32(11), np.zeros(n, bool), ends, "Hopper-v5")
    return str(write_hdf5(data, tmp_path_factory.mktemp("data") / "hop.hdf5"))


@pytest.mark.parametrize(
    "name, argv, fragment",
    [
        ("optimistic_po", ["--S", "100000"], "--S 100000"),
        ("iql", ["--dataset", "x", "--env-id", "Hopper-v5", "--batch-size", "100000000"],
         "--batch-size"),
        ("iql", ["--dataset", "x", "--env-id", "Hopper-v5", "--online-steps", "10000000000",
                 "--total-timesteps", "10000000000"], "--online-steps"),
        ("retrace", ["--buffer-size", "1000000000"], "--buffer-size"),
    ],
)  # fmt: skip
def test_allocations_beyond_the_memory_are_refused(name, argv, fragment, memory_8gib, capsys):
    err = refuse(load(name), argv, capsys)
    assert fragment in err and "GiB" in err and "8.0 GiB of memory available" in err


@pytest.mark.parametrize("name", ["dppo", "iql", "ppo"])
@pytest.mark.parametrize("env_id", ["", " "])
def test_an_empty_env_id_is_refused(name, env_id, hopper_file, capsys):
    """--env-id '' names no env (dppo took it as absent and ran on the dataset's env)."""
    dataset = [] if name == "ppo" else ["--dataset", hopper_file]
    err = refuse(load(name), [*dataset, "--env-id", env_id], capsys)
    controlrl.cli.forget_datasets()
    assert "--env-id" in err


def test_offline_batches_are_bounded_by_the_datasets_shapes(hopper_file, memory_8gib, capsys):
    dppo, iql = load("dppo"), load("iql")
    err = refuse(dppo, ["--dataset", hopper_file, "--pretrain-batch-size", "100000000"], capsys)
    assert "--pretrain-batch-size" in err and "GiB" in err
    err = refuse(iql, ["--dataset", hopper_file, "--batch-size", "100000000"], capsys)
    assert "--batch-size" in err and "GiB" in err
    controlrl.cli.forget_datasets()
    # what fits is accepted
    assert parse(iql.Args, ["--dataset", hopper_file, "--batch-size", "1000000"]).env_id
    controlrl.cli.forget_datasets()


def test_minibatches_of_one_are_refused_where_advantages_are_normalised(hopper_file, capsys):
    small = [
        "--num-steps",
        "8",
        "--num-envs",
        "1",
        "--total-timesteps",
        "8",
        "--num-minibatches",
        "8",
    ]
    for name, extra in (("ppo", []), ("spo", []), ("dppo", ["--dataset", hopper_file])):
        err = refuse(load(name), [*extra, *small], capsys)
        assert "--num-minibatches must leave minibatches of >= 2 rows" in err, (name, err)
        assert parse(load(name).Args, [*extra, *small, "--num-minibatches", "4"])
        controlrl.cli.forget_datasets()
    assert parse(load("ppo").Args, [*small, "--no-norm-adv"]).num_minibatches == 8


def test_torch_threads_are_bounded_by_the_cpus(capsys):
    err = refuse(load("ppo"), ["--torch-threads", "1000"], capsys)
    assert "--torch-threads must be in [1, " in err
    assert "--torch-threads" in refuse(load("ppo"), ["--torch-threads", "0"], capsys)


def test_retrace_without_an_update_is_refused(capsys):
    argv = ["--total-timesteps", "2000", "--log-every", "1000", "--learning-starts", "2000"]
    err = refuse(load("retrace"), argv, capsys)
    assert "--learning-starts must be < the env steps run (2000" in err


def test_absurd_bandit_sizes_are_refused(capsys):
    err = refuse(load("grpo"), ["--env-id", "bandit:bernoulli-1000000000"], capsys)
    assert "--env-id" in err and "K must be <= 100000, got 1000000000" in err
    err = refuse(load("grpo"), ["--env-id", "bandit:contextual-100000-1000"], capsys)
    assert "C x K must be <=" in err


# -- environments the scripts cannot serve -----------------------------------------------------


@pytest.mark.parametrize(
    "env_id, fragment",
    [
        ("FrozenLake-v1", "Discrete(16) observations"),
        ("Blackjack-v1", "Tuple(Discrete(32), Discrete(11), Discrete(2)) observations"),
    ],
)
def test_observation_spaces_that_are_not_flat_boxes_are_refused(env_id, fragment, capsys):
    err = refuse(load("ppo"), ["--env-id", env_id], capsys)
    assert "--env-id" in err and fragment in err and "flat Box" in err


@pytest.mark.parametrize("env_id", ["LunarLanderContinuous-v3", "CarRacing-v3"])
def test_ids_whose_package_is_missing_name_it(env_id, capsys):
    if importlib.util.find_spec("Box2D") is not None:
        pytest.skip("Box2D is installed here")
    err = refuse(load("ppo"), ["--env-id", env_id], capsys)
    assert "--env-id" in err and env_id in err and "Box2D is not installed" in err


@pytest.mark.parametrize("env_id", ["bandit:bernoulli-10", "brax:ant", "dmc:cheetah-run"])
def test_rarl_refuses_ids_of_other_backends(env_id, capsys):
    """rarl's adversary pushes MuJoCo bodies of a Gymnasium env: another backend's id is one
    line (Gymnasium's registry was asked for it: a traceback), before its backend loads."""
    err = refuse(load("rarl"), ["--env-id", env_id], capsys)
    assert "--env-id must be a Gymnasium MuJoCo id for rarl" in err and env_id in err


@pytest.mark.parametrize("name", ["ppo", "rarl"])
def test_a_compatibility_id_without_its_shim_is_one_line(name, capsys):
    if importlib.util.find_spec("shimmy") is not None:
        pytest.skip("shimmy is installed here")
    err = refuse(load(name), ["--env-id", "GymV26Environment-v0"], capsys)
    assert "--env-id: 'GymV26Environment-v0' cannot be made here" in err and "shimmy" in err


def test_videos_of_classic_control_need_pygame(monkeypatch, capsys):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        envs.gym_mujoco.importlib.util,
        "find_spec",
        lambda name, *a: None if name == "pygame" else real(name, *a),
    )
    err = refuse(load("ppo"), ["--env-id", "CartPole-v1", "--capture-video"], capsys)
    assert "--capture-video needs pygame to render CartPole-v1" in err
    # MuJoCo ids render through MuJoCo: no pygame needed
    assert parse(load("ppo").Args, ["--env-id", "Hopper-v5", "--capture-video"]).capture_video


# -- argparse scripts (figures, the dataset generator) and a few real processes ----------------


def test_figure_scripts_use_the_one_line_parsers():
    for path in sorted((ROOT / "paper_figures").glob("*.py")):
        text = path.read_text()
        assert "argparse.ArgumentParser(" not in text, path.name
        assert "tyro.cli(" not in text, path.name


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["generate", "--env", "Hopper-v5", "--kind", "bogus"], "argument --kind: invalid choice"),
        (["generate", "--env", "Hopper-v5", "--kind", "medium", "--stesp", "3"],
         "unrecognized argument --stesp; closest: --steps"),
        (["generate", "--env", "Hopper-v5", "--kind", "medium", "--steps", "nan"],
         "argument --steps: invalid int value: 'nan'"),
        (["generate", "--env", "Hopper-v5"], "required: --kind"),
        (["generate", "--env", "Hopper-v5", "--kind", "medium", "--seed", HUGE_SEED], "--seed"),
    ],
)  # fmt: skip
def test_dataset_generator_flags(argv, fragment, capsys):
    pytest.importorskip("h5py")
    from envs.offline.__main__ import main

    with pytest.raises(SystemExit) as exc:
        code = main(argv)
        raise SystemExit(code)
    assert exc.value.code == 2
    assert fragment in check_refusal(capsys.readouterr().err)


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (
            ["algos/grpo.py", "--adv-norm", "foo"],
            "must be one of batch-mean, bnpo, gpg, lite-ppo, mean",
        ),
        (["algos/ppo.py", "--adv-norm", "foo"], "unknown flag --adv-norm"),
        (["algos/optimistic_po.py", "--resume", "x"], "unknown flag --resume"),
        (["paper_figures/bench_ppo.py", "--warmup", "x"], "argument --warmup: invalid int"),
    ],
)
def test_scripts_as_processes(argv, fragment):
    proc = subprocess.run(
        [sys.executable, *argv], cwd=ROOT, capture_output=True, text=True, timeout=scaled(120)
    )
    assert proc.returncode == 2, proc.stderr
    assert fragment in check_refusal(proc.stderr)


# -- a refused command leaves no run directory -------------------------------------------------

# commands whose refusal needs the env built (its spaces), or the dataset read against it
REFUSED_BY_THE_ENV = [
    ("retrace", ["--env-id", "CartPole-v1"], "retrace needs continuous (Box) actions"),
    ("iql", ["--dataset", "HOPPER", "--env-id", "CartPole-v1"],
     "iql needs continuous (Box) actions"),
    ("iql", ["--dataset", "HOPPER", "--env-id", "HalfCheetah-v5"], "do not fit HalfCheetah-v5"),
    ("dppo", ["--dataset", "HOPPER", "--env-id", "CartPole-v1"],
     "dppo needs Box actions in [-1, 1]"),
    ("dppo", ["--dataset", "HOPPER", "--env-id", "HalfCheetah-v5"], "do not fit HalfCheetah-v5"),
    ("fpo", ["--env-id", "CartPole-v1"], "fpo needs continuous (Box) actions"),
    ("grpo", ["--env-id", "bandit:continuous", "--rollout-mismatch", "temperature",
              "--mismatch-correction", "tis"], "needs a discrete action space"),
]  # fmt: skip


@pytest.mark.parametrize("explicit", [False, True], ids=["default-dir", "run-dir"])
@pytest.mark.parametrize("name, argv, fragment", REFUSED_BY_THE_ENV)
def test_a_refused_command_leaves_no_run_directory(
    name, argv, fragment, explicit, hopper_file, tmp_path, monkeypatch, capsys
):
    """The script as its __main__ runs it (parse, then main), in an empty directory: the
    refusal is one line, exit 2, and neither runs/ (the default run directory) nor --run-dir
    (nor the parents made for it) is left behind."""
    monkeypatch.chdir(tmp_path)
    argv = [hopper_file if a == "HOPPER" else a for a in argv]
    extra = ["--run-dir", str(tmp_path / "out" / "run")] if explicit else []
    module = load(name)
    with pytest.raises(SystemExit) as exc:
        module.main(parse(module.Args, [*argv, *extra, "--no-progress", "--no-tensorboard"]))
    controlrl.cli.forget_datasets()
    assert exc.value.code == 2
    assert fragment in check_refusal(capsys.readouterr().err)
    left = [p.name for p in tmp_path.iterdir() if p.is_dir()]  # (MuJoCo may leave its log)
    assert left == [], list(tmp_path.rglob("*"))
