"""Process state every test starts from."""

import signal


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
