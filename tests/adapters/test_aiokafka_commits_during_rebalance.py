"""Commits that meet a rebalance on the classic protocol (issues #27 and #28), without a broker: a
cooperative commit answered REBALANCE_IN_PROGRESS, or ILLEGAL_GENERATION for the generation the member
is leaving through the round, goes out again under the new generation as soon as the JoinGroup is
answered, for everything the member still owns; once the round has completed, only for the partitions
the member kept; partitions the round took away are never committed after it; a round that does not
complete ends the wait at the rebalance timeout; a member that really lost its generation gets
CommitFailedError naming why."""

from __future__ import annotations

import asyncio
import time

import pytest

pytest.importorskip("aiokafka")

import aiokafka.errors as Errors  # noqa: E402
from aiokafka.consumer.subscription_state import SubscriptionState  # noqa: E402
from aiokafka.structs import OffsetAndMetadata  # noqa: E402
from aiokafka.structs import TopicPartition as TP  # noqa: E402
from aiokafka.util import create_future  # noqa: E402

from kassign.adapters.aiokafka.coordinator import KassignGroupCoordinator  # noqa: E402
from tests.adapters.test_aiokafka_cooperative_member import (  # noqa: E402
    COOPERATIVE,
    OfflineCoordinator,
    Recorder,
    assignment_bytes,
)

REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID = 27, 22, 25


class CommitClient:
    """The coordinator connection: answers each OffsetCommit with the next scripted error code (then
    success), recording the generation and offsets of every one; a HeartbeatRequest gets ``heartbeat``."""

    def __init__(self, *codes: int, heartbeat: int = 0) -> None:
        self.codes = list(codes)
        self.heartbeat = heartbeat
        self.commits: list[tuple[int, dict[TP, int]]] = []

    async def send(self, node_id, request, group=None):
        if type(request).__name__ == "HeartbeatRequest":
            return type("Resp", (), {"error_code": self.heartbeat})()
        code = self.codes.pop(0) if self.codes else 0
        offsets = {TP(topic, p): offset for topic, parts in request._topics for p, offset, _ in parts}
        self.commits.append((request._consumer_group_generation_id, offsets))
        return type("Resp", (), {"topics": [(tp.topic, [(tp.partition, code)]) for tp in offsets]})()


class Member(OfflineCoordinator):
    """The offline member with the real commit path down to a fake coordinator connection."""

    _do_commit_offsets = KassignGroupCoordinator._do_commit_offsets

    def __init__(self, client: CommitClient, rebalance_timeout_ms: int = 30000) -> None:
        subscription = SubscriptionState()
        subscription.subscribe({"t"}, listener=Recorder())
        super().__init__(subscription, COOPERATIVE, auto_commit=False)
        self._client = client
        self.coordinator_id = 0
        self._closing = create_future()
        self._session_timeout_ms = 10000
        self._rebalance_timeout_ms = rebalance_timeout_ms
        self._group_instance_id = None
        self._coordination_task = None


async def _member(client: CommitClient, owned=(0, 1), **kwargs) -> Member:
    """A member of generation 4 owning t-``owned``."""
    member = Member(client, **kwargs)
    member.generation = 4
    await member._on_join_complete(4, "m-1", "cooperative-sticky", assignment_bytes(*(("t", p) for p in owned)))
    return member


async def _round(member: Member, generation: int, *partitions: int, sync_waits: bool = True) -> None:
    """A JoinGroup/SyncGroup round giving ``partitions`` under ``generation``; ``sync_waits``: the
    SyncGroup is answered a while after the JoinGroup (else at once, nothing running in between)."""
    member._joining = True
    await asyncio.sleep(0.05)
    member.generation = generation
    member._membership_moved()  # as perform_group_join does on the JoinGroup's answer
    if sync_waits:
        await asyncio.sleep(0.05)
    member._joining = False
    await member._on_join_complete(
        generation, "m-1", "cooperative-sticky", assignment_bytes(*(("t", p) for p in partitions))
    )


def _offsets(**by_partition: int) -> dict[TP, OffsetAndMetadata]:
    return {TP("t", int(p[1:])): OffsetAndMetadata(o, "") for p, o in by_partition.items()}


async def _stop(member: Member) -> None:
    await member._stop_commit_offsets_refresh_task()


