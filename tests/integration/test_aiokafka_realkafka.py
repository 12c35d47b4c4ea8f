"""What needs Apache Kafka's group coordinator (Tansu has no protocol voting and no static
membership): the two-bounce upgrade from eager to cooperative, and a static member fencing its
replaced instance. (A static member restarting without a rebalance runs on both group protocols in
test_both_protocols.py.)

    python -m pytest -m realkafka tests/integration/test_aiokafka_realkafka.py
"""

from __future__ import annotations

import asyncio
import time

import pytest

pytest.importorskip("aiokafka")

from aiokafka.structs import TopicPartition as TP  # noqa: E402

from integration.consumers import ListenerCalls, wait_consumers_held  # noqa: E402
from integration.driver import GroupDriver, GroupTiming  # noqa: E402
from integration.timeline_checks import assert_exclusive  # noqa: E402
from kassign.adapters.aiokafka import CooperativeConsumer, CooperativeStickyAssignor, FencedInstanceIdError  # noqa: E402
from kassign.timeline.metrics import phase_metrics  # noqa: E402

pytestmark = [pytest.mark.realkafka, pytest.mark.timeout(600)]

CONSUMER = "kassign.adapters.aiokafka:CooperativeConsumer"
RANGE = "kassign.adapters.aiokafka:RangeAssignor"
COOP = "kassign.adapters.aiokafka:CooperativeStickyAssignor"


def _bounce(group: GroupDriver, member: str, strategy) -> str:
    kind = group.member_kind(member)
    group.stop_member(member)
    factory = {"consumer_factory": CONSUMER} if kind == "aiokafka" else {}
    new = group.start_member(kind, strategy, **factory)
    group.wait_settled(90, balanced=True)
    return new


#: Each client's strategy lists for the three stages: eager range; cooperative-sticky preferred with
#: range still listed (the group keeps voting range and rebalancing eagerly while anybody lacks
#: cooperative-sticky); cooperative-sticky alone. librdkafka refuses to list an eager and a
#: cooperative assignor together, so it stays on range in the first bounce and switches first in the
#: second (while everybody else still lists range next to cooperative-sticky).
STAGES = {
    "aiokafka": (RANGE, [COOP, RANGE], [COOP]),
    "java": ("range", ["cooperative-sticky", "range"], ["cooperative-sticky"]),
    "confluent": ("range", "range", "cooperative-sticky"),
}


def test_two_rolling_bounces_upgrade_eager_range_to_cooperative(bootstrap_servers, group_id, topic_factory):
    """aiokafka (kassign), Java and librdkafka members move from eager range to cooperative-sticky in two
    rolling bounces while consuming: every partition single-owned throughout, nothing lost, and the
    last bounce, fully cooperative, pauses no kept partition."""
    topic = topic_factory(12)
    with GroupDriver(bootstrap_servers, group_id, topic) as group:
        producer = group.start_producer(rate=200)
        members = []
        for kind in ("aiokafka", "java", "confluent", "aiokafka"):
            factory = {"consumer_factory": CONSUMER} if kind == "aiokafka" else {}
            members.append(group.start_member(kind, STAGES[kind][0], **factory))
        group.wait_settled(90, balanced=True)
        members = [_bounce(group, m, STAGES[group.member_kind(m)][1]) for m in members]
        members.sort(key=lambda m: group.member_kind(m) != "confluent")  # stable: the aiokafka one stays last
        for member in members[:-1]:
            _bounce(group, member, STAGES[group.member_kind(member)][2])
        last_bounce = time.time()
        _bounce(group, members[-1], STAGES[group.member_kind(members[-1])][2])
        producer.stop()
        events = group.wait_all_processed(producer, 60)
    assert_exclusive(events)
    final = phase_metrics(events, last_bounce)
    assert final.kept > 0 and final.gap_kept_s == 0.0, f"the last bounce paused kept partitions: {final}"


def _static_consumer(bootstrap_servers, group_id, instance, timing):
    return CooperativeConsumer(
        bootstrap_servers=bootstrap_servers,
        group_id=group_id,
        group_instance_id=instance,
        partition_assignment_strategy=(CooperativeStickyAssignor,),
        session_timeout_ms=timing.session_ms,
        heartbeat_interval_ms=timing.heartbeat_ms,
        auto_offset_reset="earliest",
    )


@pytest.mark.asyncio
async def test_a_replaced_static_member_is_fenced(bootstrap_servers, group_id, topic_factory):
    """A second instance started with a running static member's group.instance.id takes its place:
    it gets the old instance's partitions with no rebalance for the others, and the old instance is
    fenced for good (FENCED_INSTANCE_ID): it loses its partitions, raises from getmany and never rejoins
    (without the instance id in its heartbeats the two would keep taking the id from each other)."""
    topic = topic_factory(4)
    partitions = {TP(topic, p) for p in range(4)}
    timing = GroupTiming(session_ms=10000, heartbeat_ms=500)

    async def scenario():
        listeners = [ListenerCalls(), ListenerCalls()]
        consumers = [_static_consumer(bootstrap_servers, group_id, f"static-{i}", timing) for i in range(2)]
        for c, lst in zip(consumers, listeners):
            c.subscribe([topic], listener=lst)
            await c.start()
        before = await wait_consumers_held(consumers, partitions, 3 * timing.heartbeat_ms / 1000, balanced=True)
        calls_before = list(listeners[0].calls)
        replacement = _static_consumer(bootstrap_servers, group_id, "static-1", timing)
        replacement.subscribe([topic])
        await replacement.start()
        raised = []
        deadline = time.monotonic() + 8 * timing.heartbeat_ms / 1000
        while time.monotonic() < deadline:
            results = await asyncio.gather(
                *(c.getmany(timeout_ms=100) for c in (*consumers, replacement)), return_exceptions=True
            )
            raised += [r for r in results if isinstance(r, BaseException)]
        after = (consumers[0].assignment(), consumers[1].assignment(), replacement.assignment())
        calls_after = list(listeners[0].calls)
        for c in (*consumers, replacement):
            await c.stop()
        return before, after, raised, calls_before, calls_after, listeners[1].calls

    before, after, raised, calls_before, calls_after, old_calls = await scenario()
    kept, old, new = after
    assert kept == before[0] and new == before[1] and not old, after
    assert raised and all(isinstance(e, FencedInstanceIdError) for e in raised), raised
    assert calls_after == calls_before, "the untouched member saw a rebalance"
    assert old_calls[-1] == ("revoked", set(before[1])), old_calls  # lost (no on_partitions_lost here)
