"""Shared test setup: headless MuJoCo rendering, and fixtures used by several test files."""

import os

import pytest

os.environ.setdefault("MUJOCO_GL", "egl")


@pytest.fixture
def recorded_actions(monkeypatch):
    """Every group rollout's actions [T, envs], in collection order."""
    from controlrl.group_rollout import GroupCollector  # torch: only for the tests that ask

    seen = []
    collect = GroupCollector.collect

    def recording(self, act, seed):
        rollout = collect(self, act, seed)
        seen.append(rollout.actions.copy())
        return rollout

    monkeypatch.setattr(GroupCollector, "collect", recording)
    return seen
