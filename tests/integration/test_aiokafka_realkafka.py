"""What needs Apache Kafka itself (Tansu has no protocol voting and no static membership): the
two-bounce upgrade from eager to cooperative, and static members restarting without a rebalance.

One command, with Docker running (testcontainers starts apache/kafka) or against any cluster::

    [KAFKA_BOOTSTRAP_SERVERS=localhost:9092] python -m pytest -m realkafka tests/integration/test_aiokafka_realkafka.py
"""

from __future__ import annotations

import asyncio
import time

import pytest

pytest.importorskip("aiokafka")

from aiokafka import ConsumerRebalanceListener  # noqa: E402
from aiokafka.structs import TopicPartition as TP  # noqa: E402

from integration.driver import GroupDriver, GroupTiming  # noqa: E402
from integration.timeline_checks import assert_exclusive  # noqa: E402
from kassign.adapters.aiokafka import CooperativeConsumer, CooperativeStickyAssignor  # noqa: E402
from kassign.metrics import phase_metrics  # noqa: E402

pytestmark = [pytest.mark.realkafka, pytest.mark.timeout(600)]

CONSUMER = "kassign.adapters.aiokafka:CooperativeConsumer"
RANGE = "kassign.adapters.aiokafka:RangeAssignor"
COOP = "kassign.adapters.aiokafka:CooperativeStickyAssignor"


def _bounce(group: GroupDriver, member: str, strategy) -> str:
    group.stop_member(member)
    new = group.start_member("aiokafka", strategy, consumer_factory=CONSUMER)
    group.wait_settled(90)
    return new


def test_two_rolling_bounces_upgrade_eager_range_to_cooperative(bootstrap_servers, group_id, topic_factory):
    topic = topic_factory(12)
    with GroupDriver(bootstrap_servers, group_id, topic) as group:
        producer = group.start_producer(rate=200)
        members = group.start_members(3, "aiokafka", RANGE, consumer_factory=CONSUMER)
        group.wait_settled(90)
        # Bounce 1: list cooperative-sticky first, keep range: the group votes cooperative-sticky
        # once everybody lists it, but runs eager as long as range is listed.
        members = [_bounce(group, m, [COOP, RANGE]) for m in members]
        # Bounce 2: drop range. Upgraded members rebalance cooperatively from the first restart on.
        for member in members[:-1]:
            _bounce(group, member, [COOP])
        last_bounce = time.time()
        _bounce(group, members[-1], [COOP])
        producer.stop()
        events = group.wait_all_processed(producer, 60)
    assert_exclusive(events)
    final = phase_metrics(events, last_bounce)
    assert final.kept > 0 and final.gap_kept_s == 0.0, f"the last bounce paused kept partitions: {final}"


class Calls(ConsumerRebalanceListener):
    def __init__(self):
        self.calls = []

    def on_partitions_revoked(self, revoked):
        self.calls.append(("revoked", set(revoked)))

    def on_partitions_assigned(self, assigned):
        self.calls.append(("assigned", set(assigned)))


def test_static_member_restarts_without_a_rebalance(bootstrap_servers, group_id, topic_factory):
    topic = topic_factory(6)
    partitions = {TP(topic, p) for p in range(6)}
    timing = GroupTiming(session_ms=10000, heartbeat_ms=1000)

    def consumer(instance, listener):
        c = CooperativeConsumer(bootstrap_servers=bootstrap_servers, group_id=group_id, group_instance_id=instance,
                                partition_assignment_strategy=(CooperativeStickyAssignor,),
                                session_timeout_ms=timing.session_ms, heartbeat_interval_ms=timing.heartbeat_ms,
                                auto_offset_reset="earliest")
        c.subscribe([topic], listener=listener)
        return c

    async def settled(consumers, timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            owned = [c.assignment() for c in consumers]
            if set().union(*owned) == partitions and sum(map(len, owned)) == 6 and all(owned):
                return owned
            await asyncio.gather(*(c.getmany(timeout_ms=100) for c in consumers))
        raise AssertionError("group did not settle")

    async def scenario():
        listeners = [Calls() for _ in range(3)]
        consumers = [consumer(f"static-{i}", lst) for i, lst in enumerate(listeners)]
        for c in consumers:  # static-0 joins first and leads; static-2 is bounced
            await c.start()
        before = await settled(consumers)
        calls_before = [list(lst.calls) for lst in listeners[:2]]
        await consumers[2].stop()  # a static member sends no LeaveGroup
        restarted_listener = Calls()
        consumers[2] = consumer("static-2", restarted_listener)
        await consumers[2].start()
        after = await settled(consumers)
        for _ in range(3 * timing.heartbeat_ms // 100):  # a few heartbeats: would reveal a rebalance
            await asyncio.gather(*(c.getmany(timeout_ms=100) for c in consumers))
        for c in consumers:
            await c.stop()
        return before, after, calls_before, [lst.calls for lst in listeners[:2]], restarted_listener.calls

    before, after, calls_before, calls_after, restarted = asyncio.run(scenario())
    assert after == before
    assert calls_after == calls_before, "the other members saw a rebalance"
    assert restarted == [("assigned", before[2])]
