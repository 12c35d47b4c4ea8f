"""A mixed consumer group: one confluent-kafka (librdkafka) member and one aiokafka member, both
on the ``cooperative-sticky`` protocol, sharing one topic.

kassign's aiokafka consumer speaks Kafka's consumer protocol (v3 subscriptions, the same protocol
name and user data), so whichever member the broker makes leader, the other reads its assignment,
and both rebalance incrementally. The librdkafka member runs in a thread, the aiokafka member on
the asyncio loop; a few seconds in, the aiokafka member joins the librdkafka one.

    python examples/mixed_group.py --bootstrap localhost:9092 --seconds 20

At the end it prints one JSON line: each member's final assignment and records consumed.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
import time
import uuid

from _support import common_parser, ensure_topic, produce, run_example
from kassign.adapters.aiokafka import CooperativeConsumer, CooperativeStickyAssignor

log = logging.getLogger("mixed-group")


def run_librdkafka_member(
    bootstrap: str, group: str, topic: str, stop: threading.Event, snapshot: threading.Event, report: dict
) -> None:
    """A confluent-kafka consumer with cooperative-sticky; incremental callbacks keep its assignment.

    Its final assignment is taken when ``snapshot`` is set (while the aiokafka member is still in the
    group: once that one leaves, this one owns everything again)."""
    from confluent_kafka import Consumer

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "client.id": "librdkafka-member",
            "partition.assignment.strategy": "cooperative-sticky",
            "session.timeout.ms": report["session_ms"],
            "heartbeat.interval.ms": report["heartbeat_ms"],
            "auto.offset.reset": "earliest",
            "enable.auto.commit": True,
            "log_level": 3,
        }
    )
    owned: set[int] = set()

    def on_assign(c, partitions):
        owned.update(p.partition for p in partitions)  # cooperative: only the new ones
        log.info("librdkafka member assigned %s, owns %s", [p.partition for p in partitions], sorted(owned))

    def on_revoke(c, partitions):
        owned.difference_update(p.partition for p in partitions)
        log.info("librdkafka member revoked %s, owns %s", [p.partition for p in partitions], sorted(owned))

    consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_revoke)
    consumed = 0
    try:
        while not stop.is_set():
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                consumed += 1
            if snapshot.is_set() and "final" not in report:
                report["final"] = sorted(owned)
        report.setdefault("final", sorted(owned))
        report["consumed"] = consumed
    finally:
        consumer.close()  # revokes and leaves the group


async def run_aiokafka_member(
    bootstrap: str, group: str, topic: str, seconds: float, report: dict, snapshot: threading.Event, peer_report: dict
) -> None:
    """kassign's CooperativeConsumer: the same protocol name, so it joins the librdkafka member's group."""
    consumer = CooperativeConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        client_id="aiokafka-member",
        partition_assignment_strategy=(CooperativeStickyAssignor,),
        session_timeout_ms=report["session_ms"],
        heartbeat_interval_ms=report["heartbeat_ms"],
        auto_offset_reset="earliest",
    )
    consumer.subscribe([topic])
    await consumer.start()
    consumed = 0
    try:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            batches = await consumer.getmany(timeout_ms=200)
            consumed += sum(len(records) for records in batches.values())
        report["final"] = sorted(tp.partition for tp in consumer.assignment())
        report["consumed"] = consumed
        snapshot.set()  # the peer's final assignment, taken while both are still members
        for _ in range(50):
            if "final" in peer_report:
                break
            await asyncio.sleep(0.1)
    finally:
        await consumer.stop()


async def main_async(args) -> dict:
    topic = args.topic or f"kassign-example-mixed-{uuid.uuid4().hex[:8]}"
    group = args.group or f"kassign-example-mixed-{uuid.uuid4().hex[:8]}"
    await ensure_topic(args.bootstrap, topic, args.partitions)
    timing = {"session_ms": args.session_ms, "heartbeat_ms": args.heartbeat_ms}
    rdkafka, aio = dict(timing), dict(timing)
    stop, snapshot = threading.Event(), threading.Event()
    thread = threading.Thread(
        target=run_librdkafka_member,
        args=(args.bootstrap, group, topic, stop, snapshot, rdkafka),
        name="librdkafka-member",
    )
    thread.start()
    feeding = asyncio.create_task(produce(args.bootstrap, topic, 50, args.seconds))
    try:
        await asyncio.sleep(args.seconds / 4)  # let the librdkafka member take every partition first
        await run_aiokafka_member(args.bootstrap, group, topic, args.seconds * 3 / 4, aio, snapshot, rdkafka)
    finally:
        stop.set()
        await asyncio.to_thread(thread.join)
        await feeding
    return {"topic": topic, "group": group, "librdkafka": rdkafka, "aiokafka": aio}


def main(argv: list[str] | None = None) -> int:
    ap = common_parser("a confluent-kafka and an aiokafka member in one cooperative-sticky group")
    ap.add_argument("--topic", default=None, help="default: a fresh topic")
    ap.add_argument("--group", default=None, help="default: a fresh group id")
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--session-ms", type=int, default=6000)
    ap.add_argument("--heartbeat-ms", type=int, default=500)
    return run_example(ap, argv, main_async)


if __name__ == "__main__":
    sys.exit(main())
