"""The simulator's KIP-848 model: the broker (``ConsumerGroupCoordinator``, Kafka's target assignment and
reconciliation) and members driving :class:`kassign.membership.ConsumerGroupMember` in poll loops."""

from __future__ import annotations

import uuid

import pytest

from kassign.model import TopicPartition
from kassign.protocol.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest, TopicIdPartitions
from kassign.sim.config import KAFKA44_PRESETS, SimConfig
from kassign.sim.consumer_group_coordinator import ConsumerGroupCoordinator, topic_id
from kassign.sim.engine import EventLoop
from kassign.sim.scenarios import Crash, ScaleIn, ScaleOut, Scenario
from kassign.sim.simulator import simulate

CLIENTS = ("aiokafka", "java", "librdkafka")


def _config(client: str, **kw) -> SimConfig:
    return SimConfig(
        client=client,
        session_timeout_ms=1500,
        heartbeat_interval_ms=250,
        group_protocol="consumer",
        **{**KAFKA44_PRESETS[client], **kw},
    )


def _run(step, members: int, client: str, seed: int = 1, **kw):
    scenario = Scenario(name="kip848", topics={"t": 24}, members=members, steps=[step], seed=seed)
    return simulate(scenario, _config(client, **kw))


@pytest.mark.parametrize("client", CLIENTS)
def test_scale_out_moves_only_what_balance_needs_and_never_owns_twice(client):
    result = _run(ScaleOut(after_s=3, count=3), 3, client)
    assert result.settled
    phase = result.metrics["1:scale_out"]
    assert phase.moved == 12 and phase.double_owned_ps == 0
    assert sorted(phase.final.values()).count("m1") == 4
    assert sorted({m for m in phase.final.values()}) == ["m1", "m2", "m3", "m4", "m5", "m6"]
    # Incremental: each survivor revokes only the 4 that move, in two steps (the first newcomer's join
    # is assigned at once, the other two a second later, when the first newcomer passes 2 of its 6 on).
    revoked: dict[str, int] = {}
    for e in result.events:
        if e.ev == "cb_revoked" and e.t >= result.phases["1:scale_out"][0]:
            revoked[e.id] = revoked.get(e.id, 0) + len(e.parts)
    assert revoked == {"m1": 4, "m2": 4, "m3": 4, "m4": 2}


def test_changes_within_the_assignment_interval_wait_for_it():
    """KIP-1263: the three newcomers of a scale-out join within milliseconds; the broker assigns the
    first at once and the other two only at the first heartbeat a full interval later."""
    batched = _run(ScaleOut(after_s=3, count=3), 3, "aiokafka")
    at_once = _run(ScaleOut(after_s=3, count=3), 3, "aiokafka", assignment_interval_ms=0)
    assert 1.0 <= batched.metrics["1:scale_out"].settle_s < 1.0 + 0.25 + 0.05
    assert at_once.metrics["1:scale_out"].settle_s < 0.8
    assert at_once.metrics["1:scale_out"].moved == batched.metrics["1:scale_out"].moved == 12


@pytest.mark.parametrize("client", CLIENTS)
def test_a_leave_is_handed_over_without_waiting_for_the_session_timeout(client):
    result = _run(ScaleIn(after_s=3, count=3), 6, client)
    phase = result.metrics["1:scale_in"]
    assert result.settled and phase.moved == 12 and phase.double_owned_ps == 0
    assert phase.settle_s < 1.5 / 2, phase.settle_s


@pytest.mark.parametrize("client", CLIENTS)
def test_a_crash_is_handed_over_after_the_session_timeout(client):
    result = _run(Crash(after_s=3), 6, client)
    phase = result.metrics["1:crash"]
    assert result.settled and phase.moved == 4 and phase.double_owned_ps == 0
    # The broker counts the session from the crashed member's last heartbeat (up to an interval earlier).
    assert 1.5 - 0.25 <= phase.settle_s <= 1.5 + 0.25, phase.settle_s


def test_callbacks_inside_poll_wait_for_the_batch_in_hand():
    """Java's and librdkafka's listeners run in the application thread: with 250-750 ms batches a
    scale-out settles later than with kassign's coordinator task, which reconciles at once."""
    kw = dict(processing_ms=250, processing_max_ms=750, assignment_interval_ms=0)
    settle = {c: _run(ScaleOut(after_s=3, count=3), 3, c, **kw).metrics["1:scale_out"].settle_s for c in CLIENTS}
    assert settle["java"] > settle["aiokafka"] + 0.2 and settle["librdkafka"] > settle["aiokafka"] + 0.2


def test_runs_are_deterministic():
    a = _run(ScaleOut(after_s=3, count=3), 3, "java", processing_ms=250, processing_max_ms=750)
    b = _run(ScaleOut(after_s=3, count=3), 3, "java", processing_ms=250, processing_max_ms=750)
    assert [(e.id, e.t, e.ev, e.parts) for e in a.events] == [(e.id, e.t, e.ev, e.parts) for e in b.events]


def test_static_membership_is_refused_on_this_model():
    with pytest.raises(ValueError, match="KIP-848"):
        SimConfig(group_protocol="consumer", static_membership=True)
    with pytest.raises(ValueError, match="unknown group protocol"):
        SimConfig(group_protocol="next")


# -- the broker model alone ---------------------------------------------------------------------


class _Member:
    def __init__(self, member_id: str) -> None:
        self.id = member_id
        self.answers = []

    def on_heartbeat_response(self, response) -> None:
        self.answers.append(response)


def _owned(parts) -> list[TopicIdPartitions]:
    return [TopicIdPartitions(topic_id("t"), sorted(p.partition for p in parts))]


