"""kassign's aiokafka coordinator on KIP-848's consumer group protocol, without a broker: a fake
aiokafka client answers ConsumerGroupHeartbeat, Metadata and OffsetCommit as a scripted group
coordinator, and the tests check what goes on the wire and what the listener hears -- join, names
from topic ids, a revocation committed first, acknowledgements, fencing, fatal errors, a broker
without the protocol, member-epoch commits, leaving -- and ``CooperativeConsumer``'s arguments."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import pytest

pytest.importorskip("aiokafka")

import aiokafka.errors as Errors  # noqa: E402
from aiokafka.consumer.subscription_state import SubscriptionState  # noqa: E402
from aiokafka.structs import OffsetAndMetadata  # noqa: E402
from aiokafka.structs import TopicPartition as TP  # noqa: E402

from integration.consumers import ListenerCallsWithLost  # noqa: E402
from kassign.adapters.aiokafka import CooperativeConsumer  # noqa: E402
from kassign.adapters.aiokafka.consumer_group_coordinator import (  # noqa: E402
    ConsumerGroupCoordinator,
    GroupProtocolError,
)
from kassign.membership.consumer_group import MemberState  # noqa: E402
from kassign.model import RebalanceProtocol  # noqa: E402
from kassign.protocol.consumer_group_heartbeat import (  # noqa: E402
    ConsumerGroupHeartbeatAssignment,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    TopicIdPartitions,
)
from kassign.protocol.metadata import MetadataRequest, MetadataResponse, MetadataResponseTopic  # noqa: E402
from kassign.protocol.offset_commit import (  # noqa: E402
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)
from kassign.protocol.offset_fetch import (  # noqa: E402
    OffsetFetchRequest,
    OffsetFetchResponse,
    OffsetFetchResponseGroup,
    OffsetFetchResponsePartitions,
    OffsetFetchResponseTopics,
)

T = uuid.UUID("11111111-1111-1111-1111-111111111111")
TOPIC = "orders"


Recorder = ListenerCallsWithLost


class FakeCluster:
    def add_listener(self, listener):
        pass

    def topics(self, exclude_internal_topics=True):
        return {TOPIC}

    def partitions_for_topic(self, topic):
        return set(range(4))

    def broker_metadata(self, node_id):
        return type("Broker", (), {"host": "fake-broker", "port": 9092})()


class FakeGroupCoordinator:
    """A scripted group coordinator: it assigns ``target`` at ``epoch`` (every answer carries it),
    answers the next heartbeat with ``next_error`` once, commits per ``commit_error``, and records
    every request."""

    def __init__(self, *, supports_848: bool = True):
        self.supports_848 = supports_848
        self.topic_id = T  # TOPIC's id: another one is the topic deleted and created again
        self.commit_max_version = 10  # 9: a broker before Kafka 4.2, committing by topic name
        self.epoch = 1
        self.target: list[int] = [0, 1]
        self.next_error = 0
        self.hold_joins = False  # answer joins (epoch 0) with COORDINATOR_LOAD_IN_PROGRESS
        self.commit_error = 0
        self.commit_errors: list[int] = []  # errors answering the next commits, in turn (then commit_error)
        self.commit_gate: asyncio.Event | None = None  # while set and not fired, commits wait (in flight)
        self.commits_held = 0  # commits that waited at the gate
        self.heartbeats: list[ConsumerGroupHeartbeatRequest] = []
        self.commits: list[OffsetCommitRequest] = []
        self.fetches: list[OffsetFetchRequest] = []
        self.fetch_errors: list[int] = []  # group-level errors for the next fetches, in turn
        self.metadata_requests = 0
        self.interval_ms = 20
        self.errors_at: dict[int, int] = {}  # heartbeat index -> error code answering it
        self.lost_at: set[int] = set()  # heartbeat indexes whose answer is lost (connection error)
        self.sent_at: list[float] = []  # when each heartbeat reached the coordinator
        self.stall: asyncio.Event | None = None  # while set and not fired, heartbeats (not leaves) hang
        self.lookup_error: Exception | None = None  # FindCoordinator refused with this

    def answer(self, message: Any) -> Any:
        if isinstance(message, ConsumerGroupHeartbeatRequest):
            self.heartbeats.append(message)
            if len(self.heartbeats) - 1 in self.errors_at:
                return ConsumerGroupHeartbeatResponse(
                    error_code=self.errors_at[len(self.heartbeats) - 1], error_message="scripted"
                )
            if self.next_error:
                error, self.next_error = self.next_error, 0
                return ConsumerGroupHeartbeatResponse(error_code=error, error_message="scripted")
            if message.member_epoch == 0 and self.hold_joins:
                return ConsumerGroupHeartbeatResponse(error_code=14)
            if message.member_epoch < 0:
                return ConsumerGroupHeartbeatResponse(member_id=message.member_id, member_epoch=message.member_epoch)
            return ConsumerGroupHeartbeatResponse(
                member_id=message.member_id,
                member_epoch=self.epoch,
                heartbeat_interval_ms=self.interval_ms,
                assignment=ConsumerGroupHeartbeatAssignment([TopicIdPartitions(self.topic_id, list(self.target))]),
            )
        if isinstance(message, MetadataRequest):
            self.metadata_requests += 1
            return MetadataResponse(topics=[MetadataResponseTopic(0, TOPIC, self.topic_id)])
        if isinstance(message, OffsetCommitRequest):
            self.commits.append(message)
            code = self.commit_errors.pop(0) if self.commit_errors else self.commit_error
            return OffsetCommitResponse(
                topics=[
                    OffsetCommitResponseTopic(
                        t.name,
                        t.topic_id,
                        [OffsetCommitResponsePartition(p.partition_index, code) for p in t.partitions],
                    )
                    for t in message.topics
                ]
            )
        if isinstance(message, OffsetFetchRequest):
            self.fetches.append(message)
            error = self.fetch_errors.pop(0) if self.fetch_errors else 0
            (group,) = message.groups
            return OffsetFetchResponse(
                groups=[
                    OffsetFetchResponseGroup(
                        group.group_id,
                        []
                        if error
                        else [
                            OffsetFetchResponseTopics(
                                TOPIC,
                                partitions=[
                                    OffsetFetchResponsePartitions(p, 40 + p if p else -1, -1, "x")
                                    for p in t.partition_indexes
                                ],
                            )
                            for t in group.topics
                        ],
                        error,
                    )
                ]
            )
        raise AssertionError(f"unexpected request {message!r}")


class FakeClient:
    """The parts of AIOKafkaClient a coordinator uses; requests go to a FakeGroupCoordinator."""

    def __init__(self, group: FakeGroupCoordinator):
        self.group = group
        self.cluster = FakeCluster()

    async def coordinator_lookup(self, coordination_type, group_id):
        if self.group.lookup_error is not None:
            raise self.group.lookup_error
        return 1

    async def ready(self, node_id, group=None):
        return True

    async def force_metadata_update(self):
        return True

    def set_topics(self, topics):
        pass

    async def send(self, node_id, request, group=None):
        await asyncio.sleep(0)
        versions = {
            68: (0, 1) if self.group.supports_848 else None,
            3: (0, 13),
            8: (0, self.group.commit_max_version),
            9: (0, 10),
        }
        versions = {k: v for k, v in versions.items() if v is not None}
        prepared = request.prepare(versions)  # raises UnsupportedApiVersion as aiokafka's connection would
        message = prepared.message
        if isinstance(message, ConsumerGroupHeartbeatRequest):
            index = len(self.group.sent_at)
            self.group.sent_at.append(time.monotonic())
            if self.group.stall is not None and message.member_epoch >= 0:
                await self.group.stall.wait()
            if index in self.group.lost_at:
                self.group.heartbeats.append(message)
                raise Errors.KafkaConnectionError("scripted: connection lost")
        if isinstance(message, OffsetCommitRequest) and self.group.commit_gate is not None:
            self.group.commits_held += 1
            await self.group.commit_gate.wait()
        return self.group.answer(message)


def coordinator(group: FakeGroupCoordinator, listener: Recorder | None = None, **settings: Any):
    subscription = SubscriptionState()
    subscription.register_fetch_waiters(set())  # the fetcher would
    subscription.subscribe({TOPIC}, listener=listener or Recorder())
    kwargs = dict(
        group_id="g",
        group_instance_id=None,
        heartbeat_interval_ms=3000,
        session_timeout_ms=10000,
        retry_backoff_ms=10,
        enable_auto_commit=True,
        auto_commit_interval_ms=60000,
        exclude_internal_topics=True,
        rebalance_timeout_ms=30000,
        max_poll_interval_ms=300000,
    )
    kwargs.update(settings)
    return ConsumerGroupCoordinator(FakeClient(group), subscription, server_assignor="uniform", **kwargs), subscription


async def until(condition, timeout: float = 5.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {timeout} s")
        await asyncio.sleep(0.01)


def tps(*parts: int) -> set[TP]:
    return {TP(TOPIC, p) for p in parts}


@pytest.mark.asyncio
async def test_join_names_topic_ids_assigns_and_acknowledges():
    async def scenario():
        group, listener = FakeGroupCoordinator(), Recorder()
        coord, subscription = coordinator(group, listener)
        await until(lambda: listener.calls, what="first assignment")
        await until(lambda: any(h.topic_partitions for h in group.heartbeats[1:]), what="acknowledgement")
        await coord.close()
        return group, listener, subscription, coord

    group, listener, subscription, coord = await asyncio.wait_for(scenario(), 30)
    join = group.heartbeats[0]
    assert join.member_epoch == 0 and join.subscribed_topic_names == [TOPIC] and join.server_assignor == "uniform"
    assert join.topic_partitions == [] and join.rebalance_timeout_ms == 300000 and join.member_id == coord.member_id
    assert group.metadata_requests >= 1
    assert listener.calls[0] == ("assigned", tps(0, 1))
    ack = next(h for h in group.heartbeats[1:] if h.topic_partitions)
    assert ack.topic_partitions == [TopicIdPartitions(T, [0, 1])] and ack.member_epoch == 1
    assert ack.subscribed_topic_names is None and ack.rebalance_timeout_ms == -1  # incremental
    assert group.heartbeats[-1].member_epoch == -1  # closing left the group
    assert listener.calls[-1] == ("revoked", tps(0, 1))


@pytest.mark.asyncio
async def test_revocation_commits_first_keeps_positions_and_acknowledges_with_the_epoch():
    async def scenario():
        group, listener = FakeGroupCoordinator(), Recorder()
        group.target = [0, 1, 2]
        coord, subscription = coordinator(group, listener)
        await until(
            lambda: (
                subscription.subscription.assignment is not None
                and subscription.subscription.assignment.tps == tps(0, 1, 2)
            ),
            what="assignment",
        )
        assignment = subscription.subscription.assignment
        assignment.state_value(TP(TOPIC, 0)).seek(10)
        assignment.state_value(TP(TOPIC, 2)).seek(42)
        group.epoch, group.target = 2, [0, 1]
        await until(lambda: ("revoked", tps(2)) in listener.calls, what="revocation")
        await until(
            lambda: any(
                h.topic_partitions == [TopicIdPartitions(T, [0, 1])] and h.member_epoch == 2 for h in group.heartbeats
            ),
            what="acknowledgement",
        )
        now = subscription.subscription.assignment
        position = now.state_value(TP(TOPIC, 0)).position
        await coord.close()
        return group, listener, now, position

    group, listener, now, position = await asyncio.wait_for(scenario(), 30)
    commit = group.commits[0]
    assert commit.generation_id_or_member_epoch == 2 and commit.member_id
    assert [
        (t.name, t.topic_id, [(p.partition_index, p.committed_offset) for p in t.partitions]) for t in commit.topics
    ] == [(TOPIC, T, [(2, 42)])]
    assert now.tps == tps(0, 1) and position == 10, "kept partitions keep their positions"
    revoke_at = listener.calls.index(("revoked", tps(2)))
    assert listener.calls[revoke_at + 1] == ("assigned", set()), "on_partitions_assigned follows, with nothing new"


@pytest.mark.asyncio
async def test_fencing_loses_partitions_uncommitted_and_rejoins_at_epoch_0():
    async def scenario():
        group, listener = FakeGroupCoordinator(), Recorder()
        coord, subscription = coordinator(group, listener)
        await until(
            lambda: (
                subscription.subscription.assignment is not None
                and subscription.subscription.assignment.tps == tps(0, 1)
            ),
            what="assignment",
        )
        sent = len(group.heartbeats)
        group.next_error = 110  # FENCED_MEMBER_EPOCH
        await until(lambda: ("lost", tps(0, 1)) in listener.calls, what="loss")
        await until(lambda: any(h.member_epoch == 0 for h in group.heartbeats[sent:]), what="rejoin")
        await until(lambda: listener.calls[-1] == ("assigned", tps(0, 1)), what="reassignment")
        commits = len(group.commits)
        await coord.close()
        return group, listener, commits

    group, listener, commits = await asyncio.wait_for(scenario(), 30)
    assert commits == 0, "lost partitions are not committed"
    lost_at = listener.calls.index(("lost", tps(0, 1)))
    assert ("revoked", tps(0, 1)) not in listener.calls[:lost_at]
    rejoin = next(h for h in group.heartbeats[1:] if h.member_epoch == 0)
    assert rejoin.subscribed_topic_names == [TOPIC] and rejoin.topic_partitions == []


@pytest.mark.asyncio
async def test_commits_carry_the_member_epoch_and_fenced_ones_fail():
    async def scenario():
        group = FakeGroupCoordinator()
        group.epoch = 7
        coord, subscription = coordinator(group, enable_auto_commit=False)
        await until(
            lambda: (
                subscription.subscription.assignment is not None
                and subscription.subscription.assignment.tps == tps(0, 1)
            ),
            what="assignment",
        )
        assignment = subscription.subscription.assignment
        await coord.commit_offsets(assignment, {TP(TOPIC, 0): OffsetAndMetadata(5, "m")})
        group.commit_error = 25  # UNKNOWN_MEMBER_ID: the member is gone
        with pytest.raises(Errors.CommitFailedError):
            await coord.commit_offsets(assignment, {TP(TOPIC, 0): OffsetAndMetadata(7, "")})
        sent = len(group.commits)
        group.hold_joins, group.next_error = True, 25
        await until(lambda: coord.member.state is MemberState.JOINING, what="fenced and rejoining")
        with pytest.raises(Errors.CommitFailedError):  # refused before reaching the broker
            await coord._do_commit_offsets(assignment, {TP(TOPIC, 0): OffsetAndMetadata(8, "")})
        after = len(group.commits)
        await coord.close()
        return group, sent, after

    group, sent, after = await asyncio.wait_for(scenario(), 30)
    first = group.commits[0]
    assert first.generation_id_or_member_epoch == 7 and first.topics[0].partitions[0].committed_metadata == "m"
    assert after == sent, "a member without an epoch sends no commit"


@pytest.mark.asyncio
async def test_committed_offsets_are_read_with_the_member_epoch_and_a_stale_one_is_retried():
    """OffsetFetch v9+ as Java's consumer sends it: member id and epoch, require_stable; the broker's
    STALE_MEMBER_EPOCH is retried (after the heartbeat has caught up), UNKNOWN_MEMBER_ID raised."""

    async def scenario():
        group = FakeGroupCoordinator()
        group.epoch = 5
        coord, subscription = coordinator(group, enable_auto_commit=False)
        await until(lambda: subscription.subscription.assignment is not None, what="assignment")
        group.fetch_errors = [113]  # STALE_MEMBER_EPOCH once
        offsets = await coord.fetch_committed_offsets([TP(TOPIC, 0), TP(TOPIC, 1)])
        group.fetch_errors = [25]
        with pytest.raises(Errors.UnknownMemberIdError):
            await coord.fetch_committed_offsets([TP(TOPIC, 1)])
        await coord.close()
        return group, offsets

    group, offsets = await asyncio.wait_for(scenario(), 30)
    assert offsets == {TP(TOPIC, 1): OffsetAndMetadata(41, "x")}  # partition 0 has no committed offset
    first, retried = group.fetches[0], group.fetches[1]
    assert first.require_stable and first.groups[0].member_epoch == 5 and first.groups[0].member_id
    assert retried.groups[0].member_epoch == 5 and retried.groups[0].topics[0].partition_indexes == [0, 1]


@pytest.mark.asyncio
@pytest.mark.parametrize("code, name", [(111, "UNRELEASED_INSTANCE_ID"), (81, "GROUP_MAX_SIZE_REACHED")])
async def test_fatal_errors_reach_the_application(code, name):
    async def scenario():
        group, listener = FakeGroupCoordinator(), Recorder()
        group.next_error = code
        coord, subscription = coordinator(group, listener, group_instance_id="i-1")
        waiter = subscription.wait_for_assignment()
        with pytest.raises(GroupProtocolError) as raised:
            await asyncio.wait_for(waiter, 5)
        for _ in range(2):  # raised on every call: the membership is over
            with pytest.raises(GroupProtocolError):
                coord.check_errors()
        heartbeats = len(group.heartbeats)
        await asyncio.sleep(0.1)
        silent = len(group.heartbeats) == heartbeats
        await coord.close()
        return raised.value, silent, group

    error, silent, group = await asyncio.wait_for(scenario(), 30)
    assert error.error == name and silent, "a failed member stops heartbeating"
    assert group.heartbeats[0].instance_id == "i-1"
    assert all(h.member_epoch >= 0 for h in group.heartbeats), "a failed member does not leave"


@pytest.mark.asyncio
async def test_a_broker_without_the_protocol_is_named_in_the_error():
    async def scenario():
        coord, subscription = coordinator(FakeGroupCoordinator(supports_848=False))
        with pytest.raises(GroupProtocolError) as raised:
            await asyncio.wait_for(subscription.wait_for_assignment(), 5)
        await coord.close()
        return raised.value

    error = await asyncio.wait_for(scenario(), 30)
    assert error.error == "UNSUPPORTED_VERSION"
    assert "node 1 (fake-broker:9092)" in str(error) and "group_protocol='classic'" in str(error)
    assert "ConsumerGroupHeartbeatRequest (API key 68)" in str(error)  # the client-side refusal, kept


@pytest.mark.asyncio
@pytest.mark.parametrize("instance_id, epoch", [(None, -1), ("i-1", -2)])
async def test_close_revokes_then_leaves(instance_id, epoch):
    async def scenario():
        group, listener = FakeGroupCoordinator(), Recorder()
        coord, subscription = coordinator(group, listener, group_instance_id=instance_id)
        await until(lambda: listener.calls, what="assignment")
        await coord.close()
        return group, listener

    group, listener = await asyncio.wait_for(scenario(), 30)
    leave = group.heartbeats[-1]
    assert leave.member_epoch == epoch and leave.instance_id == instance_id
    assert leave.subscribed_topic_names is None and leave.topic_partitions is None
    assert listener.calls[-1] == ("revoked", tps(0, 1))


# -- CooperativeConsumer's arguments ---------------------------------------------------------------


async def _consumer(**kwargs):
    return CooperativeConsumer(bootstrap_servers="localhost:1", group_id="g", **kwargs)


@pytest.mark.asyncio
async def test_consumer_protocol_arguments_are_accepted():
    c = await _consumer(group_protocol="consumer", group_remote_assignor="range")
    assert c.group_protocol == "consumer" and c.rebalance_protocol is RebalanceProtocol.COOPERATIVE
    assert (await _consumer()).group_protocol == "classic"


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(group_protocol="streams"), "group_protocol must be one of"),
        (dict(group_remote_assignor="uniform"), "applies to group_protocol='consumer' only"),
        (dict(group_protocol="consumer", group_remote_assignor=""), "must name a broker-side assignor"),
        (dict(group_protocol="consumer", partition_assignment_strategy=("range",)), "cannot be set"),
        (dict(group_protocol="consumer", session_timeout_ms=10000), "session_timeout_ms cannot be set"),
        (dict(group_protocol="consumer", heartbeat_interval_ms=100), "heartbeat_interval_ms cannot be set"),
    ],
    ids=[
        "unknown protocol",
        "remote assignor on classic",
        "empty remote assignor",
        "client assignors",
        "session timeout",
        "heartbeat interval",
    ],
)
async def test_consumer_protocol_arguments_refused_as_java_refuses_them(kwargs, message):
    with pytest.raises(ValueError, match=message):
        await _consumer(**kwargs)


@pytest.mark.asyncio
async def test_a_commit_issued_before_fencing_never_goes_out_under_the_new_epoch():
    """A zombie's commit that waits (here: behind the commit lock) while the member is fenced and joins
    again must fail, not be sent with the new epoch: its partitions were another member's meanwhile."""

    async def scenario():
        group, listener = FakeGroupCoordinator(), Recorder()
        coord, subscription = coordinator(group, listener, enable_auto_commit=False)
        await until(
            lambda: (
                subscription.subscription.assignment is not None
                and subscription.subscription.assignment.tps == tps(0, 1)
            ),
            what="assignment",
        )
        assignment = subscription.subscription.assignment
        await coord._commit_lock.acquire()
        late = asyncio.ensure_future(coord.commit_offsets(assignment, {TP(TOPIC, 0): OffsetAndMetadata(9, "")}))
        await asyncio.sleep(0.05)
        group.epoch, group.next_error = 5, 110
        await until(
            lambda: ("lost", tps(0, 1)) in listener.calls and coord.member.member_epoch == 5,
            what="fenced and back at epoch 5",
        )
        coord._commit_lock.release()
        with pytest.raises(Errors.CommitFailedError):
            await late
        await coord.close()
        return group

    group = await asyncio.wait_for(scenario(), 30)
    assert group.commits == [], "the late commit reached the broker"


