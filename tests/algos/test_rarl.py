"""algos/rarl.py: both players learn in alternation on their own rollouts (the adversary on minus
the protagonist's reward), the checkpoint holds both, and its own flags are refused one line
each."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from algos import rarl
from controlrl import checkpoint
from controlrl.cli import parse

TINY = ["--total-timesteps", "256", "--num-steps", "64", "--num-minibatches", "2"]
TINY += ["--update-epochs", "2", "--eval-every", "0", "--eval-episodes", "1"]
TINY += ["--no-progress", "--no-tensorboard"]


def test_a_tiny_run_trains_both_players(tmp_path):
    run_dir = tmp_path / "run"
    rarl.main(parse(rarl.Args, [*TINY, "--run-dir", str(run_dir), "--adversary-force", "20"]))
    assert json.loads((run_dir / "final_eval.json").read_text())["step"] == 256
    state = checkpoint.load(run_dir / "checkpoints" / "latest.pt", ("policy",))
    for key in ("policy", "adversary", "adversary_value", "adversary_optimizer"):
        assert key in state
    assert "adversary_obs_normalizer" in state and "obs_normalizer" in state
    # the adversary's actions are forces on the pole: an output per (x, z) component
    assert state["adversary"]["log_std"].shape == (2,)
    with open(run_dir / "metrics.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 4
    for row in rows:
        assert int(float(row["train/adversary/grad_steps"])) == 4  # 2 epochs x 2 minibatches
        assert float(row["train/adversary/approx_kl"]) > 0  # its policy moved
        assert float(row["train/grad_steps"]) == 4
    returns = [float(r["train/adversary/episode_return"]) for r in rows]
    ended = [r for r in returns if not np.isnan(r)]
    assert ended and all(r < 0 for r in ended)  # minus the protagonist's alive bonus


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["--adversary-bodies", "mast"], "--adversary-bodies"),
        (["--adversary-force", "-1"], "--adversary-force"),
        (["--env-id", "CartPole-v1"], "--env-id"),
        (["--vectorization", "async"], "--vectorization"),
    ],
)
def test_its_own_flags_are_refused_in_one_line(argv, fragment, capsys):
    with pytest.raises(SystemExit) as exc:
        parse(rarl.Args, argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and fragment in err[0]
