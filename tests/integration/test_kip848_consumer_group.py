"""kassign's aiokafka consumer on the next-generation consumer group protocol (KIP-848,
``CooperativeConsumer(group_protocol="consumer")``) on Apache Kafka 4.4.0, where the broker assigns:
what only this protocol has (what both protocols share -- a group forming, clean leave, crash,
zombie fencing, static restart, topic deletion -- runs on both in test_both_protocols.py):

* a second instance with a static member's id in use is refused (UNRELEASED_INSTANCE_ID, raised to
  the application; the classic protocol fences the older instance instead);
* a mixed group of kassign and Java (kafka-clients 4.4.0, ``group.protocol=consumer``) members, and
  one of kassign and librdkafka (confluent-kafka, ``group.protocol=consumer``) members;
* a regex subscription resolved by the broker (SubscribedTopicRegex).

The group's session timeout and heartbeat interval are its own (``consumer.session.timeout.ms``,
``consumer.heartbeat.interval.ms``), set short per group as an operator would.
"""

from __future__ import annotations

import asyncio
import time

import pytest

pytest.importorskip("aiokafka")

from aiokafka.structs import TopicPartition as TP  # noqa: E402

from integration.consumers import ListenerCallsWithLost  # noqa: E402
from integration.driver import GroupDriver, GroupTiming  # noqa: E402
from integration.group_config import set_consumer_group_timing  # noqa: E402
from integration.timeline_checks import all_owned_at, assert_exclusive  # noqa: E402
from kassign.adapters.aiokafka import CooperativeConsumer  # noqa: E402
from kassign.adapters.aiokafka.consumer_group_coordinator import GroupProtocolError  # noqa: E402

pytestmark = [pytest.mark.realkafka, pytest.mark.consumer_protocol, pytest.mark.timeout(600)]

CONSUMER = "kassign.adapters.aiokafka:CooperativeConsumer"
#: The group's own timing on the broker (GroupDriver's members get no session timeout on this protocol).
TIMING = GroupTiming(session_ms=3000, heartbeat_ms=300)
JAVA_CLIENTS = "4.4.0"  # group.protocol=consumer is GA from kafka-clients 4.0


def _driver(bootstrap: str, group_id: str, topic: str, timing: GroupTiming = TIMING) -> GroupDriver:
    set_consumer_group_timing(bootstrap, group_id, session_ms=timing.session_ms, heartbeat_ms=timing.heartbeat_ms)
    return GroupDriver(bootstrap, group_id, topic, timing=timing)


def _start(group: GroupDriver, kind: str = "aiokafka", **kwargs) -> str:
    if kind == "aiokafka":
        return group.start_member("aiokafka", "range", consumer_factory=CONSUMER, group_protocol="consumer", **kwargs)
    if kind == "confluent":  # librdkafka 2.12+ speaks KIP-848
        return group.start_member("confluent", "range", group_protocol="consumer", **kwargs)
    return group.start_member("java", "range", kafka_clients=JAVA_CLIENTS, group_protocol="consumer", **kwargs)


def _static(bootstrap, group_id, instance):
    return CooperativeConsumer(
        bootstrap_servers=bootstrap,
        group_id=group_id,
        group_instance_id=instance,
        group_protocol="consumer",
        auto_offset_reset="earliest",
    )


@pytest.mark.asyncio
async def test_a_second_instance_with_a_static_id_in_use_is_refused(bootstrap_servers, group_id, topic_factory):
    """UNRELEASED_INSTANCE_ID is fatal for the newcomer (raised from start()/getmany()); the member
    holding the id keeps its partitions."""
    topic = topic_factory(2)
    set_consumer_group_timing(bootstrap_servers, group_id, session_ms=10000, heartbeat_ms=500)

    async def scenario():
        holder = _static(bootstrap_servers, group_id, "only-one")
        holder.subscribe([topic])
        await holder.start()
        newcomer = _static(bootstrap_servers, group_id, "only-one")
        newcomer.subscribe([topic])
        with pytest.raises(GroupProtocolError) as raised:
            await asyncio.wait_for(newcomer.start(), 30)
        with pytest.raises(GroupProtocolError):
            await newcomer.getmany(timeout_ms=100)
        await holder.getmany(timeout_ms=500)
        kept = holder.assignment()
        await newcomer.stop()
        await holder.stop()
        return raised.value, kept

    error, kept = await scenario()
    assert error.error == "UNRELEASED_INSTANCE_ID"
    assert kept == {TP(topic, 0), TP(topic, 1)}


