"""Commits that meet a rebalance on the consumer group protocol (KIP-848, issue #27), without a broker.

The broker moves a member to a new epoch when it reaches a new target, and answers a commit sent
with the epoch before STALE_MEMBER_EPOCH (Java's commitSync: CommitFailedException). Here the commit
waits for the heartbeat that brings the new epoch and goes out again for the partitions the member
held throughout; a partition revoked meanwhile is never committed after its revocation; no newer
epoch within the rebalance timeout ends the wait with aiokafka's retriable RebalanceInProgressError;
a member past max_poll_interval_ms leaves, says so once, and its late commit names the cause."""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any

import pytest

pytest.importorskip("aiokafka")

import aiokafka.errors as Errors  # noqa: E402
from aiokafka.structs import OffsetAndMetadata  # noqa: E402
from aiokafka.structs import TopicPartition as TP  # noqa: E402

from kassign.membership.consumer_group import MemberState  # noqa: E402
from tests.adapters.test_aiokafka_consumer_group import (  # noqa: E402
    TOPIC,
    FakeGroupCoordinator,
    Recorder,
    T,
    coordinator,
    tps,
    until,
)

STALE_MEMBER_EPOCH = 113


def committed(group: FakeGroupCoordinator) -> list[tuple[int, dict[int, int]]]:
    """Every OffsetCommit sent: (member epoch, {partition: offset})."""
    return [
        (
            c.generation_id_or_member_epoch,
            {p.partition_index: p.committed_offset for t in c.topics for p in t.partitions},
        )
        for c in group.commits
    ]


async def joined(group: FakeGroupCoordinator, listener: Recorder | None = None, **settings):
    coord, subscription = coordinator(group, listener, enable_auto_commit=False, **settings)
    await until(
        lambda: (
            subscription.subscription.assignment is not None and subscription.subscription.assignment.tps == tps(0, 1)
        ),
        what="assignment",
    )
    await until(lambda: coord.member.state is MemberState.STABLE, what="acknowledged")
    return coord, subscription


@pytest.mark.asyncio
async def test_a_commit_answered_stale_member_epoch_completes_under_the_new_epoch():
    async def scenario():
        group = FakeGroupCoordinator()
        group.epoch = 7
        coord, subscription = await joined(group)
        # The broker moved the member to epoch 8 (a new target keeping both partitions); the member has
        # not heard yet, so its commit goes with 7 and is refused.
        group.epoch, group.commit_errors = 8, [STALE_MEMBER_EPOCH]
        await coord.commit_offsets(
            subscription.subscription.assignment,
            {TP(TOPIC, 0): OffsetAndMetadata(5, ""), TP(TOPIC, 1): OffsetAndMetadata(9, "")},
        )
        await coord.close()
        return group

    group = await asyncio.wait_for(scenario(), 30)
    assert committed(group) == [(7, {0: 5, 1: 9}), (8, {0: 5, 1: 9})]


@pytest.mark.asyncio
@pytest.mark.parametrize("consumed", [False, True], ids=["explicit-offsets", "consumed-positions"])
async def test_a_partition_revoked_while_the_commit_waited_is_never_committed_after(consumed):
    async def scenario():
        group, listener = FakeGroupCoordinator(), Recorder()
        group.epoch = 7
        coord, subscription = await joined(group, listener)
        assignment = subscription.subscription.assignment
        group.commit_gate = asyncio.Event()  # the commit is in flight, at epoch 7 ...
        commit = asyncio.ensure_future(
            coord.commit_offsets(
                assignment,
                {TP(TOPIC, 0): OffsetAndMetadata(5, ""), TP(TOPIC, 1): OffsetAndMetadata(9, "")},
                consumed=consumed,
            )
        )
        await until(lambda: group.commits_held, what="commit in flight")
        group.target = [0]  # ... while the broker takes partition 1 away
        await until(lambda: ("revoked", tps(1)) in listener.calls, what="revocation")
        group.epoch = 8
        await until(lambda: coord.member.member_epoch == 8, what="epoch 8")
        group.commit_errors = [STALE_MEMBER_EPOCH]
        group.commit_gate.set()
        try:
            await commit
            error = None
        except Errors.CommitFailedError as exc:
            error = exc
        await coord.close()
        return group, error

    group, error = await asyncio.wait_for(scenario(), 30)
    assert committed(group) == [(7, {0: 5, 1: 9}), (8, {0: 5})]
    if consumed:
        assert error is None  # commit(): the consumed positions of what it still has
    else:
        assert error is not None and f"{TP(TOPIC, 1)}" in str(error) and "revoked" in str(error)
        assert "max_poll_interval" not in str(error)