# -- issue #26: Java's heartbeat and membership rules, through the aiokafka coordinator -----------------


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "failure",
    ["lost", 14, 15, 16],
    ids=["connection lost", "COORDINATOR_LOAD_IN_PROGRESS", "COORDINATOR_NOT_AVAILABLE", "NOT_COORDINATOR"],
)
async def test_a_failed_heartbeat_is_retried_after_the_backoff_not_the_interval(failure):
    """The coordinator asks for a 3 s interval; the acknowledgement (heartbeat 1) fails: the retry goes
    after the 10 ms retry backoff (or at once once the coordinator is found), not 3 s later."""

    async def scenario():
        group = FakeGroupCoordinator()
        group.interval_ms = 3000
        if failure == "lost":
            group.lost_at = {1}
        else:
            group.errors_at = {1: failure}
        coord, subscription = coordinator(group)
        await until(lambda: len(group.sent_at) >= 3, what="the retry")
        await coord.close()
        return group

    group = await asyncio.wait_for(scenario(), 30)
    assert group.sent_at[2] - group.sent_at[1] < 0.5
    assert group.heartbeats[2].topic_partitions is not None  # full again, owned partitions included


@pytest.mark.asyncio
async def test_topic_authorization_failure_is_raised_once_and_the_member_carries_on():
    async def scenario():
        group, listener = FakeGroupCoordinator(), Recorder()
        group.interval_ms = 50
        coord, subscription = coordinator(group, listener)
        await until(lambda: listener.calls, what="assignment")
        group.errors_at = {len(group.heartbeats) + 1: 29}
        await until(lambda: coord._reported_error is not None, what="the report")
        with pytest.raises(Errors.TopicAuthorizationFailedError) as raised:
            coord.check_errors()
        coord.check_errors()  # once only
        sent = len(group.heartbeats)
        await until(lambda: len(group.heartbeats) > sent + 1, what="heartbeats going on")
        state, owned = coord.member.state, coord.owned_partitions
        await coord.close()
        return raised.value, state, owned, listener

    error, state, owned, listener = await asyncio.wait_for(scenario(), 30)
    assert isinstance(error, GroupProtocolError) and error.error == "TOPIC_AUTHORIZATION_FAILED"
    assert state is MemberState.STABLE and owned == tps(0, 1)
    assert not any(call[0] == "lost" for call in listener.calls)


