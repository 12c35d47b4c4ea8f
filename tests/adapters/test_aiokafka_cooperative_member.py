"""The member side of KIP-429 in kassign's aiokafka coordinator, without a broker: what happens
after SyncGroup (revoke only what moves, add only what is new, keep positions, rejoin) and when
the generation is lost."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("aiokafka")

from aiokafka.consumer.subscription_state import SubscriptionState  # noqa: E402
from aiokafka.structs import TopicPartition as TP  # noqa: E402
from aiokafka.util import create_future  # noqa: E402

from integration.consumers import ListenerCalls, ListenerCallsWithLost  # noqa: E402
from kassign.adapters.aiokafka.coordinator import KassignGroupCoordinator  # noqa: E402
from kassign.model import Assignment, RebalanceProtocol  # noqa: E402
from kassign.protocol import encode_assignment  # noqa: E402

COOPERATIVE, EAGER = RebalanceProtocol.COOPERATIVE, RebalanceProtocol.EAGER


#: An aiokafka listener as written today (no on_partitions_lost), and one with it.
PlainRecorder, Recorder = ListenerCalls, ListenerCallsWithLost


class RaisingRecorder(Recorder):
    def on_partitions_revoked(self, revoked):
        super().on_partitions_revoked(revoked)
        raise RuntimeError("listener bug")


class StubAssignor:
    name = "cooperative-sticky"
    supported_protocols = (COOPERATIVE, EAGER)

    def __init__(self):
        self.assignments = []

    def on_assignment(self, partitions, generation):
        self.assignments.append((list(partitions), generation))


class OfflineCoordinator(KassignGroupCoordinator):
    """The coordinator's member logic with aiokafka's network parts left out; commits recorded."""

    def __init__(self, subscription, listener_protocol, auto_commit):  # noqa: D107 - skips network setup
        self._subscription = subscription
        self._assignors = (StubAssignor(),)
        self._protocol = listener_protocol
        self._init_member_state()
        self._client_rack = None
        self._enable_auto_commit = auto_commit
        self._commit_refresh_task = None
        self._rebalance_timeout_ms = 30000
        self._session_timeout_ms = 10000
        self._max_poll_interval = 300.0
        self._retry_backoff_ms = 10
        self._rejoin_needed_fut = create_future()
        self._commit_lock = asyncio.Lock()
        self.group_id = "g"
        self.generation = 1
        self.member_id = "m-1"
        self.committed = []

    async def _do_commit_offsets(self, assignment, offsets):
        self.committed.append({tp: o.offset for tp, o in offsets.items()})

    async def _maybe_refresh_commit_offsets(self, assignment):
        return True

    async def _on_join_complete(self, *args):
        await super()._on_join_complete(*args)
        await asyncio.sleep(0)  # let the committed-offset refresh task start, as the network would


def assignment_bytes(*parts):
    from kassign.model import TopicPartition

    return encode_assignment(Assignment([TopicPartition(t, p) for t, p in parts]))


async def _member(protocol=COOPERATIVE, auto_commit=True, listener=None):
    subscription = SubscriptionState()
    listener = listener or Recorder()
    subscription.subscribe({"t"}, listener=listener)
    return OfflineCoordinator(subscription, protocol, auto_commit), listener


@pytest.mark.asyncio
async def test_cooperative_join_complete_moves_only_the_difference_and_keeps_positions():
    async def scenario():
        member, listener = await _member()
        await member._on_join_complete(1, "m-1", "cooperative-sticky", assignment_bytes(("t", 0), ("t", 1), ("t", 2)))
        first = member._subscription.subscription.assignment
        first.state_value(TP("t", 0)).seek(10)
        first.state_value(TP("t", 1)).seek(20)
        kept_state = first.state_value(TP("t", 0))
        assert not member._rejoin_needed_fut.done()

        member.generation = 2
        await member._on_join_complete(2, "m-1", "cooperative-sticky", assignment_bytes(("t", 0), ("t", 3)))
        second = member._subscription.subscription.assignment
        assert listener.calls == [
            ("assigned", {TP("t", 0), TP("t", 1), TP("t", 2)}),
            ("revoked", {TP("t", 1), TP("t", 2)}),
            ("assigned", {TP("t", 3)}),
        ]
        assert member.committed == [{TP("t", 1): 20}]  # t2 had no position yet: nothing to commit
        assert second.tps == {TP("t", 0), TP("t", 3)}
        assert second.state_value(TP("t", 0)) is kept_state and kept_state.position == 10
        assert not first.active and second.active
        assert member._rejoin_needed_fut.done()  # revoked something: the follow-up rebalance starts at once
        assert member.owned_partitions == {TP("t", 0), TP("t", 3)}
        assert member._assignors[0].assignments[-1][1] == 2
        await member._stop_commit_offsets_refresh_task()

    await scenario()


@pytest.mark.asyncio
async def test_cooperative_join_with_nothing_new_still_calls_assigned_with_no_partitions():
    async def scenario():
        member, listener = await _member()
        await member._on_join_complete(1, "m-1", "cooperative-sticky", assignment_bytes(("t", 0)))
        await member._on_join_complete(2, "m-1", "cooperative-sticky", assignment_bytes(("t", 0)))
        assert listener.calls == [("assigned", {TP("t", 0)}), ("assigned", set())]
        assert not member._rejoin_needed_fut.done()
        await member._stop_commit_offsets_refresh_task()

    await scenario()


@pytest.mark.asyncio
async def test_join_metadata_carries_the_generation_of_the_owned_partitions_not_of_the_last_join():
    from kassign.adapters.aiokafka.group_protocol import member_metadata
    from kassign.protocol import decode_subscription

    class UserDataAssignor(StubAssignor):
        def subscription_user_data(self, topics):
            return None

    async def scenario():
        member, _ = await _member()
        assignor = UserDataAssignor()
        await member._on_join_complete(1, "m-1", "cooperative-sticky", assignment_bytes(("t", 0), ("t", 1)))
        after_sync = member.join_metadata(assignor, ["t"])
        sub = decode_subscription(after_sync)
        assert sub.generation_id == 1 and len(sub.owned_partitions) == 2
        # A JoinGroup answered generation 2, then SyncGroup failed: nothing owned changed, so the
        # metadata must not either (a broker without a join barrier would start yet another generation).
        member.generation = 2
        assert member.join_metadata(assignor, ["t"]) == after_sync
        assert after_sync != member_metadata(assignor, ["t"], owned=[], generation=2)
        member.generation = 3
        await member._on_join_complete(3, "m-1", "cooperative-sticky", assignment_bytes(("t", 0)))
        assert decode_subscription(member.join_metadata(assignor, ["t"])).generation_id == 3
        member.generation, member.member_id = -1, ""  # fenced: aiokafka's reset_generation
        await member._maybe_lose_partitions()
        assert decode_subscription(member.join_metadata(assignor, ["t"])).generation_id is None
        await member._stop_commit_offsets_refresh_task()

    await scenario()


@pytest.mark.asyncio
async def test_cooperative_round_that_changes_nothing_keeps_the_fetch_state():
    async def scenario():
        member, listener = await _member()
        await member._on_join_complete(1, "m-1", "cooperative-sticky", assignment_bytes(("t", 0), ("t", 1)))
        first = member._subscription.subscription.assignment
        first.state_value(TP("t", 0)).seek(10)
        member.generation = 2
        await member._on_join_complete(2, "m-1", "cooperative-sticky", assignment_bytes(("t", 1), ("t", 0)))
        # the same aiokafka Assignment: the fetcher keeps what it prefetched instead of refetching
        assert member._subscription.subscription.assignment is first and first.active
        assert first.state_value(TP("t", 0)).position == 10
        assert member._member.owned_generation == 2 and listener.calls[-1] == ("assigned", set())
        member.generation = 3
        await member._on_join_complete(3, "m-1", "cooperative-sticky", assignment_bytes(("t", 0)))
        assert member._subscription.subscription.assignment is not first and not first.active
        await member._stop_commit_offsets_refresh_task()

    await scenario()


@pytest.mark.asyncio
async def test_lost_partitions_go_to_on_partitions_lost_without_commit():
    async def scenario():
        member, listener = await _member()
        await member._on_join_complete(1, "m-1", "cooperative-sticky", assignment_bytes(("t", 0), ("t", 1)))
        member._subscription.subscription.assignment.state_value(TP("t", 0)).seek(5)
        member.generation, member.member_id = -1, ""  # fenced: aiokafka's reset_generation
        await member._maybe_lose_partitions()
        assert listener.calls[-1] == ("lost", {TP("t", 0), TP("t", 1)})
        assert member.committed == [] and member.owned_partitions == frozenset()
        assert member._subscription.subscription.assignment.tps == frozenset()
        await member._stop_commit_offsets_refresh_task()

    await scenario()


@pytest.mark.asyncio
async def test_lost_falls_back_to_on_partitions_revoked_for_listeners_without_it():
    async def scenario():
        member, listener = await _member(listener=PlainRecorder())
        await member._on_join_complete(1, "m-1", "cooperative-sticky", assignment_bytes(("t", 0)))
        member.generation = -1
        await member._maybe_lose_partitions()
        assert listener.calls[-1] == ("revoked", {TP("t", 0)}) and member.committed == []
        await member._stop_commit_offsets_refresh_task()

    await scenario()


@pytest.mark.asyncio
async def test_a_raising_listener_does_not_stop_the_rebalance():
    async def scenario():
        member, listener = await _member(listener=RaisingRecorder())
        await member._on_join_complete(1, "m-1", "cooperative-sticky", assignment_bytes(("t", 0), ("t", 1)))
        await member._on_join_complete(2, "m-1", "cooperative-sticky", assignment_bytes(("t", 0)))
        assert listener.calls[-1] == ("assigned", set())
        assert member._subscription.subscription.assignment.tps == {TP("t", 0)}
        await member._stop_commit_offsets_refresh_task()

    await scenario()


@pytest.mark.asyncio
async def test_cooperative_prepare_keeps_partitions_and_eager_prepare_revokes_all():
    async def scenario():
        coop, coop_listener = await _member(COOPERATIVE)
        await coop._on_join_complete(1, "m-1", "cooperative-sticky", assignment_bytes(("t", 0)))
        await coop._on_join_prepare(None)
        assert coop_listener.calls == [("assigned", {TP("t", 0)})]
        assert not coop._subscription.reassignment_in_progress  # records keep flowing during the join
        assert coop.owned_partitions == {TP("t", 0)}

        eager, eager_listener = await _member(EAGER)
        await eager._on_join_complete(1, "m-1", "cooperative-sticky", assignment_bytes(("t", 0)))
        await eager._on_join_prepare(None)
        assert eager_listener.calls[-1] == ("revoked", {TP("t", 0)})
        assert eager._subscription.reassignment_in_progress and eager.owned_partitions == frozenset()
        for member in (coop, eager):
            await member._stop_commit_offsets_refresh_task()

    await scenario()


@pytest.mark.asyncio
async def test_subscription_change_revokes_only_the_unsubscribed_topic_and_keeps_consuming_the_rest():
    async def scenario():
        member, listener = await _member()
        member._subscription.subscription._topics = frozenset({"t", "u"})
        await member._on_join_complete(1, "m-1", "cooperative-sticky", assignment_bytes(("t", 0), ("u", 0)))
        member._subscription.subscription.assignment.state_value(TP("t", 0)).seek(7)
        member._subscription.subscribe({"t"}, listener=listener)  # drops aiokafka's assignment
        await member._on_join_prepare(None)
        assert listener.calls[-1] == ("revoked", {TP("u", 0)})
        now = member._subscription.subscription.assignment
        assert now.tps == {TP("t", 0)} and now.state_value(TP("t", 0)).position == 7
        await member._stop_commit_offsets_refresh_task()

    await scenario()


class FakeCommitClient:
    """Answers an OffsetCommit of partition t-0 with one error code; ``during`` runs while the request is in flight."""

    def __init__(self, error_code, during=None):
        self.error_code, self.during = error_code, during

    async def send(self, node_id, request, group=None):
        if self.during:
            self.during()
        return type("Resp", (), {"topics": [("t", [(0, self.error_code)])]})()  # the one partition committed


class NetworkedCommits(OfflineCoordinator):
    """Commits go through the real commit path down to a fake client."""

    _do_commit_offsets = KassignGroupCoordinator._do_commit_offsets


async def _commit_with(error_code, during=None, joining=False):
    import aiokafka.errors as Errors
    from aiokafka.structs import OffsetAndMetadata

    subscription = SubscriptionState()
    subscription.subscribe({"t"})
    member = NetworkedCommits(subscription, COOPERATIVE, auto_commit=False)
    member.coordinator_id, member._joining = 0, joining
    member._client = FakeCommitClient(error_code, during and (lambda: during(member)))
    with pytest.raises(Errors.KafkaError) as raised:
        await member._do_commit_offsets(None, {TP("t", 0): OffsetAndMetadata(5, "")})
    return member, raised.value


@pytest.mark.asyncio
async def test_commit_illegal_generation_keeps_membership_and_rejoins():
    member, error = await _commit_with(22)
    assert type(error).__name__ == "IllegalGenerationError"
    assert (member.generation, member.member_id) == (1, "m-1") and member._rejoin_needed_fut.done()


@pytest.mark.asyncio
async def test_commit_unknown_member_resets_only_if_the_generation_is_unchanged():
    member, _ = await _commit_with(25)
    assert (member.generation, member.member_id) == (-1, "")

    def join_answers(m):  # the JoinGroup answer lands while the commit is in flight
        m.generation = 2

    member, _ = await _commit_with(25, during=join_answers)
    assert (member.generation, member.member_id) == (2, "m-1")


@pytest.mark.asyncio
async def test_commit_rebalance_in_progress_during_a_join_asks_for_no_extra_round():
    member, _ = await _commit_with(27, joining=True)
    assert not member._rejoin_needed_fut.done()
    member, _ = await _commit_with(27, joining=False)
    assert member._rejoin_needed_fut.done()


@pytest.mark.asyncio
async def test_a_listener_exception_reaches_the_application_once_from_the_next_poll():
    async def scenario():
        member, listener = await _member(listener=RaisingRecorder())
        await member._on_join_complete(1, "m-1", "cooperative-sticky", assignment_bytes(("t", 0), ("t", 1)))
        member._coordination_task = create_future()  # aiokafka's part of check_errors: nothing wrong
        member._error_consumed_fut = None
        member._pending_exception = None
        member.check_errors()  # nothing raised yet
        await member._on_join_complete(2, "m-1", "cooperative-sticky", assignment_bytes(("t", 0)))
        with pytest.raises(RuntimeError, match="listener bug"):
            member.check_errors()
        member.check_errors()  # raised once only
        await member._stop_commit_offsets_refresh_task()

    await scenario()


@pytest.mark.asyncio
async def test_a_slow_listener_is_warned_about(caplog, monkeypatch):
    import kassign.adapters.aiokafka.handover as handover

    class SlowRecorder(Recorder):
        async def on_partitions_assigned(self, assigned):
            super().on_partitions_assigned(assigned)
            await asyncio.sleep(0.05)

    monkeypatch.setattr(handover, "_SLOW_LISTENER_S", 0.01)

    async def scenario():
        member, _ = await _member(listener=SlowRecorder())
        await member._on_join_complete(1, "m-1", "cooperative-sticky", assignment_bytes(("t", 0)))
        await member._stop_commit_offsets_refresh_task()

    with caplog.at_level("WARNING", logger="kassign.adapters.aiokafka.handover"):
        await scenario()
    assert any("took" in r.getMessage() and "on_partitions_assigned" in r.getMessage() for r in caplog.records)
