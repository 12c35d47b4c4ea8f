"""Java ConsumerCoordinator/AbstractCoordinator rules of kassign's classic coordinator, against a fake
coordinator connection: FENCED_INSTANCE_ID answering JoinGroup or SyncGroup is fencing; ILLEGAL_GENERATION
keeps the member id (KAFKA-13419); a member with a member id and no generation leaves; a rack-aware
leader watches replica racks (KIP-881); an assignor that raises does not stop the round."""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace

import pytest

pytest.importorskip("aiokafka")

from aiokafka.consumer.subscription_state import SubscriptionState  # noqa: E402
from aiokafka.structs import TopicPartition as TP  # noqa: E402

from kassign.adapters.aiokafka import FencedInstanceIdError  # noqa: E402
from kassign.adapters.aiokafka.coordinator import _BESIDE_THE_JOIN  # noqa: E402
from kassign.assignors import CooperativeStickyAssignor  # noqa: E402
from kassign.model import RebalanceProtocol, Subscription  # noqa: E402
from kassign.protocol import encode_subscription  # noqa: E402
from tests.adapters.test_aiokafka_cooperative_member import (  # noqa: E402
    OfflineCoordinator,
    Recorder,
    StubAssignor,
    _member,
    assignment_bytes,
)

FENCED_INSTANCE_ID, ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID = 82, 22, 25


class FakeCoordinatorClient:
    """Answers each request type (by class name) with the next of its canned responses; records requests."""

    def __init__(self, **answers):
        self.answers = {name: list(responses) for name, responses in answers.items()}
        self.sent: list[tuple[str, object, object]] = []
        self.opened: list[tuple[int, object]] = []

    async def ready(self, node_id, *, group=None):
        self.opened.append((node_id, group))
        return True

    async def send(self, node_id, request, group=None):
        name = type(request).__name__
        self.sent.append((name, request, group))
        return self.answers[name].pop(0)


def join_ok(generation=5, member_id="m-1", leader_id="m-0"):
    return SimpleNamespace(
        error_code=0,
        generation_id=generation,
        member_id=member_id,
        leader_id=leader_id,
        group_protocol="cooperative-sticky",
        members=[],
    )


def error(code):
    return SimpleNamespace(error_code=code)


class JoiningAssignor(StubAssignor):
    def subscription_user_data(self, topics):
        return None


class Networked(OfflineCoordinator):
    """The offline member with aiokafka's coordinator requests going to a fake client."""

    def __init__(self, subscription, client, *, instance_id=None):
        super().__init__(subscription, RebalanceProtocol.COOPERATIVE, auto_commit=False)
        self._assignors = (JoiningAssignor(),)
        self._client = client
        self.coordinator_id = 0
        self._group_instance_id = instance_id
        self._session_timeout_ms = 10000
        self._closing = asyncio.get_running_loop().create_future()


async def _networked(client, *, instance_id=None, owned=(("t", 0), ("t", 1))):
    """A member of generation 4 owning ``owned``, its requests answered by ``client``."""
    subscription, listener = SubscriptionState(), Recorder()
    subscription.subscribe({"t"}, listener=listener)
    coordinator = Networked(subscription, client, instance_id=instance_id)
    await coordinator._on_join_complete(4, "m-1", "cooperative-sticky", assignment_bytes(*owned))
    coordinator.generation = 4
    return coordinator, listener