@pytest.mark.asyncio
async def test_group_authorization_failure_on_a_heartbeat_is_aiokafkas_error_class():
    async def scenario():
        group = FakeGroupCoordinator()
        group.errors_at = {0: 30}
        coord, subscription = coordinator(group)
        with pytest.raises(Errors.GroupAuthorizationFailedError) as raised:
            await asyncio.wait_for(subscription.wait_for_assignment(), 5)
        with pytest.raises(Errors.GroupAuthorizationFailedError):
            coord.check_errors()
        await coord.close()
        return raised.value

    error = await asyncio.wait_for(scenario(), 30)
    assert isinstance(error, GroupProtocolError) and error.error == "GROUP_AUTHORIZATION_FAILED"


@pytest.mark.asyncio
async def test_group_authorization_failure_finding_the_coordinator_is_aiokafkas_error_without_a_traceback(caplog):
    async def scenario():
        group = FakeGroupCoordinator()
        group.lookup_error = Errors.GroupAuthorizationFailedError()
        coord, subscription = coordinator(group)
        with pytest.raises(Errors.GroupAuthorizationFailedError):
            await asyncio.wait_for(subscription.wait_for_assignment(), 5)
        group.lookup_error = None  # the ACL is added: the member joins after all
        await until(lambda: subscription.subscription.assignment is not None, what="joined after all")
        await coord.close()

    await asyncio.wait_for(scenario(), 30)
    assert not [r for r in caplog.records if r.exc_info], "a traceback was logged"


