"""The KIP-848 member's rules (:mod:`kassign.membership.consumer_group`), table by table: what each
heartbeat carries, how a target assignment is reconciled, what each error does, when heartbeats are
due, and whole lifecycles (join, move, fencing, leave, static leave, poll timeout)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from kassign.membership.consumer_group import (
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    AssignPartitions,
    Backoff,
    CommitOffsets,
    ConsumerGroupFatalError,
    ConsumerGroupMember,
    Fail,
    FindCoordinator,
    LosePartitions,
    MemberState,
    Report,
    RevokePartitions,
    TopicIdPartition,
    new_member_id,
)
from kassign.model import TopicPartition
from kassign.protocol import ConsumerGroupHeartbeatRequest
from kassign.protocol.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatAssignment,
    ConsumerGroupHeartbeatResponse,
    TopicIdPartitions,
)

T = uuid.UUID("11111111-1111-1111-1111-111111111111")
U = uuid.UUID("22222222-2222-2222-2222-222222222222")
NAMES = {T: "orders", U: "payments"}


def tps(*parts: int, topic: str = "orders") -> frozenset[TopicPartition]:
    return frozenset(TopicPartition(topic, p) for p in parts)


def ids(*parts: int, topic: uuid.UUID = T) -> frozenset[TopicIdPartition]:
    return frozenset(TopicIdPartition(topic, p) for p in parts)


def answer(
    epoch: int = 1,
    assignment: dict[uuid.UUID, list[int]] | None = None,
    *,
    interval: int = 500,
    member_id: str | None = None,
    error: int = 0,
    message: str | None = None,
) -> ConsumerGroupHeartbeatResponse:
    body = (
        None
        if assignment is None
        else ConsumerGroupHeartbeatAssignment([TopicIdPartitions(t, ps) for t, ps in assignment.items()])
    )
    return ConsumerGroupHeartbeatResponse(
        error_code=error,
        error_message=message,
        member_id=member_id,
        member_epoch=epoch,
        heartbeat_interval_ms=interval,
        assignment=body,
    )


def member(**kwargs: Any) -> ConsumerGroupMember:
    kwargs.setdefault("member_id", "m-1")
    return ConsumerGroupMember("g", **kwargs)


def joined(assignment: dict[uuid.UUID, list[int]] | None = None, **kwargs: Any) -> ConsumerGroupMember:
    """A member that joined ``orders`` at epoch 1 and reconciled ``assignment`` (and acknowledged it)."""
    m = member(**kwargs)
    m.subscribe(["orders"])
    m.build_heartbeat()
    m.on_heartbeat_response(answer(1, assignment or {}))
    rec = m.maybe_reconcile(NAMES)
    if rec is not None:
        assert m.reconciliation_done(rec)
        m.build_heartbeat()
        m.on_heartbeat_response(answer(1))
    assert m.state is MemberState.STABLE
    return m


def fields(request: ConsumerGroupHeartbeatRequest) -> dict[str, Any]:
    """The request's fields that differ from "unchanged" (None / -1), plus the always-sent ones."""
    out: dict[str, Any] = {"member_epoch": request.member_epoch}
    for name in (
        "instance_id",
        "rack_id",
        "subscribed_topic_names",
        "subscribed_topic_regex",
        "server_assignor",
        "topic_partitions",
    ):
        value = getattr(request, name)
        if value is not None:
            out[name] = value
    if request.rebalance_timeout_ms != -1:
        out["rebalance_timeout_ms"] = request.rebalance_timeout_ms
    return out


# -- what each heartbeat carries -------------------------------------------------------------------

FULL_JOIN = {
    "member_epoch": 0,
    "rack_id": "r1",
    "rebalance_timeout_ms": 60000,
    "subscribed_topic_names": ["orders"],
    "server_assignor": "uniform",
    "topic_partitions": [],
}


def _steady(m: ConsumerGroupMember) -> None:
    m.build_heartbeat()
    m.on_heartbeat_response(answer(1, {}))


HEARTBEATS = {
    "join: every field, epoch 0, owned empty": ([], FULL_JOIN),
    "steady state: only group, member id and epoch": ([_steady], {"member_epoch": 1}),
    "subscription change: only the topic names": (
        [_steady, lambda m: m.subscribe(["orders", "audit"])],
        {"member_epoch": 1, "subscribed_topic_names": ["audit", "orders"]},
    ),
    "after an error answer: every field again, owned included": (
        [_steady, lambda m: (m.build_heartbeat(), m.on_heartbeat_response(answer(1, error=14)))],
        {**FULL_JOIN, "member_epoch": 1},
    ),
    "after a lost answer: every field again": (
        [_steady, lambda m: (m.build_heartbeat(), m.on_heartbeat_failure("timed out"))],
        {**FULL_JOIN, "member_epoch": 1},
    ),
}


