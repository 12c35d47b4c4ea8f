"""``kassign broker start|stop|status``: a local Apache Kafka (or Tansu) for examples and experiments."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence

from kassign.cli_errors import CLIError, handles_errors
from kassign.cli_options import ArgumentParser, bounded_int

from kassign.broker.errors import BrokerUnavailable
from kassign.broker.kafka import DEFAULT_KAFKA_VERSION, settings_help
from kassign.broker.launch import detached_brokers, start_detached, stop_detached

__all__ = ["main", "build_parser"]

log = logging.getLogger(__name__)


_port = bounded_int("port", 1, 65535, "outside 1-65535")
_brokers = bounded_int("broker count", 1, 9, "a local cluster has 1 to 9 brokers")


def _racks(text: str) -> tuple[str, ...]:
    racks = tuple(r.strip() for r in text.split(","))
    if not all(racks):
        raise argparse.ArgumentTypeError(f"racks {text!r}: give non-empty names separated by commas, e.g. r1,r2,r3")
    return racks


def build_parser() -> argparse.ArgumentParser:
    """The ``kassign broker`` options."""
    ap = ArgumentParser(
        prog="kassign broker", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run Apache Kafka on 127.0.0.1 as a local KRaft process from Maven Central's jars (fetched "
                    "once into ~/.cache/kassign with mvn; later starts are offline), or the embedded Tansu. "
                    "The broker keeps running after `start` returns; `stop` ends it and deletes its data.",
        epilog="broker settings (bounds and waits only; the group coordinator's logic is Kafka's own):\n"
               + settings_help())
    sub = ap.add_subparsers(dest="action", required=True, metavar="{start,stop,status}")
    start = sub.add_parser("start", help="start a broker and print its bootstrap address")
    start.add_argument("--version", default=DEFAULT_KAFKA_VERSION, dest="kafka_version",
                       help="Apache Kafka version (default %(default)s)")
    start.add_argument("--brokers", type=_brokers, default=1, help="number of brokers (default 1)")
    start.add_argument("--racks", type=_racks, default=(),
                       help="comma-separated racks given to the brokers in turn (broker.rack), e.g. r1,r2,r3")
    start.add_argument("--port", type=_port, default=None, help="client port of the first broker (default: a free one)")
    start.add_argument("--tansu", action="store_true", help="start the embedded Tansu broker instead (no Java)")
    start.add_argument("--timeout", type=float, default=90.0, help="seconds to wait for the broker (default 90)")
    stop = sub.add_parser("stop", help="stop the broker(s) started with `kassign broker start`")
    stop.add_argument("--port", type=_port, default=None, help="only the broker on this port (default: all)")
    sub.add_parser("status", help="list the running brokers started with `kassign broker start`")
    return ap


def _start(args: argparse.Namespace) -> int:
    if args.tansu and (args.brokers != 1 or args.racks):
        raise CLIError("--tansu runs one broker without racks", "drop --brokers/--racks")
    info = start_detached(tansu=args.tansu, version=args.kafka_version, brokers=args.brokers, racks=args.racks,
                          port=args.port, startup_timeout=args.timeout)
    print(f"{info.describe()}")
    print(f"bootstrap: {info.bootstrap}")
    print(f"  export KAFKA_BOOTSTRAP_SERVERS={info.bootstrap}")
    print("stop it with: kassign broker stop" + (f" --port {args.port}" if args.port else ""))
    return 0


def _status() -> int:
    brokers = detached_brokers()
    if not brokers:
        print("no broker started by `kassign broker start` is running")
        return 1
    for state in brokers:
        name = "Apache Kafka" if state.get("kind") == "kafka" else "Tansu"
        racks = f", racks {','.join(state['racks'])}" if state.get("racks") else ""
        answering = "answering" if state["answering"] else "NOT answering"
        print(f"{name} {state.get('version', '')} at {state['bootstrap']}: {answering}, "
              f"{state.get('brokers', 1)} broker(s){racks}, {state['rss_mb']:.0f} MB resident, "
              f"supervisor pid {state['supervisor_pid']}")
    return 0


def _stop(args: argparse.Namespace) -> int:
    stopped = stop_detached(args.port)
    if not stopped:
        where = f" on port {args.port}" if args.port else ""
        print(f"no broker started by `kassign broker start` is running{where}")
        return 1
    for state in stopped:
        print(f"stopped the broker at {state['bootstrap']}")
    return 0


@handles_errors("broker")
def main(argv: Sequence[str] | None = None) -> int:
    """Run kassign broker ...; returns the exit code."""
    args = build_parser().parse_args(argv)
    try:
        if args.action == "start":
            return _start(args)
        if args.action == "status":
            return _status()
        return _stop(args)
    except BrokerUnavailable as exc:
        raise CLIError(str(exc), "see kassign broker --help, or use --tansu", 1) from exc
