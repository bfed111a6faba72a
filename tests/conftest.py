"""Shared test setup: headless MuJoCo rendering, and fixtures used by several test files."""

import os
import sys

import pytest

os.environ.setdefault("MUJOCO_GL", "egl")
# one persistent JAX compilation cache for every test and every process a test starts (each
# reads it through envs.brax.configured_jax): a Brax shape compiles once per machine, not once
# per test process (cold ~50 s, from the cache ~8 s for ppo_brax's mjx case); a test that
# measures compile times gives its processes their own empty cache
os.environ.setdefault("CONTROLRL_JAX_CACHE", str(__import__("envs.brax").brax.CACHE_DIR))


@pytest.fixture(autouse=True)
def _default_dtype_restored():
    """A test that leaves torch's default dtype changed fails itself, not whichever test runs
    after it on the same worker."""
    yield
    torch = sys.modules.get("torch")  # only where the test imported it
    if torch is not None and torch.get_default_dtype() != torch.float32:
        leaked = torch.get_default_dtype()
        torch.set_default_dtype(torch.float32)
        pytest.fail(f"the test left torch's default dtype at {leaked}")


@pytest.fixture
def recorded_actions(monkeypatch):
    """Every rollout's actions [T, envs], in collection order: a group rollout's
    (GroupCollector) or an actor-critic rollout's buffer (rollout.Collector)."""
    from controlrl.group_rollout import GroupCollector  # torch: only for the tests that ask
    from controlrl.rollout import Collector

    seen = []
    group_collect, collect = GroupCollector.collect, Collector.collect

    def group_recording(self, act, seed):
        rollout = group_collect(self, act, seed)
        seen.append(rollout.actions.copy())
        return rollout

    def recording(self, buffer, act):
        episodes = collect(self, buffer, act)
        seen.append(buffer.actions.copy())
        return episodes

    monkeypatch.setattr(GroupCollector, "collect", group_recording)
    monkeypatch.setattr(Collector, "collect", recording)
    return seen
