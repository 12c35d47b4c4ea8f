"""Measure what a kassign group does when the broker ends SASL sessions (KIP-368 re-authentication).

The broker runs with ``connections.max.reauth.ms`` (10 s by default here) and SCRAM over SASL_PLAINTEXT
(``start_kafka(security="sasl-scram")``). Java clients re-authenticate on a live connection before the
session expires (SaslAuthenticate v1+); aiokafka 0.14 does not, so the broker closes each of its
connections when the session's lifetime ends. Two ``CooperativeConsumer`` members consume a steadily
produced topic for ``--seconds`` on each group protocol; the script counts rebalance callbacks after
the group settled, raises from ``getmany``, warning/error log lines, and unowned partition-seconds
(sampled every 100 ms). A measurement, not a test::

    flock /tmp/broker-tests.lock python tests/integration/measure_reauth.py --seconds 120
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import logging
import time
import uuid

from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError
from aiokafka.structs import TopicPartition as TP

from integration.consumers import ListenerCallsWithLost
from kassign.adapters.aiokafka import CooperativeConsumer
from kassign.broker import BrokerInfo, start_kafka

log = logging.getLogger("measure_reauth")


class _Counter(logging.Handler):
    """Counts warning/error records by logger and message head."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: collections.Counter[str] = collections.Counter()

    def emit(self, record: logging.LogRecord) -> None:
        self.lines[f"{record.name}: {record.getMessage()[:110]}"] += 1


async def _measure(info: BrokerInfo, protocol: str, seconds: float, partitions: int = 4) -> dict:
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    settings = info.client_settings()
    topic = f"t-reauth-{uuid.uuid4().hex[:8]}"
    admin = AIOKafkaAdminClient(bootstrap_servers=info.bootstrap, **settings)
    await admin.start()
    await admin.create_topics([NewTopic(topic, partitions, 1)])
    await admin.close()
    everything = {TP(topic, p) for p in range(partitions)}
    producer = AIOKafkaProducer(bootstrap_servers=info.bootstrap, **settings)
    await producer.start()
    group = f"g-reauth-{protocol}-{uuid.uuid4().hex[:6]}"
    timing = {"session_timeout_ms": 10000, "heartbeat_interval_ms": 1000} if protocol == "classic" else {}
    members = [
        CooperativeConsumer(
            bootstrap_servers=info.bootstrap,
            group_id=group,
            group_protocol=protocol,
            auto_offset_reset="earliest",
            **timing,
            **settings,
        )
        for _ in range(2)
    ]
    calls = [ListenerCallsWithLost() for _ in members]
    raised: collections.Counter[str] = collections.Counter()
    consumed = 0
    stop = asyncio.Event()

    async def produce() -> None:
        i = 0
        while not stop.is_set():
            try:
                await producer.send(topic, str(i).encode(), partition=i % partitions)
            except KafkaError as exc:
                raised[f"producer: {type(exc).__name__}"] += 1
            i += 1
            await asyncio.sleep(0.02)  # 50 records/s

    async def consume(member: CooperativeConsumer) -> None:
        nonlocal consumed
        while not stop.is_set():
            try:
                batches = await member.getmany(timeout_ms=200)
                consumed += sum(len(r) for r in batches.values())
            except KafkaError as exc:
                raised[f"getmany: {type(exc).__name__}: {str(exc)[:80]}"] += 1
                await asyncio.sleep(0.2)

    for member, listener in zip(members, calls):
        await member.start()
        member.subscribe([topic], listener=listener)
    tasks = [asyncio.ensure_future(produce())] + [asyncio.ensure_future(consume(m)) for m in members]
    deadline = time.monotonic() + 60
    while not (set().union(*(m.assignment() for m in members)) == everything and all(m.assignment() for m in members)):
        if time.monotonic() > deadline:
            raise AssertionError("the group did not settle in 60 s")
        await asyncio.sleep(0.1)
    settled_calls = [len(c.calls) for c in calls]
    counter = _Counter()
    logging.getLogger().addHandler(counter)
    unowned = 0.0
    began = last = time.monotonic()
    while time.monotonic() - began < seconds:
        await asyncio.sleep(0.1)
        now = time.monotonic()
        owned = set().union(*(m.assignment() for m in members))
        unowned += len(everything - owned) * (now - last)
        last = now
    logging.getLogger().removeHandler(counter)
    stop.set()
    for task in tasks:
        await task
    after = [c.calls[n:] for c, n in zip(calls, settled_calls)]
    for member in members:
        await member.stop()
    await producer.stop()
    return {
        "protocol": protocol,
        "seconds": round(seconds),
        "reauth_ms": 10000,
        "rebalance_callbacks": sum(len(a) for a in after),
        "callbacks": [[kind, sorted(p.partition for p in parts)] for a in after for kind, parts in a],
        "getmany_raises": dict(raised),
        "warning_lines": sum(counter.lines.values()),
        "warning_kinds": dict(counter.lines.most_common(6)),
        "unowned_partition_s": round(unowned, 2),
        "consumed": consumed,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=120.0)
    ap.add_argument("--reauth-ms", type=int, default=10000, help="connections.max.reauth.ms (0: off, a baseline)")
    ap.add_argument("--protocols", default="classic,consumer")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    settings = {
        "group.consumer.heartbeat.interval.ms": "1000",
        "group.consumer.session.timeout.ms": "10000",
        "connections.max.reauth.ms": str(args.reauth_ms),
    }
    with start_kafka(security="sasl-scram", settings=settings) as info:
        for protocol in args.protocols.split(","):
            result = asyncio.run(_measure(info, protocol, args.seconds))
            result["reauth_ms"] = args.reauth_ms
            print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
