"""SIGTERM unwinds a running command (tests/cli/test_cli_errors.py); once the command is done the default action is
back, so that a signal arriving while the interpreter shuts down ends the process without a traceback."""

from __future__ import annotations

import signal

from simulon.cli.errors import run_reporting_errors


def test_after_the_command_sigterm_has_its_default_action_again():
    before = signal.getsignal(signal.SIGTERM)
    seen = []
    try:
        run_reporting_errors(lambda: seen.append(signal.getsignal(signal.SIGTERM)), [])
        assert seen and seen[0] is not signal.SIG_DFL  # unwinding while the command ran
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    finally:
        signal.signal(signal.SIGTERM, before)