@pytest.mark.parametrize("steps, expected", HEARTBEATS.values(), ids=HEARTBEATS.keys())
def test_heartbeat_fields(steps, expected):
    m = member(rack_id="r1", rebalance_timeout_ms=60000, server_assignor="uniform")
    m.subscribe(["orders"])
    for step in steps:
        step(m)
    request = m.build_heartbeat()
    assert request is not None and request.group_id == "g" and request.member_id == "m-1"
    assert fields(request) == expected


def test_static_member_sends_its_instance_id_with_every_heartbeat():
    m = member(instance_id="i-1")
    m.subscribe(["orders"])
    first = m.build_heartbeat()
    m.on_heartbeat_response(answer(3, {}))
    second = m.build_heartbeat()
    assert first.instance_id == second.instance_id == "i-1"
    assert fields(second) == {"member_epoch": 3, "instance_id": "i-1"}


def test_regex_subscription_sends_the_regex_and_empty_names():
    m = member()
    m.subscribe(regex="orders-.*")
    assert m.subscribed_regex == "orders-.*" and m.subscribed_topics == frozenset()
    request = m.build_heartbeat()
    # As Java: the names are the (empty) explicit subscription; the broker subscribes the member to both.
    assert request.subscribed_topic_regex == "orders-.*" and request.subscribed_topic_names == []
    m.on_heartbeat_response(answer(1, {}))
    again = m.build_heartbeat()
    assert again.subscribed_topic_regex is None and again.subscribed_topic_names is None  # unchanged: null


def test_acknowledgement_carries_the_new_owned_partitions_by_topic_id():
    m = member()
    m.subscribe(["orders"])
    m.build_heartbeat()
    m.on_heartbeat_response(answer(1, {T: [2, 0], U: [1]}))
    m.subscribe(["orders", "payments"])
    rec = m.maybe_reconcile(NAMES)
    assert m.reconciliation_done(rec) and m.state is MemberState.ACKNOWLEDGING
    assert m.heartbeat_delay(0.0) == 0.0
    ack = m.build_heartbeat()
    assert sorted((t.topic_id, t.partitions) for t in ack.topic_partitions) == sorted([(T, [0, 2]), (U, [1])])
    assert m.state is MemberState.STABLE


def test_member_id_is_generated_like_kafka_clients_and_kept():
    a, b = new_member_id(), new_member_id()
    assert a != b and len(a) == 22 and "=" not in a
    m = ConsumerGroupMember("g")
    m.subscribe(["orders"])
    assert m.build_heartbeat().member_id == m.member_id and len(m.member_id) == 22
    m.on_heartbeat_response(answer(1, {}, member_id="from-broker"))  # the broker's answer wins
    assert m.member_id == "from-broker" and m.build_heartbeat().member_id == "from-broker"


# -- reconciliation --------------------------------------------------------------------------------

RECONCILE = {
    # owned, target, names known -> assigned, added, revoked, unresolved
    "first assignment: everything added": (set(), ids(0, 1), NAMES, tps(0, 1), tps(0, 1), tps(), set()),
    "a move: revoke only what is no longer assigned": ({0, 1, 2}, ids(0, 1), NAMES, tps(0, 1), tps(), tps(2), set()),
    "the broker gives freed partitions later: added only": (
        {0, 1},
        ids(0, 1, 3),
        NAMES,
        tps(0, 1, 3),
        tps(3),
        tps(),
        set(),
    ),
    "revoke and add in one step": ({0, 1}, ids(1, 2), NAMES, tps(1, 2), tps(2), tps(0), set()),
    "everything taken away": ({0, 1}, frozenset(), NAMES, tps(), tps(), tps(0, 1), set()),
    "unknown topic id waits for metadata, the rest goes on": (
        {0},
        ids(0, 1) | ids(5, topic=U),
        {T: "orders"},
        tps(0, 1),
        tps(1),
        tps(),
        {U},
    ),
}


@pytest.mark.parametrize(
    "owned, target, names, assigned, added, revoked, unresolved", RECONCILE.values(), ids=RECONCILE.keys()
)
def test_reconciliation(owned, target, names, assigned, added, revoked, unresolved):
    m = joined({T: sorted(owned)} if owned else None)
    m.build_heartbeat()
    m.on_heartbeat_response(
        answer(2, {t: sorted(p.partition for p in target if p.topic_id == t) for t in {p.topic_id for p in target}})
    )
    assert m.state is MemberState.RECONCILING
    rec = m.maybe_reconcile(names)
    assert (rec.assigned, rec.added, rec.revoked) == (assigned, added, revoked)
    assert rec.kept == assigned - added
    assert m.unresolved_topic_ids == unresolved
    expected = ([CommitOffsets(revoked), RevokePartitions(revoked)] if revoked else []) + [
        AssignPartitions(assigned, added)
    ]
    assert rec.actions == expected
    assert m.maybe_reconcile(names) is None, "one reconciliation at a time"
    assert m.reconciliation_done(rec) and m.owned == assigned