@pytest.mark.asyncio
async def test_no_newer_epoch_within_the_rebalance_timeout_is_a_retriable_rebalance_in_progress():
    async def scenario():
        group = FakeGroupCoordinator()
        group.epoch = 7
        coord, subscription = await joined(group, max_poll_interval_ms=400)  # the rebalance timeout here
        group.commit_errors = [STALE_MEMBER_EPOCH]  # and the heartbeats keep saying 7
        loop = asyncio.get_running_loop()
        started = loop.time()
        with subscription.fetch_context(), pytest.raises(Errors.RebalanceInProgressError) as caught:
            # A getmany() is waiting meanwhile (the poll timer does not run out).
            await coord.commit_offsets(subscription.subscription.assignment, {TP(TOPIC, 0): OffsetAndMetadata(5, "")})
        waited = loop.time() - started
        await coord.close()
        return group, caught.value, waited

    group, error, waited = await asyncio.wait_for(scenario(), 30)
    assert error.retriable and "STALE_MEMBER_EPOCH" in str(error)
    assert 0.3 < waited < 5
    assert len(group.commits) == 1


@pytest.mark.asyncio
async def test_a_commit_issued_before_a_fencing_names_the_fencing():
    async def scenario():
        group = FakeGroupCoordinator()
        group.epoch = 7
        coord, subscription = await joined(group)
        assignment = subscription.subscription.assignment
        group.commit_gate = asyncio.Event()
        commit = asyncio.ensure_future(coord.commit_offsets(assignment, {TP(TOPIC, 0): OffsetAndMetadata(5, "")}))
        await until(lambda: group.commits_held, what="commit in flight")
        group.hold_joins, group.next_error = True, 110  # FENCED_MEMBER_EPOCH
        await until(lambda: coord.member.state is MemberState.JOINING, what="fenced")
        group.commit_errors = [STALE_MEMBER_EPOCH]
        group.commit_gate.set()
        with pytest.raises(Errors.CommitFailedError) as caught:
            await commit
        await coord.close()
        return group, caught.value

    group, error = await asyncio.wait_for(scenario(), 30)
    assert "FENCED_MEMBER_EPOCH" in str(error) and "max_poll_interval" not in str(error)
    assert len(group.commits) == 1, "nothing is committed for a member that lost its partitions"


@pytest.mark.asyncio
async def test_a_member_past_max_poll_interval_leaves_says_so_once_and_its_late_commit_names_why(caplog):
    async def scenario():
        group, listener = FakeGroupCoordinator(), Recorder()
        with caplog.at_level(logging.WARNING, logger="kassign"):
            coord, subscription = await joined(group, listener, max_poll_interval_ms=300)
            # No getmany()/getone() from here on: the application is processing.
            await until(lambda: ("lost", tps(0, 1)) in listener.calls, what="loss after the poll timer")
            await until(lambda: coord.member.state is MemberState.STALE, what="left")
            await asyncio.sleep(0.5)  # still not polling: no second leave, no rejoin
        warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        with pytest.raises(Errors.CommitFailedError) as caught:
            coord.check_membership_for_commit()
        leaves = [h for h in group.heartbeats if h.member_epoch < 0]
        await coord.close()
        return listener, warnings, caught.value, leaves, len(group.commits)

    listener, warnings, error, leaves, commits = await asyncio.wait_for(scenario(), 30)
    assert len([w for w in warnings if "max_poll_interval_ms=300" in w]) == 1, warnings
    assert "max_poll_interval_ms=300 exceeded" in str(error)
    assert len(leaves) == 1 and commits == 0
    assert not [c for c in listener.calls if c[0] == "revoked"]