@pytest.mark.asyncio
async def test_group_authorization_failure_fetching_committed_offsets_is_raised_once_as_aiokafkas_error(caplog):
    async def scenario():
        group = FakeGroupCoordinator()
        coord, subscription = coordinator(group, enable_auto_commit=False)
        await until(lambda: subscription.subscription.assignment is not None, what="assignment")
        group.fetch_errors = [30]
        subscription.subscription.assignment.state_value(TP(TOPIC, 0)).fetch_committed()
        await until(lambda: coord._reported_error is not None, what="the report")
        with pytest.raises(Errors.GroupAuthorizationFailedError):
            coord.check_errors()
        coord.check_errors()
        await coord.close()

    await asyncio.wait_for(scenario(), 30)
    assert not [r for r in caplog.records if r.exc_info], "a traceback was logged"


@pytest.mark.asyncio
async def test_the_leave_does_not_wait_for_a_heartbeat_in_flight():
    async def scenario():
        group, listener = FakeGroupCoordinator(), Recorder()
        coord, subscription = coordinator(group, listener)
        await until(lambda: listener.calls, what="assignment")
        group.stall = asyncio.Event()  # the coordinator stops answering heartbeats
        sent = len(group.sent_at)
        await until(lambda: len(group.sent_at) > sent, what="a heartbeat in flight")
        started = time.monotonic()
        await coord.close()
        took = time.monotonic() - started
        group.stall.set()
        return group, took

    group, took = await asyncio.wait_for(scenario(), 30)
    assert group.heartbeats[-1].member_epoch == -1, "the leave never went out"
    assert took < 2.0


@pytest.mark.asyncio
async def test_group_id_not_found_answering_a_leave_lets_the_consumer_subscribe_again():
    async def scenario():
        group, listener = FakeGroupCoordinator(), Recorder()
        coord, subscription = coordinator(group, listener)
        await until(lambda: listener.calls, what="assignment")
        group.errors_at = {len(group.heartbeats): 69}  # GROUP_ID_NOT_FOUND answers the leave
        subscription.unsubscribe()
        await coord._maybe_leave_group()
        assert group.heartbeats[-1].member_epoch == -1
        subscription.subscribe({TOPIC}, listener=listener)
        await until(lambda: subscription.subscription.assignment is not None, what="joined again")
        coord.check_errors()
        await coord.close()
        return coord

    assert (await asyncio.wait_for(scenario(), 30)).member.fatal_error is None