def _assert_fenced(coordinator, listener):
    assert listener.calls[-1] == ("lost", {TP("t", 0), TP("t", 1)})
    assert coordinator.owned_partitions == frozenset()
    assert coordinator._subscription.subscription.assignment.tps == frozenset()  # nothing fetched any more
    assert not coordinator.need_rejoin(coordinator._subscription.subscription)
    coordinator._coordination_task = asyncio.get_running_loop().create_future()
    coordinator._error_consumed_fut, coordinator._pending_exception = None, None
    for _ in range(2):  # from every poll, as Java's
        with pytest.raises(FencedInstanceIdError):
            coordinator.check_errors()


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "answers",
    [
        {"JoinGroupRequest": [error(FENCED_INSTANCE_ID)]},
        {"JoinGroupRequest": [join_ok()], "SyncGroupRequest": [error(FENCED_INSTANCE_ID)]},
    ],
    ids=["JoinGroup", "SyncGroup"],
)
async def test_fenced_instance_id_answering_a_round_is_fencing(answers):
    async def scenario():
        coordinator, listener = await _networked(FakeCoordinatorClient(**answers), instance_id="static-a")
        with pytest.raises(FencedInstanceIdError):
            await coordinator._do_rejoin_group(coordinator._subscription.subscription)
        _assert_fenced(coordinator, listener)
        await coordinator._stop_commit_offsets_refresh_task()

    await scenario()


@pytest.mark.asyncio
@pytest.mark.parametrize("path", ["Heartbeat", "SyncGroup"])
async def test_illegal_generation_resets_the_generation_and_keeps_the_member_id(path):
    async def scenario():
        if path == "Heartbeat":
            client = FakeCoordinatorClient(HeartbeatRequest=[error(ILLEGAL_GENERATION)])
            coordinator, _ = await _networked(client)
            coordinator.generation = 4
            await coordinator._do_heartbeat()
        else:
            client = FakeCoordinatorClient(JoinGroupRequest=[join_ok()], SyncGroupRequest=[error(ILLEGAL_GENERATION)])
            coordinator, _ = await _networked(client)
            assert await coordinator._do_rejoin_group(coordinator._subscription.subscription) is False
        assert (coordinator.generation, coordinator.member_id) == (-1, "m-1")
        assert coordinator._rejoin_needed_fut.done()
        # The next round names the member; what it owned is lost (Java's onJoinPrepare on a reset generation).
        await coordinator._maybe_lose_partitions()
        assert coordinator.owned_partitions == frozenset()
        await coordinator._stop_commit_offsets_refresh_task()

    await scenario()


@pytest.mark.asyncio
async def test_unknown_member_id_still_resets_the_member_id():
    async def scenario():
        coordinator, _ = await _networked(FakeCoordinatorClient(HeartbeatRequest=[error(UNKNOWN_MEMBER_ID)]))
        coordinator.generation = 4
        await coordinator._do_heartbeat()
        assert (coordinator.generation, coordinator.member_id) == (-1, "")
        await coordinator._stop_commit_offsets_refresh_task()

    await scenario()


@pytest.mark.asyncio
async def test_no_heartbeat_without_a_generation():
    """After the reset that keeps the member id, the heartbeat task (until the rejoin stops it) has no
    generation to heartbeat for: it sends nothing rather than collecting ILLEGAL_GENERATION again."""

    async def scenario():
        client = FakeCoordinatorClient()
        coordinator, _ = await _networked(client)
        coordinator.generation = -1
        assert await coordinator._do_heartbeat() is True and client.sent == []
        await coordinator._stop_commit_offsets_refresh_task()

    await scenario()


@pytest.mark.asyncio
@pytest.mark.parametrize("join_in_flight", [False, True])
async def test_a_member_with_a_member_id_and_no_generation_leaves(join_in_flight):
    """Closed during its first join (KIP-394 gave it a member id, no generation yet): Java's
    maybeLeaveGroup sends LeaveGroup, so the group does not wait for, or assign to, the member."""

    async def scenario():
        client = FakeCoordinatorClient(LeaveGroupRequest=[error(0)])
        coordinator, _ = await _networked(client, owned=())
        coordinator.generation, coordinator._join_in_flight = -1, join_in_flight
        await coordinator._maybe_leave_group()
        assert [(name, request._member_id) for name, request, _ in client.sent] == [("LeaveGroupRequest", "m-1")]
        assert (coordinator.generation, coordinator.member_id) == (-1, "")
        await coordinator._stop_commit_offsets_refresh_task()

    await scenario()


