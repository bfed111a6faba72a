"""Figures whose runs are not committed are redrawn from their committed CSVs alone
(--from-csv / --replot): each script reads its CSVs back and writes the PNG, nothing else."""

import importlib.util
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "paper_figures" / "out"

CASES = {
    "mujoco_results": (["trpo_mujoco.csv"], ["--algo", "trpo", "--from-csv"], "trpo_mujoco.png"),
    "iql_tau": (["iql_vs_bc.csv", "iql_vs_bc_curves.csv"], ["--replot", "--name", "iql_vs_bc"],
                "iql_vs_bc.png"),
    "fpo_multimodal": (
        ["fpo_multimodal.csv", "fpo_multimodal_shares.csv", "fpo_multimodal_hist.csv"],
        ["--replot"],
        "fpo_multimodal.png",
    ),
    "fpo_underconditioned": (
        ["fpo_underconditioned.csv", "fpo_underconditioned_curves.csv"],
        ["--replot"],
        "fpo_underconditioned.png",
    ),
}  # fmt: skip


def load(name: str):
    """The script paper_figures/<name>.py; a case "script:variant" loads the script."""
    name = name.split(":")[0]
    spec = importlib.util.spec_from_file_location(name, ROOT / "paper_figures" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", sorted(CASES))
def test_replot_from_committed_csvs(name, tmp_path, capsys):
    csvs, flags, png = CASES[name]
    for csv_name in csvs:
        shutil.copy(OUT / csv_name, tmp_path / csv_name)
    load(name).main([*flags, "--out", str(tmp_path)])
    assert (tmp_path / png).stat().st_size > 5000
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*csvs, png])  # CSVs untouched
    for csv_name in csvs:
        assert (tmp_path / csv_name).read_bytes() == (OUT / csv_name).read_bytes()


@pytest.mark.parametrize("name", sorted(CASES))
def test_replot_names_the_missing_csv(name, tmp_path):
    _, flags, _ = CASES[name]
    with pytest.raises(SystemExit, match="needs .*csv"):
        load(name).main([*flags, "--out", str(tmp_path)])


def test_retrace_and_entropy_mechanism_replot(tmp_path):
    """Both redraw from their CSVs (retrace_vs_traces: --plot-only; the entropy mechanism's
    error bars name their 95% CI over batches)."""
    names = ["retrace_vs_traces.csv", "retrace_vs_traces_summary.csv"]
    for csv_name in names:
        shutil.copy(OUT / csv_name, tmp_path / csv_name)
    mechanism = OUT.parent / "entropy-mechanism" / "results" / "checks.csv"  # its declared table
    shutil.copy(mechanism, tmp_path / "entropy_mechanism.csv")
    load("retrace_vs_traces").main(["--plot-only", "--out", str(tmp_path)])
    em = load("entropy_mechanism")
    em.main(em.Args(out=str(tmp_path), replot=True))
    for png in ("retrace_vs_traces.png", "entropy_mechanism.png"):
        assert (tmp_path / png).stat().st_size > 5000
