"""The leader's part of a classic rebalance, client-free: run the assignor for the whole group,
refuse a result that breaks the cooperative rule, keep a round exclusive when some members'
metadata could not be read, and mark the fast follow-up.

The driver supplies what only a client knows (the partition counts of the subscribed topics, the
racks of their replicas) and encodes the result; the simulator hands it plain values.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kassign.assignors.base import PartitionAssignor
from kassign.membership.follow_up import FollowUpPolicy, mark_assignments
from kassign.model import Assignment, RebalanceProtocol, Subscription, TopicPartition

log = logging.getLogger(__name__)

__all__ = [
    "GroupAssignment",
    "InvalidAssignment",
    "IllegalCooperativeAssignment",
    "assign_group",
    "check_cooperative_assignment",
    "exclude_unreadable",
]


class InvalidAssignment(ValueError):
    """The leader's assignor returned something no member may be sent (a member left out)."""


class IllegalCooperativeAssignment(InvalidAssignment):
    """The leader's assignor handed a partition to one member while another still claims it.

    Under the cooperative protocol that would let two members consume the same partition at once,
    so the leader refuses to send the assignment (Java's ``validateCooperativeAssignment``).
    """


@dataclass(frozen=True)
class GroupAssignment:
    """The leader's answer for one round: ``assignments``, one per member, empty ones included
    (marked "follow-up pending" when the fast follow-up applies)."""

    assignments: dict[str, Assignment]


def check_cooperative_assignment(
    assignment: Mapping[str, Iterable[TopicPartition]], subscriptions: Mapping[str, Subscription]
) -> None:
    """Raise :class:`IllegalCooperativeAssignment` if a partition is added to one member while
    another member claims it in this round (it must be revoked first and handed out in the
    follow-up rebalance).

    This covers Java's check (a partition both revoked from one member and added to another) and
    also a partition added to a second member while its owner keeps it. A partition two members
    claim (a stale generation) may stay with either of them: it is not "added" to its claimant.
    """
    claimants: dict[TopicPartition, list[str]] = {}
    for member_id in sorted(subscriptions):
        for tp in subscriptions[member_id].owned_partitions:
            claimants.setdefault(TopicPartition(*tp), []).append(member_id)
    conflicts = []
    for member_id in sorted(assignment):
        owned = (
            {TopicPartition(*tp) for tp in subscriptions[member_id].owned_partitions}
            if member_id in subscriptions
            else set()
        )
        for tp in sorted({TopicPartition(*tp) for tp in assignment[member_id]} - owned):
            others = [m for m in claimants.get(tp, ()) if m != member_id]
            if others:
                conflicts.append(f"{tp.topic}-{tp.partition} to {member_id} (owned by {others[0]})")
    if conflicts:
        raise IllegalCooperativeAssignment(
            "assignor broke the cooperative rule, it adds partitions still owned by other members: "
            + ", ".join(conflicts)
        )


def exclude_unreadable(
    result: Mapping[str, Iterable[TopicPartition]],
    subscriptions: Mapping[str, Subscription],
    unreadable: Collection[str],
    may_own: Collection[str],
) -> tuple[dict[str, list[TopicPartition]], list[TopicPartition]]:
    """Keep a cooperative round exclusive when some members' metadata could not be read.

    Such a member may still own partitions nobody can see, so it gets an empty assignment: it revokes
    whatever it owns and rejoins. While one that ``may_own`` something is in the group, the partitions
    no readable member claims are withheld from everybody (they may be its own) until the next round.
    Returns the new assignment and the partitions withheld.
    """
    claimed = {
        TopicPartition(*tp) for m, sub in subscriptions.items() if m not in unreadable for tp in sub.owned_partitions
    }
    out: dict[str, list[TopicPartition]] = {}
    withheld: list[TopicPartition] = []
    for member_id, partitions in result.items():
        if member_id in unreadable:
            out[member_id] = []
            continue
        own = {TopicPartition(*tp) for tp in subscriptions[member_id].owned_partitions}
        keep = []
        for tp in partitions:
            tp = TopicPartition(*tp)
            if may_own and tp not in own and tp not in claimed:
                withheld.append(tp)
            else:
                keep.append(tp)
        out[member_id] = keep
    if unreadable:
        log.error(
            "members %s sent unreadable metadata: each gets an empty assignment%s",
            sorted(unreadable),
            f"; withholding {len(withheld)} unclaimed partitions until they have revoked" if withheld else "",
        )
    return out, sorted(withheld)


def assign_group(
    assignor: PartitionAssignor,
    partitions_per_topic: Mapping[str, int],
    subscriptions: Mapping[str, Subscription],
    protocol: RebalanceProtocol,
    generation: int,
    *,
    partition_racks: Mapping[TopicPartition, Any] | None = None,
    unreadable: Collection[str] = (),
    may_own: Collection[str] = (),
    follow_up: FollowUpPolicy | None = None,
) -> GroupAssignment:
    """Run ``assignor`` for the whole group of ``generation``.

    Every member gets an assignment, empty ones included. An assignor that leaves group-wide state
    in ``assignment_user_data`` after assigning (the delayed assignor) has it sent to every member.
    Under the cooperative protocol the result is checked (:func:`check_cooperative_assignment`),
    members whose metadata was ``unreadable`` are handled by :func:`exclude_unreadable` (``may_own``:
    those of them that may still own partitions), and ``follow_up`` decides the fast follow-up mark.
    """
    if partition_racks:
        result = assignor.assign(dict(partitions_per_topic), dict(subscriptions), partition_racks=partition_racks)
    else:  # assignors that know nothing of racks need not take the argument
        result = assignor.assign(dict(partitions_per_topic), dict(subscriptions))
    missing = set(subscriptions) - set(result)
    if missing:
        raise InvalidAssignment(f"assignor {assignor.name!r} left members {sorted(missing)} out of its assignment")
    cooperative = protocol is RebalanceProtocol.COOPERATIVE
    if cooperative:
        check_cooperative_assignment(result, subscriptions)
        if unreadable:
            result, _ = exclude_unreadable(result, subscriptions, unreadable, may_own)
    log.info("assignor %s assigned %s", assignor.name, {m: len(ps) for m, ps in sorted(result.items())})
    user_data = getattr(assignor, "assignment_user_data", None)
    assignments = {
        member_id: Assignment(sorted(TopicPartition(*tp) for tp in result[member_id]), user_data)
        for member_id in subscriptions
    }
    transferring = getattr(assignor, "partitions_transferring_ownership", None)
    if follow_up is not None and follow_up.leader_marks(cooperative, transferring, generation, subscriptions):
        log.info("generation %s: %d partitions withheld; marking the follow-up", generation, len(transferring or ()))
        assignments = mark_assignments(assignments, generation)
    return GroupAssignment(assignments)
