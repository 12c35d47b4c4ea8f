"""kassign's ``CooperativeConsumer`` on both group protocols (the ``group_protocol`` fixture:
``classic``, KIP-429 on JoinGroup/SyncGroup with kassign's cooperative-sticky assignor, and
``consumer``, KIP-848 where the broker assigns), against Apache Kafka; each test asserts what both
protocols promise alike:

* two members join one topic: every partition owned, never by two members at once (from every
  member's own callbacks), nothing lost; the time from the second join to all partitions owned is
  printed;
* a clean leave hands its partitions over at once; a crash hands them over after the session timeout;
* a member frozen past its session timeout (a zombie) is fenced when it resumes: its late commit is
  refused and its partitions go to ``on_partitions_lost``;
* a static member restarts without a reassignment;
* a deleted topic is revoked and its recreation is assigned and read from offset 0;
* a topic deleted and created again before the member saw it gone (same name, same partition count,
  a new topic id) is given up and read from offset 0, not from the old topic's positions, whether the
  member commits by hand or automatically.

The classic members state their own session timeout and heartbeat interval; on the consumer
protocol the same values are the group's own (``consumer.session.timeout.ms``,
``consumer.heartbeat.interval.ms``), set per group as an operator would.
"""

from __future__ import annotations

import asyncio
import time

import pytest

pytest.importorskip("aiokafka")

from aiokafka.structs import TopicPartition as TP  # noqa: E402

from integration.consumers import ListenerCallsWithLost, wait_consumers_held  # noqa: E402
from integration.driver import GroupTiming  # noqa: E402
from integration.protocols import consumer_config, group_driver, start_kassign_member  # noqa: E402
from integration.timeline_checks import all_owned_at, assert_exclusive, current_assignment, double_ownership  # noqa: E402
from integration.topics import create_topic, delete_topic  # noqa: E402
from kassign.adapters.aiokafka import CooperativeConsumer  # noqa: E402

pytestmark = [pytest.mark.realkafka, pytest.mark.timeout(600)]

#: The members' timing (on the consumer protocol the group's own on the broker).
TIMING = GroupTiming(session_ms=3000, heartbeat_ms=300)


def _first(events, member: str, kind: str, after: float = 0.0):
    return next((e for e in events if e.id == member and e.ev == kind and e.t >= after), None)


def _parts(events, member: str, kind: str, after: float = 0.0) -> set:
    return {tp for e in events if e.id == member and e.ev == kind and e.t >= after for tp in e.parts or ()}


def test_two_kassign_members_share_a_topic_exclusively(bootstrap_servers, group_id, topic_factory, group_protocol):
    """The second member's join moves half the partitions: the first revokes exactly what the second
    is then given, nothing is owned twice, nothing lost, every record processed."""
    topic = topic_factory(6)
    with group_driver(bootstrap_servers, group_id, topic, group_protocol, TIMING) as group:
        producer = group.start_producer(rate=200)
        first = start_kassign_member(group, group_protocol)
        group.wait_settled(60)
        second = start_kassign_member(group, group_protocol)
        settled = group.wait_settled(60, balanced=True)
        producer.stop()
        events = group.wait_all_processed(producer, 60)
    assert_exclusive(events)
    assert sorted(len(p) for p in settled.values()) == [3, 3]
    joined = _first(events, second, "subscribed").t
    moved = _parts(events, first, "cb_revoked", joined)
    assert moved == set(settled[second]) and _parts(events, second, "cb_assigned") == moved
    assert not _parts(events, first, "cb_lost") and not _parts(events, second, "cb_lost")
    took = all_owned_at(events, group.partitions, [first, second], joined) - joined
    print(f"\n{group_protocol}, 2 kassign members, 6 partitions: second join to all partitions owned {took:.2f} s")
    assert took < 10 * TIMING.heartbeat_ms / 1000 + 2.0


