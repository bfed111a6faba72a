"""The mjx deadlock guard (envs/brax.py): jaxlib 0.10.0-0.11.0 split a batched Cholesky over
XLA:CPU's thread pool from inside that pool, which hung brax:halfcheetah on 'mjx' at 1024 envs
(paper_figures/README.md, Brax items). Where such a jaxlib would split mjx's batch, the adapter
and batched_functions (what algos/ppo_brax.py steps) raise a ValueError instead of hanging.
The split rule is jaxlib's GetLapackBatchChunkSize (jax jaxlib/cpu/lapack_kernels.cc)."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("brax")
from timeouts import scaled

from envs import brax as brax_backend  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
HALFCHEETAH_NV = 9  # brax's half_cheetah.xml: 9 dofs


@pytest.mark.parametrize(
    "version, affected",
    [
        ("0.9.2", False),  # the brax extra's pin: no batch split
        ("0.9.99", False),
        ("0.10.0", True),
        ("0.10.2", True),  # hung here
        ("0.10.2rc1", True),
        ("0.10", True),
        ("0.11.0", True),
        ("0.11.1", False),
        ("0.11.1rc1", False),  # a pre-release of the first fixed version counts as it
        ("0.9.2.dev20260101", False),
        ("0.12.0", False),
        ("1.0.0", False),
    ],
)
def test_affected_jaxlib_versions(version, affected):
    assert brax_backend.lapack_blocks_pool(version) is affected


def jaxlib_splits(batch, cost, threads):
    """jaxlib 0.10's rule (GetLapackBatchChunkSize + ParallelBatchMap): whether a batch of
    matrices costing `cost` FLOP each is cut into more than one chunk for the thread pool."""
    if threads <= 1 or batch * cost < 200_000:
        return False
    chunk = max(-(-batch // threads), -(-200_000 // cost))
    return chunk < batch


@pytest.mark.parametrize("nv", [2, 6, 9, 14, 23, 60])
@pytest.mark.parametrize("threads", [2, 4, 64])
def test_max_unsplit_envs_is_jaxlibs_split_threshold(nv, threads):
    # cost per matrix: n^3 / 3 for a Cholesky (integer division, as in C++), n^2 for a
    # triangular solve with one right-hand side; the guard takes the larger
    cost = max(nv**3 // 3, nv**2)
    largest = brax_backend.max_unsplit_envs(nv)
    assert not any(jaxlib_splits(b, cost, threads) for b in range(1, largest + 1))
    assert jaxlib_splits(largest + 1, cost, threads)


def test_halfcheetah_is_split_from_825_envs():
    # the hung benchmark ran 1024 envs; 64-512 and 824 ran 400 calls each on jaxlib 0.10.2
    assert brax_backend.max_unsplit_envs(HALFCHEETAH_NV) == 824


def test_the_guard_names_env_pipeline_batch_cause_and_ways_out():
    with pytest.raises(ValueError) as err:
        brax_backend.check_no_pool_deadlock("halfcheetah", "mjx", 1024, 9, jaxlib="0.10.2")
    message = str(err.value)
    for part in ("brax:halfcheetah", "'mjx'", "num_envs=1024", "jaxlib 0.10.2", "9x9 Cholesky"):
        assert part in message, (part, message)
    for way_out in ("jaxlib 0.9.2", ">= 0.11.1", "num_envs <= 824", "--brax-pipeline"):
        assert way_out in message, (way_out, message)
    assert "\n" not in message


@pytest.mark.parametrize(
    "pipeline, num_envs, jaxlib",
    [
        ("mjx", 824, "0.10.2"),  # below the split threshold: run serially, no deadlock
        ("positional", 1024, "0.10.2"),  # brax's own pipelines factorise nothing with LAPACK
        ("generalized", 4096, "0.10.2"),
        ("mjx", 1024, "0.9.2"),  # the pinned jaxlib never splits
        ("mjx", 1024, "0.11.1"),
    ],
)
def test_the_guard_lets_safe_configurations_through(pipeline, num_envs, jaxlib):
    brax_backend.check_no_pool_deadlock("halfcheetah", pipeline, num_envs, 9, jaxlib=jaxlib)


def test_the_guard_reads_the_installed_jaxlib(monkeypatch):
    monkeypatch.setattr(brax_backend, "installed_jaxlib", lambda: "0.10.2")
    with pytest.raises(ValueError, match="jaxlib 0.10.2"):
        brax_backend.check_no_pool_deadlock("halfcheetah", "mjx", 1024, 9)
    monkeypatch.setattr(brax_backend, "installed_jaxlib", lambda: "0.9.2")
    brax_backend.check_no_pool_deadlock("halfcheetah", "mjx", 1024, 9)


def fake_mjx_env(nv):
    """What the guard reads of a brax env (backend, sys.nv) and what the adapter's constructor
    reads (sizes), without building an mjx model (seconds each)."""
    sys_ = SimpleNamespace(nv=nv)
    return SimpleNamespace(backend="mjx", sys=sys_, observation_size=17, action_size=6)


def test_adapter_and_batched_functions_refuse_before_compiling(monkeypatch):
    """Both entry points check (the adapter's constructor compiles nothing; batched_functions is
    what algos/ppo_brax.py jits), with the model's own nv."""
    from brax import envs as brax_envs

    monkeypatch.setattr(brax_backend, "installed_jaxlib", lambda: "0.10.2")
    monkeypatch.setattr(brax_envs, "get_environment", lambda name, backend: fake_mjx_env(9))
    with pytest.raises(ValueError, match="brax:halfcheetah .*num_envs=825 .*9x9"):
        brax_backend.BraxVectorEnv("halfcheetah", 825, pipeline="mjx")
    with pytest.raises(ValueError, match="num_envs=1024 .*14x14 .*num_envs <= 219"):
        brax_backend.batched_functions(fake_mjx_env(14), 1024)  # ant's nv
    vec = brax_backend.BraxVectorEnv("halfcheetah", 824, pipeline="mjx")  # not split: allowed
    assert vec.compile_seconds is None  # nothing compiled by construction
    brax_backend.batched_functions(fake_mjx_env(14), 219)


@pytest.mark.slow
def test_the_formerly_hanging_configuration_ends():
    """brax:halfcheetah, mjx, 1024 envs through the adapter in a fresh process: it steps to the
    end on a safe jaxlib and stops at once with the guard's message on an affected one; it never
    hangs (the subprocess timeout is the failure). ~2-5 min on 2 cores (compiles)."""
    script = textwrap.dedent(
        """
        import numpy as np
        from envs import brax as brax_backend
        try:
            vec = brax_backend.make("halfcheetah", 1024, pipeline="mjx", copy=False)
        except ValueError as exc:
            print("GUARD", exc)
            raise SystemExit(0)
        vec.reset(seed=0)
        act = np.random.default_rng(0).uniform(-1, 1, (1024, 6)).astype(np.float32)
        for _ in range(30):
            obs, *_ = vec.step(act)
        assert np.isfinite(obs).all()
        print("STEPPED", brax_backend.installed_jaxlib())
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        },
        capture_output=True,
        text=True,
        timeout=scaled(1200),
    )
    assert out.returncode == 0, out.stderr[-2000:]
    affected = brax_backend.lapack_blocks_pool(brax_backend.installed_jaxlib())
    assert ("GUARD" if affected else "STEPPED") in out.stdout, out.stdout[-2000:]
