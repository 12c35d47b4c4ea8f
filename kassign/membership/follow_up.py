"""kassign's fast follow-up of a cooperative rebalance: when the leader marks, when a member acts.

When a cooperative round withholds partitions (their owners must revoke them before they can
move), a follow-up round is certain. Without help the members that revoked nothing learn of it
only from their next heartbeat. With the fast follow-up on (``CooperativeConsumer``'s default):

* the leader marks every member's assignment user data "follow-up pending, generation N"
  (the wire format is :mod:`kassign.protocol.follow_up_mark`), only when its assignor reports
  partitions transferring ownership -- but not a second generation in a row that, with no new
  member, withholds a partition the marked generation before it withheld already;
* a member that receives the mark rejoins as soon as its own revocations are done (at once when
  it revoked nothing), at most once per marked generation.

A partition withheld again by the same members means the follow-up came before its owner had
revoked it. On Apache Kafka that happens when the early rejoiners' JoinGroups reach the broker
before a slower member's SyncGroup: that SyncGroup fails (REBALANCE_IN_PROGRESS), the member never
hears what it had to revoke, and the next generation withholds it again; the join barrier then
holds that next round until the member has rejoined, so marking it once more costs one quick
round. On a broker without a join barrier (Tansu) an early rejoiner opens every next generation
before the others have synced, so marks in a row would never end. Hence the bound: one such
generation is marked, the next like it is not, and the members wait for heartbeats as plain
KIP-429 does -- unless it withholds fewer partitions than the one before (some owners revoked, so
the group is not stuck: a slow member may miss two rounds in a row while the others revoke, and
waiting a heartbeat interval for the third cost a whole second). The withheld set cannot shrink
forever, so the marks still end. A generation with a new member (the newcomers' JoinGroups of a
scale-out straddling the first round) is a real change and is always marked: the marks stop when
the group stops changing.

Java and librdkafka members ignore assignment user data under ``cooperative-sticky``, so mixed
groups read marked assignments as usual. Every kassign member strips the mark before handing the
user data to its assignor, whether its own fast follow-up is on or not.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping

from kassign.model import Assignment
from kassign.protocol.follow_up_mark import mark_follow_up

log = logging.getLogger(__name__)

__all__ = ["FollowUpPolicy", "mark_assignments"]


def mark_assignments(assignments: Mapping[str, Assignment], generation: int) -> dict[str, Assignment]:
    """Every member's assignment with its user data marked "follow-up pending" for ``generation``."""
    return {
        member_id: Assignment(list(a.partitions), mark_follow_up(generation, a.user_data))
        for member_id, a in assignments.items()
    }


class FollowUpPolicy:
    """One member's fast follow-up decisions: whether its leader marks, whether it acts on a mark.

    ``enabled`` False makes both answers always "no" (the plain KIP-429 behaviour).
    """

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._last_mark = -2  # generation of the last marked assignment received, acted on or not
        # As a leader: the generation it last marked, its members and the partitions it withheld.
        self._marked_generation = -2
        self._marked_members: frozenset[str] = frozenset()
        self._marked_withheld: frozenset[object] = frozenset()
        self._repeated = False  # the last marked generation withheld again what the one before did

    def leader_marks(
        self, cooperative: bool, withheld: Collection[object] | None, generation: int, members: Collection[str] = ()
    ) -> bool:
        """Whether a leader marks the assignments of ``generation`` (``members``: its member ids): fast
        follow-up on, the cooperative protocol, the assignor withheld at least one partition, and not
        the second generation in a row to withhold, with no new member, partitions the marked
        generation before it withheld (their owners did not hear of the revocation in time) -- unless
        it withholds fewer than that one did."""
        if not (self.enabled and cooperative and withheld):
            return False
        withheld, members = frozenset(withheld), frozenset(members)
        again = bool(
            generation == self._marked_generation + 1
            and withheld & self._marked_withheld
            and members <= self._marked_members
        )
        # Fewer partitions withheld than last time: owners are revoking, the group is not stuck.
        stalled = again and not withheld < self._marked_withheld
        if stalled and self._repeated:
            log.info(
                "generation %s withholds again partitions generations %s withheld too, with no new member; "
                "not marking the follow-up",
                generation,
                f"{generation - 2}-{generation - 1}",
            )
            return False
        self._marked_generation, self._marked_members, self._marked_withheld = generation, members, withheld
        self._repeated = stalled
        return True

    def should_rejoin(self, mark: int) -> bool:
        """Whether a member that received an assignment marked for generation ``mark`` starts the
        follow-up at once: once per marked generation (not that one again, nor an older one)."""
        act = self.enabled and mark > self._last_mark
        if self.enabled and not act:
            log.debug(
                "follow-up mark for generation %s not acted on (last marked assignment: generation %s)",
                mark,
                self._last_mark,
            )
        self._last_mark = max(self._last_mark, mark)
        return act