def test_clean_leave_and_crash_hand_partitions_over(bootstrap_servers, group_id, topic_factory, group_protocol):
    """A member that closes revokes everything and leaves (its partitions move at once); a member that
    is killed keeps its partitions until the group's session timeout expires."""
    topic = topic_factory(6)
    with group_driver(bootstrap_servers, group_id, topic, group_protocol, TIMING) as group:
        producer = group.start_producer(rate=200)
        members = [start_kassign_member(group, group_protocol) for _ in range(3)]
        before = group.wait_settled(60, balanced=True)
        left = time.time()
        group.stop_member(members[0])
        after_leave = group.wait_settled(30, balanced=True)
        leave_took = time.time() - left
        crashed = time.time()
        group.crash_member(members[1])
        after_crash = group.wait_settled(30)
        crash_took = time.time() - crashed
        producer.stop()
        events = group.wait_all_processed(producer, 60)
    assert_exclusive(events)
    assert _parts(events, members[0], "cb_revoked", left) == set(before[members[0]])
    assert set(after_leave) == {members[1], members[2]} and set(after_crash) == {members[2]}
    assert len(after_crash[members[2]]) == 6
    print(
        f"\n{group_protocol}: a clean leave settled in {leave_took:.2f} s, a crash in {crash_took:.2f} s "
        f"(session timeout {TIMING.session_ms / 1000:.1f} s)"
    )
    assert leave_took < TIMING.session_ms / 1000, "a clean leave waited for the session timeout"
    assert crash_took >= TIMING.session_ms / 1000 * 0.8, "partitions moved before the crashed member's session expired"


def test_a_zombie_is_fenced_its_late_commit_refused_and_its_partitions_lost(
    bootstrap_servers, group_id, topic_factory, group_protocol
):
    """SIGSTOP past the session timeout: the broker removes the member and hands its partitions over.
    Resumed, it commits what it had processed at once -- refused, its generation (classic) or member
    epoch (consumer) is gone -- loses its partitions (on_partitions_lost) and joins again as a new
    member, getting a fresh share."""
    topic = topic_factory(4)
    with group_driver(bootstrap_servers, group_id, topic, group_protocol, TIMING) as group:
        producer = group.start_producer(rate=200)
        keeper, zombie = start_kassign_member(group, group_protocol), start_kassign_member(group, group_protocol)
        before = group.wait_settled(60, balanced=True)
        frozen = group.freeze_member(zombie)
        group.wait_for(
            lambda ev: len(current_assignment(ev).get(keeper, ())) == 4, 30, "the keeper owns every partition"
        )
        thawed = group.thaw_member(zombie)
        group.wait_for(
            lambda ev: (
                _first(ev, zombie, "late_commit", thawed) is not None
                and _first(ev, zombie, "cb_lost", thawed) is not None
            ),
            30,
            "the zombie noticed",
        )
        after = group.wait_settled(60, balanced=True)
        producer.stop()
        events = group.wait_all_processed(producer, 60)
    late = _first(events, zombie, "late_commit", thawed)
    assert late.extra.get("ok") is False, f"the zombie's late commit was accepted: {late}"
    assert _parts(events, zombie, "cb_lost", thawed) == set(before[zombie])
    assert set(after[zombie]) and set(after[keeper]), after
    lost_at = _first(events, zombie, "cb_lost", thawed).t
    # The only double ownership is the zombie's own, while it was frozen and until it learnt it was out.
    for overlap in double_ownership(events):
        assert zombie in overlap.members and overlap.start >= frozen and overlap.end <= lost_at, str(overlap)


def _static(bootstrap: str, group_id: str, instance: str, config: dict) -> CooperativeConsumer:
    return CooperativeConsumer(
        bootstrap_servers=bootstrap,
        group_id=group_id,
        group_instance_id=instance,
        auto_offset_reset="earliest",
        **config,
    )


@pytest.mark.asyncio
async def test_static_member_restarts_without_a_reassignment(
    bootstrap_servers, group_id, topic_factory, group_protocol
):
    """A static member's close is a temporary leave (classic: no LeaveGroup; consumer: epoch -2):
    restarted within the session timeout with its instance id it gets its own partitions back, and
    the others hear nothing (no rebalance)."""
    topic = topic_factory(6)
    partitions = {TP(topic, p) for p in range(6)}
    config = consumer_config(bootstrap_servers, group_id, group_protocol, session_ms=10000, heartbeat_ms=500)

    async def scenario():
        listeners = [ListenerCallsWithLost() for _ in range(3)]
        consumers = [_static(bootstrap_servers, group_id, f"static-{i}", config) for i in range(3)]
        for c, lst in zip(consumers, listeners):
            c.subscribe([topic], listener=lst)
            await c.start()
        before = await wait_consumers_held(consumers, partitions, 1.5, balanced=True)
        calls_before = [list(lst.calls) for lst in listeners[:2]]
        await consumers[2].stop()
        restarted = ListenerCallsWithLost()
        consumers[2] = _static(bootstrap_servers, group_id, "static-2", config)
        consumers[2].subscribe([topic], listener=restarted)
        began = time.monotonic()
        await consumers[2].start()
        while not consumers[2].assignment():
            await asyncio.gather(*(c.getmany(timeout_ms=50) for c in consumers))
        regained_s = time.monotonic() - began
        after = await wait_consumers_held(consumers, partitions, 1.5, balanced=True)
        calls_after = [list(lst.calls) for lst in listeners[:2]]
        restarted_calls = list(restarted.calls)  # before close(): closing revokes
        for c in consumers:
            await c.stop()
        return before, after, calls_before, calls_after, restarted_calls, regained_s

    before, after, calls_before, calls_after, restarted, regained_s = await scenario()
    assert after == before
    assert calls_after == calls_before, "the other members saw a reassignment"
    assert restarted == [("assigned", set(before[2]))]
    print(f"\n{group_protocol} static restart: partitions back in {regained_s:.2f} s")
    assert regained_s < 5.0