def test_unresolved_topic_alone_does_not_reconcile_until_named():
    m = joined({T: [0]})
    m.build_heartbeat()
    m.on_heartbeat_response(answer(2, {T: [0], U: [3]}))
    assert m.maybe_reconcile({T: "orders"}) is None and m.unresolved_topic_ids == {U}
    m.build_heartbeat()  # the new target is acknowledged with what the member owns (as Java)
    rec = m.maybe_reconcile(lambda tid: NAMES.get(tid))  # metadata arrived: a callable lookup works too
    assert rec.added == tps(3, topic="payments") and not m.unresolved_topic_ids


def test_owned_topic_keeps_its_name_when_metadata_forgets_it():
    m = joined({T: [0, 1]})
    m.build_heartbeat()
    m.on_heartbeat_response(answer(2, {T: [0]}))
    rec = m.maybe_reconcile({})  # the topic is gone from metadata (deleted): still named from the owned set
    assert rec.revoked == tps(1)


def test_new_target_during_a_reconciliation_is_reconciled_after_the_acknowledgement():
    m = joined({T: [0, 1, 2]})
    m.build_heartbeat()
    m.on_heartbeat_response(answer(2, {T: [0, 1]}))
    first = m.maybe_reconcile(NAMES)
    assert first.revoked == tps(2)
    m.build_heartbeat()  # an interval heartbeat while the listener runs: owned unchanged, not sent
    m.on_heartbeat_response(answer(2, {T: [0]}))
    assert m.maybe_reconcile(NAMES) is None
    assert m.reconciliation_done(first)
    ack = m.build_heartbeat()
    assert ack.topic_partitions == [TopicIdPartitions(T, [0, 1])]
    assert m.state is MemberState.RECONCILING  # the newer target is next
    second = m.maybe_reconcile(NAMES)
    assert second.revoked == tps(1) and second.assigned == tps(0)


def test_revocation_is_acknowledged_before_the_broker_hands_out_the_freed_partitions():
    """The broker's two steps for a member that must give p2 up for p3: first only the kept partitions
    (epoch unchanged), then -- once the heartbeat no longer lists p2 -- the new one with a new epoch."""
    m = joined({T: [0, 1, 2]})
    m.build_heartbeat()
    m.on_heartbeat_response(answer(1, {T: [0, 1]}))  # revoke p2 first
    rec = m.maybe_reconcile(NAMES)
    assert rec.actions == [CommitOffsets(tps(2)), RevokePartitions(tps(2)), AssignPartitions(tps(0, 1), tps())]
    assert m.reconciliation_done(rec)
    ack = m.build_heartbeat()
    assert ack.topic_partitions == [TopicIdPartitions(T, [0, 1])] and ack.member_epoch == 1
    m.on_heartbeat_response(answer(2, {T: [0, 1, 3]}))
    rec = m.maybe_reconcile(NAMES)
    assert rec.revoked == tps() and rec.added == tps(3)


def test_an_empty_first_assignment_is_still_reconciled_once():
    """A member joining a group with more members than partitions hears on_partitions_assigned(empty)
    once, as in Java; the same empty assignment again is nothing to do."""
    m = member()
    m.subscribe(["orders"])
    m.build_heartbeat()
    m.on_heartbeat_response(answer(1, {}))
    rec = m.maybe_reconcile(NAMES)
    assert rec is not None and rec.actions == [AssignPartitions(frozenset(), frozenset())]
    assert m.reconciliation_done(rec)
    m.build_heartbeat()
    m.on_heartbeat_response(answer(1, {}))
    assert m.state is MemberState.STABLE and m.maybe_reconcile(NAMES) is None


def test_same_target_again_is_nothing_to_do():
    m = joined({T: [0, 1]})
    m.build_heartbeat()
    m.on_heartbeat_response(answer(1, {T: [1, 0]}))
    assert m.state is MemberState.STABLE and m.maybe_reconcile(NAMES) is None


# -- errors ----------------------------------------------------------------------------------------

ERRORS = {
    # code -> (action types, state after, epoch after)
    "FENCED_MEMBER_EPOCH loses and rejoins": (110, [LosePartitions], MemberState.FENCED, 0),
    "UNKNOWN_MEMBER_ID loses and rejoins": (25, [LosePartitions], MemberState.FENCED, 0),
    "UNRELEASED_INSTANCE_ID is fatal": (111, [LosePartitions, Fail], MemberState.FATAL, 0),
    "GROUP_MAX_SIZE_REACHED is fatal": (81, [LosePartitions, Fail], MemberState.FATAL, 0),
    "FENCED_INSTANCE_ID is fatal": (82, [LosePartitions, Fail], MemberState.FATAL, 0),
    "UNSUPPORTED_ASSIGNOR is fatal": (112, [LosePartitions, Fail], MemberState.FATAL, 0),
    "UNSUPPORTED_VERSION is fatal": (35, [LosePartitions, Fail], MemberState.FATAL, 0),
    "GROUP_AUTHORIZATION_FAILED is fatal": (30, [LosePartitions, Fail], MemberState.FATAL, 0),
    "an unknown error is fatal": (9999, [LosePartitions, Fail], MemberState.FATAL, 0),
    "NOT_COORDINATOR: find it again": (16, [FindCoordinator], MemberState.STABLE, 4),
    "COORDINATOR_NOT_AVAILABLE: find it again": (15, [FindCoordinator], MemberState.STABLE, 4),
    "COORDINATOR_LOAD_IN_PROGRESS: back off": (14, [Backoff], MemberState.STABLE, 4),
}


