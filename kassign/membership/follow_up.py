"""kassign's fast follow-up of a cooperative rebalance: when the leader marks, when a member acts.

When a cooperative round withholds partitions (their owners must revoke them before they can
move), a follow-up round is certain. Without help the members that revoked nothing learn of it
only from their next heartbeat. With the fast follow-up on (``CooperativeConsumer``'s default):

* the leader marks every member's assignment user data "follow-up pending, generation N"
  (the wire format is :mod:`kassign.protocol.follow_up_mark`), only when its assignor reports
  partitions transferring ownership;
* a member that receives the mark rejoins as soon as its own revocations are done (at once when
  it revoked nothing), at most once per marked generation and never for two marked generations
  in a row: not for generation N+1's mark after generation N's, acted on or not. So a run of
  rounds that keep withholding (a group that keeps changing, or a broker without a join barrier)
  gets one early rejoin, then waits for heartbeats as plain KIP-429 does: no rejoin storm.

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
    return {member_id: Assignment(list(a.partitions), mark_follow_up(generation, a.user_data))
            for member_id, a in assignments.items()}


class FollowUpPolicy:
    """One member's fast follow-up decisions: whether its leader marks, whether it acts on a mark.

    ``enabled`` False makes both answers always "no" (the plain KIP-429 behaviour).
    """

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._last_mark = -2  # generation of the last marked assignment received, acted on or not

    def leader_marks(self, cooperative: bool, withheld: Collection[object] | None) -> bool:
        """Whether a leader marks this round's assignments: fast follow-up on, the cooperative
        protocol, and the assignor withheld at least one partition."""
        return self.enabled and cooperative and bool(withheld)

    def should_rejoin(self, mark: int) -> bool:
        """Whether a member that received an assignment marked for generation ``mark`` starts the
        follow-up at once: only when the assignment it received before was not marked, i.e. not
        for a mark of the generation right after its last marked one (nor that one again, nor an
        older one). On a broker without a join barrier (Tansu) an early rejoiner opens generation
        N+1 before the others have synced N and revoked, so N+1 withholds and is marked again;
        acting on that too keeps the leader rejoining every round while the others never sync."""
        act = self.enabled and mark > self._last_mark + 1
        if self.enabled and not act:
            log.debug("follow-up mark for generation %s not acted on (last marked assignment: generation %s)",
                      mark, self._last_mark)
        self._last_mark = max(self._last_mark, mark)
        return act
