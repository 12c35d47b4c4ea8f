"""A simulated consumer: the client side of the classic group protocol, as Java's
``ConsumerCoordinator`` runs it.

Eager: before every JoinGroup the member revokes everything it owns (the revoke callback's cost
is paid while the whole group waits at the barrier), and after SyncGroup it is handed its whole
assignment. Cooperative (KIP-429): the member keeps its partitions through the rebalance, sends
them as owned partitions, and after SyncGroup revokes only what the leader took away, then
joins again at once so those partitions can be handed over in a second round. A stable member
learns of a rebalance only from its next heartbeat (the heartbeat timer restarts at every sync).

That includes a LeaveGroup or a crash: the classic protocol has no way for the broker or the
departing member to tell the survivors, so they find out from their next heartbeat after the
coordinator began the rebalance, on average half a heartbeat interval later. Neither kassign nor
any other client can shorten that wait except by heartbeating more often.

kassign's fast follow-up (``fast_follow_up``, :mod:`kassign.protocol.follow_up_mark`) removes the other
heartbeat wait, the one before a cooperative follow-up rebalance: a kassign leader whose assignor
withholds partitions marks every assignment, and a marked kassign member rejoins right after its
revocations (at once if it has none), once per marked generation and never for two marked
generations in a row (then it waits for its heartbeat, as other clients do).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Protocol

from kassign.model import Assignment, RebalanceProtocol, Subscription, TopicPartition
from kassign.protocol.follow_up_mark import mark_follow_up, read_follow_up

if TYPE_CHECKING:
    from kassign.sim.coordinator import JoinResponse, SyncResponse
    from kassign.sim.engine import EventLoop, Timer

__all__ = ["SimMember", "GroupContext", "SimulationError"]


FENCED = frozenset({"ILLEGAL_GENERATION", "UNKNOWN_MEMBER_ID"})


class SimulationError(RuntimeError):
    """The simulated group reached a state Kafka's client would refuse (e.g. an invalid
    cooperative assignment)."""


class GroupContext(Protocol):
    """What a member needs from the simulation around it."""

    loop: EventLoop
    coordinator: Any
    protocol: RebalanceProtocol
    protocol_name: str
    partitions_per_topic: dict[str, int]
    heartbeat_s: float

    def latency(self, name: str) -> float: ...
    def emit(self, member: str, ev: str, parts: Iterable[TopicPartition] | None = None, **extra: Any) -> None: ...
    def leader_assigned(self, member: SimMember) -> None: ...


class SimMember:
    """One incarnation of a consumer: ``name`` is its id in the timeline (``m1``...), ``id`` its
    broker member id (a new one per restart, as a real consumer gets). ``fast_follow_up``: a
    kassign consumer that sets and acts on the follow-up mark."""

    def __init__(self, name: str, incarnation: int, ctx: GroupContext, assignor: Any, topics: Iterable[str],
                 instance_id: str | None = None, fast_follow_up: bool = False) -> None:
        self.name = name
        self.id = f"{name}-{incarnation}"
        self.ctx = ctx
        self.assignor = assignor
        self.topics = sorted(set(topics))
        self.instance_id = instance_id
        self.fast_follow_up = fast_follow_up
        self._followed_mark = -1  # generation of the last follow-up mark acted on
        self._followed_last = False  # whether the last SyncGroup's mark was acted on
        self.state = "down"  # down, unjoined, joining, syncing, stable
        self.generation = -1
        self.owned: set[TopicPartition] = set()
        self.next_heartbeat_t: float | None = None
        self._known_id = False
        self._lost = False
        self._rejoin_timer: Timer | None = None
        self._heartbeat_timer: Timer | None = None
        self._scheduled_rejoin: Timer | None = None

    @property
    def cooperative(self) -> bool:
        return self.ctx.protocol is RebalanceProtocol.COOPERATIVE

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self) -> None:
        """The consumer subscribes and, after starting up, sends its first JoinGroup."""
        self.state = "unjoined"
        self.ctx.emit(self.name, "subscribed")
        self._rejoin_timer = self.ctx.loop.after(self.ctx.latency("startup_ms"), self._rejoin)

    def close(self) -> None:
        """``consumer.close()``: revoke everything, then LeaveGroup (static members skip it)."""
        if self.state == "down":
            return
        ctx = self.ctx
        self._stop()
        ctx.emit(self.name, "closing")
        delay = 0.0
        if self.owned:
            ctx.emit(self.name, "cb_revoked", self.owned)
            self.owned = set()
            delay = ctx.latency("revocation_ms")
            ctx.loop.after(delay, ctx.emit, self.name, "cb_revoked_done")
        if self.instance_id is None:
            ctx.loop.after(delay + ctx.latency("network_ms"), ctx.coordinator.leave, self)
        ctx.loop.after(delay + 2 * ctx.latency("network_ms"), ctx.emit, self.name, "closed")

    def crash(self) -> None:
        """The process dies: no callbacks, no LeaveGroup; the broker finds out from the session timeout."""
        if self.state == "down":
            return
        self._stop()
        self.owned = set()
        self.ctx.emit(self.name, "crash")

    def change_subscription(self, topics: Iterable[str]) -> None:
        """``consumer.subscribe(topics)``: rejoin at the next poll."""
        self.topics = sorted(set(topics))
        self.request_rejoin()

    def _stop(self) -> None:
        self.state = "down"
        self.ctx.loop.cancel(self._rejoin_timer)
        self.ctx.loop.cancel(self._heartbeat_timer)
        self.ctx.loop.cancel(self._scheduled_rejoin)
        self._rejoin_timer = self._heartbeat_timer = self._scheduled_rejoin = None
        self.next_heartbeat_t = None

    # -- joining -------------------------------------------------------------------------------
    def request_rejoin(self) -> None:
        """Rejoin at the next poll, unless a join is already under way."""
        if self.state in ("down", "joining", "syncing") or self._rejoin_timer is not None:
            return
        self._rejoin_timer = self.ctx.loop.after(self.ctx.latency("poll_ms") + self.ctx.latency("processing_ms"), self._rejoin)

    def _rejoin(self) -> None:
        """``onJoinPrepare`` then JoinGroup."""
        self._rejoin_timer = None
        if self.state == "down":
            return
        ctx = self.ctx
        ctx.loop.cancel(self._heartbeat_timer)
        self._heartbeat_timer = None
        self.next_heartbeat_t = None
        self.state = "joining"
        if self._lost:
            self._lost = False
            if self.owned:
                ctx.emit(self.name, "cb_lost", self.owned)
                self.owned = set()
        if self.cooperative:
            revoke = {tp for tp in self.owned if tp.topic not in self.topics}
        else:
            revoke = set(self.owned)
        if revoke:
            ctx.emit(self.name, "cb_revoked", revoke)
            self.owned -= revoke
            delay = ctx.latency("revocation_ms")
            ctx.loop.after(delay, ctx.emit, self.name, "cb_revoked_done")
            ctx.loop.after(delay, self._send_join)
        else:
            self._send_join()

    def _send_join(self) -> None:
        if self.state != "joining":
            return
        ctx = self.ctx
        subscription = Subscription(
            topics=list(self.topics),
            user_data=self.assignor.subscription_user_data(set(self.topics)),
            owned_partitions=sorted(self.owned),
            generation_id=self.generation if self.generation >= 0 else None,
            group_instance_id=self.instance_id,
        )
        ctx.emit(self.name, "join", gen=self.generation)
        ctx.loop.after(ctx.latency("network_ms"), ctx.coordinator.join, self, subscription, self._known_id)

    def on_join_response(self, response: JoinResponse) -> None:
        """JoinGroup answered: sync, handing in the assignment when leader."""
        if self.state != "joining":
            return
        if response.error == "MEMBER_ID_REQUIRED":
            self._known_id = True
            self._send_join()
            return
        if response.error is not None:
            self._failed(response.error)
            return
        self.state = "syncing"
        delay = self.ctx.latency("network_ms")
        assignment = None
        if response.leader == self.id:
            assignment = self._lead(response.members or {}, response.generation)
            delay += self.ctx.latency("assign_ms")  # the leader's SyncGroup leaves after the others'
        self.ctx.loop.after(delay, self.ctx.coordinator.sync, self, response.generation, assignment)

    def _lead(self, subscriptions: dict[str, Subscription], generation: int) -> dict[str, Assignment]:
        """The leader's ``onLeaderElected``: run the assignor, check a cooperative result, attach
        the user data an assignor hands every member (``assignment_user_data``, if it has one),
        marked "follow-up pending" by a kassign leader whose assignor withheld partitions."""
        ppt = dict(self.ctx.partitions_per_topic)
        assignment = self.assignor.assign(ppt, subscriptions)
        if self.cooperative:
            _check_cooperative(subscriptions, assignment)
        user_data = getattr(self.assignor, "assignment_user_data", None)
        withheld = getattr(self.assignor, "partitions_transferring_ownership", None)
        if self.fast_follow_up and self.cooperative and withheld:
            user_data = mark_follow_up(generation, user_data)
        self.ctx.leader_assigned(self)
        return {m: Assignment(sorted(parts), user_data) for m, parts in assignment.items()}

    def on_sync_response(self, response: SyncResponse) -> None:
        """SyncGroup answered: adopt the assignment and run the callbacks."""
        if self.state != "syncing":
            return
        if response.error is not None:
            self._failed(response.error)
            return
        ctx = self.ctx
        self.generation = response.generation
        self.state = "stable"
        mark, user_data = read_follow_up(response.user_data)  # other clients skip the mark too
        # At most one fast follow-up in a row: on a broker that answers the leader's SyncGroup
        # before the others' (Tansu), a leader rejoining at once would start a new generation
        # before the others could sync, revoke, and so stop the next round from withholding.
        follow_up = (self.fast_follow_up and mark is not None and mark > self._followed_mark
                     and not self._followed_last)
        self._followed_last = follow_up
        if follow_up:
            self._followed_mark = mark  # type: ignore[assignment]
            ctx.emit(self.name, "sync", gen=response.generation, protocol=ctx.protocol_name, follow_up=True)
        else:
            ctx.emit(self.name, "sync", gen=response.generation, protocol=ctx.protocol_name)
        assigned = set(response.partitions)
        self.assignor.on_assignment(sorted(assigned), response.generation)
        self._schedule_heartbeat(ctx.loop.now + ctx.heartbeat_s)
        self._follow_assignor(user_data)
        revoked = self.owned - assigned
        added = assigned - self.owned
        if revoked:
            ctx.emit(self.name, "cb_revoked", revoked)
            self.owned -= revoked
            delay = ctx.latency("revocation_ms")
            ctx.loop.after(delay, ctx.emit, self.name, "cb_revoked_done")
            ctx.loop.after(delay, self._assigned, added)
            ctx.loop.after(delay, self.request_rejoin)  # cooperative: hand the revoked partitions over
        else:
            self._assigned(added)
            if follow_up:
                self.request_rejoin()  # without waiting for a heartbeat to report the follow-up

    def _follow_assignor(self, user_data: bytes | None) -> None:
        """Assignors that schedule rebalances (Connect-style delayed reassignment) read their
        assignment's user data and may ask for a rejoin some seconds later."""
        receive = getattr(self.assignor, "on_assignment_user_data", None)
        if receive is None:
            return
        receive(user_data)
        delay = getattr(self.assignor, "rejoin_after_s", None)
        if delay is not None:
            self.ctx.loop.cancel(self._scheduled_rejoin)
            self._scheduled_rejoin = self.ctx.loop.after(delay, self._scheduled_rejoin_due)

    def _scheduled_rejoin_due(self) -> None:
        self._scheduled_rejoin = None
        self.request_rejoin()

    def _assigned(self, added: set[TopicPartition]) -> None:
        if self.state == "down":
            return
        self.owned |= added
        self.ctx.emit(self.name, "cb_assigned", added)

    def _failed(self, error: str) -> None:
        """A join or sync refused: fenced members lose their partitions, everyone rejoins."""
        self.state = "unjoined"
        if error in FENCED:
            self._fenced(error)
        self.request_rejoin()

    def _fenced(self, error: str) -> None:
        self._lost = True
        self.generation = -1
        if error == "UNKNOWN_MEMBER_ID":
            self._known_id = False

    # -- heartbeats ----------------------------------------------------------------------------
    def _schedule_heartbeat(self, t: float) -> None:
        self.ctx.loop.cancel(self._heartbeat_timer)
        self.next_heartbeat_t = t
        self._heartbeat_timer = self.ctx.loop.at(t, self._heartbeat, background=True)

    def _heartbeat(self) -> None:
        self._heartbeat_timer = None
        if self.state != "stable":
            return
        ctx = self.ctx
        ctx.loop.after(ctx.latency("network_ms"), ctx.coordinator.heartbeat, self, self.generation, background=True)
        self._schedule_heartbeat(ctx.loop.now + ctx.heartbeat_s)

    def on_heartbeat_response(self, error: str | None) -> None:
        """REBALANCE_IN_PROGRESS: rejoin at the next poll; fenced: partitions lost, rejoin."""
        if error is None or self.state != "stable":
            return
        self.state = "unjoined"
        if error in FENCED:
            self._fenced(error)
        self.request_rejoin()


def _check_cooperative(subscriptions: dict[str, Subscription], assignment: dict[str, list[TopicPartition]]) -> None:
    """Java's ``validateCooperativeAssignment``: no partition may be revoked from one member and
    added to another in the same cooperative round. "Added" is relative to the member's own claim,
    so a partition two members claim may stay with either of them."""
    added: dict[TopicPartition, str] = {}
    revoked: dict[TopicPartition, str] = {}
    for member in sorted(assignment):
        owned = set(subscriptions[member].owned_partitions)
        assigned = set(assignment[member])
        for tp in assigned - owned:
            added[tp] = member
        for tp in owned - assigned:
            revoked[tp] = member
    for tp in sorted(added.keys() & revoked.keys()):
        raise SimulationError(
            f"cooperative assignment moves {tp} from {revoked[tp]} to {added[tp]} in one round; "
            f"the assignor must revoke it first"
        )