async def _consume_until(consumer, done, seen: list, what: str) -> None:
    """Read into ``seen`` (partition, offset, value) until ``done()``; AssertionError after 60 s."""
    deadline = time.monotonic() + 60
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached; assignment {sorted(consumer.assignment())}; seen {seen}")
        for tp, records in (await consumer.getmany(timeout_ms=100)).items():
            seen.extend((tp, r.offset, r.value.decode()) for r in records)


def _given_up(calls) -> set:
    """Partitions revoked or lost in ``calls``: a member that meets a topic back under its name before
    it saw it gone loses (classic) what it held of the old one."""
    return {tp for kind, parts in calls if kind in ("revoked", "lost") for tp in parts}


async def _started_consumer(
    bootstrap_servers, group_id, group_protocol, topics, listener, *, metadata_max_age_ms, auto_commit=False
):
    """A kassign consumer of ``topics``, reading from the start, started: committing manually, or with
    ``auto_commit`` in the background every minute (so the commits that matter are the revocations')."""
    config = consumer_config(bootstrap_servers, group_id, group_protocol, session_ms=10000, heartbeat_ms=300)
    consumer = CooperativeConsumer(
        bootstrap_servers=bootstrap_servers,
        group_id=group_id,
        metadata_max_age_ms=metadata_max_age_ms,
        **config,
        auto_offset_reset="earliest",
        enable_auto_commit=auto_commit,
        auto_commit_interval_ms=60000,
    )
    consumer.subscribe(topics, listener=listener)
    await consumer.start()
    return consumer


@pytest.mark.asyncio
async def test_a_deleted_topic_is_revoked_and_its_recreation_assigned_from_the_start(
    bootstrap_servers, group_id, topic_factory, group_protocol
):
    """A subscribed topic deleted: the broker drops its partitions from the target and the member
    revokes them (still named: the member knows the names of what it owns, metadata no longer does).
    Back under the same name -- created again, or auto-created by a client's metadata request, as
    Kafka's default ``auto.create.topics.enable`` allows -- it has a new topic id: the member names it
    with Metadata, is assigned its partitions and reads them from offset 0 (neither its old positions
    nor the offsets committed for the deleted topic carry over)."""
    from confluent_kafka import KafkaException, Producer

    from integration.topics import partition_count

    keep, doomed = topic_factory(2), topic_factory(2)
    producer = Producer({"bootstrap.servers": bootstrap_servers, "log_level": 3})

    def produce(topic: str, partitions: int, tag: str) -> None:
        for p in range(partitions):
            for i in range(3):
                producer.produce(topic, value=f"{tag}-{p}-{i}".encode(), partition=p)
        producer.flush(10)

    def recreate(topic: str) -> int:
        """Create ``topic`` again unless a client's metadata request already has; its partition count."""
        try:
            create_topic(bootstrap_servers, topic, 2)
        except KafkaException as exc:
            if "TOPIC_ALREADY_EXISTS" not in str(exc):
                raise
        return partition_count(bootstrap_servers, topic)

    gone = {TP(doomed, 0), TP(doomed, 1)}

    async def scenario():
        listener = ListenerCallsWithLost()
        consumer = await _started_consumer(
            bootstrap_servers, group_id, group_protocol, [keep, doomed], listener, metadata_max_age_ms=1000
        )
        produce(doomed, 2, "old")
        seen: list = []
        await _consume_until(consumer, lambda: sum(tp.topic == doomed for tp, _, _ in seen) == 6, seen, "old records")
        await consumer.commit()  # offsets 3 for the old topic's partitions
        mark = len(listener.calls)
        delete_topic(bootstrap_servers, doomed)
        await _consume_until(
            consumer,
            lambda: gone <= _given_up(listener.calls[mark:]),
            seen,
            "deleted topic revoked",
        )
        partitions = recreate(doomed)
        produce(doomed, partitions, "new")
        await _consume_until(
            consumer,
            lambda: sum(v.startswith("new") for _, _, v in seen) == 3 * partitions,
            seen,
            "recreated topic's records",
        )
        final = consumer.assignment()
        await consumer.stop()
        return listener.calls[mark:], seen, final, partitions

    calls, seen, final, partitions = await scenario()
    revoked_at = next(i for i in range(len(calls)) if gone <= _given_up(calls[: i + 1]))
    back = {TP(doomed, p) for p in range(partitions)}
    assert any(kind == "assigned" and parts & back for kind, parts in calls[revoked_at + 1 :]), calls
    new = sorted((tp.partition, offset) for tp, offset, value in seen if value.startswith("new"))
    assert new == [(p, i) for p in range(partitions) for i in range(3)], "the topic back is read from offset 0"
    assert final == {TP(keep, 0), TP(keep, 1)} | back
    print(
        f"\n{group_protocol}: deleted topic revoked; back with {partitions} partition(s) under a new id, "
        "read from offset 0"
    )


