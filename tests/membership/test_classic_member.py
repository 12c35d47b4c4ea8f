"""The member's rules, once: a table of rounds fed to :class:`kassign.membership.ClassicMember`, then
the same table through both drivers -- kassign's aiokafka coordinator and the simulator's member --
which must revoke, add and rejoin exactly as the core decided."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import pytest

from kassign.membership import ClassicMember, mark_assignments
from kassign.model import Assignment, RebalanceProtocol, Subscription, TopicPartition
from kassign.sim.coordinator import SyncResponse
from kassign.sim.engine import EventLoop
from kassign.sim.member import SimMember

COOP, EAGER = RebalanceProtocol.COOPERATIVE, RebalanceProtocol.EAGER


def tps(*parts: int, topic: str = "t") -> frozenset[TopicPartition]:
    return frozenset(TopicPartition(topic, p) for p in parts)


@dataclass(frozen=True)
class Sync:
    """One SyncGroup answer and what the member must do with it."""

    generation: int
    partitions: frozenset[TopicPartition]
    revoked: frozenset[TopicPartition]
    added: frozenset[TopicPartition]
    rejoin: bool
    mark: int | None = None  # the leader's fast follow-up mark
    foreign: frozenset[TopicPartition] = field(default_factory=frozenset)  # of a topic not subscribed


ROUNDS = {
    "cooperative first assignment": (COOP, True, [Sync(1, tps(0, 1, 2), tps(), tps(0, 1, 2), False)]),
    "cooperative move revokes only the difference and rejoins": (
        COOP,
        False,
        [Sync(1, tps(0, 1, 2), tps(), tps(0, 1, 2), False), Sync(2, tps(0, 3), tps(1, 2), tps(3), True)],
    ),
    "unchanged assignment: nothing to do": (
        COOP,
        False,
        [Sync(1, tps(0, 1), tps(), tps(0, 1), False), Sync(2, tps(0, 1), tps(), tps(), False)],
    ),
    "marked, nothing revoked, fast follow-up on: rejoin at once": (
        COOP,
        True,
        [Sync(1, tps(0, 1), tps(), tps(0, 1), True, mark=1)],
    ),
    "marked but fast follow-up off: wait for the heartbeat": (
        COOP,
        False,
        [Sync(1, tps(0, 1), tps(), tps(0, 1), False, mark=1)],
    ),
    "once per marked generation, in a row too": (
        COOP,
        True,
        [
            Sync(1, tps(0), tps(), tps(0), True, mark=1),
            Sync(2, tps(0), tps(), tps(), True, mark=2),
            Sync(3, tps(0), tps(), tps(), False, mark=2),
            Sync(4, tps(0), tps(), tps(), False),
            Sync(5, tps(0, 1), tps(), tps(1), True, mark=5),
        ],
    ),
    "a revoking member rejoins whatever the mark": (
        COOP,
        False,
        [Sync(1, tps(0, 1), tps(), tps(0, 1), False), Sync(2, tps(0), tps(1), tps(), True, mark=2)],
    ),
    "partitions of an unsubscribed topic are ignored and the member rejoins": (
        COOP,
        False,
        [Sync(1, tps(0) | tps(0, topic="u"), tps(), tps(0), True, foreign=tps(0, topic="u"))],
    ),
    "eager: everything assigned is added, nothing revoked after sync": (
        EAGER,
        False,
        [Sync(1, tps(0, 1), tps(), tps(0, 1), False), Sync(2, tps(1, 2), tps(), tps(1, 2), False, mark=2)],
    ),
}


def _assignment(sync: Sync) -> Assignment:
    assignment = Assignment(sorted(sync.partitions))
    return mark_assignments({"m": assignment}, sync.mark)["m"] if sync.mark is not None else assignment


@pytest.mark.parametrize("name", sorted(ROUNDS))
def test_core_decides_each_round(name: str) -> None:
    protocol, fast, syncs = ROUNDS[name]
    member = ClassicMember(protocol, fast_follow_up=fast)
    for sync in syncs:
        if protocol is EAGER:
            assert member.prepare_join({"t"}).revoked == member.owned or not member.owned
        outcome = member.on_sync(sync.generation, _assignment(sync), {"t"})
        assert (outcome.revoked, outcome.added, outcome.ignored) == (sync.revoked, sync.added, sync.foreign)
        assert (outcome.rejoin is not None) == sync.rejoin, (sync, outcome.rejoin)
        assert member.owned == sync.partitions - sync.foreign and member.owned_generation == sync.generation
        assert outcome.user_data is None  # the mark never reaches the assignor


def test_cooperative_join_keeps_what_is_subscribed_and_eager_gives_all_up() -> None:
    coop, eager = ClassicMember(COOP), ClassicMember(EAGER)
    for member in (coop, eager):
        member.on_sync(3, Assignment(sorted(tps(0, 1) | tps(0, topic="u"))), {"t", "u"})
    assert coop.prepare_join({"t"}).revoked == tps(0, topic="u") and coop.owned == tps(0, 1)
    assert eager.prepare_join({"t", "u"}).revoked == tps(0, 1) | tps(0, topic="u") and eager.owned == frozenset()
    assert coop.subscription({"t"}) == Subscription(["t"], None, sorted(tps(0, 1)), 3)


def test_a_reset_generation_loses_everything_and_forgets_the_generation() -> None:
    member = ClassicMember(COOP)
    member.on_sync(4, Assignment(sorted(tps(0, 1))), {"t"})
    prep = member.prepare_join({"t"}, generation_reset=True)
    assert (prep.lost, prep.revoked) == (tps(0, 1), frozenset())
    assert member.subscription({"t"}).generation_id is None and member.subscription({"t"}).owned_partitions == []
    member.on_sync(5, Assignment(sorted(tps(2))), {"t"})
    assert member.leave().revoked == tps(2) and member.owned == frozenset()
    member.on_sync(6, Assignment(sorted(tps(3))), {"t"})
    assert member.leave(generation_reset=True).lost == tps(3)


def test_partitions_of_a_topic_created_again_under_its_name_are_lost_once() -> None:
    """A topic deleted and created again keeps its name and often its partition count: only its id
    tells. The owned partitions of the old topic are lost (no commit) and the rest stays owned."""
    import uuid

    old, new, other = uuid.UUID(int=1), uuid.UUID(int=2), uuid.UUID(int=3)
    member = ClassicMember(COOP)
    member.on_sync(1, Assignment(sorted(tps(0, 1) | tps(0, topic="u"))), {"t", "u"})
    assert member.topics_without_ids == {"t", "u"}
    assert member.topic_ids_seen({"t": old}) == frozenset()
    assert member.topics_without_ids == {"u"}
    assert member.topic_ids_seen({"t": old, "u": other}) == frozenset() and not member.topics_without_ids
    assert member.topic_ids_seen({"u": other}) == frozenset()  # deleted, not yet back: the rebalance revokes it
    assert member.topic_ids_seen({"t": new, "u": other}) == tps(0, 1)
    assert member.owned == tps(0, topic="u") and member.subscription({"t", "u"}).owned_partitions == sorted(
        tps(0, topic="u")
    )
    # Handed out again by name, they are new partitions, whose id is read afresh.
    outcome = member.on_sync(2, Assignment(sorted(tps(0, 1) | tps(0, topic="u"))), {"t", "u"})
    assert outcome.added == tps(0, 1) and outcome.revoked == frozenset()
    assert member.topics_without_ids == {"t"}
    assert member.topic_ids_seen({"t": new, "u": other}) == frozenset()
    assert member.held_since(1, tps(0, 1) | tps(0, topic="u"))[0] == tps(0, topic="u")


def test_topic_ids_are_forgotten_with_the_partitions() -> None:
    """An id is compared only while the member owned the topic since it was read: a topic given up
    (revoked, lost, left) and handed back later is read again, never judged by an id from before."""
    import uuid

    old, new = uuid.UUID(int=1), uuid.UUID(int=2)
    for give_up in ("revoked", "eager join", "reset", "leave"):
        member = ClassicMember(EAGER if give_up == "eager join" else COOP)
        member.on_sync(1, Assignment(sorted(tps(0))), {"t"})
        member.topic_ids_seen({"t": old})
        if give_up == "revoked":
            member.on_sync(2, Assignment([]), {"t"})
        elif give_up == "eager join":
            member.prepare_join({"t"})
        elif give_up == "reset":
            member.prepare_join({"t"}, generation_reset=True)
        else:
            member.leave()
        member.on_sync(3, Assignment(sorted(tps(0))), {"t"})
        assert member.topics_without_ids == {"t"}, give_up
        assert member.topic_ids_seen({"t": new}) == frozenset() and member.owned == tps(0), give_up


class _DelayAssignor:
    """An assignor with group-wide state: each assignment's user data may carry a rejoin delay."""

    name = "cooperative-sticky"
    supported_protocols = (COOP,)
    rejoin_after_s: float | None = None

    def subscription_user_data(self, topics: Any) -> None:
        return None

    def on_assignment(self, partitions: Any, generation: int) -> None:
        pass

    def on_assignment_user_data(self, user_data: bytes | None) -> None:
        self.rejoin_after_s = None if user_data is None else float(user_data.decode())