@pytest.mark.parametrize("code, actions, state, epoch", ERRORS.values(), ids=ERRORS.keys())
def test_error_answers(code, actions, state, epoch):
    m = joined({T: [0, 1]})
    m.build_heartbeat()
    m.on_heartbeat_response(answer(4, {T: [0, 1]}))
    m.build_heartbeat()
    got = m.on_heartbeat_response(answer(error=code, message="why"))
    assert [type(a) for a in got] == actions
    assert m.state is state
    if state is not MemberState.STABLE:
        assert m.member_epoch == 0 and m.owned == frozenset()
    else:
        assert m.member_epoch == epoch and m.owned == tps(0, 1)
    lost = [a for a in got if isinstance(a, LosePartitions)]
    if lost:
        assert lost[0].partitions == tps(0, 1)
    failed = [a for a in got if isinstance(a, Fail)]
    if failed:
        assert m.fatal_error is failed[0].error and m.heartbeat_delay(100.0) is None
        assert m.commit_identity() is None


def test_fenced_member_rejoins_at_epoch_0_only_after_its_partitions_are_lost():
    m = joined({T: [0, 1]})
    m.build_heartbeat()
    actions = m.on_heartbeat_response(answer(error=110))
    assert actions == [LosePartitions(tps(0, 1))]
    assert m.heartbeat_delay(100.0) is None, "no heartbeat while the lost callback runs"
    m.partitions_lost_done()
    assert m.state is MemberState.JOINING and m.heartbeat_delay(0.0) == 0.0
    rejoin = m.build_heartbeat()
    assert rejoin.member_epoch == 0 and rejoin.member_id == "m-1" and rejoin.topic_partitions == []
    assert rejoin.subscribed_topic_names == ["orders"]


def test_fencing_abandons_a_reconciliation_in_progress():
    m = joined({T: [0, 1]})
    m.build_heartbeat()
    m.on_heartbeat_response(answer(2, {T: [0, 2]}))
    rec = m.maybe_reconcile(NAMES)
    assert m.still_reconciling(rec)
    m.build_heartbeat()
    assert m.on_heartbeat_response(answer(error=25)) == [LosePartitions(tps(0, 1))]
    assert not m.still_reconciling(rec)
    assert m.reconciliation_done(rec) is False and m.owned == frozenset()


def test_unsupported_version_names_the_broker():
    m = member(broker="localhost:9092 (node 1)")
    m.subscribe(["orders"])
    m.build_heartbeat()
    (fail,) = m.on_unsupported_version("ConsumerGroupHeartbeat not in ApiVersions")
    assert isinstance(fail, Fail) and isinstance(fail.error, ConsumerGroupFatalError)
    text = str(fail.error)
    assert "localhost:9092 (node 1)" in text and "group_protocol='classic'" in text
    assert fail.error.error == "UNSUPPORTED_VERSION"
    assert m.subscribe(["orders"]) == [fail], "a fatal member stays failed"


def test_fatal_message_keeps_the_brokers_words():
    m = joined()
    m.build_heartbeat()
    (fail,) = m.on_heartbeat_response(answer(error=111, message="instance i-1 is still in use"))
    assert fail.error.error == "UNRELEASED_INSTANCE_ID" and "instance i-1 is still in use" in str(fail.error)


# -- when heartbeats are due -----------------------------------------------------------------------


def test_heartbeat_timing():
    m = member()
    assert m.heartbeat_delay(0.0) is None  # unsubscribed: none
    m.subscribe(["orders"])
    assert m.heartbeat_delay(0.0) == 0.0  # joining: at once
    m.build_heartbeat()
    assert m.heartbeat_delay(10.0) is None  # one in flight
    m.on_heartbeat_response(answer(1, {}, interval=2000))
    assert m.heartbeat_interval_ms == 2000
    assert m.heartbeat_delay(0.5) == pytest.approx(1.5)  # stable: the broker's interval
    assert m.heartbeat_delay(3.0) == 0.0


# -- commits ---------------------------------------------------------------------------------------