@pytest.mark.asyncio
@pytest.mark.parametrize("code", [REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION])
@pytest.mark.parametrize(
    ("sync_waits", "again"),
    [
        # Sent again under generation 5 before the SyncGroup's answer: t-1 is still the member's.
        (True, {TP("t", 0): 10, TP("t", 1): 20}),
        # The round completed before the commit could go again: only what the member kept.
        (False, {TP("t", 0): 10}),
    ],
)
async def test_a_cooperative_commit_meeting_a_rebalance_goes_again_under_the_new_generation(code, sync_waits, again):
    async def scenario():
        client = CommitClient(code)
        member = await _member(client)
        commit = asyncio.ensure_future(member.commit_offsets(None, _offsets(p0=10, p1=20), consumed=True))
        await asyncio.sleep(0.01)  # answered: the commit waits for the JoinGroup's answer
        assert not commit.done()
        await _round(member, 5, 0, 2, sync_waits=sync_waits)  # t-0 kept, t-1 revoked, t-2 added
        await asyncio.wait_for(commit, 5)
        await _stop(member)
        return client.commits

    assert await scenario() == [(4, {TP("t", 0): 10, TP("t", 1): 20}), (5, again)]


@pytest.mark.asyncio
async def test_explicit_offsets_of_a_revoked_partition_are_refused_after_the_kept_ones_are_committed():
    async def scenario():
        client = CommitClient(REBALANCE_IN_PROGRESS)
        member = await _member(client)
        commit = asyncio.ensure_future(member.commit_offsets(None, _offsets(p0=10, p1=20)))
        await asyncio.sleep(0.01)
        await _round(member, 5, 0, sync_waits=False)
        with pytest.raises(Errors.CommitFailedError, match=r"TopicPartition\(topic='t', partition=1\).*revoked"):
            await asyncio.wait_for(commit, 5)
        await _stop(member)
        return client.commits

    assert await scenario() == [(4, {TP("t", 0): 10, TP("t", 1): 20}), (5, {TP("t", 0): 10})]


@pytest.mark.asyncio
async def test_a_partition_revoked_and_handed_back_is_not_committed_with_its_old_offset():
    """Revoked in one round and assigned back in the next (the follow-up): another member may have
    consumed it meanwhile, so the offset the commit carried is stale."""

    async def scenario():
        client = CommitClient(REBALANCE_IN_PROGRESS, REBALANCE_IN_PROGRESS)
        member = await _member(client)
        commit = asyncio.ensure_future(member.commit_offsets(None, _offsets(p0=10, p1=20), consumed=True))
        await asyncio.sleep(0.01)
        await _round(member, 5, 0, sync_waits=False)  # t-1 revoked; the retry meets the follow-up round
        await asyncio.sleep(0.01)
        await _round(member, 6, 0, 1)  # t-1 back
        await asyncio.wait_for(commit, 5)
        await _stop(member)
        return client.commits

    assert await scenario() == [(4, {TP("t", 0): 10, TP("t", 1): 20}), (5, {TP("t", 0): 10}), (6, {TP("t", 0): 10})]


@pytest.mark.asyncio
async def test_a_round_that_does_not_complete_ends_the_wait_at_the_rebalance_timeout():
    async def scenario():
        member = await _member(CommitClient(REBALANCE_IN_PROGRESS), rebalance_timeout_ms=300)
        member._joining = True  # the round hangs
        began = time.monotonic()
        with pytest.raises(Errors.RebalanceInProgressError, match="rebalance_timeout_ms=300") as raised:
            await asyncio.wait_for(member.commit_offsets(None, _offsets(p0=10)), 5)
        await _stop(member)
        return time.monotonic() - began, raised.value

    took, error = await scenario()
    assert 0.3 <= took < 1.5 and error.retriable


@pytest.mark.asyncio
async def test_a_member_whose_session_expired_during_the_wait_gets_commit_failed_naming_it():
    """The zombie rule: the heartbeat learns the member is gone while its commit waits for the round."""

    async def scenario():
        client = CommitClient(REBALANCE_IN_PROGRESS, heartbeat=UNKNOWN_MEMBER_ID)
        member = await _member(client)
        commit = asyncio.ensure_future(member.commit_offsets(None, _offsets(p0=10), consumed=True))
        await asyncio.sleep(0.01)
        await member._do_heartbeat()  # answered UNKNOWN_MEMBER_ID: the generation is reset
        with pytest.raises(Errors.CommitFailedError, match=r"session expired \(session_timeout_ms=10000\)"):
            await asyncio.wait_for(commit, 5)
        await member._round_after_reset()
        return client.commits

    async def _round_after_reset(self):
        await self._stop_commit_offsets_refresh_task()

    Member._round_after_reset = _round_after_reset
    assert await scenario() == [(4, {TP("t", 0): 10})]  # never sent again