@pytest.mark.asyncio
@pytest.mark.parametrize("member_id, instance_id", [("", None), ("m-1", "static-a")])
async def test_no_leave_without_a_member_id_or_for_a_static_member(member_id, instance_id):
    async def scenario():
        client = FakeCoordinatorClient()
        coordinator, _ = await _networked(client, owned=(), instance_id=instance_id)
        coordinator.generation, coordinator.member_id = -1, member_id
        await coordinator._maybe_leave_group()
        assert client.sent == []
        await coordinator._stop_commit_offsets_refresh_task()

    await scenario()


class RackCluster:
    """aiokafka's ClusterMetadata as the leader reads it: one topic, replicas on racked brokers."""

    def __init__(self, replicas, racks):
        self.replicas, self.racks = replicas, racks  # partition -> node ids; node id -> rack

    @property
    def _partitions(self):
        return {"t": {p: SimpleNamespace(replicas=nodes) for p, nodes in self.replicas.items()}}

    def partitions_for_topic(self, topic):
        return set(self.replicas) if topic == "t" else None

    def broker_metadata(self, node_id):
        return SimpleNamespace(rack=self.racks.get(node_id))

    def topics(self, exclude_internal_topics=True):
        return {"t"}


class NoWaitClient:
    def set_topics(self, topics):
        pass

    async def _maybe_wait_metadata(self):
        pass


@pytest.mark.asyncio
@pytest.mark.parametrize("member_rack", ["r1", None])
async def test_a_rack_aware_leader_rejoins_when_replica_racks_change(member_rack):
    """KIP-881 (Java's MetadataSnapshot with PartitionRackInfo): the leader of a rack-aware assignment
    rebalances when a partition's replicas move to other racks; without racks only counts matter."""

    async def scenario():
        member, _ = await _member()
        member._assignors = (CooperativeStickyAssignor(),)
        member._client = NoWaitClient()
        member._cluster = RackCluster({0: [1, 2], 1: [2, 3]}, {1: "r1", 2: "r2", 3: "r3"})
        metadata = encode_subscription(Subscription(["t"], None, [], None, member_rack))
        response = SimpleNamespace(group_protocol="cooperative-sticky", members=[("m-1", metadata)])
        await member._perform_assignment(response)
        member._handle_metadata_update(member._cluster)
        assert not member._rejoin_needed_fut.done()  # same metadata
        member._cluster.replicas[0] = [1, 3]  # partition 0: a replica moves from r2 to r3
        member._handle_metadata_update(member._cluster)
        return member._rejoin_needed_fut.done()

    assert await scenario() is (member_rack is not None)


class RaisingAssignor(StubAssignor):
    def on_assignment(self, partitions, generation):
        super().on_assignment(partitions, generation)
        raise RuntimeError("assignor bug")


@pytest.mark.asyncio
async def test_an_assignor_that_raises_does_not_abort_the_round():
    """Java logs it and completes the round (revocation, install, listener calls), then poll raises it:
    what the member owns is what the consumer fetches."""

    async def scenario():
        member, listener = await _member()
        await member._on_join_complete(1, "m-1", "cooperative-sticky", assignment_bytes(("t", 0), ("t", 1)))
        member._assignors = (RaisingAssignor(),)
        await member._on_join_complete(2, "m-1", "cooperative-sticky", assignment_bytes(("t", 1), ("t", 2)))
        assert listener.calls[-2:] == [("revoked", {TP("t", 0)}), ("assigned", {TP("t", 2)})]
        assert member._subscription.subscription.assignment.tps == member.owned_partitions == {TP("t", 1), TP("t", 2)}
        assert member._rejoin_needed_fut.done()  # the follow-up round for the revoked partition
        member._coordination_task = asyncio.get_running_loop().create_future()
        member._error_consumed_fut, member._pending_exception = None, None
        with pytest.raises(RuntimeError, match="assignor bug"):
            member.check_errors()
        member.check_errors()  # once
        await member._stop_commit_offsets_refresh_task()

    await scenario()


