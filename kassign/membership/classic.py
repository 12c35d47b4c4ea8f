"""One member of the classic group protocol (JoinGroup/SyncGroup), eager or cooperative (KIP-429),
with the rules of Java's ``ConsumerCoordinator`` and nothing else: no client, no clock, no I/O.

A driver calls :class:`ClassicMember` at each step of a round and carries out the answer:

1. a join is due: :meth:`~ClassicMember.prepare_join` says what to lose (a reset generation) and
   revoke (eager: everything; cooperative: only partitions of topics no longer subscribed) before
   JoinGroup; :meth:`~ClassicMember.subscription` is what JoinGroup carries for each assignor;
2. elected leader: :meth:`~ClassicMember.lead` computes every member's assignment;
3. SyncGroup answered: :meth:`~ClassicMember.on_sync` says what is revoked, added and kept, what the
   assignor asked to schedule, and whether (and why) to rejoin once the revocations are done;
4. leaving or fenced: :meth:`~ClassicMember.leave` and :meth:`~ClassicMember.lose_all`;
5. the cluster's topic ids read (Metadata v12+): :meth:`~ClassicMember.topic_ids_seen` says which owned
   partitions belonged to a topic since deleted and created again under its name (lost; rejoin);
6. a commit issued under one generation and completed after a rebalance: :meth:`~ClassicMember.held_since`
   says which of its partitions the member owned without interruption since then (only those may be
   committed: the others may have been processed by another member meanwhile).

The member's ``owned`` partitions change when a step is decided; the driver runs the listener
calls (revoked before assigned, lost without a commit) in the order the answer lists them.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kassign.assignors.base import PartitionAssignor
from kassign.membership.follow_up import FollowUpPolicy
from kassign.membership.leader import GroupAssignment, assign_group
from kassign.model import Assignment, RebalanceProtocol, Subscription, TopicPartition
from kassign.protocol.follow_up_mark import read_follow_up

log = logging.getLogger(__name__)

__all__ = [
    "ClassicMember",
    "JoinPreparation",
    "SyncOutcome",
    "select_rebalance_protocol",
    "FENCING_ERRORS",
    "MEMBER_ID_KEPT_ERRORS",
    "FATAL_FENCING_ERRORS",
]

#: Errors after which a member's generation is gone: what it owned may already be someone else's.
FENCING_ERRORS = frozenset({"ILLEGAL_GENERATION", "UNKNOWN_MEMBER_ID", "FENCED_INSTANCE_ID"})
#: Fencing errors after which the member keeps its member id and resets only its generation (Java's
#: KAFKA-13419): the coordinator still knows the member, so the next JoinGroup names it rather than
#: adding a second member that the group keeps, unsynced, until its session expires.
MEMBER_ID_KEPT_ERRORS = frozenset({"ILLEGAL_GENERATION"})
#: Fencing errors that end the membership for good, whichever request they answer (JoinGroup,
#: SyncGroup, Heartbeat): another instance took this static member's ``group.instance.id``.
FATAL_FENCING_ERRORS = frozenset({"FENCED_INSTANCE_ID"})

_EMPTY: frozenset[TopicPartition] = frozenset()


def select_rebalance_protocol(assignors: Sequence[Any]) -> RebalanceProtocol:
    """The most capable protocol every assignor supports, as Java's ConsumerCoordinator picks it.

    ``(range, cooperative-sticky)`` runs EAGER; ``(cooperative-sticky,)`` runs COOPERATIVE.
    """
    if not assignors:
        raise ValueError("at least one partition assignor is needed, got none")
    common = set(RebalanceProtocol)
    for assignor in assignors:
        common &= set(assignor.supported_protocols)
    if not common:
        names = [a.name for a in assignors]
        raise ValueError(f"assignors {names} support no common rebalance protocol")
    return max(common, key=lambda protocol: protocol.value)


@dataclass(frozen=True)
class JoinPreparation:
    """What a member gives up before joining (or when leaving): ``lost`` without a commit
    (``on_partitions_lost``), then ``revoked`` after committing them (``on_partitions_revoked``)."""

    lost: frozenset[TopicPartition] = _EMPTY
    revoked: frozenset[TopicPartition] = _EMPTY


@dataclass(frozen=True)
class SyncOutcome:
    """What a member does with the assignment SyncGroup gave it for ``generation``.

    In order: revoke ``revoked`` (commit, ``on_partitions_revoked``), start consuming ``added``
    beside ``kept`` (``on_partitions_assigned(added)``), and when ``rejoin`` names a reason, join
    again. ``ignored``: partitions of topics the member does not subscribe to (never consumed).
    ``user_data``: the assignor's own user data, the follow-up mark stripped. ``reschedule``: the
    assignor reads user data, so its rejoin schedule is replaced: by a rejoin ``rejoin_after_s``
    seconds from now, or by none. ``assignor_error``: what the assignor raised when told of the
    assignment; the round completes regardless (the driver hands it to the application afterwards).
    """

    generation: int
    assigned: frozenset[TopicPartition]
    added: frozenset[TopicPartition]
    revoked: frozenset[TopicPartition]
    kept: frozenset[TopicPartition]
    ignored: frozenset[TopicPartition] = _EMPTY
    user_data: bytes | None = None
    follow_up: bool = False
    rejoin: str | None = None
    reschedule: bool = False
    rejoin_after_s: float | None = None
    assignor_error: Exception | None = None

    @property
    def changed(self) -> bool:
        """Whether the member's partitions changed at all."""
        return bool(self.added or self.revoked)