def test_mixed_group_of_kassign_and_java_members(bootstrap_servers, group_id, topic_factory):
    """kassign and Java (kafka-clients 4.4.0) members in one KIP-848 group: joins, a Java member's
    leave and a kassign member's leave, with exclusive ownership throughout and nothing lost."""
    topic = topic_factory(8)
    with _driver(bootstrap_servers, group_id, topic) as group:
        producer = group.start_producer(rate=200)
        members = [_start(group, "java"), _start(group, "aiokafka")]
        group.wait_settled(90, balanced=True)
        joined = time.time()
        members += [_start(group, "java"), _start(group, "aiokafka")]
        settled = group.wait_settled(90, balanced=True)
        group.stop_member(members[0])
        group.wait_settled(60, balanced=True)
        group.stop_member(members[1])
        final = group.wait_settled(60, balanced=True)
        producer.stop()
        events = group.wait_all_processed(producer, 60)
    assert_exclusive(events)
    assert sorted(len(p) for p in settled.values()) == [2, 2, 2, 2]
    assert set(final) == {members[2], members[3]} and sorted(len(p) for p in final.values()) == [4, 4]
    took = all_owned_at(events, group.partitions, members, joined) - joined
    print(f"\nKIP-848 mixed kassign + Java group, 8 partitions: 2 joins to all 4 members owning {took:.2f} s")
    assert not any(e.ev == "cb_lost" for e in events)


def test_mixed_group_of_kassign_and_librdkafka_members(bootstrap_servers, group_id, topic_factory):
    """kassign and librdkafka (``group.protocol=consumer``) members in one KIP-848 group: joins and a
    librdkafka member's leave, with exclusive ownership from every member's callbacks and nothing lost."""
    topic = topic_factory(6)
    with _driver(bootstrap_servers, group_id, topic) as group:
        producer = group.start_producer(rate=200)
        members = [_start(group, "confluent"), _start(group, "aiokafka")]
        group.wait_settled(90, balanced=True)
        joined = time.time()
        members.append(_start(group, "confluent"))
        settled = group.wait_settled(90, balanced=True)
        group.stop_member(members[0])
        final = group.wait_settled(60, balanced=True)
        producer.stop()
        events = group.wait_all_processed(producer, 60)
    assert_exclusive(events)
    assert sorted(len(p) for p in settled.values()) == [2, 2, 2]
    assert set(final) == {members[1], members[2]} and sorted(len(p) for p in final.values()) == [3, 3]
    took = all_owned_at(events, group.partitions, members, joined) - joined
    print(f"\nKIP-848 mixed kassign + librdkafka group, 6 partitions: a join to all 3 members owning {took:.2f} s")
    assert not any(e.ev == "cb_lost" for e in events)


@pytest.mark.asyncio
async def test_regex_subscription_is_resolved_by_the_broker(bootstrap_servers, group_id, topic_factory):
    """``subscribe(pattern=...)`` sends the pattern as the heartbeat's SubscribedTopicRegex (v1): the
    broker assigns the partitions of every matching topic -- names found by topic id -- and none of
    the others."""
    prefix = f"re-{group_id[-8:]}"
    first, second, other = topic_factory(2, f"{prefix}-a"), topic_factory(1, f"{prefix}-b"), topic_factory(1)
    set_consumer_group_timing(bootstrap_servers, group_id, session_ms=10000, heartbeat_ms=500)

    async def scenario():
        listener = ListenerCallsWithLost()
        consumer = CooperativeConsumer(
            bootstrap_servers=bootstrap_servers, group_id=group_id, group_protocol="consumer", metadata_max_age_ms=1000
        )
        consumer.subscribe(pattern=f"{prefix}-.*", listener=listener)
        await consumer.start()
        deadline = time.monotonic() + 30
        while len(consumer.assignment()) < 3 and time.monotonic() < deadline:
            await consumer.getmany(timeout_ms=100)
        owned = consumer.assignment()
        sent_regex = consumer._coordinator.member.subscribed_regex
        await consumer.stop()
        return owned, listener.calls, sent_regex

    owned, calls, regex = await scenario()
    assert owned == {TP(first, 0), TP(first, 1), TP(second, 0)}
    assert all(tp.topic != other for _, parts in calls for tp in parts)
    assert regex == f"{prefix}-.*"


def test_the_groups_assignment_interval_is_set_with_its_timing(bootstrap_servers, group_id):
    """consumer.assignment.interval.ms (KIP-1263), the lever of KIP-848's cost on scale-out
    (docs/benchmarks.md), is set per group beside the session timeout and heartbeat interval."""
    from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

    with pytest.raises(ValueError, match="assignment_interval_ms >= 0, got -1"):
        set_consumer_group_timing(
            bootstrap_servers, group_id, session_ms=6000, heartbeat_ms=500, assignment_interval_ms=-1
        )
    set_consumer_group_timing(bootstrap_servers, group_id, session_ms=6000, heartbeat_ms=500, assignment_interval_ms=0)
    admin = AdminClient({"bootstrap.servers": bootstrap_servers, "log_level": 3})
    (future,) = admin.describe_configs([ConfigResource(ResourceType.GROUP, group_id)]).values()
    configs = {name: entry.value for name, entry in future.result(timeout=20).items()}
    assert configs["consumer.assignment.interval.ms"] == "0"
    assert configs["consumer.session.timeout.ms"] == "6000"
    assert configs["consumer.heartbeat.interval.ms"] == "500"