REBALANCE_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE = 27, 15


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("answers", "at_once"),
    [
        ({"JoinGroupRequest": [join_ok()], "SyncGroupRequest": [error(REBALANCE_IN_PROGRESS)]}, True),
        ({"JoinGroupRequest": [error(REBALANCE_IN_PROGRESS)]}, True),
        ({"JoinGroupRequest": [join_ok()], "SyncGroupRequest": [error(UNKNOWN_MEMBER_ID)]}, True),
        ({"JoinGroupRequest": [join_ok()], "SyncGroupRequest": [error(COORDINATOR_NOT_AVAILABLE)]}, False),
    ],
    ids=["SyncGroup-rebalance", "JoinGroup-rebalance", "SyncGroup-unknown-member", "SyncGroup-coordinator"],
)
async def test_a_round_that_lost_to_the_next_one_rejoins_at_once(answers, at_once):
    """Java's joinGroupIfNeeded rejoins at once after REBALANCE_IN_PROGRESS, UNKNOWN_MEMBER_ID,
    ILLEGAL_GENERATION and MEMBER_ID_REQUIRED, and backs off after anything else; aiokafka backed off
    after every failed round. A SyncGroup overtaken by another member's JoinGroup is the common case:
    the next round's barrier waits for this member, so its backoff delayed everyone."""
    coordinator, _ = await _networked(FakeCoordinatorClient(**answers))
    coordinator._retry_backoff_ms = 60_000
    coordinator._coordinator_dead_fut = asyncio.get_running_loop().create_future()  # the lookup's signal
    rejoin = asyncio.ensure_future(coordinator._do_rejoin_group(coordinator._subscription.subscription))
    done, _ = await asyncio.wait({rejoin}, timeout=5)
    try:
        assert bool(done) is at_once, f"rejoin {'waited for' if at_once else 'skipped'} the retry backoff"
        if done:
            assert rejoin.result() is False
    finally:
        rejoin.cancel()
        await asyncio.gather(rejoin, return_exceptions=True)
        await coordinator._stop_commit_offsets_refresh_task()


@pytest.mark.asyncio
async def test_the_connection_beside_the_join_is_opened_after_a_completed_round_only():
    """Commits and LeaveGroup sent while the JoinGroup waits use a connection of their own; it is
    opened between rounds, not on first use inside a round (where a large group's members all want
    the machine at once), and kept open by the heartbeats."""
    client = FakeCoordinatorClient(
        JoinGroupRequest=[error(REBALANCE_IN_PROGRESS), join_ok(generation=5), join_ok(generation=6)],
        SyncGroupRequest=[
            SimpleNamespace(error_code=0, member_assignment=assignment_bytes(("t", 0))),
            SimpleNamespace(error_code=0, member_assignment=assignment_bytes(("t", 0))),
        ],
        AiokafkaRequest=[_topic_ids_answer(uuid.UUID(int=7))],  # the topic id, read after the first round
    )
    coordinator, _ = await _networked(client)
    subscription = coordinator._subscription.subscription
    try:
        assert await coordinator._do_rejoin_group(subscription) is False
        await asyncio.sleep(0)
        assert client.opened == [], "a failed round opened it"
        assert await coordinator._do_rejoin_group(subscription) is True
        await asyncio.sleep(0)
        assert client.opened == [(0, _BESIDE_THE_JOIN)]
        assert all(group != _BESIDE_THE_JOIN for _, _, group in client.sent)
        assert await coordinator._do_rejoin_group(subscription) is True
        await asyncio.sleep(0)
        assert client.opened == [(0, _BESIDE_THE_JOIN)] * 2, "kept (or opened again) after every round"
        # and after every heartbeat answered without error (aiokafka closes idle connections), but
        # not while a round is under way
        client.answers["HeartbeatRequest"] = [error(0), error(0), error(REBALANCE_IN_PROGRESS)]
        coordinator._joining = True
        assert await coordinator._do_heartbeat() is True
        await asyncio.sleep(0)
        coordinator._joining = False
        assert await coordinator._do_heartbeat() is True
        await asyncio.sleep(0)
        assert await coordinator._do_heartbeat() is True  # rebalancing: the round starts now
        assert coordinator._rejoin_needed_fut.done()
        await asyncio.sleep(0)
        assert client.opened == [(0, _BESIDE_THE_JOIN)] * 3
    finally:
        await coordinator._stop_commit_offsets_refresh_task()


