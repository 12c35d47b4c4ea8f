"""kassign's CooperativeConsumer in live groups (group driver, one subprocess per member): a scale-out
keeping what stays put consuming (on both group protocols), mixed clients, and members crashing or
leaving between KIP-429's two rebalances (classic only: the consumer protocol has no such rounds).

Every test checks the group's own timeline: no partition ever has two owners, the group settles
with every partition owned, and every produced record is processed.
"""

from __future__ import annotations

import time

import pytest

pytest.importorskip("aiokafka")

from integration.driver import GroupDriver, GroupTiming  # noqa: E402
from integration.protocols import group_driver, start_kassign_member  # noqa: E402
from integration.timeline_checks import assert_exclusive  # noqa: E402
from kassign.model import TopicPartition  # noqa: E402
from kassign.timeline.events import Event, partition_of  # noqa: E402

COOP = "kassign.adapters.aiokafka:CooperativeStickyAssignor"
CONSUMER = "kassign.adapters.aiokafka:CooperativeConsumer"

pytestmark = pytest.mark.timeout(240)


def _start_cooperative(group: GroupDriver, n: int) -> list[str]:
    return group.start_members(n, "aiokafka", COOP, consumer_factory=CONSUMER)


def _kept(before: dict[str, list[TopicPartition]], after: dict[str, list[TopicPartition]]) -> dict[TopicPartition, str]:
    return {tp: m for m, parts in before.items() for tp in parts if tp in after.get(m, [])}


def _positions(events: list[Event], member: str, tp: TopicPartition, start: float, end: float) -> list[int]:
    out = []
    for e in events:
        if e.id == member and e.ev == "progress" and start <= e.t <= end:
            for key, pos in e.extra.get("pos", {}).items():
                if partition_of(key, tp.topic) == tp:
                    out.append(int(pos))
    return out


def test_scale_out_keeps_kept_partitions_consuming(bootstrap_servers, group_id, topic_factory, group_protocol):
    """3 members to 6 on 12 partitions, on both group protocols (kassign's cooperative-sticky on
    classic, the broker's uniform assignor on consumer): each original member keeps 2 of its 4
    partitions, never revokes them, and keeps consuming them through the rebalance."""
    topic = topic_factory(12)
    with group_driver(bootstrap_servers, group_id, topic, group_protocol, GroupTiming()) as group:
        producer = group.start_producer(rate=300)
        for _ in range(3):
            start_kassign_member(group, group_protocol)
        before = group.wait_settled(40)
        scale_out = time.time()
        for _ in range(3):
            start_kassign_member(group, group_protocol)
        after = group.wait_settled(60)
        settled = time.time()
        time.sleep(1.5)
        producer.stop()
        events = group.wait_all_processed(producer, 30)

    assert_exclusive(events)
    assert all(len(parts) == 2 for parts in after.values()), after
    kept = _kept(before, after)
    assert len(kept) == 6, f"a sticky assignor keeps 2 of each original member's 4 partitions: {kept}"
    for e in events:
        if e.t >= scale_out and e.ev in ("cb_revoked", "cb_lost"):
            taken = {partition_of(p, topic) for p in e.parts or []}
            assert not {tp for tp in taken if kept.get(tp) == e.id}, f"{e.id} gave up a kept partition: {e}"
    for tp, member in kept.items():
        positions = _positions(events, member, tp, scale_out, settled + 1.0)
        assert positions == sorted(positions) and positions[-1] > positions[0], (
            f"{tp} on {member} did not keep advancing through the rebalance: {positions}"
        )


def test_member_crashing_mid_rebalance(bootstrap_servers, group_id, topic_factory):
    topic = topic_factory(8)
    with GroupDriver(bootstrap_servers, group_id, topic) as group:
        producer = group.start_producer(rate=200)
        _start_cooperative(group, 3)
        group.wait_settled(40)
        start = time.time()
        _start_cooperative(group, 2)
        group.wait_for(lambda ev: any(e.ev == "cb_revoked" and e.t > start for e in ev), 30, "first revocation")
        group.crash_member("m2")  # between the revoking rebalance and its follow-up
        after = group.wait_settled(60)
        producer.stop()
        events = group.wait_all_processed(producer, 30)
    assert "m2" not in after and len(after) == 4
    assert_exclusive(events)


def test_leader_leaving_between_the_two_rebalances(bootstrap_servers, group_id, topic_factory):
    topic = topic_factory(8)
    with GroupDriver(bootstrap_servers, group_id, topic) as group:
        producer = group.start_producer(rate=200)
        # m1 joins alone first, so it is the group's leader (the first member to join leads).
        _start_cooperative(group, 1)
        group.wait_settled(40)
        _start_cooperative(group, 2)
        group.wait_settled(40)
        start = time.time()
        _start_cooperative(group, 2)
        group.wait_for(lambda ev: any(e.ev == "cb_revoked" and e.t > start for e in ev), 30, "first revocation")
        group.stop_member("m1")
        after = group.wait_settled(60)
        producer.stop()
        events = group.wait_all_processed(producer, 30)
    assert sorted(after) == ["m2", "m3", "m4", "m5"]
    assert_exclusive(events)


@pytest.mark.java
@pytest.mark.parametrize("kafka_clients", ["3.9.1", "4.4.0"])
def test_mixed_group_converges(bootstrap_servers, group_id, topic_factory, kafka_clients):
    """aiokafka (kassign) + Java CooperativeStickyAssignor (kafka-clients 3.9 and 4.x) + librdkafka
    cooperative-sticky in one group."""
    topic = topic_factory(12)
    with GroupDriver(bootstrap_servers, group_id, topic) as group:
        producer = group.start_producer(rate=200)
        _start_cooperative(group, 1)
        group.wait_settled(40)
        group.start_member("java", "cooperative-sticky", kafka_clients=kafka_clients)
        group.start_member("confluent", "cooperative-sticky")
        mixed = group.wait_settled(90)
        _start_cooperative(group, 1)
        group.wait_for(
            lambda ev: sorted(map(len, group.assignment().values())) == [3, 3, 3, 3],
            90,
            "4 members with 3 partitions each",
        )
        final = group.wait_settled(30)
        producer.stop()
        events = group.wait_all_processed(producer, 30)
    assert len(mixed) == 3 and sorted(map(len, final.values())) == [3, 3, 3, 3]
    assert_exclusive(events)
