"""paper_figures/lab/scripts.py: a sweep trained with a line per run and its failures named, a
figure saved without metadata."""

from __future__ import annotations

import pytest

from controlrl.experiment import SweepConfig
from paper_figures.lab import scripts


def test_train_prints_each_run_and_names_the_failed(tmp_path, monkeypatch, capsys):
    statuses = {"ppo/Hopper-v5/seed1": {"status": "done"}}
    statuses["ppo/Hopper-v5/seed2"] = {"status": "failed"}
    seen = {}

    def fake(config, out, workers, on_update):
        seen.update(out=out, workers=workers)
        for run_id, s in statuses.items():
            on_update({"run_id": run_id, **s})
        return statuses

    monkeypatch.setattr(scripts, "run_sweep", fake)
    config = SweepConfig(["ppo"], ["Hopper-v5"], 2, 64, [])
    assert scripts.train(config, tmp_path, "arm", workers=3) == statuses
    assert seen == {"out": tmp_path, "workers": 3}
    out = capsys.readouterr().out.splitlines()
    assert out[:2] == ["[done] arm ppo/Hopper-v5/seed1", "[failed] arm ppo/Hopper-v5/seed2"]
    assert out[2] == f"warning: failed runs ['ppo/Hopper-v5/seed2']; see {tmp_path / 'sweep.json'}"


def test_save_figure_writes_a_png_without_software_metadata_and_closes_it(tmp_path):
    from PIL import Image

    from controlrl.plots import plt

    fig, ax = plt.subplots(figsize=(2, 1))
    ax.plot([0, 1], [0, 1])
    scripts.save_figure(fig, tmp_path / "f.png", dpi=50)
    with Image.open(tmp_path / "f.png") as image:
        assert image.size == (100, 50) and "Software" not in image.info
    assert not plt.fignum_exists(fig.number)


def test_at_least_names_the_first_flag_below_its_bound(capsys):
    from argparse import Namespace

    from controlrl.cli import ArgumentParser

    args = Namespace(num_envs=4, warmup=0, seeds=0)
    scripts.at_least(ArgumentParser(), args, ("num_envs",))
    scripts.at_least(ArgumentParser(), args, ("warmup",), 0)
    with pytest.raises(SystemExit) as exc:
        scripts.at_least(ArgumentParser(), args, ("num_envs", "seeds", "warmup"))
    assert exc.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1].endswith("--seeds must be >= 1, got 0")


def test_replot_fixture_copies_the_toy_csvs_under_the_runs_name_then_redraws(tmp_path):
    from argparse import Namespace

    fixture, out = tmp_path / "toy", tmp_path / "out"
    fixture.mkdir()
    for part in ("", "_curves"):
        (fixture / f"toy{part}.csv").write_text(f"a{part}\n1\n")
    calls = []
    args = Namespace(out=out, name="fig_60k")
    scripts.replot_fixture(calls.append, ["--out", str(out)], args, fixture, ("", "_curves"), "-r")
    assert calls == [["--out", str(out), "-r"]]
    assert sorted(p.name for p in out.iterdir()) == ["fig_60k.csv", "fig_60k_curves.csv"]
    assert (out / "fig_60k_curves.csv").read_text() == "a_curves\n1\n"
