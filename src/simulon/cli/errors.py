"""How a `simulon` command ends: 0 success, 2 bad input (config.errors.ConfigError: one plain message naming
the file or option, the field and the problem, no traceback), 1 internal error."""

from __future__ import annotations

import sys
from collections.abc import Callable

from ..config.errors import ConfigError, one_line

EXIT_INTERNAL_ERROR = 1
EXIT_BAD_INPUT = 2


def run_reporting_errors(command: Callable[[], object]) -> None:
    """Run a command; bad input ends it with one line and exit status 2, anything else with exit status 1."""
    try:
        command()  # click handles usage errors itself (exit status 2) and exits
    except ConfigError as exc:
        print(f"error: {one_line(str(exc))}", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)
    except Exception as exc:
        print(f"internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
        sys.exit(EXIT_INTERNAL_ERROR)
