"""The kassign command line: one entry point dispatching to each area's own command module.

Each subcommand lives next to the code it drives (kassign assign in kassign.assign_cli, kassign
sweep in kassign.spark, ...) and is imported only when used, so that kassign assign never pays
for PySpark or a Kafka client. Every command runs through one error handler
(kassign.cli_errors): what a user can cause is one line on stderr and a non-zero exit code.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

from kassign.cli_errors import EXIT_INPUT, CLIError, report, run_command, set_verbose
from kassign.cli_options import configure_logging, restore_logging, split_global_options

__all__ = ["COMMANDS", "main"]

# subcommand -> ("module", "function", one-line help); the function takes argv and returns an exit code.
COMMANDS: dict[str, tuple[str, str, str]] = {
    "assign": ("kassign.assign_cli", "main", "assign scenario files and print balance and movement"),
    "broker": ("kassign.broker.cli", "main", "start, stop or list a local Apache Kafka (or Tansu) broker"),
    "demo": ("kassign.demo", "main", "eager vs cooperative on a live group, on a local Apache Kafka"),
    "simulate": ("kassign.sim.cli", "main", "simulate a rebalance scenario (or --replay a recording)"),
    "sweep": ("kassign.spark.cli", "sweep_main", "sweep a scenario grid on Spark and write a report"),
    "analyze": ("kassign.spark.cli", "analyze_main", "aggregate recorded timelines into a report"),
    "replicas": ("kassign.placement.cli", "main", "plan Kafka replica placement (rack-aware)"),
    "telemetry": ("kassign.telemetry.cli", "main", "Java's rebalance metrics of recorded consumers (JSON)"),
}

#: Commands whose own options include --version (the Kafka version of kassign broker start).
OWN_VERSION = ("broker",)


def _usage() -> str:
    lines = ["usage: kassign [-V] [-q | -v] [--log-level LEVEL] COMMAND [ARGS...]", "", "commands:"]
    lines += [f"  {name:<10} {help_}" for name, (_, _, help_) in COMMANDS.items()]
    lines += [
        "",
        "options (also after the command):",
        "  -V, --version      print kassign's version and exit",
        "  -q, --quiet        errors only",
        "  -v, --verbose      other libraries' logs, timestamps, and the traceback on errors",
        "  --log-level LEVEL  DEBUG, INFO, WARNING or ERROR",
        "",
        "kassign COMMAND --help describes a command.",
    ]
    return "\n".join(lines)


def _version() -> str:
    from kassign import __version__

    return f"kassign {__version__}"


def _dispatch(name: str, rest: list[str]) -> int:
    module, func, _ = COMMANDS[name]
    try:
        entry = getattr(importlib.import_module(module), func)
    except ImportError as exc:
        raise CLIError(
            f"not available: {exc}",
            "install the matching extra, e.g. pip install 'kassign[spark]' or 'kassign[demo]'",
            EXIT_INPUT,
        ) from exc
    return run_command(name, entry, rest)


def main(argv: Sequence[str] | None = None) -> int:
    """Run kassign COMMAND ARGS; returns the process exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        opts, args = split_global_options(args, OWN_VERSION)
    except ValueError as exc:
        return report("", CLIError(str(exc), "see kassign --help"))
    if opts.version:
        print(_version())
        return 0
    if not args or args[0] in ("-h", "--help"):
        print(_usage())
        return 0 if args else EXIT_INPUT
    name, rest = args[0], args[1:]
    if name not in COMMANDS:
        print(f"kassign: unknown command {name!r} (one of {', '.join(COMMANDS)}; see kassign --help)", file=sys.stderr)
        return EXIT_INPUT
    set_verbose(opts.verbose)
    configure_logging(opts)
    try:
        return _run(name, rest)
    finally:
        restore_logging()
        set_verbose(False)


def _run(name: str, rest: list[str]) -> int:
    try:
        return _dispatch(name, rest)
    except SystemExit:
        raise
    except BaseException as exc:  # noqa: BLE001 - e.g. a failed import, or Ctrl-C while importing
        return report(name, exc)


if __name__ == "__main__":
    sys.exit(main())
