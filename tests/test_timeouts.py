"""tests/timeouts.py: every subprocess limit of the tests is scaled by one factor, which an
environment variable overrides."""

import pytest
import timeouts


def test_the_default_factor_allows_a_machine_loaded_several_times_over(monkeypatch):
    monkeypatch.delenv("CONTROLRL_TEST_TIMEOUT_SCALE", raising=False)
    assert timeouts.scaled(30) == 30 * timeouts.DEFAULT_SCALE
    assert timeouts.DEFAULT_SCALE >= 3  # load 6 on two cores: a process runs ~3x slower


def test_the_variable_overrides_the_factor_and_a_bad_one_is_named(monkeypatch):
    monkeypatch.setenv("CONTROLRL_TEST_TIMEOUT_SCALE", "10")
    assert timeouts.scaled(30) == 300
    for bad in ("fast", "0", "-1"):
        monkeypatch.setenv("CONTROLRL_TEST_TIMEOUT_SCALE", bad)
        with pytest.raises(ValueError, match="CONTROLRL_TEST_TIMEOUT_SCALE"):
            timeouts.scaled(30)