def test_commit_identity_follows_the_epoch():
    m = member()
    assert m.commit_identity() is None
    m.subscribe(["orders"])
    m.build_heartbeat()
    assert m.commit_identity() is None  # joining at epoch 0
    m.on_heartbeat_response(answer(7, {T: [0]}))
    assert m.commit_identity() == ("m-1", 7)
    m.build_heartbeat()
    m.on_heartbeat_response(answer(error=110))
    assert m.commit_identity() is None  # fenced: its old epoch is refused by the broker anyway


# -- leaving ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "instance_id, epoch",
    [(None, LEAVE_EPOCH), ("i-1", STATIC_LEAVE_EPOCH)],
    ids=["dynamic leaves with -1", "static leaves with -2 (temporary)"],
)
def test_leave(instance_id, epoch):
    m = joined({T: [0, 1]}, instance_id=instance_id)
    assert m.leave() == [CommitOffsets(tps(0, 1)), RevokePartitions(tps(0, 1))]
    assert m.state is MemberState.PREPARE_LEAVING and m.leave() == []
    m.build_heartbeat()  # still heartbeating while the listener runs
    m.on_heartbeat_response(answer(1, {T: [0]}))
    assert m.maybe_reconcile(NAMES) is None, "no new assignment while leaving"
    m.leave_prepared()
    assert m.state is MemberState.LEAVING and m.heartbeat_delay(0.0) == 0.0
    request = m.build_heartbeat()
    assert fields(request) == (
        {"member_epoch": epoch} if instance_id is None else {"member_epoch": epoch, "instance_id": instance_id}
    )
    assert m.state is MemberState.UNSUBSCRIBED and m.heartbeat_delay(100.0) is None and m.owned == frozenset()
    m.on_heartbeat_response(answer(epoch, {T: [0]}))  # the answer to the leave changes nothing
    assert m.state is MemberState.UNSUBSCRIBED
    m.subscribe(["orders"])  # and it can join again
    assert m.build_heartbeat().member_epoch == 0


def test_fenced_while_leaving_sends_no_leave_and_does_not_rejoin():
    m = joined({T: [0]})
    m.leave()
    m.build_heartbeat()
    assert m.on_heartbeat_response(answer(error=110)) == []
    m.leave_prepared()
    assert m.state is MemberState.UNSUBSCRIBED and m.build_heartbeat() is None


def test_leave_while_fenced_is_silent():
    m = joined({T: [0]})
    m.build_heartbeat()
    m.on_heartbeat_response(answer(error=25))
    assert m.leave() == [] and m.state is MemberState.UNSUBSCRIBED
    m.partitions_lost_done()
    assert m.state is MemberState.UNSUBSCRIBED, "a member that left does not rejoin"


def test_poll_timeout_leaves_loses_and_rejoins_on_the_next_poll():
    m = joined({T: [0, 1]})
    assert m.poll_timer_expired() == [LosePartitions(tps(0, 1))]
    assert m.build_heartbeat().member_epoch == LEAVE_EPOCH
    assert m.state is MemberState.STALE and m.heartbeat_delay(100.0) is None
    m.poll_resumed()
    assert m.state is MemberState.JOINING and m.build_heartbeat().member_epoch == 0


# -- arguments -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "call",
    [
        lambda m: m.subscribe([]),
        lambda m: m.subscribe(["a"], regex="b.*"),
    ],
    ids=["no topics", "topics and regex"],
)
def test_bad_subscriptions(call):
    with pytest.raises(ValueError):
        call(member())


def test_bad_construction():
    with pytest.raises(ValueError):
        ConsumerGroupMember("")
    with pytest.raises(ValueError):
        ConsumerGroupMember("g", rebalance_timeout_ms=0)


def test_a_joining_member_waits_for_names_instead_of_an_empty_first_assignment():
    m = member()
    m.subscribe(["orders"])
    m.build_heartbeat()
    m.on_heartbeat_response(answer(1, {T: [0, 1]}))
    assert m.maybe_reconcile({}) is None and m.unresolved_topic_ids == {T}
    rec = m.maybe_reconcile(NAMES)
    assert rec.actions == [AssignPartitions(tps(0, 1), tps(0, 1))]


def test_an_answer_during_acknowledging_keeps_the_acknowledgement_urgent():
    m = joined({T: [0, 1]})
    m.build_heartbeat()  # an interval heartbeat is in flight ...
    m.on_heartbeat_response(answer(2, {T: [0]}))
    rec = m.maybe_reconcile(NAMES)
    m.build_heartbeat()
    assert m.reconciliation_done(rec) and m.state is MemberState.ACKNOWLEDGING  # ... when the reconciliation ends
    m.on_heartbeat_response(answer(3, {T: [0, 2]}))  # its answer brings a newer target
    assert m.state is MemberState.ACKNOWLEDGING and m.heartbeat_delay(0.0) == 0.0
    ack = m.build_heartbeat()
    # epoch 3's partition 2 is listed too: the member is about to take it (see the tests below)
    assert ack.member_epoch == 3 and ack.topic_partitions == [TopicIdPartitions(T, [0, 2])]
    assert m.state is MemberState.RECONCILING


