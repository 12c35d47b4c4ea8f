"""kassign's opt-in fast follow-up on a live group: a cooperative scale-out with ``fast_follow_up=True``
keeps every partition single-owned, settles, and loses no record (13-17 s on Tansu); in the ``slow``
set, Java and librdkafka members in a group whose kassign leader marks (about 17 s). The rules
themselves are unit-tested without a broker in tests/adapters/test_aiokafka_fast_follow_up.py."""

from __future__ import annotations

import time

import pytest

pytest.importorskip("aiokafka")

from integration.driver import GroupDriver  # noqa: E402
from integration.timeline_checks import assert_all_processed, assert_exclusive  # noqa: E402

COOP = "kassign.adapters.aiokafka:CooperativeStickyAssignor"
FAST = "benchmarks.rebalance:fast_follow_up_consumer"

pytestmark = pytest.mark.timeout(120)


def test_scale_out_with_fast_follow_up_is_exclusive_settles_and_loses_nothing(
    bootstrap_servers, group_id, topic_factory
):
    topic = topic_factory(8)
    with GroupDriver(bootstrap_servers, group_id, topic) as group:
        producer = group.start_producer(rate=200)
        group.start_members(2, "aiokafka", COOP, consumer_factory=FAST)
        group.wait_settled(40)
        scale_out = time.time()
        group.start_members(2, "aiokafka", COOP, consumer_factory=FAST)
        after = group.wait_settled(60)
        time.sleep(1.0)
        producer.stop()
        events = group.wait_all_processed(producer, 30)
        produced = producer.produced()

    assert_exclusive(events)
    assert_all_processed(events, produced, topic)
    assert sorted(len(parts) for parts in after.values()) == [2, 2, 2, 2], after
    # Cooperative: the two first members gave up only what moved (two partitions each), never all.
    revoked = [e for e in events if e.ev == "cb_revoked" and e.t >= scale_out and e.parts]
    assert revoked and all(len(e.parts) <= 2 for e in revoked), revoked


@pytest.mark.slow
@pytest.mark.java
def test_java_and_librdkafka_members_take_marked_assignments(bootstrap_servers, group_id, topic_factory):
    """A kassign leader with the fast follow-up on marks the assignments it sends to a Java and a
    librdkafka cooperative-sticky member; they read them as usual (about 40 s on Tansu)."""
    topic = topic_factory(12)
    with GroupDriver(bootstrap_servers, group_id, topic) as group:
        producer = group.start_producer(rate=200)
        group.start_member("aiokafka", COOP, consumer_factory=FAST)
        group.wait_settled(40)
        group.start_member("java", "cooperative-sticky")
        group.start_member("confluent", "cooperative-sticky")
        mixed = group.wait_settled(90)
        group.start_member("aiokafka", COOP, consumer_factory=FAST)
        group.wait_for(
            lambda ev: sorted(map(len, group.assignment().values())) == [3, 3, 3, 3],
            90,
            "4 members with 3 partitions each",
        )
        final = group.wait_settled(30)
        producer.stop()
        events = group.wait_all_processed(producer, 30)
        produced = producer.produced()
    assert len(mixed) == 3 and sorted(map(len, final.values())) == [3, 3, 3, 3]
    # m1 owned all 12 when the others joined, so that round withheld partitions: it was marked.
    assert any(e.id == "m1" and e.ev == "cb_revoked" and e.parts for e in events)
    assert_exclusive(events)
    assert_all_processed(events, produced, topic)
