"""``kassign broker start|stop|status``: a local Apache Kafka (or Tansu) for examples and experiments."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence

from kassign.broker.errors import BrokerUnavailable
from kassign.broker.kafka import DEFAULT_KAFKA_VERSION, settings_help
from kassign.broker.launch import detached_brokers, start_detached, stop_detached
from kassign.broker.security import SECURITY_MODES, ClientSecurity
from kassign.broker.versions import kafka_version
from kassign.cli_errors import CLIError, handles_errors
from kassign.cli_options import ArgumentParser, bounded_int

__all__ = ["main", "build_parser"]

log = logging.getLogger(__name__)


_port = bounded_int("port", 1, 65535, "outside 1-65535")
_brokers = bounded_int("broker count", 1, 9, "a local cluster has 1 to 9 brokers")


def _racks(text: str) -> tuple[str, ...]:
    racks = tuple(r.strip() for r in text.split(","))
    if not all(racks):
        raise argparse.ArgumentTypeError(f"racks {text!r}: give non-empty names separated by commas, e.g. r1,r2,r3")
    return racks


def _user(text: str) -> tuple[str, str | None]:
    name, sep, password = text.partition(":")
    if not name or (sep and not password):
        raise argparse.ArgumentTypeError(f"user {text!r}: give NAME or NAME:PASSWORD, e.g. alice or alice:secret")
    return name, password or None


def _version(text: str) -> str:
    try:
        return kafka_version(text)
    except BrokerUnavailable as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def build_parser() -> argparse.ArgumentParser:
    """The ``kassign broker`` options."""
    ap = ArgumentParser(
        prog="kassign broker",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run Apache Kafka on 127.0.0.1 as a local KRaft process from Maven Central's jars (fetched "
        "once into ~/.cache/kassign with mvn; later starts are offline), or the embedded Tansu. "
        "The broker keeps running after `start` returns; `stop` ends it and deletes its data.",
        epilog="broker settings (bounds and waits only; the group coordinator's logic is Kafka's own):\n"
        + settings_help(),
    )
    sub = ap.add_subparsers(dest="action", required=True, metavar="{start,stop,status}")
    start = sub.add_parser("start", help="start a broker and print its bootstrap address")
    start.add_argument(
        "--version",
        type=_version,
        default=DEFAULT_KAFKA_VERSION,
        dest="kafka_version",
        help="Apache Kafka version, 3.3.0 or newer (default %(default)s; tested: 3.3.2, 3.7.2, 3.9.2, 4.0.2, 4.4.0)",
    )
    start.add_argument("--brokers", type=_brokers, default=1, help="number of brokers (default 1)")
    start.add_argument(
        "--racks",
        type=_racks,
        default=(),
        help="comma-separated racks given to the brokers in turn (broker.rack), e.g. r1,r2,r3",
    )
    start.add_argument("--port", type=_port, default=None, help="client port of the first broker (default: a free one)")
    start.add_argument(
        "--security",
        choices=tuple(SECURITY_MODES),
        default="plaintext",
        help="plaintext (default); sasl-scram (SASL_PLAINTEXT), sasl-ssl (SASL_SSL) or ssl (mutual "
        "TLS): SCRAM-SHA-256/512 users or client certificates from a generated CA, the "
        "StandardAuthorizer and the super user admin (Kafka 3.5+)",
    )
    start.add_argument(
        "--user",
        type=_user,
        action="append",
        default=[],
        metavar="NAME[:PASSWORD]",
        help="another user (no ACLs: grant them as admin); repeatable; password generated if omitted",
    )
    start.add_argument("--tansu", action="store_true", help="start the embedded Tansu broker instead (no Java)")
    start.add_argument("--timeout", type=float, default=90.0, help="seconds to wait for the broker (default 90)")
    stop = sub.add_parser("stop", help="stop the broker(s) started with `kassign broker start`")
    stop.add_argument("--port", type=_port, default=None, help="only the broker on this port (default: all)")
    sub.add_parser("status", help="list the running brokers started with `kassign broker start`")
    return ap


def _start(args: argparse.Namespace) -> int:
    if args.tansu and (args.brokers != 1 or args.racks):
        raise CLIError("--tansu runs one broker without racks", "drop --brokers/--racks")
    if args.tansu and args.security != "plaintext":
        raise CLIError(f"--tansu runs plaintext only, not --security {args.security}", "drop --tansu")
    if args.user and args.security == "plaintext":
        raise CLIError(f"--user {args.user[0][0]} needs a --security mode", "add e.g. --security sasl-ssl")
    info = start_detached(
        tansu=args.tansu,
        version=args.kafka_version,
        brokers=args.brokers,
        racks=args.racks,
        port=args.port,
        startup_timeout=args.timeout,
        security=args.security,
        users=dict(args.user),
    )
    print(f"{info.describe()}")
    print(f"bootstrap: {info.bootstrap}")
    print(f"  export KAFKA_BOOTSTRAP_SERVERS={info.bootstrap}")
    if info.security is not None:
        _print_security(info.bootstrap, info.security)
    print("stop it with: kassign broker stop" + (f" --port {args.port}" if args.port else ""))
    return 0


def _print_security(bootstrap: str, security: ClientSecurity) -> None:
    """The client settings of a secured cluster, to paste: aiokafka/CooperativeConsumer keyword
    arguments for each user, and librdkafka properties for the super user."""
    print(f"security: {security.describe()}")
    for user in sorted(security.users, key=lambda u: (u != "admin", u)):
        print(f"CooperativeConsumer / aiokafka settings for {user} (from aiokafka.helpers import create_ssl_context):")
        print(f'  bootstrap_servers="{bootstrap}",')
        for line in security.aiokafka_lines(user):
            print(f"  {line}")
    print(
        "librdkafka / confluent-kafka settings for admin: "
        + " ".join(f"{k}={v}" for k, v in security.librdkafka_settings().items())
    )


def _status() -> int:
    brokers = detached_brokers()
    if not brokers:
        print("no broker started by `kassign broker start` is running")
        return 1
    for state in brokers:
        name = "Apache Kafka" if state.get("kind") == "kafka" else "Tansu"
        racks = f", racks {','.join(state['racks'])}" if state.get("racks") else ""
        answering = "answering" if state["answering"] else "NOT answering"
        secured = f", {state['security']['security_protocol']}" if state.get("security") else ""
        print(
            f"{name} {state.get('version', '')} at {state['bootstrap']}{secured}: {answering}, "
            f"{state.get('brokers', 1)} broker(s){racks}, {state['rss_mb']:.0f} MB resident, "
            f"supervisor pid {state['supervisor_pid']}"
        )
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
