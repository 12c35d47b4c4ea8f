"""What every ``kassign`` command shares: the global options, logging, and checked argument types.

``-q/--quiet``, ``-v/--verbose`` and ``--log-level LEVEL`` are accepted before or after the
command (``kassign -v assign x.json`` and ``kassign assign x.json -v`` are the same).
By default the output carries no timestamps and no other library's log lines (aiokafka's
warnings, matplotlib's font cache, py4j); ``--verbose`` shows them, with timestamps. The group
machinery's per-round detail (:data:`DETAIL_LOGGERS`: each leader round's assignment, each member's
reconciliation, hundreds of lines in a large simulated group) is shown at ``--verbose`` or
``--log-level INFO``/``DEBUG`` only: by default a command prints its progress and its result.
"""

from __future__ import annotations

import argparse
import logging
import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NoReturn

from kassign.cli_errors import EXIT_INPUT

__all__ = [
    "GlobalOptions",
    "split_global_options",
    "configure_logging",
    "restore_logging",
    "libraries_verbose",
    "ArgumentParser",
    "finite_float",
    "bounded_int",
    "MAX_PARTITIONS_PER_TOPIC",
    "MAX_PARTITIONS_TOTAL",
]

#: Bounds on what a command will build in memory (named in the error message when exceeded).
MAX_PARTITIONS_PER_TOPIC = 1_000_000
MAX_PARTITIONS_TOTAL = 10_000_000

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
#: kassign's loggers whose INFO records are per-round detail rather than progress.
DETAIL_LOGGERS = ("kassign.membership", "kassign.adapters")
_FLAGS = {"-q": "quiet", "--quiet": "quiet", "-v": "verbose", "--verbose": "verbose"}


@dataclass
class GlobalOptions:
    """The options every command takes; ``version`` only before the command."""

    quiet: bool = False
    verbose: bool = False
    log_level: str | None = None
    version: bool = False


def split_global_options(args: Sequence[str], own_version: Sequence[str] = ()) -> tuple[GlobalOptions, list[str]]:
    """Take the global options out of ``args`` (anywhere before a ``--``).

    ``--version`` after a command in ``own_version`` (``broker start --version 4.0.0``) is that
    command's. Raises ValueError for a ``--log-level`` without a known level.
    """
    opts = GlobalOptions()
    rest: list[str] = []
    command: str | None = None
    items = list(args)
    i = 0
    while i < len(items):
        arg = items[i]
        if arg == "--":
            rest += items[i:]
            break
        if arg in _FLAGS:
            setattr(opts, _FLAGS[arg], True)
        elif arg == "-V" or (arg == "--version" and command not in own_version):
            opts.version = True
        elif arg == "--log-level" or arg.startswith("--log-level="):
            if "=" in arg:
                level = arg.partition("=")[2]
            elif i + 1 < len(items):
                i += 1
                level = items[i]
            else:
                raise ValueError("--log-level needs a level (DEBUG, INFO, WARNING, ERROR)")
            if level.upper() not in LEVELS:
                raise ValueError(f"unknown log level {level!r}; expected one of {', '.join(LEVELS)}")
            opts.log_level = level.upper()
        else:
            if command is None and not arg.startswith("-"):
                command = arg
            rest.append(arg)
        i += 1
    return opts, rest