# -- owned partitions while reconciling: never fewer than the member may hold at that epoch ----------
# The broker skips a revocation the member's heartbeat says is done (CurrentAssignmentBuilder: owned
# partitions without the ones to revoke) and hands those partitions on at once. Found as 40-236 ms of
# double ownership in two 96-member KIP-848 runs (n96-instant-scale-in-kip848-r2/-r3): each time the
# old owner was given the partitions at epoch E and revoked them at a later epoch, never at E.


def reported(heartbeat: Any) -> list[int]:
    return [p for t in heartbeat.topic_partitions for p in t.partitions]


def test_a_full_heartbeat_mid_reconciliation_lists_the_partitions_being_added():
    m = joined({T: [0, 1]})
    m.build_heartbeat()
    m.on_heartbeat_response(answer(2, {T: [0, 1, 2]}))
    rec = m.maybe_reconcile(NAMES)  # on_partitions_assigned([2]) is running ...
    assert rec is not None and m.owned == tps(0, 1)
    m.on_heartbeat_failure("timed out")  # ... when a heartbeat gets no answer: the next is full
    hb = m.build_heartbeat()
    assert hb.member_epoch == 2 and reported(hb) == [0, 1, 2]


def test_the_target_is_listed_before_its_reconciliation_starts():
    m = joined({T: [0]})
    m.build_heartbeat()
    m.on_heartbeat_response(answer(2, {T: [0, 1]}))
    assert m.state is MemberState.RECONCILING
    hb = m.build_heartbeat()  # the interval heartbeat goes out before the driver reconciles
    assert hb.member_epoch == 2 and reported(hb) == [0, 1]


def test_a_partition_given_then_taken_back_is_listed_until_its_revocation_is_acknowledged():
    m = joined({T: [0]})
    m.build_heartbeat()
    m.on_heartbeat_response(answer(2, {T: [0, 1]}))
    first = m.maybe_reconcile(NAMES)  # taking 1 ...
    m.build_heartbeat()
    m.on_heartbeat_response(answer(2, {T: [0]}))  # ... which the next target takes away again
    m.on_heartbeat_failure("connection lost")
    assert reported(m.build_heartbeat()) == [0, 1]  # still owned, or about to be
    m.on_heartbeat_response(answer(2, {T: [0]}))
    assert m.reconciliation_done(first) and m.owned == tps(0, 1)
    assert reported(m.build_heartbeat()) == [0, 1]
    m.on_heartbeat_response(answer(2, {T: [0]}))
    second = m.maybe_reconcile(NAMES)
    assert second is not None and second.revoked == tps(1)
    assert m.reconciliation_done(second)
    assert reported(m.build_heartbeat()) == [0]  # the revocation's acknowledgement


def test_a_revocation_is_not_reported_before_it_is_done():
    m = joined({T: [0, 1]})
    m.build_heartbeat()
    m.on_heartbeat_response(answer(1, {T: [0]}))
    rec = m.maybe_reconcile(NAMES)
    m.on_heartbeat_failure("timed out")
    assert reported(m.build_heartbeat()) == [0, 1]  # on_partitions_revoked([1]) has not finished
    m.on_heartbeat_response(answer(1, {T: [0]}))
    assert m.reconciliation_done(rec)
    assert reported(m.build_heartbeat()) == [0]


# -- issue #26: the rules Java's ConsumerMembershipManager and heartbeat managers pin down ------------


def test_a_target_that_grows_and_shrinks_back_before_reconciling_is_acknowledged():
    """The broker asked for a revocation (target A+B, then A) before the member reconciled: the member
    owns A either way, but the broker waits for an owned list without B, so it must hear A again."""
    m = joined({T: [0, 1]})
    m.on_heartbeat_response(answer(2, {T: [0, 1, 2]}))  # grew ...
    m.on_heartbeat_response(answer(2, {T: [0, 1]}))  # ... and shrank back before the member reconciled
    assert m.maybe_reconcile(NAMES) is None
    assert m.state is MemberState.ACKNOWLEDGING and m.heartbeat_delay(0.0) == 0.0
    ack = m.build_heartbeat()
    assert [(t.topic_id, t.partitions) for t in ack.topic_partitions] == [(T, [0, 1])]
    assert m.state is MemberState.STABLE
    m.on_heartbeat_response(answer(3, {T: [0, 1]}))  # the same target again is nothing new
    assert m.state is MemberState.STABLE and m.build_heartbeat().topic_partitions is None


def test_a_new_target_met_while_reconciling_another_is_acknowledged_after_it():
    """Target A -> A-1 (reconciling, revoking 1) -> A again: once the revocation is done the member
    re-assigns 1 at the newer target's epoch, acknowledging both steps."""
    m = joined({T: [0, 1]})
    m.on_heartbeat_response(answer(2, {T: [0]}))
    rec = m.maybe_reconcile(NAMES)
    m.on_heartbeat_response(answer(2, {T: [0, 1]}))  # back while the revocation runs
    assert m.reconciliation_done(rec) and m.owned == tps(0)
    assert m.build_heartbeat().topic_partitions is not None and m.state is MemberState.RECONCILING
    rec = m.maybe_reconcile(NAMES)
    assert rec is not None and rec.added == tps(1)


