"""Broker-side model of KIP-848's consumer group protocol (ConsumerGroupHeartbeat), as Apache Kafka 4's
group coordinator runs it.

There is no join barrier and no leader: every member heartbeats on its own, and the broker

* bumps the **group epoch** when the membership or a subscription changes (a member joins with epoch 0,
  leaves with epoch -1, or misses its session timeout) and computes the new **target assignment**
  at once (target epoch = group epoch), sticky to the previous target;
* moves each member towards its target one heartbeat at a time (Kafka's ``CurrentAssignmentBuilder``):
  a member that must give partitions up first keeps its epoch and is told what to keep (its
  *unrevoked* partitions are withheld from everyone); once a heartbeat of its no longer lists them,
  it gets the target epoch and every partition of its target that nobody else still holds; a
  partition still held by another member is handed over at the receiving member's next heartbeat
  after it is released (*unreleased* partitions);
* answers each heartbeat with the member's epoch, the heartbeat interval and, when it changed, the
  partitions the member may own now.

The target is computed by kassign's sticky algorithm (:class:`TargetAssignor`) standing in for the
broker's ``uniform``: both keep every member's partitions of the previous target up to a balanced
quota and spread the rest, so they move the same number of partitions (which ones can differ). Static membership (epoch -2) and the rebalance timeout
of a member slow to revoke are not modelled.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from kassign.assignors import StickyAssignor
from kassign.model import Subscription, TopicPartition
from kassign.protocol.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatAssignment,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    TopicIdPartitions,
)
from kassign.sim.engine import EventLoop, Timer

__all__ = ["ConsumerGroupCoordinator", "HeartbeatingMember", "TargetAssignor", "topic_id"]

log = logging.getLogger(__name__)

#: Error codes the model answers with (Kafka's numbers).
UNKNOWN_MEMBER_ID = 25
FENCED_MEMBER_EPOCH = 110
_TOPIC_ID_NAMESPACE = uuid.UUID("6b61737369676e00000000000000cafe")


def topic_id(topic: str) -> uuid.UUID:
    """The simulated topic's id (fixed per name, so runs are repeatable)."""
    return uuid.uuid5(_TOPIC_ID_NAMESPACE, topic)


class TargetAssignor(StickyAssignor):
    """The sticky algorithm fed the previous target (as each member's owned partitions), as the
    broker's assignor is: balanced, and moving only what balance requires."""

    def member_data(self, member_id: str, subscription: Subscription) -> tuple[list[TopicPartition], int]:
        return list(subscription.owned_partitions), subscription.generation_id or 0


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
    target computation (a mapping the simulation keeps current); ``assignor`` (default
    :class:`TargetAssignor`) computes targets from subscriptions carrying the previous target."""

    def __init__(self, loop: EventLoop, *, network_s: float, session_s: float, heartbeat_s: float,
                 partitions_per_topic: Mapping[str, int], assignor: Any = None) -> None:
        self.loop = loop
        self.network_s = network_s
        self.session_s = session_s
        self.heartbeat_ms = round(heartbeat_s * 1000)
        self.assignor = assignor or TargetAssignor()
        self.partitions_per_topic = partitions_per_topic
        self.group_epoch = 0
        self.target_epoch = 0
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
        return all(m.epoch == self.target_epoch and not m.revoking and m.reported == m.assigned
                   and m.assigned == self.target.get(mid, frozenset()) for mid, m in self.members.items())

    def metadata_changed(self) -> None:
        """A subscribed topic's partition count changed: a new group epoch and target."""
        self._bump()

    # -- requests ------------------------------------------------------------------------------
    def heartbeat(self, member: HeartbeatingMember, request: ConsumerGroupHeartbeatRequest) -> None:
        """A ConsumerGroupHeartbeat arrives; the answer goes back one network latency later."""
        state = self.members.get(member.id)
        if request.member_epoch < 0:  # -1 leave (-2, a static member's, is taken as a leave here)
            if state is not None:
                self._remove(member.id, "left")
            self._reply(member, ConsumerGroupHeartbeatResponse(member_id=member.id,
                                                               member_epoch=request.member_epoch))
            return
        if request.member_epoch == 0:
            if state is not None:  # a fenced member joining again under its id: it starts over
                self._release(state)
            state = self.members[member.id] = _Member(member)
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
            self._bump()
        elif request.member_epoch == 0:
            self._bump()
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
        out = set()
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
        log.debug("t=%.3f %s removed (%s)", self.loop.now, member_id, why)
        self._bump()

    def _release(self, state: _Member) -> None:
        state.assigned = state.revoking = frozenset()

    def _bump(self) -> None:
        """A new group epoch and, at once, its target assignment (sticky to the previous one)."""
        self.group_epoch += 1
        self.target_computations += 1
        partitions = dict(self.partitions_per_topic)
        subscriptions = {
            mid: Subscription(sorted(s.topics), owned_partitions=sorted(self.target.get(mid, frozenset())),
                              generation_id=self.target_epoch)
            for mid, s in sorted(self.members.items()) if s.topics
        }
        assigned = self.assignor.assign(partitions, subscriptions) if subscriptions else {}
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
        if gone:
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
                [TopicIdPartitions(topic_id(t), sorted(ps)) for t, ps in sorted(by_topic.items())])
            state.sent = state.assigned
        return ConsumerGroupHeartbeatResponse(member_id=member_id, member_epoch=state.epoch,
                                              heartbeat_interval_ms=self.heartbeat_ms, assignment=assignment)

    def _reply(self, member: HeartbeatingMember, response: ConsumerGroupHeartbeatResponse) -> None:
        self.loop.after(self.network_s, member.on_heartbeat_response, response, background=response.error_code == 0)
