"""The ratio-filters script (paper_figures/ratio_filters.py): the gradient statistics, the
collapse criterion, the toy run end to end (the staleness queue: k = 0 updates on the data its
policy collected, k = 2 on older data), and bad flags. Priming EpisodeRatios with stale
log-ratios: tests/controlrl/test_ratios.py."""

import csv
import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from timeouts import scaled

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location(
    "ratio_filters", ROOT / "paper_figures/ratio_filters.py"
)
fig = importlib.util.module_from_spec(spec)
spec.loader.exec_module(fig)


def test_gradient_stats_trace_covariance_noise_to_signal_and_cosine():
    grads = torch.tensor([[1.0, 0.0, 2.0], [3.0, 0.0, 2.0]])  # mean (2, 0, 2)
    stats = fig.gradient_stats(grads, torch.tensor([1.0, 5.0, 1.0]))
    assert stats["grad_var"] == pytest.approx(1.0)  # ((1 - 2)^2 + (3 - 2)^2) / 2
    assert stats["grad_rel_var"] == pytest.approx(1.0 / 8.0)
    assert stats["grad_cos"] == pytest.approx(4.0 / (np.sqrt(8.0) * np.sqrt(27.0)))
    assert fig.gradient_stats(grads, torch.tensor([-1.0, 0, -1]))["grad_cos"] == pytest.approx(-1)


def test_collapse_criterion():
    """Failed; return down to under half of its best 5-iteration mean; entropy down > 1 nat."""
    rising = np.linspace(10.0, 500.0, 20)
    entropy = np.full(20, 4.25)
    assert not fig.collapsed(rising, entropy, failed=False)
    assert fig.collapsed(rising, entropy, failed=True)
    fallen = np.concatenate([rising, np.full(5, 200.0)])  # best 5-mean 451, final 200
    assert fig.collapsed(fallen, np.full(25, 4.25), failed=False)
    dipped = np.concatenate([rising, np.full(5, 300.0)])  # final 300 > 451 / 2
    assert not fig.collapsed(dipped, np.full(25, 4.25), failed=False)
    assert fig.collapsed(rising, np.linspace(4.25, 3.2, 20), failed=False)
    assert not fig.collapsed(rising, np.linspace(4.25, 3.3, 20), failed=False)
    with_nan = np.concatenate([rising[:10], [np.nan], rising[10:]])
    assert not fig.collapsed(with_nan, np.full(21, 4.25), failed=False)


def _metrics(run_dir: Path) -> list[dict]:
    with (run_dir / "metrics.csv").open() as f:
        return list(csv.DictReader(f))


@pytest.mark.slow  # the script end to end at toy size
def test_toy_run_staleness_queue_and_csv(tmp_path):
    """--toy --workers 2 --staleness 0,2 --seeds 1: step and kalman at k = 0 and 2 on Hopper-v5,
    5 iterations of 128 steps, in two spawned processes. k = 0 updates every iteration on the
    rollout its own policy collected: KL(behaviour || current) is exactly 0, and the per-step
    kind's mean minibatch gradient points along the on-policy gradient (cosine > 0.9; they
    differ only by the per-minibatch advantage normalisation). k = 2 skips the first 2 updates,
    then uses the rollout of 2 iterations before: data of the unchanged policy once (KL 0), then
    of the policy 1 and 2 updates back (KL > 0). The CSV rows are the runs' metrics.csv numbers,
    means over the updates on data of full age k."""
    out = tmp_path / "out"
    cmd = [sys.executable, "paper_figures/ratio_filters.py", "--toy", "--workers", "2"]
    cmd += ["--staleness", "0,2", "--seeds", "1", "--out", str(out)]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=scaled(240))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert "command: python paper_figures/ratio_filters.py --toy --workers 2" in done.stdout
    rows = list(csv.DictReader((out / "ratio_filters.csv").open()))
    assert list(rows[0]) == list(fig.RUN_FIELDS)
    assert [(r["kind"], r["staleness"], r["seed"]) for r in rows] == [
        ("step", "0", "1"), ("kalman", "0", "1"), ("step", "2", "1"), ("kalman", "2", "1")
    ]  # fmt: skip
    for row in rows:
        k = int(row["staleness"])
        metrics = _metrics(out / "runs" / row["kind"] / f"k{k}" / "seed1")
        assert [int(m["step"]) for m in metrics] == [128, 256, 384, 512, 640]
        behaviour = np.array([float(m["train/kl_behaviour"]) for m in metrics])
        assert np.isnan(behaviour[:k]).all() and int(row["updates"]) == 5 - k
        # the first update of k = 2 is on data of the same (not yet updated) policy
        if k == 0:
            assert (behaviour == 0).all()
        else:
            assert behaviour[k] == 0 and (behaviour[k + 1 :] > 0).all()
        age = fig.data_age(5, k)
        np.testing.assert_array_equal(age, [0] * 5 if k == 0 else [-1, -1, 0, 1, 2])
        cos = np.array([float(m["train/grad_cos"]) for m in metrics])[age == k]
        if row["kind"] == "step" and k == 0:
            assert (cos > 0.9).all()
        # the run's means are over its updates on data of full age k
        assert float(row["grad_cos"]) == pytest.approx(cos.mean(), rel=1e-5)
        rel_var = np.array([float(m["train/grad_rel_var"]) for m in metrics])[age == k]
        assert float(row["grad_rel_var"]) == pytest.approx(rel_var.mean(), rel=1e-5)
        assert row["collapsed"] in ("0", "1") and row["failed"] == "0"


@pytest.mark.parametrize(
    "argv, flag",
    [
        (["--seeds", "0"], "--seeds"),
        (["--steps", "0"], "--steps"),
        (["--workers", "0"], "--workers"),
        (["--kinds", "step,token"], "--kinds"),
        (["--staleness", "0,-1"], "--staleness"),
        (["--staleness", "two"], "--staleness"),
        (["--env-id", "Nope-v9"], "--env-id"),
        (["--env-id", "bandit:bernoulli-10"], "--env-id"),
    ],
)
def test_bad_flags_exit_2_naming_the_flag(argv, flag, capsys, tmp_path):
    with pytest.raises(SystemExit) as exc:
        fig.main([*argv, "--out", str(tmp_path / "o")])
    assert exc.value.code == 2
    assert flag in capsys.readouterr().err.strip().splitlines()[-1]
    assert not (tmp_path / "o").exists()
