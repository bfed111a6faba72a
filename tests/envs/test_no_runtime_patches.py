"""No project file patches a third-party module at run time, and the installed JAX stack is the
pinned one, under which brax's own trainer runs unpatched.

brax 0.14.2 (brax/training/agents/ppo/train.py, brax/training/pmap.py) calls
jax.device_put_replicated, which jax 0.10 removed; the brax extra pins jax/jaxlib 0.9.2, the
newest JAX that still has it, instead of putting it back at run time (pyproject.toml).
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
OWN = {"controlrl", "envs", "theory", "algos", "paper_figures", "tests"}
SETTERS = ("setattr", "delattr")
SKIP = {".venv", "venv", "mutants", "runs", "out", ".git", "__pycache__", "build"}


def module_patches(source: str) -> list[str]:
    """Assignments to an attribute of a third-party module (`jax.x = ...`, `np.a.b += ...`,
    `setattr(torch, ...)`), whether the module came in by `import` or as a parameter named jax;
    the standard library's are not third-party (a run's `sys.argv = ...`)."""
    tree = ast.parse(source)
    modules = {"jax"}  # also a function parameter holding the jax module (the old race patch)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.split(".")[0]
                if top not in OWN and top not in sys.stdlib_module_names:
                    modules.add(alias.asname or top)

    def root(node):
        while isinstance(node, ast.Attribute):
            node = node.value
        return node.id if isinstance(node, ast.Name) else None

    found = []
    for node in ast.walk(tree):
        targets = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) in SETTERS:
            obj = node.args[0] if node.args else None
            if isinstance(obj, ast.Name) and obj.id in modules:
                found.append(f"{node.lineno}: {ast.unparse(node)}")
        for target in targets:
            if isinstance(target, ast.Attribute) and root(target) in modules:
                found.append(f"{node.lineno}: {ast.unparse(target)} = ...")
    return sorted(found, key=lambda hit: int(hit.split(":")[0]))


def project_files() -> list[Path]:
    return [p for p in sorted(ROOT.rglob("*.py")) if not SKIP & set(p.relative_to(ROOT).parts[:-1])]


def test_the_scan_finds_every_kind_of_patch():
    patched = """
import jax
import numpy as np
import torch.nn as tnn
from brax import envs
def shim(jax):
    jax.device_put_replicated = lambda x, d: x
np.float = float
tnn.functional.relu += 0
setattr(jax, "pmap", None)
"""
    found = module_patches(patched)
    assert [f.split(":")[0] for f in found] == ["7", "8", "9", "10"], found
    # the old race patch: jax came in as an argument (configured_jax()), never imported there
    shim = "def _patch_jax(jax):\n    jax.device_put_replicated = None\n"
    assert module_patches(shim) == ["2: jax.device_put_replicated = ..."]
    clean = """
import jax
from envs.brax import configured_jax
jax.config.update("jax_enable_x64", True)
configured_jax.configured = True
args = object(); setattr(args, "seed", 1)
x = jax.numpy.zeros(3)
import sys
sys.argv = ["script.py"]
"""
    assert module_patches(clean) == []


def test_no_project_file_patches_a_third_party_module():
    files = project_files()
    assert len(files) > 50 and ROOT / "paper_figures/brax_ppo_race.py" in files
    found = {
        str(p.relative_to(ROOT)): hits for p in files if (hits := module_patches(p.read_text()))
    }
    assert found == {}, f"run-time patches of third-party modules: {found}"
    # the plain text as well, for anything the parse could miss (exec strings, notebooks)
    pattern = re.compile(r"(?<![\w.])jax\.[A-Za-z_][\w.]*\s*(?:[-+*/|&]?=)(?!=)")
    lines = [
        f"{p.relative_to(ROOT)}:{i}"
        for p in files
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if pattern.search(line) and p != Path(__file__).resolve()
    ]
    assert lines == []


def pinned(extra: str) -> dict[str, str]:
    text = (ROOT / "pyproject.toml").read_text()
    block = re.search(rf"^{extra} = \[(.*?)\]", text, re.M | re.S).group(1)
    return dict(re.findall(r'"([\w.-]+)==([\w.]+)"', block))


def test_the_installed_jax_stack_is_the_pinned_one_and_has_what_brax_calls():
    pytest.importorskip("brax")
    pins = pinned("brax")
    assert set(pins) >= {"jax", "jaxlib", "brax", "mujoco-mjx", "flax", "optax"}
    installed = {name: importlib.metadata.version(name) for name in pins}
    assert installed == pins, "the venv is not the pinned set: run `make setup`"
    import jax

    # what brax.training.agents.ppo.train calls; jax 0.10 removed it
    assert callable(jax.device_put_replicated)