@pytest.mark.asyncio
async def test_a_commit_answered_unknown_member_id_names_the_session():
    async def scenario():
        member = await _member(CommitClient(UNKNOWN_MEMBER_ID))
        with pytest.raises(Errors.CommitFailedError, match="no longer knows member m-1: its session expired"):
            await member.commit_offsets(None, _offsets(p0=10))
        await _stop(member)

    await scenario()


@pytest.mark.asyncio
async def test_a_commit_from_a_rebalance_listener_meeting_a_rebalance_is_retriable_not_a_wait():
    """The round waits for the listener: the commit cannot wait for the round."""

    async def scenario():
        member = await _member(CommitClient(REBALANCE_IN_PROGRESS), rebalance_timeout_ms=2000)
        member._coordination_task = asyncio.current_task()  # this task runs the listener
        with pytest.raises(Errors.RebalanceInProgressError, match="in a rebalance listener") as raised:
            await member.commit_offsets(None, _offsets(p0=10))
        assert raised.value.retriable
        await _stop(member)

    await scenario()


@pytest.mark.asyncio
async def test_a_stale_illegal_generation_asks_for_no_extra_round():
    """Answered after the member's round completed: the commit is retried, no rejoin is requested."""

    async def scenario():
        client = CommitClient(ILLEGAL_GENERATION)
        member = await _member(client)

        async def send(node_id, request, group=None, _send=client.send):
            await _round(member, 5, 0, 1)  # the round completes while the commit is in flight
            return await _send(node_id, request, group)

        member._client = type("C", (), {"send": staticmethod(send)})()
        await asyncio.wait_for(member.commit_offsets(None, _offsets(p0=10), consumed=True), 5)
        member._client = client
        await member.commit_offsets(None, _offsets(p0=11), consumed=True)
        await _stop(member)
        return client.commits, member._rejoin_needed_fut.done()

    commits, rejoin = await scenario()
    assert commits == [(4, {TP("t", 0): 10}), (5, {TP("t", 0): 10}), (5, {TP("t", 0): 11})] and not rejoin


@pytest.mark.asyncio
async def test_a_static_member_fenced_while_its_commit_waits_gets_commit_failed_naming_the_new_instance():
    async def scenario():
        member = await _member(CommitClient(REBALANCE_IN_PROGRESS))
        member._group_instance_id = "static-a"
        commit = asyncio.ensure_future(member.commit_offsets(None, _offsets(p0=10), consumed=True))
        await asyncio.sleep(0.01)
        member._lost_cause = f"fenced by a newer instance with group_instance_id {member._group_instance_id}"
        await member._fence()  # FENCED_INSTANCE_ID answered its JoinGroup
        with pytest.raises(
            Errors.CommitFailedError, match="fenced by a newer instance with group_instance_id static-a"
        ):
            await asyncio.wait_for(commit, 2)
        await _stop(member)

    await scenario()


@pytest.mark.asyncio
async def test_an_auto_commit_refused_for_good_is_tried_again_at_the_next_interval_not_at_once():
    """TOPIC_AUTHORIZATION_FAILED (no READ on the topic): aiokafka raised it and, its deadline
    unchanged, committed again at once, for ever; as Java, the next try is an interval later."""

    async def scenario():
        client = CommitClient(29, 29, 29)
        member = await _member(client)
        member._enable_auto_commit = True
        member._auto_commit_interval_ms = 5000
        member._next_autocommit_deadline = 0
        assignment = member._subscription.subscription.assignment
        for tp in assignment.tps:  # consumed positions to commit
            assignment.state_value(tp).seek(3)
        with pytest.raises(Errors.TopicAuthorizationFailedError):
            await member._maybe_do_autocommit(assignment)
        again = await member._maybe_do_autocommit(assignment)  # what aiokafka's routine does next
        await _stop(member)
        return len(client.commits), again

    commits, again = await scenario()
    assert commits == 1 and 4.5 < again <= 5.0