def test_each_assignment_replaces_the_assignors_schedule() -> None:
    member, assignor = ClassicMember(COOP), _DelayAssignor()
    first = member.on_sync(1, Assignment([], b"0.25"), {"t"}, assignor)
    second = member.on_sync(2, Assignment([]), {"t"}, assignor)
    assert (first.reschedule, first.rejoin_after_s) == (True, 0.25)
    assert (second.reschedule, second.rejoin_after_s) == (True, None)  # cancels the pending rejoin
    assert member.on_sync(3, Assignment([]), {"t"}).reschedule is False  # no assignor that reads user data


class _RaisingAssignor(_DelayAssignor):
    def on_assignment(self, partitions: Any, generation: int) -> None:
        raise RuntimeError("assignor bug")


def test_an_assignor_that_raises_does_not_stop_the_round() -> None:
    """Java's ``invokeOnAssignment``: the exception is reported with the outcome; the revocation,
    the new partitions and the assignor's schedule all still come out of the round."""
    member, assignor = ClassicMember(COOP), _RaisingAssignor()
    member.on_sync(1, Assignment(sorted(tps(0, 1))), {"t"})
    outcome = member.on_sync(2, Assignment(sorted(tps(1, 2)), b"0.5"), {"t"}, assignor)
    assert isinstance(outcome.assignor_error, RuntimeError) and str(outcome.assignor_error) == "assignor bug"
    assert (outcome.revoked, outcome.added, outcome.kept) == (tps(0), tps(2), tps(1))
    assert outcome.rejoin is not None and (outcome.reschedule, outcome.rejoin_after_s) == (True, 0.5)
    assert member.owned == tps(1, 2) and member.owned_generation == 2
    assert member.on_sync(3, Assignment(sorted(tps(1, 2))), {"t"}, _DelayAssignor()).assignor_error is None


