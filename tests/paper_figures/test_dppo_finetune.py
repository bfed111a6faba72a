"""The DPPO fine-tuning figure at toy size: a tiny Hopper-v5 dataset file, one clone per policy,
one fine-tuning seed each from it, end to end; the CSVs hold what the runs wrote (final_eval.json,
the eval/return column, the clone's evaluation at step 0)."""

import csv
import json
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from timeouts import scaled

from envs.offline import Dataset
from envs.offline.d4rl import write_hdf5

ROOT = Path(__file__).resolve().parents[2]


def random_hopper_dataset(steps: int) -> Dataset:
    """Hopper-v5 transitions of uniform random actions, D4RL layout."""
    env = gym.make("Hopper-v5")
    env.action_space.seed(0)
    obs, _ = env.reset(seed=0)
    cols: list[list] = [[] for _ in range(6)]
    for _ in range(steps):
        action = env.action_space.sample()
        nxt, reward, term, trunc, _ = env.step(action)
        for col, v in zip(cols, (obs, action, reward, nxt, term, trunc)):
            col.append(v)
        obs = env.reset()[0] if term or trunc else nxt
    f32 = [np.asarray(c, np.float32) for c in cols[:4]]
    return Dataset(*f32, np.asarray(cols[4]), np.asarray(cols[5]), "Hopper-v5")


@pytest.mark.slow  # 4 runs + 2 clone evaluations: ~17 s of CPU
def test_dppo_finetune_toy(tmp_path):
    data = write_hdf5(random_hopper_dataset(200), tmp_path / "tiny-hop.hdf5")
    sweep, out = tmp_path / "sweep", tmp_path / "out"
    cmd = [sys.executable, "paper_figures/dppo_finetune.py", "--toy", "--train"]
    cmd += ["--datasets", str(data), "--sweep-dir", str(sweep), "--out", str(out)]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=scaled(300))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert "command: python paper_figures/dppo_finetune.py --toy" in done.stdout
    rows = list(csv.DictReader((out / "dppo_finetune.csv").open()))
    assert [(r["dataset"], r["policy"], r["seed"]) for r in rows] == [
        ("tiny-hop", "diffusion", "1"),
        ("tiny-hop", "gaussian", "1"),
    ]
    curves = list(csv.DictReader((out / "dppo_finetune_curves.csv").open()))
    for row in rows:
        policy = row["policy"]
        clone = sweep / "tiny-hop" / f"{policy}_clone" / "runs" / "dppo" / "Hopper-v5" / "seed1"
        run = sweep / "tiny-hop" / policy / "runs" / "dppo" / "Hopper-v5" / "seed1"
        final = json.loads((run / "final_eval.json").read_text())
        assert float(row["final_return"]) == final["eval_return_mean"]
        assert int(row["steps"]) == final["step"] == 64
        assert float(row["train_s"]) > 0  # the run's seconds collecting and updating
        config = json.loads((run / "config.json").read_text())["args"]
        assert config["pretrained"] == str(clone / "pretrained.pt")  # the one clone
        assert config["policy"] == policy
        cached = json.loads((clone / "clone_eval.json").read_text())["return"]
        assert float(row["clone_return"]) == pytest.approx(cached)
        mine = [c for c in curves if c["policy"] == policy and c["metric"] == "eval_return"]
        assert [int(c["step"]) for c in mine] == [0, 32, 64]  # clone, two evaluations
        assert float(mine[0]["value"]) == pytest.approx(cached, rel=1e-5)
        assert float(mine[-1]["value"]) == pytest.approx(final["eval_return_mean"], rel=1e-5)
        logged = list(csv.DictReader((run / "metrics.csv").open()))
        train = [c for c in curves if c["policy"] == policy and c["metric"] == "train_return"]
        expected = [r for r in logged if r["train/episode_return"] not in ("", "nan")]
        assert [int(c["step"]) for c in train] == [int(r["step"]) for r in expected]
        for c, r in zip(train, expected):
            assert float(c["value"]) == pytest.approx(float(r["train/episode_return"]), rel=1e-5)
    assert (out / "dppo_finetune.png").stat().st_size > 5000


def _fig():
    import importlib.util

    spec = importlib.util.spec_from_file_location("fig", ROOT / "paper_figures/dppo_finetune.py")
    fig = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fig)
    return fig


def test_a_bad_dataset_is_refused_before_any_run(tmp_path, capsys):
    fig = _fig()
    with pytest.raises(SystemExit) as exc:
        fig.main(["--datasets", str(tmp_path / "none.hdf5"), "--sweep-dir", str(tmp_path)])
    assert "--datasets" in str(exc.value) and "none.hdf5" in str(exc.value)
    assert not any(tmp_path.iterdir())  # nothing ran