def _under(name: str, prefixes: Sequence[str]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


class _ConsoleFilter(logging.Filter):
    """kassign's own records at ``own`` and up (its per-round detail, :data:`DETAIL_LOGGERS`, at
    ``detail`` and up); other libraries' at ``others`` and up."""

    def __init__(self, own: int, others: int, detail: int | None = None) -> None:
        super().__init__()
        self.own, self.others = own, others
        self.detail = own if detail is None else detail

    def filter(self, record: logging.LogRecord) -> bool:
        if _under(record.name, DETAIL_LOGGERS):
            return record.levelno >= self.detail
        ours = _under(record.name, ("kassign",))
        return record.levelno >= (self.own if ours else self.others)


class _PlainFormatter(logging.Formatter):
    """``kassign: message`` (another library's name instead of kassign); warnings and errors say so.
    No tracebacks: ``--verbose`` shows them."""

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        if record.levelno >= logging.WARNING:
            message = f"{record.levelname.lower()}: {message}"
        source = record.name.split(".")[0]
        return f"{'kassign' if source == 'kassign' else record.name}: {message}"


_installed: list[tuple[logging.Handler, int, bool]] = []
_libraries_verbose = False


def libraries_verbose() -> bool:
    """Whether other libraries' logs are wanted (``--verbose`` or ``--log-level`` below ERROR)."""
    return _libraries_verbose


def configure_logging(opts: GlobalOptions) -> None:
    """Log to stderr as ``opts`` says; :func:`restore_logging` undoes it."""
    if opts.log_level:
        own = others = getattr(logging, opts.log_level)
    elif opts.verbose:
        own, others = logging.DEBUG, logging.INFO
    elif opts.quiet:
        own, others = logging.ERROR, logging.CRITICAL
    else:  # another library's errors repeat what kassign's one-line error says
        own, others = logging.INFO, logging.CRITICAL
    # Per-round detail only when asked for: --verbose, or --log-level INFO/DEBUG.
    detail = own if opts.verbose or opts.log_level else max(own, logging.WARNING)
    global _libraries_verbose
    _libraries_verbose = others < logging.ERROR
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(_ConsoleFilter(own, others, detail))
    if opts.verbose or opts.log_level in ("DEBUG", "INFO"):
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    else:
        handler.setFormatter(_PlainFormatter())
    root = logging.getLogger()
    _installed.append((handler, root.level, logging.raiseExceptions))
    root.addHandler(handler)
    root.setLevel(min(own, others))
    logging.captureWarnings(True)  # Python warnings (pyspark, matplotlib) follow the same rules


def restore_logging() -> None:
    """Remove the handler :func:`configure_logging` added (tests call ``main`` many times)."""
    global _libraries_verbose
    _libraries_verbose = False
    logging.captureWarnings(False)
    while _installed:
        handler, level, _ = _installed.pop()
        root = logging.getLogger()
        root.removeHandler(handler)
        root.setLevel(level)


class ArgumentParser(argparse.ArgumentParser):
    """argparse with one-line usage errors (``kassign assign: ... (see kassign assign --help)``) and
    the global options listed in ``--help``."""

    def __init__(self, *args, **kwargs) -> None:  # noqa: ANN002, ANN003 - argparse's own signature
        super().__init__(*args, **kwargs)
        group = self.add_argument_group("global options (also before the command)")
        group.add_argument("-q", "--quiet", action="store_true", dest="_quiet", help="errors only")
        group.add_argument(
            "-v",
            "--verbose",
            action="store_true",
            dest="_verbose",
            help="other libraries' logs, timestamps, and the traceback on errors",
        )
        group.add_argument(
            "--log-level",
            dest="_log_level",
            metavar="LEVEL",
            type=str.upper,
            choices=LEVELS,
            help="log level (DEBUG, INFO, WARNING, ERROR)",
        )

    def error(self, message: str) -> NoReturn:
        """One line on stderr and exit 2 (argparse prints the whole usage)."""
        message = " ".join(message.split())
        sys.stderr.write(f"{self.prog}: {message} (see {self.prog} --help)\n")
        sys.exit(EXIT_INPUT)


def finite_float(
    what: str, low: float = 0.0, high: float = math.inf, *, low_inclusive: bool = True
) -> Callable[[str], float]:
    """An argparse type: a finite float in [low, high] (``(low, high]`` without ``low_inclusive``)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{what} must be a finite number, got {text!r}")
        if value < low or (value == low and not low_inclusive) or value > high:
            bound = f"{'>=' if low_inclusive else '>'} {low:g}" + (f" and <= {high:g}" if high < math.inf else "")
            raise argparse.ArgumentTypeError(f"{what} must be {bound}, got {text}")
        return value

    return parse


def bounded_int(what: str, low: int, high: int, why: str | None = None) -> Callable[[str], int]:
    """An argparse type: an integer in [low, high]; ``why`` replaces the default out-of-range message."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{what} {text!r} is not an integer") from None
        if not low <= value <= high:
            if why is not None:
                raise argparse.ArgumentTypeError(f"{what} {value}: {why}")
            raise argparse.ArgumentTypeError(f"{what} must be between {low:,} and {high:,}, got {value:,}")
        return value

    return parse
