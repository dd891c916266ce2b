"""How a `simulon` command ends: 0 success, 2 bad input (config.errors.ConfigError: one plain message naming
the file or option, the field and the problem, no traceback), 1 internal error."""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable

from ..config.errors import ConfigError, one_line

EXIT_INTERNAL_ERROR = 1
EXIT_BAD_INPUT = 2
EXIT_TERMINATED = 128 + signal.SIGTERM


def stop_on_terminate(signum: int, frame: object) -> None:
    """SIGTERM (what batch schedulers and `kill` send) unwinds like an interrupt, so that a file being written
    atomically removes its temporary copy (export.files.write_atomic) instead of leaving it behind."""
    raise SystemExit(EXIT_TERMINATED)


def run_reporting_errors(command: Callable[[], object]) -> None:
    """Run a command; bad input ends it with one line and exit status 2, anything else with exit status 1."""
    signal.signal(signal.SIGTERM, stop_on_terminate)
    try:
        command()  # click handles usage errors itself (exit status 2) and exits
    except ConfigError as exc:
        print(f"error: {one_line(str(exc))}", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)
    except Exception as exc:
        print(f"internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
        sys.exit(EXIT_INTERNAL_ERROR)
