"""Broker-side group coordinators for the classic group protocol (JoinGroup/SyncGroup/Heartbeat).

:class:`KafkaCoordinator` follows Apache Kafka's classic ``GroupCoordinator``: a join barrier
that waits for every known member to rejoin (up to the rebalance timeout), the initial delay of a
new group, members learning of a rebalance only from their next heartbeat, KIP-394's
member-id round trip for new members (the barrier also waits for members it has sent
MEMBER_ID_REQUIRED, up to their session timeout: ``hasAllMembersJoined``), KIP-345 static
members that rejoin without a rebalance, and session timeouts for members that fall silent.

:class:`TansuCoordinator` follows Tansu 0.6 (the broker the integration tests embed): no
barrier; requests are re-evaluated once a second, a JoinGroup until half the session timeout
has passed, so every join takes that long and answers with whoever is in the group by then.

Coordinators talk to members only through the event loop, one network latency each way.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Protocol

from kassign.model import Assignment, Subscription, TopicPartition
from kassign.sim.engine import EventLoop, Timer

__all__ = ["GroupMember", "JoinResponse", "SyncResponse", "KafkaCoordinator", "TansuCoordinator", "Coordinator"]

log = logging.getLogger(__name__)

MEMBER_ID_REQUIRED = "MEMBER_ID_REQUIRED"
REBALANCE_IN_PROGRESS = "REBALANCE_IN_PROGRESS"
ILLEGAL_GENERATION = "ILLEGAL_GENERATION"
UNKNOWN_MEMBER_ID = "UNKNOWN_MEMBER_ID"


class GroupMember(Protocol):
    """A member as the broker sees it: its ids and where its answers go."""

    id: str
    instance_id: str | None

    def on_join_response(self, response: JoinResponse) -> None: ...
    def on_sync_response(self, response: SyncResponse) -> None: ...
    def on_heartbeat_response(self, error: str | None) -> None: ...


@dataclass(frozen=True)
class JoinResponse:
    """What a JoinGroup answers: an error, or the generation, its leader and (to the leader only)
    every member's subscription."""

    error: str | None = None
    generation: int = -1
    leader: str | None = None
    members: dict[str, Subscription] | None = None


@dataclass(frozen=True)
class SyncResponse:
    """What a SyncGroup answers: an error, or the member's assignment for ``generation``."""

    error: str | None = None
    generation: int = -1
    partitions: tuple[TopicPartition, ...] = ()
    user_data: bytes | None = None


_NOTHING = Assignment([])


@dataclass
class _Member:
    member: GroupMember
    subscription: Subscription | None = None
    awaiting_join: bool = False
    awaiting_sync: bool = False
    last_seen: float = 0.0
    expiry: Timer | None = field(default=None, repr=False)


class Coordinator:
    """What both broker models share: the group's generation, leader, members and assignment,
    and replies that travel back one network latency."""

    def __init__(self, loop: EventLoop, *, network_s: float, session_s: float, rebalance_s: float) -> None:
        self.loop = loop
        self.network_s = network_s
        self.session_s = session_s
        self.rebalance_s = rebalance_s
        self.generation = 0
        self.leader: str | None = None
        self.members: dict[str, _Member] = {}
        self.assignment: dict[str, Assignment] = {}
        self.assignment_generation = -1
        self._static: dict[str, str] = {}  # group.instance.id -> member id

    def settled(self) -> bool:
        """Whether no rebalance is in flight on the broker side."""
        raise NotImplementedError

    def offset_commit(self, member: GroupMember, arrived: float) -> None:
        """An OffsetCommit from ``member`` that reached the coordinator at ``arrived`` (at most now).
        Only its effect on the member's session is modelled; by default it has none."""

    def _reply_join(self, member: GroupMember, response: JoinResponse) -> None:
        self.loop.after(self.network_s, member.on_join_response, response)

    def _reply_sync(self, member: GroupMember, response: SyncResponse) -> None:
        self.loop.after(self.network_s, member.on_sync_response, response)

    def _reply_heartbeat(self, member: GroupMember, error: str | None) -> None:
        self.loop.after(self.network_s, member.on_heartbeat_response, error, background=error is None)

    def _granted(self, member_id: str) -> SyncResponse:
        assignment = self.assignment.get(member_id, _NOTHING)
        return SyncResponse(
            generation=self.generation, partitions=tuple(assignment.partitions), user_data=assignment.user_data
        )

    def _subscriptions_for(self, member_id: str) -> dict[str, Subscription] | None:
        """Every member's subscription for the leader's JoinGroup response, None for the others."""
        if member_id != self.leader:
            return None
        return {m: s.subscription for m, s in self.members.items() if s.subscription is not None}


