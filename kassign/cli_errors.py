"""The command line's one error handler: anything a user can cause becomes one line on stderr.

Every ``kassign`` command runs through :func:`run_command`, which turns an exception into::

    kassign <command>: <what went wrong> (<what to do>)

and an exit code: 2 for bad input (a missing file, malformed JSON, a value out of range), 1 for
a failure at run time (a full disk, an unreachable broker, a bug), 130 for Ctrl-C. A broken pipe
(``kassign ... | head -1``) exits quietly. With ``--verbose`` the traceback is printed first.
"""

from __future__ import annotations

import errno
import functools
import gzip
import json
import logging
import os
import sys
import traceback
import zlib
from collections.abc import Callable, Sequence
from typing import Any

__all__ = [
    "CLIError",
    "describe",
    "report",
    "run_command",
    "handles_errors",
    "set_verbose",
    "EXIT_INPUT",
    "EXIT_RUNTIME",
    "EXIT_INTERRUPTED",
    "EXIT_BROKEN_PIPE",
]

log = logging.getLogger(__name__)

EXIT_RUNTIME = 1
EXIT_INPUT = 2
EXIT_INTERRUPTED = 130
#: 128 + SIGPIPE, what a C tool killed by the broken pipe reports.
EXIT_BROKEN_PIPE = 141
#: Longest message printed; longer ones (a huge value echoed back) are cut.
MAX_MESSAGE = 400

_verbose = False

# errno values that mean "the path the user gave is wrong", not "the machine failed".
_INPUT_ERRNOS = {errno.ENOENT, errno.EACCES, errno.EPERM, errno.EISDIR, errno.ENOTDIR, errno.ENAMETOOLONG, errno.ELOOP}


class CLIError(Exception):
    """A failure a command explains itself: ``what`` went wrong, what to do (``todo``), exit ``code``."""

    def __init__(self, what: str, todo: str | None = None, code: int = EXIT_INPUT) -> None:
        super().__init__(what)
        self.what = what
        self.todo = todo
        self.code = code


def set_verbose(verbose: bool) -> None:
    """Whether errors also print their traceback (``--verbose``)."""
    global _verbose
    _verbose = verbose


def _one_line(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - 3] + "..."


def _os_error(exc: OSError, command: str) -> tuple[str, str, int]:
    where = exc.filename if exc.filename is not None else ""
    reason = exc.strerror or str(exc)
    what = f"{where}: {reason}" if where else reason
    if exc.errno in _INPUT_ERRNOS:
        todos = {
            errno.ENOENT: "check the path",
            errno.EACCES: "check the file's permissions",
            errno.EPERM: "check the file's permissions",
            errno.EISDIR: "give a file, not a directory",
            errno.ENOTDIR: "check the path",
        }
        return what, todos.get(exc.errno, "check the path"), EXIT_INPUT
    if exc.errno == errno.ENOSPC:
        return what, "free disk space and run it again", EXIT_RUNTIME
    return what, f"check the paths and the machine; kassign --verbose {command} ... shows the traceback", EXIT_RUNTIME


def describe(exc: BaseException, command: str) -> tuple[str, str, int]:
    """(what went wrong, what to do, exit code) for an exception raised by ``kassign <command>``."""
    help_hint = f"see kassign {command} --help"
    if isinstance(exc, CLIError):
        return exc.what, exc.todo or help_hint, exc.code
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted", "run it again to start over", EXIT_INTERRUPTED
    if isinstance(exc, RecursionError):
        return "input nested too deeply to read", "flatten the input file", EXIT_INPUT
    if isinstance(exc, MemoryError):
        return "out of memory", "try a smaller input", EXIT_RUNTIME
    if isinstance(exc, OverflowError):
        return f"number too large: {exc}", "use smaller values", EXIT_INPUT
    if isinstance(exc, (EOFError, zlib.error, gzip.BadGzipFile)):
        return (
            f"truncated or corrupted compressed data: {exc or type(exc).__name__}",
            "re-create or re-download the file",
            EXIT_INPUT,
        )
    if isinstance(exc, json.JSONDecodeError):
        return f"malformed JSON: {exc}", "fix the file", EXIT_INPUT
    if isinstance(exc, UnicodeDecodeError):
        return f"not UTF-8 text: {exc}", "give a text (JSON, YAML) file", EXIT_INPUT
    if isinstance(exc, OSError):
        return _os_error(exc, command)
    if type(exc).__module__.split(".")[0] == "yaml":
        return f"malformed YAML: {exc}", "fix the file", EXIT_INPUT
    if isinstance(exc, (ValueError, TypeError)):
        return str(exc) or type(exc).__name__, help_hint, EXIT_INPUT
    return (
        f"unexpected {type(exc).__name__}: {exc}",
        f"kassign --verbose {command} ... shows the traceback; please report it",
        EXIT_RUNTIME,
    )


def _silence_stdout() -> None:
    """After a broken pipe: point stdout at /dev/null so the interpreter's final flush stays quiet."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # no real stdout (a test's capture)
        pass


def report(command: str, exc: BaseException) -> int:
    """Print ``exc`` as one line (its traceback first with ``--verbose``); returns the exit code."""
    if isinstance(exc, BrokenPipeError):
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    what, todo, code = describe(exc, command)
    try:
        if _verbose:
            traceback.print_exception(exc, file=sys.stderr)
        prefix = f"kassign {command}" if command else "kassign"
        print(f"{prefix}: {_one_line(what)} ({_one_line(todo)})", file=sys.stderr)
        sys.stderr.flush()
    except (BrokenPipeError, ValueError):  # stderr gone too: nothing left to tell
        pass
    return code


def run_command(command: str, entry: Callable[[Sequence[str]], Any], argv: Sequence[str]) -> int:
    """Run ``entry(argv)`` (a command's main); returns its exit code, or the error's (see :func:`report`)."""
    try:
        code = entry(argv)
        sys.stdout.flush()  # a broken pipe shows here, not at exit
        return int(code or 0)
    except SystemExit:
        raise
    except BaseException as exc:  # noqa: BLE001 - the one place every failure is turned into a line
        return report(command, exc)


def handles_errors(command: str) -> Callable[[Callable[..., Any]], Callable[..., int]]:
    """Decorate a command's ``main(argv)`` so a direct call reports errors as ``kassign`` does."""

    def wrap(main: Callable[..., Any]) -> Callable[..., int]:
        @functools.wraps(main)
        def wrapped(argv: Sequence[str] | None = None) -> int:
            return run_command(command, main, sys.argv[1:] if argv is None else argv)

        return wrapped

    return wrap
