"""paper_figures is a package of the installed distribution: figure scripts import each other as
paper_figures.<name>, nothing rewrites sys.path, and nothing outside paper_figures imports it."""

import ast
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def tracked_python() -> list[Path]:
    out = subprocess.run(
        ["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return [ROOT / p for p in out.stdout.split()]


def imported_modules(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
    return names


def test_no_file_rewrites_sys_path():
    """Every import goes through the installed packages (pytest's own rootdir handling aside)."""
    offenders = []
    for path in tracked_python():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("insert", "append", "extend")
                and ast.unparse(node.func.value) == "sys.path"
            ):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert offenders == []


def test_only_paper_figures_imports_paper_figures_and_it_is_installed():
    """DESIGN's layering: nothing imports paper_figures but paper_figures itself (and its
    tests); pyproject's package list installs it, so `pip install -e .` finds the imports."""
    outside = [
        str(p.relative_to(ROOT))
        for p in tracked_python()
        if p.relative_to(ROOT).parts[0] not in ("paper_figures", "tests")
        and any(m.split(".")[0] == "paper_figures" for m in imported_modules(p))
    ]
    assert outside == []
    inside = [
        p
        for p in (ROOT / "paper_figures").glob("*.py")
        if any(m.startswith("paper_figures.") for m in imported_modules(p))
        or "paper_figures" in imported_modules(p)
    ]
    assert inside, "no figure script imports another: this test guards nothing"
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "paper_figures" in config["tool"]["setuptools"]["packages"]["find"]["include"]
    assert (ROOT / "paper_figures" / "__init__.py").exists()
    done = subprocess.run(
        [sys.executable, "-c", "import paper_figures.brax_ppo_race as m; print(m.__name__)"],
        cwd=ROOT / "tests",
        capture_output=True,
        text=True,
    )
    assert done.stdout.strip() == "paper_figures.brax_ppo_race", done.stderr[-2000:]
