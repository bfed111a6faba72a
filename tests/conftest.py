"""Shared test setup: headless MuJoCo rendering, and fixtures used by several test files."""

import os

import pytest

os.environ.setdefault("MUJOCO_GL", "egl")


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
