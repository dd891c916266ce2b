"""How a `simulon` command ends: 0 success, 2 bad input (config.errors.ConfigError: one plain message naming
the file or option, the field and the problem, no traceback), 1 an error the system reported (a full disk, a
closed pipe: one line naming the file; standard output closed early, as `| head` does, ends it without a word, as
click does) or an internal error."""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable, Sequence

import typer
from typer.exceptions import Abort, TyperException

from ..config.errors import ConfigError, one_line

EXIT_INTERNAL_ERROR = 1
EXIT_BAD_INPUT = 2
EXIT_TERMINATED = 128 + signal.SIGTERM
OUT_OF_MEMORY = ("ran out of memory: the run took more than this process may have, though its estimated size "
                 "fitted (the estimate is of resident memory; a limit on virtual memory, `ulimit -v`, also counts "
                 "what libraries reserve): give it more memory, or a smaller job (--max-memory below what it has, "
                 "so that the run is folded and its micro-batches sampled sooner, or fewer --jobs or --workers)")


def stop_on_terminate(signum: int, frame: object) -> None:
    """SIGTERM (what batch schedulers and `kill` send) unwinds like an interrupt, so that a file being written
    atomically removes its temporary copy (export.files.write_atomic) instead of leaving it behind."""
    raise SystemExit(EXIT_TERMINATED)


_TYPER_WORDING = {
    "Input should be a valid integer, unable to parse string as an integer": "expected a whole number",
    "Input should be a valid number, unable to parse string as a number": "expected a number",
}
"""typer's messages for an option of the wrong type, as the rest of simulon's messages put it."""


def given_value(exc: typer.BadParameter, args: Sequence[str]) -> str | None:
    """The value the command line gave the option `exc` complains of (the last one given), or None."""
    opts = getattr(exc.param, "opts", ())
    value = None
    for i, arg in enumerate(args):
        if arg in opts and i + 1 < len(args):
            value = args[i + 1]
        elif "=" in arg and arg.split("=", 1)[0] in opts:
            value = arg.split("=", 1)[1]
    return value


def usage_problem(exc: TyperException, args: Sequence[str]) -> str:
    """A command-line usage error (unknown option, bad option value, missing argument) as one line naming the
    option and the value given, and where help is."""
    message = exc.format_message()
    for theirs, ours in _TYPER_WORDING.items():
        message = message.replace(theirs, ours)
    if isinstance(exc, typer.BadParameter) and (value := given_value(exc, args)) is not None:
        message += f", got {value!r}"
    ctx = getattr(exc, "ctx", None)
    where = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
    return one_line(message + where)


def printable_stdout() -> None:
    """Standard output writes a character its encoding lacks as an escape (\\xe9), as Python's standard error does:
    under an ASCII locale (LC_ALL=C) a sweep's series named by a swept value 'café' ended the command in 'internal
    error: UnicodeEncodeError' after every point had run."""
    reconfigure = getattr(sys.stdout, "reconfigure", None)
    if reconfigure is not None:
        reconfigure(errors="backslashreplace")


def _run(command: Callable[[], object]) -> object:
    """The command, SIGTERM unwinding it while it runs; once it is done the default action is back, so that a
    signal arriving while the interpreter shuts down ends the process without an 'Exception ignored' traceback."""
    try:
        return command()
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def run_reporting_errors(command: Callable[[], object], args: Sequence[str] | None = None) -> None:
    """Run a click/typer command in non-standalone mode; bad input (a ConfigError, a usage error) ends it with one
    line and exit status 2, anything else unexpected with exit status 1."""
    signal.signal(signal.SIGTERM, stop_on_terminate)
    printable_stdout()
    args = sys.argv[1:] if args is None else args
    try:
        status = _run(command)
    except TyperException as exc:  # click's usage errors: unknown option, wrong type, missing argument
        if exc.format_message():  # empty where click already printed the help (no arguments)
            print(f"error: {usage_problem(exc, args)}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except Abort:
        print("aborted", file=sys.stderr)
        sys.exit(EXIT_INTERNAL_ERROR)
    except ConfigError as exc:
        print(f"error: {one_line(str(exc))}", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)
    except OSError as exc:  # the system refused a read or a write (a full disk, a closed pipe): not simulon's fault
        where = exc.filename if exc.filename is not None else "standard output or a file"
        print(f"error: cannot complete the command: {where}: {exc.strerror or exc}", file=sys.stderr)
        sys.exit(EXIT_INTERNAL_ERROR)
    except MemoryError:  # past the size check (dag/size.py), whose estimate was below what the process could take
        print(f"error: {OUT_OF_MEMORY}", file=sys.stderr)
        sys.exit(EXIT_INTERNAL_ERROR)
    except Exception as exc:
        print(f"internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
        sys.exit(EXIT_INTERNAL_ERROR)
    if isinstance(status, int) and status:  # typer.Exit(code) in non-standalone mode returns the code
        sys.exit(status)
