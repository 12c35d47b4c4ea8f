"""Online migration of a live group between the classic protocol and KIP-848's, on Apache Kafka 4.4.0.

A classic group of three kassign ``CooperativeConsumer`` members and one Java member (kafka-clients
4.4.0, cooperative-sticky) under a steady keyed load is moved to the consumer protocol by a rolling
bounce (each member closed and replaced by one with ``group.protocol=consumer``), then back by a
second rolling bounce, as Kafka 4's ``group.consumer.migration.policy`` (``bidirectional`` by
default) allows: the broker converts the group when the first consumer-protocol member joins, runs a
mixed group meanwhile (its classic members get the broker's assignment through JoinGroup/SyncGroup),
and converts it back when the last consumer-protocol member leaves.

Checked from every member's own callbacks: no partition owned by two members at once, at any point of
either bounce; no record lost; the group's type (ConsumerGroupDescribe / DescribeGroups) after each
bounce. Measured: the unowned partition-seconds of each bounce, printed (``-s``).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import pytest

pytest.importorskip("aiokafka")
pytest.importorskip("confluent_kafka")

from integration.driver import GroupDriver, GroupTiming  # noqa: E402
from integration.timeline_checks import assert_exclusive  # noqa: E402
from kassign.broker.group_config import consumer_group_type, set_consumer_group_timing  # noqa: E402
from kassign.timeline.metrics import (  # noqa: E402
    GONE_EVENTS,
    change_settles,
    kept_partitions,
    ownership_intervals,
    unowned_partition_seconds,
)

pytestmark = [pytest.mark.realkafka, pytest.mark.consumer_protocol, pytest.mark.timeout(900)]

CONSUMER = "kassign.adapters.aiokafka:CooperativeConsumer"
COOPERATIVE_STICKY = "kassign.adapters.aiokafka:CooperativeStickyAssignor"
JAVA_CLIENTS = "4.4.0"  # speaks both protocols
#: Classic members' session timeout and heartbeat interval, and the group's own on the consumer protocol.
TIMING = GroupTiming(session_ms=3000, heartbeat_ms=300)
KINDS = ("aiokafka", "aiokafka", "java", "aiokafka")


@dataclass(frozen=True)
class Bounce:
    """One member replaced: when it began, the protocol the replacement speaks, its unowned partition-seconds."""

    slot: int
    kind: str
    protocol: str
    start: float
    settle: float
    unowned_ps: float
    kept: int
    group_type: str


def _start(group: GroupDriver, kind: str, protocol: str, *, hold: bool = False) -> str:
    if kind == "aiokafka":
        strategy = "range" if protocol == "consumer" else COOPERATIVE_STICKY
        return group.start_member("aiokafka", strategy, consumer_factory=CONSUMER, group_protocol=protocol, hold=hold)
    return group.start_member(
        "java", "cooperative-sticky", kafka_clients=JAVA_CLIENTS, group_protocol=protocol, hold=hold
    )


def _rolling_bounce(group: GroupDriver, bootstrap: str, members: list[str], protocol: str) -> list[Bounce]:
    """Replace every member, one at a time, by one speaking ``protocol``: the replacement is started
    and ready first, subscribes once its predecessor's consumer has closed, and the group settles
    (balanced) before the next."""
    bounces = []
    for slot, member in enumerate(list(members)):
        kind = KINDS[slot]
        replacement = _start(group, kind, protocol, hold=True)
        group.wait_ready(replacement, 90)
        start = time.time()
        group.hand_over(member, replacement)
        group.wait_settled(120, balanced=True)
        members[slot] = replacement
        events = group.events()
        (settle,) = change_settles(events, [start], math.inf)
        intervals = ownership_intervals(events, release_events=GONE_EVENTS)
        bounces.append(
            Bounce(
                slot,
                kind,
                protocol,
                start,
                settle,
                unowned_partition_seconds(intervals, group.partitions, start, settle),
                len(kept_partitions(intervals, start, settle)),
                consumer_group_type(bootstrap, group.group_id),
            )
        )
    return bounces


def test_rolling_bounce_to_the_consumer_protocol_and_back(bootstrap_servers, group_id, topic_factory):
    topic = topic_factory(12)
    set_consumer_group_timing(
        bootstrap_servers, group_id, session_ms=TIMING.session_ms, heartbeat_ms=TIMING.heartbeat_ms
    )
    with GroupDriver(bootstrap_servers, group_id, topic, timing=TIMING) as group:
        producer = group.start_producer(rate=300)
        members = [_start(group, kind, "classic") for kind in KINDS]
        group.wait_settled(120, balanced=True)
        before = consumer_group_type(bootstrap_servers, group_id)
        time.sleep(1.0)
        upgrade = _rolling_bounce(group, bootstrap_servers, members, "consumer")
        time.sleep(1.0)
        downgrade = _rolling_bounce(group, bootstrap_servers, members, "classic")
        time.sleep(1.0)
        producer.stop()
        events = group.wait_all_processed(producer, 90)  # raises if a record was never processed
    print("\nonline migration, 12 partitions, 3 kassign + 1 Java member, unowned partition-seconds per bounce:")
    for b in upgrade + downgrade:
        print(
            f"  slot {b.slot} ({b.kind}) -> {b.protocol}: {b.unowned_ps:.2f} ps, settled in "
            f"{b.settle - b.start:.2f} s, {b.kept}/12 partitions kept their owner, group type {b.group_type}"
        )
    assert_exclusive(events)
    assert before == "classic"
    # The first consumer-protocol member converts the group; it stays a consumer group (mixed) until
    # the last one leaves, and then is classic again.
    assert [b.group_type for b in upgrade] == ["consumer"] * len(KINDS)
    assert [b.group_type for b in downgrade] == ["consumer"] * (len(KINDS) - 1) + ["classic"]
    # No bounce stops the world, not even the ones that convert the group: the leaver's 3 partitions
    # move, and at most as many again to rebalance; the rest keep their owner throughout.
    for b in upgrade + downgrade:
        assert b.settle - b.start < 10, f"bounce of slot {b.slot} to {b.protocol} took {b.settle - b.start:.1f} s"
        assert b.kept >= 6, f"bounce of slot {b.slot} to {b.protocol}: only {b.kept}/12 partitions kept their owner"
    lost = [e for e in events if e.ev == "cb_lost" and e.parts]
    assert not lost, f"partitions lost during a clean migration: {lost[:3]}"