def _assigned(response) -> set[TopicPartition]:
    return {TopicPartition("t", p) for t in response.assignment.topic_partitions for p in t.partitions}


def _broker(interval_s: float = 0.0) -> tuple[EventLoop, ConsumerGroupCoordinator]:
    loop = EventLoop()
    return loop, ConsumerGroupCoordinator(
        loop,
        network_s=0.001,
        session_s=10.0,
        heartbeat_s=0.25,
        partitions_per_topic={"t": 4},
        assignment_interval_s=interval_s,
    )


def _beat(loop, broker, member, epoch, owned=None, topics=None):
    broker.heartbeat(
        member,
        ConsumerGroupHeartbeatRequest(
            "g",
            member.id,
            epoch,
            subscribed_topic_names=topics,
            topic_partitions=None if owned is None else _owned(owned),
        ),
    )
    loop.run(loop.now + 0.01, lambda: False)
    return member.answers[-1]


def test_a_partition_moves_only_after_its_owner_stops_listing_it():
    loop, broker = _broker()
    a, b = _Member("a"), _Member("b")
    first = _beat(loop, broker, a, 0, owned=[], topics=["t"])
    assert first.member_epoch == 1 and len(_assigned(first)) == 4
    joined = _beat(loop, broker, b, 0, owned=[], topics=["t"])
    # b's target is half the topic, but a still owns it: b gets the new epoch and nothing yet.
    assert joined.member_epoch == 2 and _assigned(joined) == set()
    # a must revoke two: it is told what to keep and keeps its epoch until it no longer lists them.
    told = _beat(loop, broker, a, 1, owned=_assigned(first))
    keep = _assigned(told)
    assert len(keep) == 2 and told.member_epoch == 1
    still = _beat(loop, broker, b, 2, owned=[])
    assert still.assignment is None or _assigned(still) == set()
    acked = _beat(loop, broker, a, 1, owned=keep)
    assert acked.member_epoch == 2
    released = _beat(loop, broker, b, 2, owned=[])
    assert _assigned(released) == _assigned(first) - keep
    assert broker.settled() is False  # b has not acknowledged yet
    _beat(loop, broker, b, 2, owned=_assigned(released))
    assert broker.settled()


def test_stale_epochs_and_unknown_members_are_refused():
    loop, broker = _broker()
    a = _Member("a")
    _beat(loop, broker, a, 0, owned=[], topics=["t"])
    assert _beat(loop, broker, a, 7, owned=[]).error_code == 110  # FENCED_MEMBER_EPOCH
    assert _beat(loop, broker, _Member("ghost"), 3, owned=[]).error_code == 25  # UNKNOWN_MEMBER_ID
    assert broker.topic_name(topic_id("t")) == "t" and broker.topic_name(uuid.uuid4()) is None


def test_a_leave_takes_the_leaver_out_of_the_target_until_the_next_computation():
    """Within the interval a newcomer that joins right after a leave gets exactly the leaver's
    partitions (nobody else's target changed), as recorded on Kafka 4.4 in rolling restarts."""
    loop, broker = _broker(interval_s=1.0)
    a, b, c = _Member("a"), _Member("b"), _Member("c")
    _beat(loop, broker, a, 0, owned=[], topics=["t"])
    loop.run(loop.now + 2.0, lambda: False)
    answer_b = _beat(loop, broker, b, 0, owned=[], topics=["t"])  # a second later: computed at once
    answer_a = _beat(loop, broker, a, 1, owned=[TopicPartition("t", p) for p in range(4)])
    assert len(_assigned(answer_a)) == 2 and _assigned(answer_b) == set()
    _beat(loop, broker, a, 1, owned=_assigned(answer_a))
    b_parts = _assigned(_beat(loop, broker, b, answer_b.member_epoch, owned=[]))
    assert len(b_parts) == 2
    loop.run(loop.now + 2.0, lambda: False)
    left = _beat(loop, broker, b, -1)
    assert left.member_epoch == -1 and "b" not in broker.target
    joined = _beat(loop, broker, c, 0, owned=[], topics=["t"])
    assert _assigned(joined) == b_parts


def test_a_member_that_never_took_what_it_must_give_up_skips_the_revocation():
    """Kafka's ownsRevokedPartitions: when the heartbeat's owned list shows the member does not hold
    the partitions its new target takes away (it was told of them, but the target moved on before it
    took them), the broker does not wait for a revocation that can never be acknowledged."""
    loop, broker = _broker()
    a, b = _Member("a"), _Member("b")
    first = _beat(loop, broker, a, 0, owned=[], topics=["t"])
    assert len(_assigned(first)) == 4
    _beat(loop, broker, b, 0, owned=[], topics=["t"])
    # a reports owning nothing (it never took the four): nothing to wait for, new epoch at once.
    told = _beat(loop, broker, a, first.member_epoch, owned=[])
    assert told.member_epoch == broker.target_epoch and len(_assigned(told)) == 2
    assert not broker.members["a"].revoking


def test_a_member_closed_before_it_ever_heartbeats_still_closes():
    """Closed while still starting up (no heartbeat sent yet): nothing to leave, but ``closed`` comes."""
    from kassign.sim.simulator import Simulation

    sim = Simulation(Scenario(name="early", topics={"t": 4}, members=0, steps=[], seed=1), _config("java"), None)
    member = sim.start_member()
    member.close()
    sim.loop.run(5.0, lambda: False)
    assert [e.ev for e in sim.events if e.id == member.name][-1] == "closed"
    assert member.state == "down" and not sim.coordinator.members