class KafkaCoordinator(Coordinator):
    """Apache Kafka's classic group coordinator (see the module docstring).

    A member's session expires ``EXPIRY_LAG_S`` after its deadline (the last request plus the
    session timeout): Kafka's timer wheel ticks by the millisecond and the expiry then waits its
    turn on the coordinator's event queue, so a heartbeat that arrives at the deadline itself is
    answered before the expiry. The Kafka 4.4 crash recordings agree: survivors whose heartbeat is
    due when a crashed member's session ends mostly learn of the crash one interval later.
    """

    EXPIRY_LAG_S = 0.001

    def __init__(
        self, loop: EventLoop, *, network_s: float, session_s: float, rebalance_s: float, initial_delay_s: float = 0.0
    ) -> None:
        super().__init__(loop, network_s=network_s, session_s=session_s, rebalance_s=rebalance_s)
        self.state = "Empty"
        self.initial_delay_s = initial_delay_s
        self._rebalance_timer: Timer | None = None
        self._initial_timer: Timer | None = None
        self._initial_deadline = 0.0
        #: Members sent MEMBER_ID_REQUIRED that have not joined with their id yet, and their expiry.
        self._pending: dict[str, Timer] = {}

    def settled(self) -> bool:
        return self.state in ("Stable", "Empty")

    def join(self, member: GroupMember, subscription: Subscription, known_id: bool) -> None:
        """JoinGroup from ``member``; ``known_id`` False for a member's first join."""
        mid = member.id
        instance = subscription.group_instance_id
        if instance is not None and instance in self._static and mid not in self.members:
            self._static_rejoin(member, subscription)
            return
        if mid not in self.members:
            if not known_id and instance is None:  # KIP-394: come back with the id we hand out
                self.loop.cancel(self._pending.get(mid))
                self._pending[mid] = self.loop.after(self.session_s, self._pending_expired, mid, background=True)
                self._reply_join(member, JoinResponse(error=MEMBER_ID_REQUIRED))
                return
            self.loop.cancel(self._pending.pop(mid, None))
            self._add(member, subscription)
            return
        state = self.members[mid]
        self._touch(state)
        changed = state.subscription != subscription
        state.subscription = subscription
        if self.state == "PreparingRebalance":
            state.awaiting_join = True
            self._try_complete_join()
        elif self.state == "CompletingRebalance":
            if changed:
                state.awaiting_join = True
                self._prepare_rebalance()
            else:
                self._reply_join(member, self._join_result(mid))
        elif self.state == "Stable":
            if changed or self.leader == mid:
                state.awaiting_join = True
                self._prepare_rebalance()
            else:
                self._reply_join(member, self._join_result(mid))
        else:  # Empty: a known member cannot be here, but treat it as a first join
            state.awaiting_join = True
            self._prepare_rebalance()

    def _add(self, member: GroupMember, subscription: Subscription) -> None:
        state = _Member(member, subscription, awaiting_join=True)
        self.members[member.id] = state
        if subscription.group_instance_id is not None:
            self._static[subscription.group_instance_id] = member.id
        self._touch(state)
        if self.state == "Empty":
            self.state = "PreparingRebalance"
            self._arm_rebalance_timeout()
            if self.initial_delay_s > 0:
                self._initial_deadline = self.loop.now + self.rebalance_s
                self._initial_timer = self.loop.after(self.initial_delay_s, self._initial_delay_over)
                return
            self._try_complete_join()
        elif self.state == "PreparingRebalance":
            if self._initial_timer is not None:
                # Kafka's InitialDelayedJoin: each newcomer extends the wait, capped by the rebalance timeout.
                self.loop.cancel(self._initial_timer)
                until = min(self.loop.now + self.initial_delay_s, self._initial_deadline)
                self._initial_timer = self.loop.at(until, self._initial_delay_over)
                return
            self._try_complete_join()
        else:
            self._prepare_rebalance()

    def _static_rejoin(self, member: GroupMember, subscription: Subscription) -> None:
        """KIP-345: a restarted static member takes its old member id's place (and assignment);
        no rebalance if the group is Stable."""
        old = self._static[subscription.group_instance_id]  # type: ignore[index]
        state = self.members.pop(old)
        self.loop.cancel(state.expiry)
        state.expiry = None
        state.member = member
        self.members[member.id] = state
        self._static[subscription.group_instance_id] = member.id  # type: ignore[index]
        if old in self.assignment:
            self.assignment[member.id] = self.assignment.pop(old)
        if self.leader == old:
            self.leader = member.id
        self._touch(state)
        state.subscription = subscription
        if self.state == "Stable":  # Kafka compares only the selected protocol, which is unchanged here
            self._reply_join(member, self._join_result(member.id))
            return
        state.awaiting_join = True
        if self.state == "PreparingRebalance":
            self._try_complete_join()
        else:
            self._prepare_rebalance()

    def _pending_expired(self, member_id: str) -> None:
        """A member sent MEMBER_ID_REQUIRED never came back: the barrier stops waiting for it."""
        if self._pending.pop(member_id, None) is not None:
            self._try_complete_join()

    def _initial_delay_over(self) -> None:
        self._initial_timer = None
        self._try_complete_join()

    def _arm_rebalance_timeout(self) -> None:
        self.loop.cancel(self._rebalance_timer)
        self._rebalance_timer = self.loop.after(self.rebalance_s, self._rebalance_timeout)

    def _rebalance_timeout(self) -> None:
        self._rebalance_timer = None
        if self.state != "PreparingRebalance":
            return
        for mid in [m for m, s in self.members.items() if not s.awaiting_join]:
            log.debug("t=%.3f %s missed the rebalance timeout", self.loop.now, mid)
            state = self.members.pop(mid)
            self.loop.cancel(state.expiry)
            if self.leader == mid:
                self.leader = None
        self._complete_join()

    def _prepare_rebalance(self) -> None:
        if self.state == "CompletingRebalance":
            for state in self.members.values():
                if state.awaiting_sync:
                    state.awaiting_sync = False
                    self._reply_sync(state.member, SyncResponse(error=REBALANCE_IN_PROGRESS))
        if self.state != "PreparingRebalance":
            self.state = "PreparingRebalance"
            self._arm_rebalance_timeout()
        self._try_complete_join()

    # -- sessions and departures ---------------------------------------------------------------
    def _touch(self, state: _Member) -> None:
        """A request from the member: its session starts over."""
        state.last_seen = self.loop.now
        if state.expiry is None:
            state.expiry = self.loop.after(
                self.session_s + self.EXPIRY_LAG_S, self._check_session, state.member.id, background=True
            )

    def _check_session(self, member_id: str) -> None:
        state = self.members.get(member_id)
        if state is None:
            return
        state.expiry = None
        if state.awaiting_join or state.awaiting_sync:
            # Kafka keeps members parked in a join or sync alive until the rebalance timeout.
            state.expiry = self.loop.after(
                self.session_s + self.EXPIRY_LAG_S, self._check_session, member_id, background=True
            )
            return
        deadline = state.last_seen + self.session_s + self.EXPIRY_LAG_S
        if self.loop.now + 1e-9 < deadline:
            state.expiry = self.loop.at(deadline, self._check_session, member_id, background=True)
            return
        log.debug("t=%.3f session of %s expired", self.loop.now, member_id)
        self._remove(member_id)

    def offset_commit(self, member: GroupMember, arrived: float) -> None:
        """An OffsetCommit keeps a classic member's session alive while the group is Stable or
        PreparingRebalance (``OffsetMetadataManager.commitOffset``: "In the old consumer group
        protocol, the offset commits maintain the session"), so a crashed member's session ends a
        session timeout after its last heartbeat or commit, whichever came later."""
        state = self.members.get(member.id)
        if state is None or self.state not in ("Stable", "PreparingRebalance"):
            return
        state.last_seen = max(state.last_seen, arrived)
        if state.expiry is None:
            self._touch(state)

    def leave(self, member: GroupMember) -> None:
        """LeaveGroup: the member goes at once (no session timeout); the others learn of it only
        from their next heartbeat."""
        self._remove(member.id)

    def _remove(self, member_id: str) -> None:
        state = self.members.pop(member_id, None)
        if state is None:
            return
        self.loop.cancel(state.expiry)
        instance = state.subscription.group_instance_id if state.subscription is not None else None
        if instance is not None and self._static.get(instance) == member_id:
            del self._static[instance]
        if self.leader == member_id:
            self.leader = None
        if not self.members:
            self.loop.cancel(self._rebalance_timer)
            self.state = "Empty"
            self.generation += 1
        elif self.state in ("Stable", "CompletingRebalance"):
            self._prepare_rebalance()
        else:
            self._try_complete_join()

    def _try_complete_join(self) -> None:
        if self.state != "PreparingRebalance" or self._initial_timer is not None:
            return
        if self.members and all(s.awaiting_join for s in self.members.values()) and not self._pending:
            self._complete_join()

    def _complete_join(self) -> None:
        self.loop.cancel(self._rebalance_timer)
        self._rebalance_timer = None
        self.generation += 1
        if not self.members:
            self.state = "Empty"
            return
        if self.leader not in self.members:
            self.leader = next(iter(self.members))
        self.state = "CompletingRebalance"
        self.assignment = {}
        for mid, state in self.members.items():
            state.awaiting_join = False
            self._touch(state)
            self._reply_join(state.member, self._join_result(mid))

    def _join_result(self, mid: str) -> JoinResponse:
        return JoinResponse(generation=self.generation, leader=self.leader, members=self._subscriptions_for(mid))

    def sync(self, member: GroupMember, generation: int, assignment: dict[str, Assignment] | None) -> None:
        """SyncGroup from ``member``; the leader's carries everyone's assignment."""
        state = self.members.get(member.id)
        if state is None:
            self._reply_sync(member, SyncResponse(error=UNKNOWN_MEMBER_ID))
            return
        self._touch(state)
        if generation != self.generation:
            self._reply_sync(member, SyncResponse(error=ILLEGAL_GENERATION))
        elif self.state == "PreparingRebalance":
            self._reply_sync(member, SyncResponse(error=REBALANCE_IN_PROGRESS))
        elif self.state == "CompletingRebalance":
            state.awaiting_sync = True
            if member.id == self.leader and assignment is not None:
                self.assignment = {m: assignment.get(m, _NOTHING) for m in self.members}
                self.assignment_generation = self.generation
                self.state = "Stable"
                for mid, s in self.members.items():
                    if s.awaiting_sync:
                        s.awaiting_sync = False
                        self._reply_sync(s.member, self._granted(mid))
        else:
            self._reply_sync(member, self._granted(member.id))

    def heartbeat(self, member: GroupMember, generation: int) -> None:
        """Heartbeat: the only way a stable member learns that a rebalance began."""
        state = self.members.get(member.id)
        if state is None:
            self._reply_heartbeat(member, UNKNOWN_MEMBER_ID)
            return
        self._touch(state)
        if self.state == "PreparingRebalance":
            self._reply_heartbeat(member, REBALANCE_IN_PROGRESS)
        elif generation != self.generation:
            self._reply_heartbeat(member, ILLEGAL_GENERATION)
        else:
            self._reply_heartbeat(member, None)


