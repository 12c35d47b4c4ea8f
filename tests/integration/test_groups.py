"""Live consumer groups on the session broker: end states and invariants, never round counts.

Every test polls for the settled state with a deadline (rebalance timing is the broker's) and then
checks, over the whole timeline recorded from the members' own callbacks: no partition owned by two
members at once, every partition owned after settling, every produced record processed at least once.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable

import pytest

from integration.driver import GroupDriver
from integration.timeline_checks import assert_all_processed, assert_exclusive, ownership_intervals

pytestmark = pytest.mark.broker

# Deadlines, not expectations: on Apache Kafka settling takes 1-5 s; the margin is for 2 loaded cores.
EAGER_SETTLE_S = 40.0
COOPERATIVE_SETTLE_S = 60.0


def kassign_aiokafka(name: str):
    """A class from kassign.adapters.aiokafka, or None while that module does not provide it."""
    try:
        return getattr(importlib.import_module("kassign.adapters.aiokafka"), name)
    except (ImportError, AttributeError):
        return None


def aiokafka_variants() -> list:
    """(assignor, consumer factory) pairs: aiokafka's own eager assignors, plus kassign's drop-ins and
    its cooperative consumer once kassign.adapters.aiokafka provides them."""
    params = [
        pytest.param("roundrobin", None, id="aiokafka-roundrobin"),
        pytest.param("range", None, id="aiokafka-range"),
    ]
    for name in ("RangeAssignor", "RoundRobinAssignor", "StickyAssignor", "CooperativeStickyAssignor"):
        cls = kassign_aiokafka(name)
        if cls is not None:
            params.append(pytest.param(cls, None, id=f"kassign-{cls.name}"))
    consumer, cooperative = kassign_aiokafka("CooperativeConsumer"), kassign_aiokafka("CooperativeStickyAssignor")
    if consumer is not None and cooperative is not None:
        params.append(pytest.param(cooperative, consumer, id="kassign-CooperativeConsumer"))
    return params


def finish(group: GroupDriver, producer) -> None:
    """Stop producing, wait for the survivors to process everything, check the invariants."""
    producer.stop()
    assert producer.errors == []
    assert producer.sent > 0
    events = group.wait_all_processed(producer, timeout=EAGER_SETTLE_S)
    assert_exclusive(events)
    assert_all_processed(events, producer.produced(), default_topic=group.topics[0])


def kept_throughout(group: GroupDriver, member: str, since: float) -> list:
    """Partitions ``member`` owned without interruption from ``since`` to now."""
    return [
        i.partition
        for i in ownership_intervals(group.events())
        if i.member == member and i.start <= since and i.end == float("inf")
    ]


@pytest.mark.parametrize(("assignor", "factory"), aiokafka_variants())
def test_aiokafka_group_join_scale_crash(assignor, factory, bootstrap_servers, group_id, topic_factory):
    # the cooperative consumer needs two rebalance rounds to settle
    settle_s = COOPERATIVE_SETTLE_S if factory is not None else EAGER_SETTLE_S
    topic = topic_factory(12)
    with GroupDriver(bootstrap_servers, group_id, topic) as group:
        producer = group.start_producer(rate=200)
        group.start_members(3, "aiokafka", assignor, consumer_factory=factory)
        first = group.wait_settled(settle_s, balanced=True)
        assert sorted(first) == ["m1", "m2", "m3"]
        assert sorted(len(ps) for ps in first.values()) == [4, 4, 4]

        group.scale_out(2, "aiokafka", assignor, consumer_factory=factory)
        out = group.wait_settled(settle_s, balanced=True)
        assert sorted(out) == ["m1", "m2", "m3", "m4", "m5"]
        assert sorted(len(ps) for ps in out.values()) == [2, 2, 2, 3, 3]

        group.scale_in(["m5"])
        group.crash_member("m1")
        after = group.wait_settled(settle_s, balanced=True)
        assert sorted(after) == ["m2", "m3", "m4"]
        assert sorted(len(ps) for ps in after.values()) == [4, 4, 4]
        finish(group, producer)


@pytest.mark.parametrize("strategy", ["range", "roundrobin"])
def test_mixed_clients_converge(strategy, bootstrap_servers, group_id, topic_factory):
    """aiokafka, Java and librdkafka members agree on one protocol and one valid assignment."""
    topic = topic_factory(9)
    with GroupDriver(bootstrap_servers, group_id, topic) as group:
        producer = group.start_producer(rate=200)
        group.start_member("aiokafka", strategy)
        group.start_member("java", strategy)
        group.start_member("confluent", strategy)
        settled = group.wait_settled(EAGER_SETTLE_S)
        assert sorted(settled) == ["m1", "m2", "m3"]
        assert sorted(len(ps) for ps in settled.values()) == [3, 3, 3]
        group.scale_in(["m2"])
        after = group.wait_settled(EAGER_SETTLE_S)
        assert sorted(after) == ["m1", "m3"]
        finish(group, producer)


def test_aiokafka_and_java_sticky(bootstrap_servers, group_id, topic_factory):
    """kassign's StickyAssignor speaks Java's "sticky" protocol: a mixed group keeps partitions on scale-out."""
    sticky = kassign_aiokafka("StickyAssignor")
    if sticky is None:
        pytest.skip("kassign.adapters.aiokafka.StickyAssignor is not written yet")
    topic = topic_factory(12)
    with GroupDriver(bootstrap_servers, group_id, topic) as group:
        producer = group.start_producer(rate=200)
        group.start_member("aiokafka", sticky)
        group.start_member("java", "sticky")
        before = group.wait_settled(EAGER_SETTLE_S)
        group.start_member("aiokafka", sticky)
        group.start_member("java", "sticky")
        after = group.wait_settled(EAGER_SETTLE_S)
        assert sorted(len(ps) for ps in after.values()) == [3, 3, 3, 3]
        # sticky: each original member keeps 3 of its 6 partitions (eager revokes, then gives them back)
        for member in ("m1", "m2"):
            assert len(set(before[member]) & set(after[member])) == 3, (member, before, after)
        finish(group, producer)


def test_java_and_librdkafka_cooperative_scale_out(bootstrap_servers, group_id, topic_factory):
    """Baseline: Java and librdkafka cooperative-sticky members keep their remaining partitions through a scale-out."""
    topic = topic_factory(12)
    with GroupDriver(bootstrap_servers, group_id, topic) as group:
        producer = group.start_producer(rate=200)
        group.start_member("java", "cooperative-sticky")
        group.start_member("confluent", "cooperative-sticky")
        group.wait_settled(COOPERATIVE_SETTLE_S)
        scale_out_at = time.time()
        group.start_member("java", "cooperative-sticky")
        group.start_member("confluent", "cooperative-sticky")
        after = group.wait_settled(COOPERATIVE_SETTLE_S, balanced=True)
        assert sorted(len(ps) for ps in after.values()) == [3, 3, 3, 3]
        for member in ("m1", "m2"):
            # cooperative: what a member keeps is never revoked, so it was owned without a break
            assert len(kept_throughout(group, member, scale_out_at)) == 3, (member, group.describe())
        finish(group, producer)


def test_cooperative_mixed_group_keeps_partitions(bootstrap_servers, group_id, topic_factory):
    """kassign's CooperativeConsumer, Java and librdkafka in one cooperative-sticky group: through a
    scale-out every original member keeps the partitions it is left with, without a revocation."""
    consumer, cooperative = kassign_aiokafka("CooperativeConsumer"), kassign_aiokafka("CooperativeStickyAssignor")
    if consumer is None or cooperative is None:
        pytest.skip("kassign.adapters.aiokafka.CooperativeConsumer is not written yet")
    topic = topic_factory(12)
    with GroupDriver(bootstrap_servers, group_id, topic) as group:
        producer = group.start_producer(rate=200)
        group.start_member("aiokafka", cooperative, consumer_factory=consumer)
        group.start_member("java", "cooperative-sticky")
        group.start_member("confluent", "cooperative-sticky")
        group.wait_settled(COOPERATIVE_SETTLE_S)
        scale_out_at = time.time()
        group.start_member("aiokafka", cooperative, consumer_factory=consumer)
        after = group.wait_settled(COOPERATIVE_SETTLE_S, balanced=True)
        assert sorted(len(ps) for ps in after.values()) == [3, 3, 3, 3]
        for member in ("m1", "m2", "m3"):
            assert len(kept_throughout(group, member, scale_out_at)) == 3, (member, group.describe())
        finish(group, producer)


def orphan_gap(group: GroupDriver, member: str, stop: Callable[[str], object]) -> float:
    """Seconds from stopping ``member`` until every partition it owned has a new owner."""
    parts = set(group.assignment()[member])
    stopping_at = time.time()
    stop(member)
    group.wait_settled(EAGER_SETTLE_S, stable_for=0)
    taken = [
        i.start
        for i in ownership_intervals(group.events())
        if i.partition in parts and i.member != member and i.end == float("inf")
    ]
    return max(taken) - stopping_at


def test_crashed_member_waits_for_its_session_timeout(bootstrap_servers, group_id, topic_factory):
    """A crash sends no LeaveGroup: the broker reassigns the partitions only after the session expires."""
    topic = topic_factory(6)
    with GroupDriver(bootstrap_servers, group_id, topic) as group:
        group.start_members(3, "aiokafka", "roundrobin")
        group.wait_settled(EAGER_SETTLE_S)
        crash_gap = orphan_gap(group, "m2", group.crash_member)
        assert crash_gap >= 0.9 * group.timing.session_ms / 1000, crash_gap


@pytest.mark.realkafka
def test_closed_member_leaves_before_its_session_timeout(kafka_broker, group_id, topic_factory):
    """A clean close sends LeaveGroup, so Kafka moves the partitions without waiting for the session
    to expire. (Tansu quirk: there both take a session timeout or more.)"""
    topic = topic_factory(6)
    with GroupDriver(kafka_broker.bootstrap, group_id, topic) as group:
        group.start_members(3, "aiokafka", "roundrobin")
        group.wait_settled(EAGER_SETTLE_S)
        leave_gap = orphan_gap(group, "m1", group.stop_member)
        assert leave_gap < group.timing.session_ms / 1000, leave_gap


@pytest.mark.realkafka
def test_protocol_voting_picks_the_common_strategy(kafka_broker, group_id, topic_factory):
    """Kafka chooses the first protocol every member supports. (Tansu quirk: it takes the first joiner's first.)"""
    topic = topic_factory(6)
    with GroupDriver(kafka_broker.bootstrap, group_id, topic) as group:
        group.start_member("java", ["roundrobin", "range"])
        group.wait_settled(EAGER_SETTLE_S)
        group.start_member("java", "range")
        settled = group.wait_settled(EAGER_SETTLE_S)
        # range over 6 partitions and 2 members gives each a contiguous half
        assert sorted(p.partition for p in settled["m1"]) in ([0, 1, 2], [3, 4, 5])
