"""Broker-side model of KIP-848's consumer group protocol (ConsumerGroupHeartbeat), as Apache Kafka 4's
group coordinator runs it.

There is no join barrier and no leader: every member heartbeats on its own, and the broker

* bumps the **group epoch** when the membership or a subscription changes (a member joins with epoch 0,
  leaves with epoch -1, or misses its session timeout); a member that goes is taken out of the
  target assignment at once (its partitions wait, unassigned, for the next computation);
* computes a new **target assignment** (target epoch = group epoch, sticky to the previous target)
  while handling a heartbeat that finds the target behind the group epoch, but at most once per
  ``consumer.assignment.interval.ms`` (KIP-1263, 1 s by default in Kafka 4.4): changes within the
  interval wait for the first heartbeat after it (there is no timer);
* moves each member towards its target one heartbeat at a time (Kafka's ``CurrentAssignmentBuilder``):
  a member that must give partitions up first keeps its epoch and is told what to keep (its
  *unrevoked* partitions are withheld from everyone); once a heartbeat of its no longer lists them,
  it gets the target epoch and every partition of its target that nobody else still holds; a
  partition still held by another member is handed over at the receiving member's next heartbeat
  after it is released (*unreleased* partitions);
* answers each heartbeat with the member's epoch, the heartbeat interval and, when it changed, the
  partitions the member may own now.

The target is the broker's default ``uniform`` assignor's for a group whose members all subscribe to
the same topics (Kafka 4's homogeneous uniform builder, :func:`uniform_target`): each member keeps the
lowest-numbered partitions of its previous target up to its quota (the first ``P mod N`` members in
the coordinator's member order get one more), the rest and the unassigned are handed out in that
order. The coordinator's member order is a hash map's over random member ids, so here it is an
order by a hash of the simulated ids. Members with different subscriptions get kassign's sticky
algorithm instead (balanced and sticky like the broker's heterogeneous builder; which partitions
move can differ). Static membership (epoch -2) and the rebalance timeout
of a member slow to revoke are not modelled.
"""

from __future__ import annotations

import hashlib
import logging
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from kassign.assignors import StickyAssignor
from kassign.model import Subscription, TopicPartition
from kassign.protocol.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatAssignment,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    TopicIdPartitions,
)
from kassign.sim.engine import EventLoop, Timer

__all__ = ["ConsumerGroupCoordinator", "HeartbeatingMember", "TargetAssignor", "topic_id", "uniform_target"]

log = logging.getLogger(__name__)

#: Error codes the model answers with (Kafka's numbers).
UNKNOWN_MEMBER_ID = 25
FENCED_MEMBER_EPOCH = 110
_TOPIC_ID_NAMESPACE = uuid.UUID("6b61737369676e00000000000000cafe")


def topic_id(topic: str) -> uuid.UUID:
    """The simulated topic's id (fixed per name, so runs are repeatable)."""
    return uuid.uuid5(_TOPIC_ID_NAMESPACE, topic)


class TargetAssignor(StickyAssignor):
    """For members with different subscriptions: the sticky algorithm fed the previous target (as
    each member's owned partitions), balanced and moving only what balance requires."""

    def member_data(self, member_id: str, subscription: Subscription) -> tuple[list[TopicPartition], int]:
        return list(subscription.owned_partitions), subscription.generation_id or 0


def member_order(member_ids: Iterable[str]) -> list[str]:
    """The coordinator's order of its members: arbitrary but fixed (a hash of each id)."""
    return sorted(member_ids, key=lambda m: hashlib.sha256(m.encode()).digest())


def uniform_target(
    members: Sequence[str], partitions: Sequence[TopicPartition], previous: Mapping[str, frozenset[TopicPartition]]
) -> dict[str, frozenset[TopicPartition]]:
    """Kafka 4's uniform assignment of ``partitions`` over ``members`` (in the coordinator's order), all
    subscribed to the same topics, sticky to the ``previous`` target."""
    if not members:
        return {}
    wanted = set(partitions)
    quota, extra = divmod(len(partitions), len(members))
    taken = {tp for m in members for tp in previous.get(m, ()) if tp in wanted}
    unassigned = [tp for tp in partitions if tp not in taken]
    target: dict[str, list[TopicPartition]] = {}
    room: list[tuple[str, int]] = []
    for m in members:
        share = quota + (1 if extra > 0 else 0)
        extra -= 1 if extra > 0 else 0
        kept = sorted(tp for tp in previous.get(m, ()) if tp in wanted)
        target[m] = kept[:share]
        unassigned += kept[share:]
        if len(target[m]) < share:
            room.append((m, share - len(target[m])))
    it = iter(unassigned)
    for m, free in room:
        target[m] += [tp for _, tp in zip(range(free), it)]
    return {m: frozenset(ps) for m, ps in target.items()}