@pytest.mark.asyncio
@pytest.mark.parametrize("auto_commit", [False, True], ids=["manual-commit", "auto-commit"])
async def test_a_topic_created_again_unseen_is_given_up_and_read_from_the_start(
    bootstrap_servers, group_id, topic_factory, group_protocol, auto_commit
):
    """A subscribed topic deleted and created again, with as many partitions, before the member's
    metadata saw it gone: the name and the partition count are the same, only the topic id differs.
    The member must not go on from the old topic's positions (3 here, the new topic's end: its
    records would never be read): it gives the old partitions up without committing them (classic:
    ``on_partitions_lost``, from the topic id read beside aiokafka's metadata; KIP-848: the broker's
    assignment names the new id) and reads the new topic from offset 0. With auto-commit, the
    revocation's commit must not write position 3 under the name, which the new topic now has."""
    from confluent_kafka import Producer

    from integration.topics import partition_count

    keep, doomed = topic_factory(2), topic_factory(2)
    producer = Producer({"bootstrap.servers": bootstrap_servers, "log_level": 3})
    old = {TP(doomed, 0), TP(doomed, 1)}

    def produce(tag: str) -> None:
        for p in range(2):
            for i in range(3):
                producer.produce(doomed, value=f"{tag}-{p}-{i}".encode(), partition=p)
        producer.flush(10)

    listener = ListenerCallsWithLost()
    # Metadata every minute only: nothing but the forced update below may see the topic in between.
    consumer = await _started_consumer(
        bootstrap_servers,
        group_id,
        group_protocol,
        [keep, doomed],
        listener,
        metadata_max_age_ms=60000,
        auto_commit=auto_commit,
    )
    try:
        produce("old")
        seen: list = []
        await _consume_until(consumer, lambda: sum(tp.topic == doomed for tp, _, _ in seen) == 6, seen, "old records")
        await consumer.commit()
        # Paused, its partitions are not fetched, so no fetch error makes aiokafka refresh its metadata.
        consumer.pause(*old)
        mark = len(listener.calls)
        delete_topic(bootstrap_servers, doomed)
        create_topic(bootstrap_servers, doomed, 2)  # fails if a metadata request auto-created it meanwhile
        assert partition_count(bootstrap_servers, doomed) == 2
        produce("new")
        consumer.resume(*old)
        await consumer._client.force_metadata_update()  # what the next periodic update would do
        await _consume_until(
            consumer, lambda: sum(v.startswith("new") for _, _, v in seen) == 6, seen, "the new topic's records"
        )
        final = consumer.assignment()
    finally:
        await consumer.stop()
    calls = listener.calls[mark:]
    assert old <= _given_up(calls), calls
    if group_protocol == "classic":
        assert any(kind == "lost" and old <= parts for kind, parts in calls), calls
    assert any(kind == "assigned" and old <= parts for kind, parts in calls), calls
    new = sorted((tp.partition, offset) for tp, offset, value in seen if value.startswith("new"))
    assert new == [(p, i) for p in range(2) for i in range(3)], "the new topic is read from offset 0"
    assert final == {TP(keep, 0), TP(keep, 1)} | old
    print(f"\n{group_protocol}: topic created again unseen: given up ({calls}), read from offset 0")