@pytest.mark.asyncio
async def test_an_auto_commit_refused_for_good_waits_for_the_next_interval():
    """No READ on the topic: every auto-commit answered TOPIC_AUTHORIZATION_FAILED. One attempt per
    auto-commit interval (Java's pace), not one per retry backoff."""

    async def scenario():
        group = FakeGroupCoordinator()
        group.commit_error = 29
        coord, subscription = coordinator(group, enable_auto_commit=True, auto_commit_interval_ms=1000)
        await until(
            lambda: (
                subscription.subscription.assignment is not None
                and subscription.subscription.assignment.tps == tps(0, 1)
            ),
            what="assignment",
        )
        for tp in tps(0, 1):  # consumed positions to commit
            subscription.subscription.assignment.state_value(tp).seek(3)
        await asyncio.sleep(2.5)
        attempts = len(group.commits)
        await coord.close()
        return attempts

    attempts = await asyncio.wait_for(scenario(), 30)
    assert 1 <= attempts <= 4, attempts  # about one a second; a retry loop made ~25 (retry_backoff_ms=10: ~250)


RECREATED = uuid.UUID("22222222-2222-2222-2222-222222222222")


def old_offsets_committed(group: FakeGroupCoordinator, offset: int) -> list[tuple[str, uuid.UUID, int]]:
    """Every partition committed at ``offset``: (topic name, topic id, partition)."""
    return [
        (t.name, t.topic_id, p.partition_index)
        for c in group.commits
        for t in c.topics
        for p in t.partitions
        if p.committed_offset == offset
    ]


async def created_again(group: FakeGroupCoordinator, listener: Recorder) -> tuple[Any, Any]:
    """A member owning partitions 0 and 1 of TOPIC at position 3, auto-committing (every minute: only
    the revocation's commit is in play)."""
    coord, subscription = coordinator(group, listener)
    await until(
        lambda: (
            subscription.subscription.assignment is not None and subscription.subscription.assignment.tps == tps(0, 1)
        ),
        what="assignment",
    )
    await until(lambda: coord.member.state is MemberState.STABLE, what="acknowledged")
    for p in (0, 1):
        subscription.subscription.assignment.state_value(TP(TOPIC, p)).seek(3)
    return coord, subscription


async def reassigned_under(coord: Any, topic_id: uuid.UUID) -> None:
    await until(
        lambda: {(p.topic_id, p.partition) for p in coord.member.owned_ids} == {(topic_id, 0), (topic_id, 1)},
        what="the new topic's partitions",
    )


@pytest.mark.asyncio
@pytest.mark.parametrize("commit_version", [9, 10], ids=["by-name", "by-id"])
async def test_the_old_topics_positions_are_never_committed_to_a_topic_created_again(commit_version):
    """TOPIC deleted and created again (a new id, the same name and partitions): the broker's target
    swaps the ids. The revocation of the old topic's partitions commits nothing: by name (OffsetCommit
    v9, brokers before Kafka 4.2) position 3 would become the new topic's committed offset, and its
    first three records would never be read; by id it belongs to a topic that is gone."""

    async def scenario():
        group, listener = FakeGroupCoordinator(), Recorder()
        group.commit_max_version = commit_version
        coord, _ = await created_again(group, listener)
        group.epoch, group.topic_id = 2, RECREATED
        await reassigned_under(coord, RECREATED)
        await coord.close()
        return group, listener

    group, listener = await asyncio.wait_for(scenario(), 30)
    revoked = listener.calls.index(("revoked", tps(0, 1)))
    assert ("assigned", tps(0, 1)) in listener.calls[revoked:]
    assert old_offsets_committed(group, 3) == []