class HeartbeatingMember(Protocol):
    """A member as this broker sees it: its id and where its answers go."""

    id: str

    def on_heartbeat_response(self, response: ConsumerGroupHeartbeatResponse) -> None: ...


@dataclass
class _Member:
    member: HeartbeatingMember
    topics: frozenset[str] = frozenset()
    epoch: int = 0
    previous_epoch: int = -1
    #: Partitions the member may own now (sent to it), and those it must still give up.
    assigned: frozenset[TopicPartition] = frozenset()
    revoking: frozenset[TopicPartition] = frozenset()
    sent: frozenset[TopicPartition] | None = None  # the assignment last sent to it
    reported: frozenset[TopicPartition] = frozenset()  # what its heartbeats last said it owns
    expiry: Timer | None = field(default=None, repr=False)


class ConsumerGroupCoordinator:
    """One consumer group on a Kafka 4 group coordinator. ``partitions_per_topic`` is read at every
    target computation (a mapping the simulation keeps current)."""

    def __init__(
        self,
        loop: EventLoop,
        *,
        network_s: float,
        session_s: float,
        heartbeat_s: float,
        partitions_per_topic: Mapping[str, int],
        assignment_interval_s: float = 1.0,
    ) -> None:
        self.loop = loop
        self.network_s = network_s
        self.session_s = session_s
        self.heartbeat_ms = round(heartbeat_s * 1000)
        self.partitions_per_topic = partitions_per_topic
        self.assignment_interval_s = assignment_interval_s
        self.group_epoch = 0
        self.target_epoch = 0
        self.last_computed: float | None = None
        self.target: dict[str, frozenset[TopicPartition]] = {}
        self.members: dict[str, _Member] = {}
        self.leader: str | None = None  # no leader on this protocol (the classic model's attribute)
        self.target_computations = 0

    @property
    def generation(self) -> int:
        """The epoch every member reaches once the group is reconciled."""
        return self.target_epoch

    def topic_name(self, tid: uuid.UUID) -> str | None:
        """Metadata: the name of a topic id (what a member's Metadata request resolves)."""
        return next((t for t in self.partitions_per_topic if topic_id(t) == tid), None)

    def settled(self) -> bool:
        """Every member has its target and has acknowledged owning it; nothing is being handed over."""
        return self.target_epoch == self.group_epoch and all(
            m.epoch == self.target_epoch
            and not m.revoking
            and m.reported == m.assigned
            and m.assigned == self.target.get(mid, frozenset())
            for mid, m in self.members.items()
        )

    def metadata_changed(self) -> None:
        """A subscribed topic's partition count changed: a new group epoch (and target, when allowed)."""
        self.group_epoch += 1

    # -- requests ------------------------------------------------------------------------------
    def heartbeat(self, member: HeartbeatingMember, request: ConsumerGroupHeartbeatRequest) -> None:
        """A ConsumerGroupHeartbeat arrives; the answer goes back one network latency later."""
        state = self.members.get(member.id)
        if request.member_epoch < 0:  # -1 leave (-2, a static member's, is taken as a leave here)
            if state is not None:
                self._remove(member.id, "left")
            self._reply(member, ConsumerGroupHeartbeatResponse(member_id=member.id, member_epoch=request.member_epoch))
            return
        if request.member_epoch == 0:
            if state is not None:  # a fenced member joining again under its id: it starts over
                self._release(state)
            state = self.members[member.id] = _Member(member, epoch=self.target_epoch)
            log.debug("t=%.3f %s joins", self.loop.now, member.id)
        elif state is None:
            self._reply(member, ConsumerGroupHeartbeatResponse(error_code=UNKNOWN_MEMBER_ID))
            return
        elif not self._epoch_ok(state, request):
            self._reply(member, ConsumerGroupHeartbeatResponse(error_code=FENCED_MEMBER_EPOCH))
            return
        self._touch(state)
        if request.subscribed_topic_names is not None and frozenset(request.subscribed_topic_names) != state.topics:
            state.topics = frozenset(request.subscribed_topic_names)
            self.group_epoch += 1
        elif request.member_epoch == 0:
            self.group_epoch += 1
        self._maybe_compute_target()
        owned = None if request.topic_partitions is None else self._named(request.topic_partitions)
        if owned is not None:
            state.reported = owned
        self._reconcile(member.id, state, owned)
        self._reply(member, self._response(member.id, state, full=request.member_epoch == 0))

    def _epoch_ok(self, state: _Member, request: ConsumerGroupHeartbeatRequest) -> bool:
        """Kafka accepts the member's current epoch, or its previous one when what it reports owning
        is within what it is assigned (its answer to the last epoch bump was lost)."""
        if request.member_epoch == state.epoch:
            return True
        if request.member_epoch == state.previous_epoch and request.topic_partitions is not None:
            return self._named(request.topic_partitions) <= state.assigned
        return False

    def _named(self, partitions: list[TopicIdPartitions]) -> frozenset[TopicPartition]:
        out: set[TopicPartition] = set()
        for t in partitions:
            name = self.topic_name(t.topic_id)
            if name is not None:
                out.update(TopicPartition(name, p) for p in t.partitions)
        return frozenset(out)

    # -- membership ----------------------------------------------------------------------------
    def _touch(self, state: _Member) -> None:
        self.loop.cancel(state.expiry)
        state.expiry = self.loop.after(self.session_s, self._expire, state.member.id, background=True)

    def _expire(self, member_id: str) -> None:
        if member_id in self.members:
            self._remove(member_id, "session timeout")

    def _remove(self, member_id: str, why: str) -> None:
        state = self.members.pop(member_id)
        self.loop.cancel(state.expiry)
        self.target.pop(member_id, None)  # its partitions are nobody's target until the next computation
        log.debug("t=%.3f %s removed (%s)", self.loop.now, member_id, why)
        self.group_epoch += 1

    def _release(self, state: _Member) -> None:
        state.assigned = state.revoking = frozenset()

    def _maybe_compute_target(self) -> None:
        """The target assignment of the group epoch, if it is behind and the interval since the last
        computation has passed."""
        if self.target_epoch >= self.group_epoch:
            return
        now = self.loop.now
        if self.last_computed is not None and now < self.last_computed + self.assignment_interval_s - 1e-9:
            return
        self.last_computed = now
        self.target_computations += 1
        subscribed = {mid: s.topics for mid, s in self.members.items() if s.topics}
        topic_sets = set(subscribed.values())
        if len(topic_sets) == 1:
            (topics,) = topic_sets
            partitions = [
                TopicPartition(t, p) for t in sorted(topics) for p in range(self.partitions_per_topic.get(t, 0))
            ]
            assigned: Mapping[str, Iterable[TopicPartition]] = uniform_target(
                member_order(subscribed), partitions, self.target
            )
        elif subscribed:
            assigned = TargetAssignor().assign(
                dict(self.partitions_per_topic),
                {
                    mid: Subscription(
                        sorted(topics),
                        owned_partitions=sorted(self.target.get(mid, frozenset())),
                        generation_id=self.target_epoch,
                    )
                    for mid, topics in sorted(subscribed.items())
                },
            )
        else:
            assigned = {}
        self.target = {mid: frozenset(assigned.get(mid, ())) for mid in self.members}
        self.target_epoch = self.group_epoch

    # -- reconciliation (Kafka's CurrentAssignmentBuilder) -------------------------------------
    def _held_elsewhere(self, member_id: str) -> set[TopicPartition]:
        held: set[TopicPartition] = set()
        for mid, m in self.members.items():
            if mid != member_id:
                held |= m.assigned | m.revoking
        return held

    def _reconcile(self, member_id: str, state: _Member, owned: frozenset[TopicPartition] | None) -> None:
        if state.revoking:
            if owned is None or owned & state.revoking:
                return  # still revoking: it keeps its epoch until a heartbeat no longer lists them
            state.revoking = frozenset()
        target = self.target.get(member_id, frozenset())
        if state.epoch == self.target_epoch and state.assigned == target:
            return
        gone = state.assigned - target
        if gone and (owned is None or owned & gone):
            # Revoke first -- unless this heartbeat shows the member never took them (Kafka's
            # ownsRevokedPartitions: without an owned list it must assume it holds them).
            state.assigned = state.assigned & target
            state.revoking = gone
            return
        held = self._held_elsewhere(member_id)
        state.assigned = frozenset(tp for tp in target if tp in state.assigned or tp not in held)
        if state.epoch != self.target_epoch:
            state.previous_epoch, state.epoch = state.epoch, self.target_epoch

    def _response(self, member_id: str, state: _Member, *, full: bool) -> ConsumerGroupHeartbeatResponse:
        assignment = None
        if full or state.sent != state.assigned:
            by_topic: dict[str, list[int]] = {}
            for tp in state.assigned:
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            assignment = ConsumerGroupHeartbeatAssignment(
                [TopicIdPartitions(topic_id(t), sorted(ps)) for t, ps in sorted(by_topic.items())]
            )
            state.sent = state.assigned
        return ConsumerGroupHeartbeatResponse(
            member_id=member_id,
            member_epoch=state.epoch,
            heartbeat_interval_ms=self.heartbeat_ms,
            assignment=assignment,
        )

    def _reply(self, member: HeartbeatingMember, response: ConsumerGroupHeartbeatResponse) -> None:
        self.loop.after(self.network_s, member.on_heartbeat_response, response, background=response.error_code == 0)
