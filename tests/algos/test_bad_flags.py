"""Every script in algos/ refuses bad numbers before anything starts: every float flag rejects
nan and inf, and a negative seed is refused, each with one line naming the flag (exit 2)."""

from __future__ import annotations

import dataclasses
import importlib
from pathlib import Path

import pytest
import tyro

from controlrl.cli import CommonArgs, parse

ALGOS = sorted(p.stem for p in (Path(__file__).parents[2] / "algos").glob("*.py"))
ALGOS.remove("__init__")


def load(name: str):
    if name == "ppo_brax":
        pytest.importorskip("brax")
    return importlib.import_module(f"algos.{name}")


def refuse(module, argv: list[str], capsys) -> str:
    """Parse argv the way the script does; return stderr of the exit-2 refusal."""
    with pytest.raises(SystemExit) as exc:
        if issubclass(module.Args, CommonArgs):
            parse(module.Args, argv)
        else:  # the tabular script: tyro, then its own validate
            module.validate(tyro.cli(module.Args, args=argv))
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err


def float_flags(module) -> list[str]:
    """Every flag whose default is a float (or may be one: float | None)."""
    return [
        f.name
        for f in dataclasses.fields(module.Args)
        if isinstance(f.default, float) or "float" in str(f.type)
    ]


def test_every_script_is_covered():
    assert {"ppo", "spo", "bpo", "fixpo", "trpo", "gae", "optimistic_po"} <= set(ALGOS)


@pytest.mark.parametrize("name", ALGOS)
def test_negative_seed_is_refused(name, capsys):
    err = refuse(load(name), ["--seed", "-1"], capsys)
    assert "--seed" in err


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