# -- the same table through both drivers ---------------------------------------------------------


def _aiokafka_driver(protocol: RebalanceProtocol, fast: bool, syncs: list[Sync]) -> list[tuple[Any, ...]]:
    pytest.importorskip("aiokafka")
    from aiokafka.consumer.subscription_state import SubscriptionState
    from aiokafka.util import create_future

    from kassign.protocol import encode_assignment
    from tests.adapters.test_aiokafka_cooperative_member import OfflineCoordinator, Recorder

    async def drive() -> list[tuple[Any, ...]]:
        subscription = SubscriptionState()
        listener = Recorder()
        subscription.subscribe({"t"}, listener=listener)
        coordinator = OfflineCoordinator(subscription, protocol, False)
        coordinator._init_member_state(fast)
        seen: list[tuple[Any, ...]] = []
        for sync in syncs:
            if protocol is EAGER:
                await coordinator._on_join_prepare(None)
            listener.calls.clear()
            coordinator._rejoin_needed_fut = create_future()
            coordinator.generation = sync.generation
            await coordinator._on_join_complete(
                sync.generation, "m-1", "cooperative-sticky", encode_assignment(_assignment(sync))
            )
            calls = {kind: frozenset(TopicPartition(*tp) for tp in parts) for kind, parts in listener.calls}
            seen.append(
                (
                    calls.get("revoked", frozenset()),
                    calls.get("assigned", frozenset()),
                    coordinator._rejoin_needed_fut.done(),
                )
            )
        return seen

    return asyncio.run(drive())


class _Context:
    """Just enough simulation around one member: zero latencies, joins recorded."""

    def __init__(self, protocol: RebalanceProtocol) -> None:
        self.loop = EventLoop()
        self.protocol = protocol
        self.protocol_name = "cooperative-sticky"
        self.partitions_per_topic = {"t": 8, "u": 8}
        self.heartbeat_s = 3.0
        self.events: list[tuple[str, frozenset[TopicPartition]]] = []
        self.joins = 0
        self.coordinator = self

    def latency(self, name: str) -> float:
        return 0.0

    def emit(self, member: str, ev: str, parts: Any = None, **extra: Any) -> None:
        if ev in ("cb_revoked", "cb_assigned"):
            self.events.append((ev, frozenset(parts or ())))

    def leader_assigned(self, member: Any) -> None:
        pass

    def join(self, member: Any, subscription: Subscription, known_id: bool) -> None:
        self.joins += 1

    def heartbeat(self, member: Any, generation: int) -> None:
        pass


def _sim_driver(protocol: RebalanceProtocol, fast: bool, syncs: list[Sync], client: str) -> list[tuple[Any, ...]]:
    ctx = _Context(protocol)
    member = SimMember("m1", 1, ctx, _DelayAssignor(), ["t"], fast_follow_up=fast, client=client)
    seen: list[tuple[Any, ...]] = []
    for sync in syncs:
        ctx.events.clear()
        joins = ctx.joins
        if protocol is EAGER:
            member.core.prepare_join(member.topics)
        member.state = "syncing"
        member.on_sync_response(
            SyncResponse(
                generation=sync.generation,
                partitions=tuple(sorted(sync.partitions)),
                user_data=_assignment(sync).user_data,
            )
        )
        ctx.loop.run(ctx.loop.now + 1.0, lambda: True)
        events = dict(ctx.events)
        seen.append((events.get("cb_revoked", frozenset()), events.get("cb_assigned", frozenset()), ctx.joins > joins))
    return seen


@pytest.mark.parametrize("name", sorted(ROUNDS))
@pytest.mark.parametrize("driver", ["aiokafka", "sim-java", "sim-librdkafka", "sim-aiokafka"])
def test_both_drivers_do_what_the_core_decides(name: str, driver: str) -> None:
    protocol, fast, syncs = ROUNDS[name]
    expected = [(s.revoked, s.added, s.rejoin) for s in syncs]
    if driver == "aiokafka":
        seen = _aiokafka_driver(protocol, fast, syncs)
    else:
        seen = _sim_driver(protocol, fast, syncs, driver.removeprefix("sim-"))
    assert seen == expected
