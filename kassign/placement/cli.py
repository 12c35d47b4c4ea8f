"""kassign replicas plan: plan a topic's replica placement as Kafka does, print it, write the
kafka-reassign-partitions JSON, or create the topic with that explicit placement.

    kassign replicas plan --brokers 0:r1,1:r2,2:r3 --partitions 12 --replication-factor 3 \\
        --topic orders --out plan.json [--start-index 0]
    kassign replicas plan --bootstrap-servers localhost:9092 --partitions 6 --replication-factor 1 \\
        --topic orders --create

Brokers are sorted by id before planning, as Kafka's admin tools pass them. Without
--brokers, the brokers and their racks are read from the cluster at --bootstrap-servers.
confluent-kafka is imported only for --create and broker discovery.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from kassign.cli_errors import CLIError, handles_errors
from kassign.cli_options import MAX_PARTITIONS_PER_TOPIC, ArgumentParser, bounded_int, finite_float
from kassign.placement.plan import reassignment_json, summarize
from kassign.placement.replica_assignment import assign_replicas_to_brokers

__all__ = ["main", "parse_brokers"]


def parse_brokers(spec: str) -> dict[int, str | None]:
    """``"0:r1,1:r2,2"`` -> ``{0: "r1", 1: "r2", 2: None}``, sorted by broker id."""
    brokers: dict[int, str | None] = {}
    for item in filter(None, (part.strip() for part in spec.split(","))):
        broker_id, _, rack = item.partition(":")
        try:
            broker = int(broker_id)
        except ValueError:
            raise ValueError(f"broker id must be an integer, got {broker_id!r} in {item!r}") from None
        if broker in brokers:
            raise ValueError(f"broker {broker} is listed twice in {spec!r}")
        brokers[broker] = rack.strip() or None
    if not brokers:
        raise ValueError(f"no brokers in {spec!r}")
    return dict(sorted(brokers.items()))


def _admin(bootstrap: str):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})


def _discover_brokers(bootstrap: str, timeout: float) -> dict[int, str | None]:
    admin = _admin(bootstrap)  # keep the handle alive until the future resolves
    cluster = admin.describe_cluster(request_timeout=timeout).result(timeout=timeout)
    return dict(sorted((node.id, node.rack or None) for node in cluster.nodes))


def _create_topic(bootstrap: str, topic: str, assignment: dict[int, list[int]], timeout: float) -> None:
    from confluent_kafka.admin import NewTopic

    admin = _admin(bootstrap)  # keep the handle alive until the future resolves
    replicas = [assignment[p] for p in sorted(assignment)]
    # librdkafka wants the partition count spelled out next to an explicit replica assignment.
    new_topic = NewTopic(topic, num_partitions=len(replicas), replica_assignment=replicas)
    futures = admin.create_topics([new_topic], operation_timeout=timeout, request_timeout=timeout)
    futures[topic].result(timeout=timeout)


def _parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(prog="kassign replicas", description="Plan Kafka replica placement (rack-aware).")
    sub = parser.add_subparsers(dest="action", required=True)
    plan = sub.add_parser(
        "plan",
        help="plan a topic's replica placement",
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    plan.add_argument("--brokers", help="broker ids with optional racks: 0:r1,1:r2,... (default: ask the cluster)")
    plan.add_argument(
        "--partitions",
        type=bounded_int("the partition count", 1, MAX_PARTITIONS_PER_TOPIC),
        required=True,
        help=f"number of partitions (1 to {MAX_PARTITIONS_PER_TOPIC:,})",
    )
    plan.add_argument(
        "--replication-factor",
        type=bounded_int("the replication factor", 1, 32767),
        required=True,
        help="replicas per partition",
    )
    plan.add_argument("--topic", default="my-topic", help="topic name for the JSON and --create (default: my-topic)")
    plan.add_argument("--out", help="write the kafka-reassign-partitions JSON here ('-' for stdout)")
    plan.add_argument(
        "--start-index",
        type=int,
        default=-1,
        help="fixed start index (and initial shift) for a reproducible plan; -1 = random, as Kafka",
    )
    plan.add_argument("--start-partition", type=int, default=-1, help="first partition id (default 0)")
    plan.add_argument("--create", action="store_true", help="create the topic with this placement")
    plan.add_argument("--bootstrap-servers", help="cluster for --create, or to discover brokers and racks")
    plan.add_argument(
        "--timeout",
        type=finite_float("the timeout (s)", 0, 3600, low_inclusive=False),
        default=30.0,
        help="seconds to wait for the cluster (default 30)",
    )
    return parser


def _check_out(out: str | None) -> None:
    """Fail before printing anything when --out cannot be written."""
    if not out or out == "-":
        return
    path = Path(out)
    if path.is_dir():
        raise CLIError(f"--out {out} is a directory", "give a file name, e.g. --out plan.json")
    if not path.parent.is_dir():
        raise CLIError(f"--out {out}: directory {path.parent} does not exist", "create it first or pick another path")


@handles_errors("replicas")
def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of kassign replicas; returns the exit code."""
    args = _parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    _check_out(args.out)
    if args.create and not args.bootstrap_servers:
        raise CLIError("--create needs --bootstrap-servers", "add --bootstrap-servers HOST:PORT")
    if args.brokers is None and not args.bootstrap_servers:
        raise CLIError("no brokers given", "give --brokers, or --bootstrap-servers to read them from the cluster")
    if args.brokers is None:
        try:
            brokers = _discover_brokers(args.bootstrap_servers, args.timeout)
        except Exception as exc:  # the admin client's KafkaException carries the reason
            raise CLIError(
                f"reading brokers from {args.bootstrap_servers} failed: {exc}",
                "check that the cluster is up, or give --brokers",
                1,
            ) from exc
    else:
        brokers = parse_brokers(args.brokers)
    assignment = assign_replicas_to_brokers(
        brokers,
        args.partitions,
        args.replication_factor,
        fixed_start_index=args.start_index,
        start_partition_id=args.start_partition,
    )
    document = reassignment_json(args.topic, assignment)

    # With the JSON on stdout, the human-readable plan goes to stderr so stdout stays parseable.
    report = sys.stderr if args.out == "-" else sys.stdout
    racked = all(rack is not None for rack in brokers.values())
    print(
        f"topic {args.topic}: {args.partitions} partitions x {args.replication_factor} replicas on "
        f"{len(brokers)} brokers ({'rack-aware' if racked else 'rack-unaware'})",
        file=report,
    )
    for partition, replicas in assignment.items():
        racks = f"  racks {[brokers[b] for b in replicas]}" if racked else ""
        print(f"  partition {partition}: replicas {replicas}{racks}", file=report)
    print(summarize(assignment, brokers).render(), file=report)

    # One partition per line: diffable, and still the JSON kafka-reassign-partitions.sh reads.
    rows = ",\n    ".join(json.dumps(entry) for entry in document["partitions"])
    text = f'{{"version": {document["version"]}, "partitions": [\n    {rows}\n]}}\n'

    if args.out == "-":
        sys.stdout.write(text)
    elif args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            fh.write(text)
        print(f"wrote {args.out}", file=report)

    if args.create:
        try:
            _create_topic(args.bootstrap_servers, args.topic, assignment, args.timeout)
        except Exception as exc:  # the admin client's KafkaException carries the broker's reason
            raise CLIError(
                f"creating topic {args.topic!r} failed: {exc}",
                "check the cluster, or that the topic does not exist yet",
                1,
            ) from exc
        print(f"created topic {args.topic} with this placement", file=report)
    return 0