@pytest.mark.asyncio
async def test_a_revocation_commit_held_up_until_the_new_topic_is_named_still_names_the_old_one():
    """The revocation's commit waits behind a commit in flight, and meanwhile the member names the new
    topic id (Metadata): built then, it must not take the id the name has now. Here it is dropped,
    since the metadata says the owned topic is gone."""

    async def scenario():
        group, listener = FakeGroupCoordinator(), Recorder()
        coord, subscription = await created_again(group, listener)
        group.commit_gate = asyncio.Event()
        in_flight = asyncio.ensure_future(
            coord.commit_offsets(subscription.subscription.assignment, {TP(TOPIC, 0): OffsetAndMetadata(1, "")})
        )
        await until(lambda: group.commits_held, what="commit in flight")
        named = group.metadata_requests
        group.epoch, group.topic_id = 2, RECREATED
        await until(lambda: group.metadata_requests > named, what="the new id named")
        await asyncio.sleep(0.05)
        group.commit_gate.set()
        await in_flight
        await reassigned_under(coord, RECREATED)
        await coord.close()
        return group

    group = await asyncio.wait_for(scenario(), 30)
    assert old_offsets_committed(group, 1) == [(TOPIC, T, 0)]  # the commit in flight, built before
    assert old_offsets_committed(group, 3) == []


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "commit_version, name_now, committed_as",
    [
        (9, T, [(TOPIC, T, 0), (TOPIC, T, 1)]),  # moved to another member: committed by name
        (9, RECREATED, []),  # the name is another topic's now: nothing committed
        (10, RECREATED, [(TOPIC, T, 0), (TOPIC, T, 1)]),  # by the old id, which the broker refuses
    ],
    ids=["by-name-same-topic", "by-name-created-again", "by-id"],
)
async def test_a_topic_leaving_the_member_is_committed_by_name_only_while_the_name_is_its_own(
    commit_version, name_now, committed_as
):
    """The broker's target drops TOPIC altogether: taken by other members, or deleted (and perhaps
    created again before the revocation's commit). By id the commit goes as it is; by name only after
    the metadata says the name still has the owned id."""

    async def scenario():
        group, listener = FakeGroupCoordinator(), Recorder()
        group.commit_max_version = commit_version
        coord, _ = await created_again(group, listener)
        asked = group.metadata_requests
        group.topic_id = name_now  # what a Metadata request answers for TOPIC from now on
        group.epoch, group.target = 2, []
        await until(lambda: ("revoked", tps(0, 1)) in listener.calls, what="revocation")
        await coord.close()
        return group, group.metadata_requests - asked

    group, metadata_requests = await asyncio.wait_for(scenario(), 30)
    assert [(name, tid if commit_version == 10 else T, p) for name, tid, p in old_offsets_committed(group, 3)] == (
        committed_as
    )
    assert metadata_requests == (1 if commit_version == 9 else 0)


@pytest.mark.asyncio
async def test_a_deleted_topics_revocation_commit_refused_by_id_is_a_warning_not_an_error(caplog):
    """The broker's target drops a deleted TOPIC; the revocation commits it by its old id, which the
    broker answers UNKNOWN_TOPIC_ID: nothing to commit there, said once as a warning."""
    unknown_topic_id = 100

    async def scenario():
        group, listener = FakeGroupCoordinator(), Recorder()
        coord, _ = await created_again(group, listener)
        group.commit_errors = [unknown_topic_id]
        group.epoch, group.target = 2, []
        await until(lambda: ("revoked", tps(0, 1)) in listener.calls, what="revocation")
        await coord.close()
        return group

    with caplog.at_level(logging.WARNING, logger="kassign"):
        group = await asyncio.wait_for(scenario(), 30)
    assert old_offsets_committed(group, 3) == [(TOPIC, T, 0), (TOPIC, T, 1)]
    records = [r for r in caplog.records if r.name.startswith("kassign")]
    assert [(r.levelname, "topic was deleted" in r.getMessage()) for r in records] == [("WARNING", True)]