class TansuCoordinator(Coordinator):
    """Tansu 0.6's coordinator (``tansu-broker/src/coordinator/group/administrator.rs``).

    The group is *Forming* or *Formed*. A new member's first JoinGroup (MEMBER_ID_REQUIRED), a
    dynamic member rejoining with changed metadata, a LeaveGroup or an eviction bump the
    generation and make a Formed group Forming again; the first member to join a leaderless
    group leads it, and the leader's SyncGroup with an assignment for exactly the current
    members forms it. Requests are not parked on a barrier but re-evaluated every second: a
    JoinGroup until half the session timeout has passed (static members: at least 3 s), a
    SyncGroup until it gets an assignment or 80 % of the session timeout has passed. Members that
    fell silent for a session timeout are evicted when any request arrives.
    """

    POLL_S = 1.0  # Tansu sleeps a second between re-evaluations of a held request
    STATIC_PAUSE_S = 3.0

    def __init__(self, loop: EventLoop, *, network_s: float, session_s: float, rebalance_s: float) -> None:
        super().__init__(loop, network_s=network_s, session_s=session_s, rebalance_s=rebalance_s)
        self.forming = True
        self._in_flight = 0  # held joins and syncs

    def settled(self) -> bool:
        return not self.forming and self._in_flight == 0

    def _reform(self) -> None:
        """A new generation, Forming until its leader hands in an assignment."""
        self.generation += 1
        self.forming = True
        self.assignment = {}

    def _evict(self, member: GroupMember, static: bool) -> None:
        """Tansu's ``missed_heartbeat``: refresh the caller, evict whoever was silent too long."""
        now = self.loop.now
        if static:
            return
        if member.id in self.members:
            self.members[member.id].last_seen = now
        expired = [m for m, s in self.members.items() if now - s.last_seen > self.session_s]
        if not expired:
            return
        for mid in expired:
            log.debug("t=%.3f tansu evicts %s", now, mid)
            del self.members[mid]
            if self.leader == mid:
                self.leader = None
        if not self.forming:
            self._reform()

    # -- JoinGroup -----------------------------------------------------------------------------
    def join(self, member: GroupMember, subscription: Subscription, known_id: bool) -> None:
        """JoinGroup: re-evaluated every second until half the session timeout has passed."""
        self._in_flight += 1
        self._join_round(member, subscription, known_id, self.loop.now)

    def _join_round(self, member: GroupMember, subscription: Subscription, known_id: bool, started: float) -> None:
        static = subscription.group_instance_id is not None
        self._evict(member, static)
        response = self._process_join(member, subscription, known_id)
        elapsed = self.loop.now - started
        if static and elapsed < self.STATIC_PAUSE_S - 1e-9:
            self.loop.at(started + self.STATIC_PAUSE_S, self._join_round, member, subscription, True, started)
        elif response.error is None and elapsed < self.session_s / 2 - 1e-9:
            self.loop.after(self.POLL_S, self._join_round, member, subscription, True, started)
        else:
            self._in_flight -= 1
            self._reply_join(member, response)

    def _process_join(self, member: GroupMember, subscription: Subscription, known_id: bool) -> JoinResponse:
        mid = member.id
        instance = subscription.group_instance_id
        if not known_id and instance is None:
            self.members[mid] = _Member(member, subscription, last_seen=self.loop.now)
            if not self.forming:
                self._reform()
            return JoinResponse(error=MEMBER_ID_REQUIRED)
        if instance is not None and mid not in self.members and instance in self._static:
            self._rename(self._static[instance], member)
        state = self.members.get(mid)
        if state is None:
            self.members[mid] = _Member(member, subscription, last_seen=self.loop.now)
            if instance is not None:
                self._static[instance] = mid
            if not self.forming:
                self._reform()
        else:
            state.member = member
            state.last_seen = self.loop.now
            if state.subscription != subscription:
                state.subscription = subscription
                if not self.forming and instance is None:
                    self._reform()
        if self.forming and self.leader is None:
            self.leader = mid
        return JoinResponse(generation=self.generation, leader=self.leader, members=self._subscriptions_for(mid))

    def _rename(self, old: str, member: GroupMember) -> None:
        """A restarted static member takes over its previous member id's entry."""
        state = self.members.pop(old)
        state.member = member
        self.members[member.id] = state
        if old in self.assignment:
            self.assignment[member.id] = self.assignment.pop(old)
        if self.leader == old:
            self.leader = member.id

    # -- SyncGroup -----------------------------------------------------------------------------
    def sync(self, member: GroupMember, generation: int, assignment: dict[str, Assignment] | None) -> None:
        """SyncGroup: re-evaluated every second until assigned or 80 % of the session timeout."""
        self._in_flight += 1
        self._sync_round(member, generation, assignment, self.loop.now)

    def _sync_round(
        self, member: GroupMember, generation: int, assignment: dict[str, Assignment] | None, started: float
    ) -> None:
        self._evict(member, member.instance_id is not None)
        mid = member.id
        assigned = False
        if mid in self.members and generation == self.generation:
            if self.forming and mid == self.leader and assignment is not None and set(assignment) == set(self.members):
                self.assignment = dict(assignment)
                self.assignment_generation = self.generation
                self.forming = False
            assigned = not self.forming and mid in self.assignment
        elapsed = self.loop.now - started
        if assigned:
            self._in_flight -= 1
            self._reply_sync(member, self._granted(mid))
        elif elapsed < 0.8 * self.session_s - 1e-9:
            self.loop.after(self.POLL_S, self._sync_round, member, generation, assignment, started)
        else:
            self._in_flight -= 1
            self._reply_sync(member, SyncResponse(error=REBALANCE_IN_PROGRESS))

    # -- Heartbeat and LeaveGroup --------------------------------------------------------------
    def heartbeat(self, member: GroupMember, generation: int) -> None:
        """Heartbeat: REBALANCE_IN_PROGRESS once the group's generation moved past the member's."""
        if member.id not in self.members:
            self._reply_heartbeat(member, UNKNOWN_MEMBER_ID)
            return
        self._evict(member, False)
        if member.id not in self.members:
            self._reply_heartbeat(member, UNKNOWN_MEMBER_ID)
        elif generation > self.generation:
            self._reply_heartbeat(member, ILLEGAL_GENERATION)
        elif generation < self.generation:
            self._reply_heartbeat(member, REBALANCE_IN_PROGRESS)
        else:
            self._reply_heartbeat(member, None)

    def leave(self, member: GroupMember) -> None:
        """LeaveGroup: a new generation; a Formed group keeps its leader only if it stayed."""
        state = self.members.pop(member.id, None)
        if state is None:
            return
        if state.subscription is not None and state.subscription.group_instance_id is not None:
            self._static.pop(state.subscription.group_instance_id, None)
        if not self.forming and self.leader == member.id:
            self.leader = None
        self._reform()