def test_a_partial_target_equal_to_the_owned_set_is_acknowledged_and_reconciled_once_named():
    m = joined({T: [0]})
    m.on_heartbeat_response(answer(2, {T: [0], U: [3]}))
    assert m.maybe_reconcile({T: "orders"}) is None and m.state is MemberState.ACKNOWLEDGING
    assert m.build_heartbeat().topic_partitions is not None and m.state is MemberState.RECONCILING
    m.on_heartbeat_response(answer(2))
    rec = m.maybe_reconcile(NAMES)
    assert rec is not None and rec.added == tps(3, topic="payments")


@pytest.mark.parametrize(
    "fail",
    [
        lambda m: m.on_heartbeat_failure("connection reset"),
        lambda m: m.on_heartbeat_response(answer(1, error=14)),  # COORDINATOR_LOAD_IN_PROGRESS
        lambda m: m.on_heartbeat_response(answer(1, error=7)),  # REQUEST_TIMED_OUT
    ],
    ids=["lost answer", "COORDINATOR_LOAD_IN_PROGRESS", "REQUEST_TIMED_OUT"],
)
def test_a_failed_heartbeat_is_retried_after_the_backoff_not_the_interval(fail):
    m = joined(retry_backoff_ms=100, retry_backoff_max_ms=1000)
    m.on_heartbeat_response(answer(1, interval=5000))
    m.build_heartbeat()
    assert any(isinstance(a, Backoff) for a in fail(m))
    assert m.heartbeat_delay(0.0) == pytest.approx(0.1) and m.heartbeat_delay(0.2) == 0.0
    delays = []
    for _ in range(5):  # each failure in a row doubles the backoff, up to the maximum
        m.build_heartbeat()
        fail(m)
        delays.append(m.heartbeat_delay(0.0))
    assert delays == pytest.approx([0.2, 0.4, 0.8, 1.0, 1.0])
    m.build_heartbeat()
    m.on_heartbeat_response(answer(1, interval=5000))
    assert m.heartbeat_delay(0.0) == pytest.approx(5.0)  # an answer: back on the interval


@pytest.mark.parametrize("code", [15, 16], ids=["COORDINATOR_NOT_AVAILABLE", "NOT_COORDINATOR"])
def test_a_coordinator_error_retries_as_soon_as_the_coordinator_is_found(code):
    m = joined()
    m.on_heartbeat_response(answer(1, interval=5000))
    m.build_heartbeat()
    assert isinstance(m.on_heartbeat_response(answer(1, error=code))[0], FindCoordinator)
    assert m.heartbeat_delay(0.0) == 0.0


def test_a_joining_member_backs_off_too():
    m = member()
    m.subscribe(["orders"])
    m.build_heartbeat()
    m.on_heartbeat_failure("connection refused")
    assert m.heartbeat_delay(0.05) == pytest.approx(0.05)


def test_topic_authorization_failure_is_reported_and_the_member_carries_on():
    """Java (KAFKA-18813): raised to the application, the member keeps its state and retries."""
    m = joined({T: [0]})
    m.build_heartbeat()
    actions = m.on_heartbeat_response(answer(1, error=29, message="Unauthorized topics: [payments]"))
    assert [type(a) for a in actions] == [Report, Backoff]
    assert actions[0].error.error == "TOPIC_AUTHORIZATION_FAILED" and "payments" in str(actions[0].error)
    assert m.state is MemberState.STABLE and m.owned == tps(0) and m.member_epoch == 1
    assert m.heartbeat_delay(0.0) == pytest.approx(0.1)
    retry = m.build_heartbeat()
    assert retry.topic_partitions is not None and retry.subscribed_topic_names == ["orders"]  # full again
    m.on_heartbeat_response(answer(1))
    assert m.state is MemberState.STABLE
    assert m.subscribe(["payments"]) == [] and m.state is MemberState.STABLE


def test_topic_authorization_failure_while_joining_keeps_joining():
    m = member()
    m.subscribe(["orders"])
    m.build_heartbeat()
    assert isinstance(m.on_heartbeat_response(answer(0, error=29))[0], Report)
    assert m.state is MemberState.JOINING and m.build_heartbeat().member_epoch == 0


@pytest.mark.parametrize(
    "switch",
    [
        lambda m: m.subscribe(["orders"]),
        lambda m: m.subscribe(regex=""),
    ],
    ids=["to topics", "to an empty regex"],
)
def test_dropping_a_regex_subscription_sends_an_empty_regex(switch):
    m = member()
    m.subscribe(regex="orders-.*")
    m.build_heartbeat()
    m.on_heartbeat_response(answer(1, {}))
    switch(m)
    request = m.build_heartbeat()
    assert request.subscribed_topic_regex == ""  # null would mean "unchanged": the broker kept the old regex
    m.on_heartbeat_response(answer(1))
    assert m.build_heartbeat().subscribed_topic_regex is None