def _topic_ids_answer(topic_id):
    from kassign.protocol.metadata import MetadataResponse, MetadataResponseTopic

    return MetadataResponse(topics=[MetadataResponseTopic(name="t", topic_id=topic_id, partitions=[])])


@pytest.mark.asyncio
async def test_a_topic_created_again_under_its_name_is_lost_once_the_round_is_over():
    """The topic ids of what the member owns are read beside aiokafka's metadata (which has none):
    the same id changes nothing; a new one (the topic deleted and created again, the same partition
    count) loses the owned partitions -- no commit, no longer fetched -- and rejoins. A read that
    lands during a round waits for its end: the round may hand the same names out again."""
    from kassign.protocol import AiokafkaRequest

    old, new = uuid.UUID(int=7), uuid.UUID(int=8)
    client = FakeCoordinatorClient(AiokafkaRequest=[_topic_ids_answer(old), _topic_ids_answer(new)])
    coordinator, listener = await _networked(client)
    try:
        coordinator._check_topic_ids()
        await coordinator._topic_ids_task
        (request,) = [r for name, r, _ in client.sent if name == "AiokafkaRequest"]
        assert isinstance(request, AiokafkaRequest)
        assert [t.name for t in request.message.topics] == ["t"] and not request.message.allow_auto_topic_creation
        assert not coordinator._rejoin_needed_fut.done() and coordinator.owned_partitions == {TP("t", 0), TP("t", 1)}

        coordinator._in_round = True
        coordinator._check_topic_ids()  # a metadata update during a round: read after it
        assert len(client.sent) == 1 and coordinator._topic_ids_stale
        coordinator._in_round = False
        coordinator._check_topic_ids()
        await coordinator._topic_ids_task
        assert listener.calls[-1] == ("lost", {TP("t", 0), TP("t", 1)})
        assert coordinator.owned_partitions == frozenset()
        assert coordinator._subscription.subscription.assignment.tps == frozenset()
        assert coordinator._rejoin_needed_fut.done()
        assert coordinator.committed == []
    finally:
        await coordinator._stop_commit_offsets_refresh_task()


@pytest.mark.asyncio
async def test_a_round_that_gives_a_topic_without_a_known_id_reads_it_after_the_round():
    """After the round, not inside it: a topic id read for newly owned partitions, once."""
    client = FakeCoordinatorClient(
        JoinGroupRequest=[join_ok(generation=5), join_ok(generation=6)],
        SyncGroupRequest=[
            SimpleNamespace(error_code=0, member_assignment=assignment_bytes(("t", 0), ("t", 1))),
            SimpleNamespace(error_code=0, member_assignment=assignment_bytes(("t", 0), ("t", 1))),
        ],
        AiokafkaRequest=[_topic_ids_answer(uuid.UUID(int=7))],
    )
    coordinator, listener = await _networked(client)
    subscription = coordinator._subscription.subscription
    try:
        assert await coordinator._do_rejoin_group(subscription) is True
        await coordinator._topic_ids_task
        assert [name for name, _, _ in client.sent] == ["JoinGroupRequest", "SyncGroupRequest", "AiokafkaRequest"]
        assert coordinator._member.topics_without_ids == frozenset()
        assert await coordinator._do_rejoin_group(subscription) is True
        await asyncio.sleep(0)
        assert [name for name, _, _ in client.sent].count("AiokafkaRequest") == 1, "known: not read again"
        assert not any(kind == "lost" for kind, _ in listener.calls)
    finally:
        await coordinator._stop_commit_offsets_refresh_task()