class ClassicMember:
    """A consumer's membership in a classic group: what it owns, since which generation, and the
    decisions of each round. ``fast_follow_up``: kassign's early rejoin on a marked assignment
    (:mod:`kassign.membership.follow_up`)."""

    def __init__(self, protocol: RebalanceProtocol, *, fast_follow_up: bool = False) -> None:
        self.protocol = protocol
        self.follow_up = FollowUpPolicy(fast_follow_up)
        self.owned: frozenset[TopicPartition] = _EMPTY
        # The generation whose SyncGroup gave ``owned`` (KIP-792's meaning of the subscription's
        # generation): unlike the client's current generation it does not move when a round fails
        # after JoinGroup, so a member's metadata changes only when what it owns changes. A broker
        # without a join barrier (Tansu) starts a new generation for every changed metadata it sees.
        self.owned_generation = -1
        # The generation whose SyncGroup gave each owned partition to this member (kept ones keep theirs).
        self._acquired: dict[TopicPartition, int] = {}
        # The topic id of each topic it owns partitions of, first seen while it owned them
        # (topic_ids_seen); forgotten as soon as it owns none of the topic's partitions.
        self._topic_ids: dict[str, uuid.UUID] = {}
        # Leader: members whose metadata it could not read and emptied in the last completed round
        # (they own nothing now); those of this round, until its SyncGroup; and whether this round
        # withheld partitions for such members, so that the leader rejoins after it.
        self._emptied_unreadable: frozenset[str] = frozenset()
        self._emptying_unreadable: frozenset[str] = frozenset()
        self._rejoin_after_sync = False

    @property
    def cooperative(self) -> bool:
        return self.protocol is RebalanceProtocol.COOPERATIVE

    def subscription(
        self,
        topics: Iterable[str],
        user_data: bytes | None = None,
        *,
        rack: str | None = None,
        instance_id: str | None = None,
    ) -> Subscription:
        """What JoinGroup carries for one assignor: topics, its user data, the owned partitions and
        the generation they came from, the rack."""
        return Subscription(
            sorted(set(topics)),
            user_data,
            sorted(self.owned),
            None if self.owned_generation < 0 else self.owned_generation,
            rack,
            instance_id,
        )

    # -- giving partitions up ----------------------------------------------------------------

    def lose_all(self) -> frozenset[TopicPartition]:
        """The generation is gone (fenced, session expired): everything owned is lost, uncommitted."""
        lost, self.owned, self.owned_generation = self.owned, _EMPTY, -1
        self._acquired = {}
        self._topic_ids = {}
        return lost

    @property
    def topics_without_ids(self) -> frozenset[str]:
        """Topics it owns partitions of whose topic id it has not seen yet: the driver reads them
        (Metadata v12+) and calls :meth:`topic_ids_seen`."""
        return frozenset(tp.topic for tp in self.owned if tp.topic not in self._topic_ids)

    def topic_ids_seen(self, ids: Mapping[str, uuid.UUID]) -> frozenset[TopicPartition]:
        """The topic ids the cluster has now (``ids``: name -> id; a topic absent is left out). A topic
        owned under another id was deleted and created again under its name: the partitions owned of it
        belonged to a topic that is gone, so they are lost -- no commit, since their positions and
        offsets mean nothing in the new topic -- and the driver rejoins, to be assigned the new topic's
        partitions as new ones. Only the id tells the two apart: the classic protocol names partitions
        by topic name, and the new topic may have as many partitions as the old one."""
        recreated = {t for t, tid in ids.items() if t in self._topic_ids and self._topic_ids[t] != tid}
        lost = frozenset(tp for tp in self.owned if tp.topic in recreated)
        self.owned -= lost
        for tp in lost:
            del self._acquired[tp]
        # Recreated topics start afresh: their partitions come back in the next round, as new ones.
        self._forget_ids_but(self.owned)
        owned_topics = {tp.topic for tp in self.owned}
        for t, tid in ids.items():
            if t in owned_topics:
                self._topic_ids.setdefault(t, tid)
        return lost

    def _forget_ids_but(self, partitions: Iterable[TopicPartition]) -> None:
        """Keep the topic ids only of the topics of ``partitions`` (held on without interruption)."""
        topics = {tp.topic for tp in partitions}
        self._topic_ids = {t: tid for t, tid in self._topic_ids.items() if t in topics}

    def held_since(
        self, generation: int, partitions: Iterable[TopicPartition]
    ) -> tuple[frozenset[TopicPartition], frozenset[TopicPartition]]:
        """Of ``partitions``, those owned without interruption since ``generation`` (a commit issued then
        may still be completed for them) and the others (revoked or lost since, perhaps handed back
        later: another member may have processed them meanwhile, so their offsets are stale)."""
        partitions = frozenset(partitions)
        held = frozenset(
            tp for tp in partitions if tp in self.owned and self._acquired.get(tp, generation + 1) <= generation
        )
        return held, partitions - held

    def prepare_join(self, topics: Collection[str], *, generation_reset: bool = False) -> JoinPreparation:
        """Java's ``onJoinPrepare``: lose everything when the generation was reset; then revoke
        everything (eager) or only what is no longer subscribed (cooperative)."""
        lost = self.lose_all() if generation_reset else _EMPTY
        revoked = frozenset(tp for tp in self.owned if tp.topic not in topics) if self.cooperative else self.owned
        self.owned -= revoked
        self._forget_ids_but(self.owned)
        return JoinPreparation(lost, revoked)

    def leave(self, *, generation_reset: bool = False) -> JoinPreparation:
        """Leaving the group (close, unsubscribe): everything is given up first, as Java's
        ``onLeavePrepare`` -- lost when the generation is gone, else revoked."""
        if generation_reset:
            return JoinPreparation(lost=self.lose_all())
        revoked, self.owned = self.owned, _EMPTY
        self._topic_ids = {}
        return JoinPreparation(revoked=revoked)

    # -- the leader --------------------------------------------------------------------------

    def lead(
        self,
        assignor: PartitionAssignor,
        partitions_per_topic: Mapping[str, int],
        subscriptions: Mapping[str, Subscription],
        generation: int,
        *,
        unreadable: Collection[str] = frozenset(),
        partition_racks: Mapping[TopicPartition, Any] | None = None,
    ) -> GroupAssignment:
        """The leader's assignment for ``generation`` (:func:`kassign.membership.leader.assign_group`).

        ``unreadable``: members whose metadata did not parse. Those not emptied by this member's last
        completed round may still own partitions, so unclaimed partitions are withheld this round and
        the leader rejoins after it.
        """
        unreadable = frozenset(unreadable)
        may_own = unreadable - self._emptied_unreadable if self.cooperative else frozenset()
        self._emptying_unreadable = unreadable
        self._rejoin_after_sync = bool(may_own)
        return assign_group(
            assignor,
            partitions_per_topic,
            subscriptions,
            self.protocol,
            generation,
            partition_racks=partition_racks,
            unreadable=unreadable,
            may_own=may_own,
            follow_up=self.follow_up,
        )

    # -- after SyncGroup ---------------------------------------------------------------------

    def on_sync(
        self,
        generation: int,
        assignment: Assignment,
        topics: Collection[str],
        assignor: PartitionAssignor | None = None,
    ) -> SyncOutcome:
        """Adopt the assignment of ``generation``: cooperative members revoke ``owned - assigned``, add
        ``assigned - owned`` and keep the rest; eager members, which revoked everything before
        joining, add it all. ``assignor`` (the round's) hears of the assignment and reads its user data."""
        assigned = frozenset(TopicPartition(*tp) for tp in assignment.partitions)
        ignored = frozenset(tp for tp in assigned if tp.topic not in topics)
        if ignored:
            log.warning(
                "generation %s assigned partitions of topics this member does not subscribe to: %s; "
                "ignoring them and rejoining",
                generation,
                sorted(ignored),
            )
            assigned -= ignored
        # The mark is stripped whether or not this member acts on it: the assignor sees its own bytes.
        mark, user_data = read_follow_up(assignment.user_data)
        follow_up = mark is not None and self.cooperative and self.follow_up.should_rejoin(mark)
        if self.cooperative:
            revoked, added, kept = self.owned - assigned, assigned - self.owned, self.owned & assigned
        else:
            revoked, added, kept = _EMPTY, assigned, _EMPTY
        self.owned, self.owned_generation = assigned, generation
        self._acquired = {tp: self._acquired.get(tp, generation) if tp in kept else generation for tp in assigned}
        self._forget_ids_but(kept)

        self._emptied_unreadable, self._emptying_unreadable = self._emptying_unreadable, frozenset()
        rejoin = None
        if ignored:
            rejoin = "assigned partitions of unsubscribed topics"
        elif revoked:
            rejoin = "revoked partitions go out in the follow-up rebalance"
        elif self._rejoin_after_sync:
            rejoin = "partitions withheld for members with unreadable metadata"
        elif follow_up:
            rejoin = "follow-up pending"
        self._rejoin_after_sync = False

        reschedule, rejoin_after_s, error = False, None, None
        if assignor is not None:
            # As Java's ``invokeOnAssignment``: an assignor that raises is reported, never allowed to
            # stop the round half-way (``owned`` is already this generation's assignment).
            error = _call_assignor(assignor, "on_assignment", sorted(assigned), generation)
            receive = getattr(assignor, "on_assignment_user_data", None)
            if receive is not None:
                receive_error = _call_assignor(assignor, "on_assignment_user_data", user_data)
                if error is None:
                    error = receive_error
                if receive_error is None:
                    # This assignment's schedule replaces the previous one, whatever it was.
                    reschedule = True
                    delay = getattr(assignor, "rejoin_after_s", None)
                    rejoin_after_s = None if delay is None else max(0.0, float(delay))
        return SyncOutcome(
            generation,
            assigned,
            added,
            revoked,
            kept,
            ignored,
            user_data,
            follow_up,
            rejoin,
            reschedule,
            rejoin_after_s,
            error,
        )


def _call_assignor(assignor: PartitionAssignor, method: str, *args: Any) -> Exception | None:
    """Call ``assignor.method(*args)``; what it raises is logged and returned, not propagated."""
    try:
        getattr(assignor, method)(*args)
    except Exception as exc:
        log.exception("assignor %s failed in %s; completing the round without it", assignor.name, method)
        return exc
    return None
