"""The ``kassign`` command line: one entry point dispatching to each area's own command module.

Each subcommand lives next to the code it drives (``kassign assign`` in :mod:`kassign.assign_cli`,
``kassign sweep`` in :mod:`kassign.spark`, ...) and is imported only when used, so that
``kassign assign`` never pays for PySpark or a Kafka client.
"""

from __future__ import annotations

import importlib
import logging
import sys
from collections.abc import Sequence

# subcommand -> ("module", "function", one-line help); the function takes argv and returns an exit code.
COMMANDS: dict[str, tuple[str, str, str]] = {
    "assign": ("kassign.assign_cli", "main", "assign a scenario file and print balance and movement"),
    "broker": ("kassign.broker.cli", "main", "start, stop or list a local Apache Kafka (or Tansu) broker"),
    "demo": ("kassign.demo", "main", "eager vs cooperative on a live group, on a local Apache Kafka"),
    "simulate": ("kassign.sim.cli", "main", "simulate a rebalance scenario (or --replay a recording)"),
    "sweep": ("kassign.spark.cli", "sweep_main", "sweep a scenario grid on Spark and write a report"),
    "analyze": ("kassign.spark.cli", "analyze_main", "aggregate recorded timelines into a report"),
    "replicas": ("kassign.placement.cli", "main", "plan Kafka replica placement (rack-aware)"),
    "telemetry": ("kassign.telemetry.cli", "main", "Java's rebalance metrics of recorded consumers (JSON)"),
}


def _usage() -> str:
    lines = ["usage: kassign COMMAND [ARGS...]", "", "commands:"]
    lines += [f"  {name:<10} {help_}" for name, (_, _, help_) in COMMANDS.items()]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``kassign COMMAND ARGS``; returns the process exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if not args or args[0] in ("-h", "--help"):
        print(_usage())
        return 0 if args else 2
    name, rest = args[0], args[1:]
    if name not in COMMANDS:
        print(f"kassign: unknown command {name!r}\n\n{_usage()}", file=sys.stderr)
        return 2
    module, func, _ = COMMANDS[name]
    try:
        entry = getattr(importlib.import_module(module), func)
    except ImportError as exc:
        print(f"kassign {name}: not available ({exc}); install the matching extra, e.g. pip install 'kassign[spark]'",
              file=sys.stderr)
        return 2
    return int(entry(rest) or 0)


if __name__ == "__main__":
    sys.exit(main())