def test_dropping_a_regex_is_said_again_in_a_full_heartbeat_after_a_failure():
    m = member()
    m.subscribe(regex="orders-.*")
    m.build_heartbeat()
    m.on_heartbeat_response(answer(1, {}))
    m.subscribe(["orders"])
    m.build_heartbeat()
    m.on_heartbeat_failure("timed out")  # the broker may never have seen the switch
    assert m.build_heartbeat().subscribed_topic_regex == ""


def test_a_topics_member_never_sends_a_regex():
    m = joined()
    m.subscribe(["orders", "audit"])
    m.on_heartbeat_failure("timed out")
    assert m.build_heartbeat().subscribed_topic_regex is None


def test_switching_from_topics_to_a_regex_clears_the_names():
    m = joined()
    m.subscribe(regex="orders-.*")
    request = m.build_heartbeat()
    assert request.subscribed_topic_regex == "orders-.*" and request.subscribed_topic_names == []


def test_group_id_not_found_answering_the_leave_is_harmless():
    """Subscribe, then unsubscribe before the group exists: the leave's answer does not end the member."""
    m = member()
    m.subscribe(["orders"])
    m.leave()
    m.leave_prepared()
    assert m.build_heartbeat().member_epoch == LEAVE_EPOCH
    assert m.on_heartbeat_response(answer(-1, error=69)) == []  # GROUP_ID_NOT_FOUND
    assert m.state is MemberState.UNSUBSCRIBED and m.fatal_error is None
    assert m.subscribe(["orders"]) == [] and m.state is MemberState.JOINING


def test_group_id_not_found_in_the_group_is_still_fatal():
    m = joined()
    m.build_heartbeat()
    assert isinstance(m.on_heartbeat_response(answer(1, error=69))[-1], Fail)


def test_the_leave_heartbeat_does_not_wait_for_one_in_flight():
    m = joined({T: [0]})
    m.on_heartbeat_response(answer(1, interval=5000))
    assert m.build_heartbeat() is not None  # in flight
    assert m.heartbeat_delay(0.0) is None
    m.leave()
    m.leave_prepared()
    assert m.heartbeat_delay(0.0) == 0.0
    leave = m.build_heartbeat()
    assert leave is not None and leave.member_epoch == LEAVE_EPOCH
    assert m.on_heartbeat_response(answer(1, {T: [0]})) == []  # the late answer to the one in flight
    assert m.state is MemberState.UNSUBSCRIBED and m.owned == frozenset()


# -- what a commit issued earlier may still commit (issue #27) -------------------------------------


def test_held_since_counts_only_partitions_owned_without_interruption():
    m = joined({T: [0, 1, 2]})
    mark = m.ownership_mark
    assert m.held_since(mark, tps(0, 1, 2)) == (tps(0, 1, 2), tps())
    # A new target keeping p0, revoking p1 and p2, then giving p2 back and adding p3.
    m.build_heartbeat()
    m.on_heartbeat_response(answer(2, {T: [0]}))
    assert m.reconciliation_done(m.maybe_reconcile(NAMES))
    m.build_heartbeat()
    m.on_heartbeat_response(answer(3, {T: [0, 2, 3]}))
    assert m.reconciliation_done(m.maybe_reconcile(NAMES))
    assert m.owned == tps(0, 2, 3)
    assert m.held_since(mark, tps(0, 1, 2, 3)) == (tps(0), tps(1, 2, 3))
    assert m.held_since(m.ownership_mark, tps(0, 2, 3)) == (tps(0, 2, 3), tps())


def test_held_since_after_a_fencing_holds_nothing_from_before():
    m = joined({T: [0, 1]})
    mark = m.ownership_mark
    m.build_heartbeat()
    actions = m.on_heartbeat_response(answer(error=110, message="fenced"))  # FENCED_MEMBER_EPOCH
    assert actions == [LosePartitions(tps(0, 1))]
    assert "FENCED_MEMBER_EPOCH" in actions[0].reason and "m-1" in actions[0].reason
    m.partitions_lost_done()
    m.build_heartbeat()
    m.on_heartbeat_response(answer(5, {T: [0, 1]}))
    assert m.reconciliation_done(m.maybe_reconcile(NAMES))
    assert m.held_since(mark, tps(0, 1)) == (tps(), tps(0, 1))


def test_a_poll_timeout_says_which_setting_ran_out():
    m = joined({T: [0]}, rebalance_timeout_ms=4000)
    (lose,) = m.poll_timer_expired()
    assert "max_poll_interval_ms=4000 exceeded" in lose.reason
