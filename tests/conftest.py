"""Process state every test starts from."""

import signal
from datetime import datetime, timezone

import pytest


def pytest_configure(config):
    # A container's PID 1 starts with every signal at its default disposition. A test run started
    # in the background of a non-interactive shell (as CI may start it) inherits SIGINT and SIGQUIT
    # *ignored*, and bash cannot un-ignore a signal that was ignored when it started, so the launch
    # scripts would run their trainer with SIGINT ignored, as no pod ever does. A caught signal
    # resets to its default across exec, so catching them here gives every script the tests start
    # the dispositions of a pod. (Runs in every xdist worker too.)
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if signal.getsignal(signal.SIGQUIT) is signal.SIG_IGN:
        signal.signal(signal.SIGQUIT, lambda *_: None)


TEST_NOW = datetime(2026, 12, 1, tzinfo=timezone.utc)
"""The time every test loads a stack at (rlinf_eks.loading.clock): no test depends on today's date,
so a Capacity Block of a test stays ahead. The example stack's own block is checked against the
real clock by tests/test_config_holes.py."""


@pytest.fixture(autouse=True)
def _fixed_clock(monkeypatch):
    from rlinf_eks import loading

    monkeypatch.setattr(loading, "clock", lambda: TEST_NOW)
