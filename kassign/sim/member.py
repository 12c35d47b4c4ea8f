"""A simulated consumer: the member rules of :class:`kassign.membership.ClassicMember` (the same
object kassign's aiokafka coordinator runs) driven on the simulator's clock, inside a poll loop.

Eager: before every JoinGroup the member revokes everything it owns; after SyncGroup it is handed
its whole assignment. Cooperative (KIP-429): it keeps its partitions through the rebalance, sends
them as owned partitions, revokes only what the leader took away, and joins again so those can be
handed over in a second round. A stable member learns of a rebalance only from its next heartbeat
(heartbeats run on their own thread or task in every client), and so do the survivors of a leave
or a crash: the classic protocol has no way to tell them sooner.

Where the poll loop comes in, per client (``client``):

* ``java``: the group protocol advances only inside ``poll()`` (the heartbeat thread only learns that
  a rebalance began), one step per call: ``poll()`` sends the JoinGroup without waiting for it and
  returns the records of the partitions the member still owns, so the JoinGroup's answer is read
  (and the SyncGroup sent) at the next ``poll()``, the SyncGroup's answer (and the callbacks, and a
  cooperative follow-up JoinGroup) at the one after. A member with nothing to process stays inside
  ``poll()`` and takes each step as its answer arrives;
* ``librdkafka``: a background thread joins and syncs, but rebalance callbacks (revoke, assign,
  lost) wait for the next ``poll()``; an eager member must revoke before it can join. The thread sends
  at most one JoinGroup per second (``rkcg_join_intvl``) except right after giving partitions up or
  after MEMBER_ID_REQUIRED, so a rejoin on a heartbeat's news, or after a failed SyncGroup, within a
  second of its last JoinGroup waits for that second to pass; and while callbacks wait for ``poll()``
  a cooperative member ignores a heartbeat's news of another rebalance ("skipping COOPERATIVE
  rebalance ... awaiting assign call"), rejoining once the callbacks are done if it revoked
  something, else at a later heartbeat. Nor does anything time its heartbeats on the classic
  protocol: its main thread sends one that is due only when it wakes up for something else (a
  broker's answer, an application call such as a commit or an assign, the 500 ms
  ``max.poll.interval.ms`` check or the 1 s timer), and their interval runs from the last one sent,
  never reset by a rebalance; so with a 250 ms interval they go 250-850 ms apart (measured:
  ``benchmarks/librdkafka_heartbeats.py``);
* ``aiokafka`` (kassign): the group coordinator is a task of its own, so joins and callbacks do not
  wait for the application's batch.

Every client's ``close()`` waits for the batch in hand; librdkafka's also for a rebalance round it
has joined (the application's last synchronous commit is held until the round is over), so a
member told to stop while its JoinGroup is parked takes part in that round before it leaves. How long batches take is
:class:`~kassign.sim.processing.Processing`'s; each member draws from its own seeded generator.

Two refinements are off unless set (every simulation sets them from ``SimConfig.heartbeat_lag_ms``
and ``SimConfig.commit_interval_ms``): ``heartbeat_lag_s``, the mean lateness of each heartbeat (a heartbeat timer that
wakes a little late each interval, so members that synced together drift apart by a few milliseconds
over a few seconds, and a departure can land between their heartbeats: some hear of it one interval
after the others); and ``commit_interval_s``, the application's periodic OffsetCommit, which keeps a
classic member's session alive as a heartbeat does (a crashed member's session ends one session
timeout after its last heartbeat *or* commit).

With CPU contention (``contention``, :mod:`kassign.sim.contention`; off unless
``SimConfig.cpu_cores`` is set) each heartbeat is also late by a wait for a core, which carries over
to the next (the timer restarts from the heartbeat sent), and the member handles a heartbeat's news of
a rebalance, a JoinGroup answer and a SyncGroup answer only once woken and served by a core.

With ``revocation_commit_s`` as well (``SimConfig.revocation_commit_ms``; kassign's aiokafka members
only: Java's and librdkafka's ``revocation_ms`` presets were fitted with their commit inside) a
revocation callback is the benchmark member's (``integration/members/aiokafka_member.py``): it waits
for its periodic commit in flight (``SerialCommitter.wait``), then commits the revoked partitions and
waits for the answer, each answer a wake-up and ``revocation_commit_s`` of a core under contention.
A periodic commit sent after the member's JoinGroup was answered waits behind its SyncGroup on the
coordinator connection (the broker reads a connection's requests one at a time) and is answered only
after the round -- one more round trip before a cooperative survivor's revocation commit. Otherwise
(one sent while the JoinGroup waits goes beside it, and a group preparing its rebalance accepts it)
the periodic commit is in flight for a mean round trip after its tick.

kassign's fast follow-up (``fast_follow_up``, :mod:`kassign.membership.follow_up`) removes the
heartbeat wait before a cooperative follow-up rebalance: a kassign leader whose assignor withholds
partitions marks every assignment, and a marked member rejoins right after its revocations.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol

from kassign.membership import ClassicMember, InvalidAssignment, SyncOutcome
from kassign.membership.classic import FENCING_ERRORS
from kassign.model import Assignment, RebalanceProtocol, Subscription, TopicPartition
from kassign.sim.poll_loop import PollLoop
from kassign.sim.processing import Processing

if TYPE_CHECKING:
    from kassign.sim.contention import CpuContention
    from kassign.sim.coordinator import JoinResponse, SyncResponse
    from kassign.sim.engine import EventLoop, Timer

__all__ = ["SimMember", "GroupContext", "SimulationError", "CLIENT_KINDS"]

#: How each client's poll loop meets the group protocol (see the module docstring).
CLIENT_KINDS = ("java", "librdkafka", "aiokafka")
#: librdkafka's least time between two JoinGroups of one member (``rd_interval_immediate(&rkcg_join_intvl,
#: 1000 * 1000, now)`` in rdkafka_cgrp.c), in seconds.
LIBRDKAFKA_JOIN_INTERVAL_S = 1.0
#: librdkafka's main-thread timers that wake its group logic on the classic protocol: the
#: ``max.poll.interval.ms`` check (``rkcg_max_poll_interval_tmr``, restarted by every assign call) and
#: the generic one-second timer, in seconds.
LIBRDKAFKA_MAX_POLL_CHECK_S = 0.5
LIBRDKAFKA_GENERIC_TIMER_S = 1.0


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
    kassign consumer that sets and acts on the follow-up mark. ``client``: one of
    :data:`CLIENT_KINDS`; ``processing``: its work per poll batch, drawn from ``rng``;
    ``heartbeat_lag_s``, ``commit_interval_s`` and ``contention``: see the module docstring."""

    def __init__(
        self,
        name: str,
        incarnation: int,
        ctx: GroupContext,
        assignor: Any,
        topics: Iterable[str],
        instance_id: str | None = None,
        fast_follow_up: bool = False,
        *,
        client: str = "java",
        processing: Processing | None = None,
        rng: random.Random | None = None,
        heartbeat_lag_s: float = 0.0,
        commit_interval_s: float | None = None,
        contention: CpuContention | None = None,
        revocation_commit_s: float | None = None,
    ) -> None:
        if client not in CLIENT_KINDS:
            raise ValueError(f"unknown client {client!r}; expected one of {CLIENT_KINDS}")
        self.name = name
        self.id = f"{name}-{incarnation}"
        self.ctx = ctx
        self.assignor = assignor
        self.topics = sorted(set(topics))
        self.instance_id = instance_id
        self.client = client
        self.core = ClassicMember(ctx.protocol, fast_follow_up=fast_follow_up)
        # The poll loop: what the application consumes (callbacks done), and when its batch ends.
        self.poll = PollLoop(ctx.loop, processing or Processing(), rng or random.Random(self.id))
        self.state = "down"  # down, unjoined, joining, syncing, stable
        self.generation = -1  # of the last SyncGroup answered, -1 once fenced
        self.next_heartbeat_t: float | None = None
        self._known_id = False
        self._lost = False  # fenced: what it owns is lost at the next join
        self._last_join: float | None = None  # when the last JoinGroup left (librdkafka's join interval)
        self._join_answered_t: float | None = None  # when the last JoinGroup answer was handled
        self._skip_join_backoff = False  # this join follows a revocation or MEMBER_ID_REQUIRED
        self._in_round = False  # a JoinGroup sent whose round (join and sync) is not over
        self._callbacks_pending = False  # librdkafka: rebalance callbacks waiting for poll()
        self._join_timer: Timer | None = None  # librdkafka: a JoinGroup held by the join interval
        self._close_after_round = False  # librdkafka told to close while in a round
        self._rejoin_timer: Timer | None = None
        self._heartbeat_timer: Timer | None = None
        self._scheduled_rejoin: Timer | None = None
        self._closing = False
        self._subscribed_at: float | None = None
        #: Mean lateness of a heartbeat (seconds), and the application's commit interval (None: no
        #: periodic commits); see the module docstring.
        self.heartbeat_lag_s = heartbeat_lag_s
        self.commit_interval_s = commit_interval_s
        # Heartbeat lateness from a generator of its own, seeded from the batches' one without
        # drawing from it, so that the batch times stay the same with or without it.
        # (the state's 625 words only: hashing the whole state hashes None, by address before 3.12).
        words = self.poll.rng.getstate()[1]
        self._hb_rng = random.Random(hash(words))
        # librdkafka: its last heartbeat, its last assign call, and the phase of its 1 s timer (see
        # _librdkafka_wakeup); the phase is drawn from a generator of its own, like the lateness.
        self._last_heartbeat: float | None = None
        self._assign_call_t: float | None = None
        self._timer_origin_s = random.Random(hash(words) + 1).uniform(0.0, LIBRDKAFKA_GENERIC_TIMER_S)
        # CPU contention's waits, from a generator of its own too (no draws from the others).
        self.contention = contention
        self._cpu_rng = random.Random(hash(words) + 2)
        #: A revocation's commit as a round trip under contention (None: ``revocation_ms``).
        self.revocation_commit_s = revocation_commit_s

    @property
    def owned(self) -> frozenset[TopicPartition]:
        """What the member owns by the group's rules (its callbacks may still be pending)."""
        return self.core.owned

    @property
    def consuming(self) -> set[TopicPartition]:
        """What the application consumes now (its callbacks done)."""
        return self.poll.consuming

    # -- the poll loop -------------------------------------------------------------------------
    def _stay_in_poll(self, until: float) -> None:
        """Callbacks run inside ``poll()`` (Java, librdkafka): the next batch starts after them."""
        if self.client != "aiokafka":
            self.poll.hold_until(until)

    def _when_polling(self, fn: Callable[..., Any], *args: Any, latency: bool = True, extra_s: float = 0.0) -> Timer:
        """Run ``fn`` at the next ``poll()``, plus the loop's own latency to act on what its heartbeat
        learnt (``latency``; an event queued for ``poll()`` wakes an idle one at once) and ``extra_s``."""
        return self.poll.at_next_poll(fn, *args, extra_s=(self.ctx.latency("poll_ms") if latency else 0.0) + extra_s)

    def _reaction_s(self) -> float:
        """How long this member takes to get to a broker's answer under CPU contention (0 without)."""
        if self.contention is None:
            return 0.0
        return self.contention.reaction_s(self.ctx.loop.now, self._cpu_rng)

    def _when_woken(self, fn: Callable[..., Any], *args: Any) -> None:
        """Handle a broker's answer in this client's loop: at once, or under contention once woken and
        served by a core."""
        if self.contention is None:
            self._in_poll(fn, *args)
        else:
            self.ctx.loop.after(self._reaction_s(), self._in_poll, fn, *args)

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self) -> None:
        """The consumer subscribes and, after starting up, sends its first JoinGroup."""
        self.state = "unjoined"
        self._subscribed_at = self.ctx.loop.now
        self.ctx.emit(self.name, "subscribed")
        self._rejoin_timer = self.ctx.loop.after(self.ctx.latency("startup_ms"), self._rejoin)

    def close(self) -> None:
        """``consumer.close()`` once the batch in hand is done: revoke everything, then LeaveGroup
        (static members skip it)."""
        if self.state == "down" or self._closing:
            return
        self._closing = True
        self.poll.at_next_poll(self._close_now)

    def _close_now(self) -> None:
        if self.state == "down":
            return
        self.ctx.emit(self.name, "closing")
        if self.client == "librdkafka" and self._in_round:
            self._close_after_round = True  # leaves as soon as the round is over
            return
        self._leave()

    def _leave(self) -> None:
        """Revoke (or lose) everything, then LeaveGroup (static members skip it)."""
        ctx = self.ctx
        self._stop()
        departure = self.core.leave(generation_reset=self._lost)
        delay = 0.0
        if departure.lost:
            ctx.emit(self.name, "cb_lost", departure.lost)
        if departure.revoked:
            ctx.emit(self.name, "cb_revoked", departure.revoked)
            if self._commits_revocations():
                # The LeaveGroup waits for the revocation's commit (aiokafka's close runs the callback first).
                self._revoke_then(self._left, in_round=False)
                self.poll.set_consuming(set())
                return
            delay = ctx.latency("revocation_ms")
            ctx.loop.after(delay, ctx.emit, self.name, "cb_revoked_done")
        self.poll.set_consuming(set())
        self._left(delay)

    def _left(self, delay: float = 0.0) -> None:
        """After the revocation (``delay`` from now): LeaveGroup (not for static members), then closed."""
        ctx = self.ctx
        if self.instance_id is None:
            ctx.loop.after(delay + ctx.latency("network_ms"), ctx.coordinator.leave, self)
        ctx.loop.after(delay + 2 * ctx.latency("network_ms"), ctx.emit, self.name, "closed")

    def crash(self) -> None:
        """The process dies: no callbacks, no LeaveGroup; the broker finds out from the session timeout."""
        if self.state == "down":
            return
        last_commit = self._last_commit_t()
        self._stop()
        self.core.lose_all()
        self.poll.set_consuming(set())
        self.ctx.emit(self.name, "crash")
        if last_commit is not None:
            arrival = last_commit + self.ctx.latency("network_ms")
            self.ctx.loop.at(arrival, self.ctx.coordinator.offset_commit, self, arrival, background=True)

    def _last_commit_t(self) -> float | None:
        """When the application's last periodic OffsetCommit left (None: none yet, or it commits
        none). Like the benchmark's members, it commits at the first turn of its poll loop at or past
        each tick (``commit_interval_s`` apart from subscribing): on the tick when its loop is idle or
        batches are instant, at the end of every batch when batches outlast a tick.

        Commits matter to the broker only once heartbeats stop, so a member reports its last one when
        it dies instead of the simulation sending every one (an event per batch and member)."""
        interval, start = self.commit_interval_s, self._subscribed_at
        now = self.ctx.loop.now
        if not interval or start is None or now < start + interval:
            return None
        poll = self.poll
        if poll.consuming and poll.processing.busy and poll.batch_end is not None:
            poll.next_poll()  # brings the batch in hand up to now
            began = poll.batch_start if poll.batch_start is not None else now
            if poll.batch_chained and began >= start + interval:
                return began  # the batch before it ended past a tick: it committed then
            now = began  # it polled idle before this batch: the last tick before it began
        return start + interval * (1 + int((now - start - interval) / interval))

    def change_subscription(self, topics: Iterable[str]) -> None:
        """``consumer.subscribe(topics)``: rejoin at the next poll."""
        self.topics = sorted(set(topics))
        self.request_rejoin()

    def _stop(self) -> None:
        self.state = "down"
        self.ctx.loop.cancel(self._rejoin_timer)
        self.ctx.loop.cancel(self._heartbeat_timer)
        self.ctx.loop.cancel(self._scheduled_rejoin)
        self.ctx.loop.cancel(self._join_timer)
        self._rejoin_timer = self._heartbeat_timer = self._scheduled_rejoin = self._join_timer = None
        self.next_heartbeat_t = None

    # -- joining -------------------------------------------------------------------------------
    def _gives_up_before_joining(self) -> bool:
        """Whether the next join starts with a callback (lost, or revoked before JoinGroup)."""
        if not self.owned:
            return False
        return self._lost or not self.core.cooperative or any(tp.topic not in self.topics for tp in self.owned)

    def request_rejoin(self, extra_s: float = 0.0) -> None:
        """Join again, when this client's loop gets to it (``extra_s`` later: a reaction's wait for a
        core); unless a join is already under way."""
        if self.state in ("down", "joining", "syncing") or self._rejoin_timer is not None:
            return
        waits_for_poll = self.client == "java" or (self.client == "librdkafka" and self._gives_up_before_joining())
        if waits_for_poll:
            self._rejoin_timer = self._when_polling(self._rejoin, extra_s=extra_s)
        else:
            self._rejoin_timer = self.ctx.loop.after(self.ctx.latency("poll_ms") + extra_s, self._rejoin)

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
        preparation = self.core.prepare_join(self.topics, generation_reset=self._lost)
        self._lost = False
        if preparation.lost:
            ctx.emit(self.name, "cb_lost", preparation.lost)
        gone = preparation.lost | preparation.revoked
        if gone:
            self._skip_join_backoff = True  # librdkafka rejoins at once once it has unassigned
        if preparation.revoked:
            ctx.emit(self.name, "cb_revoked", preparation.revoked)
            if self._commits_revocations():
                self._revoke_then(self._send_join, in_round=False)  # before it stops consuming: what it commits
                self.poll.set_consuming(self.consuming - gone)
                return
            self.poll.set_consuming(self.consuming - gone)
            delay = ctx.latency("revocation_ms")
            ctx.loop.after(delay, ctx.emit, self.name, "cb_revoked_done")
            ctx.loop.after(delay, self._send_join)
        else:
            self.poll.set_consuming(self.consuming - gone)
            self._send_join()

    def _send_join(self) -> None:
        """JoinGroup, once librdkafka's join interval allows it."""
        if self.state != "joining":
            return
        wait = self._join_backoff_s()
        if wait > 0:
            self.ctx.loop.cancel(self._join_timer)
            self._join_timer = self.ctx.loop.after(wait, self._send_join)
            return
        self.ctx.loop.cancel(self._join_timer)
        self._join_timer = None
        self._skip_join_backoff = False
        self._last_join = self.ctx.loop.now
        self._in_round = True
        ctx = self.ctx
        subscription = self.core.subscription(
            self.topics, self.assignor.subscription_user_data(set(self.topics)), instance_id=self.instance_id
        )
        ctx.emit(self.name, "join", gen=self.generation)
        ctx.loop.after(ctx.latency("network_ms"), ctx.coordinator.join, self, subscription, self._known_id)

    def _join_backoff_s(self) -> float:
        """How long librdkafka holds this JoinGroup back (0 for the other clients)."""
        if self.client != "librdkafka" or self._skip_join_backoff or self._last_join is None:
            return 0.0
        return max(0.0, self._last_join + LIBRDKAFKA_JOIN_INTERVAL_S - self.ctx.loop.now)

    def _in_poll(self, fn: Callable[..., Any], *args: Any) -> None:
        """A broker's answer: Java's application thread reads it at its next ``poll()``; the other
        clients' coordinators at once."""
        if self.client == "java":
            self._when_polling(fn, *args, latency=False)
        else:
            fn(*args)

    def on_join_response(self, response: JoinResponse) -> None:
        """JoinGroup answered: sync, handing in the assignment when leader (once woken, under contention)."""
        self._when_woken(self._join_answered, response)

    def _join_answered(self, response: JoinResponse) -> None:
        if self.state != "joining":
            return
        if response.error == "MEMBER_ID_REQUIRED":
            self._known_id = True
            self._skip_join_backoff = True
            retry = self.ctx.latency("id_rejoin_ms")
            if retry > 0:
                self.ctx.loop.after(retry, self._send_join)
            else:
                self._send_join()
            return
        if response.error is not None:
            self._failed(response.error)
            return
        self.state = "syncing"
        self._join_answered_t = self.ctx.loop.now
        delay = self.ctx.latency("network_ms")
        assignment = None
        if response.leader == self.id:
            assignment = self._lead(response.members or {}, response.generation)
            delay += self.ctx.latency("assign_ms")  # the leader's SyncGroup leaves after the others'
        self.ctx.loop.after(delay, self.ctx.coordinator.sync, self, response.generation, assignment)

    def _lead(self, subscriptions: dict[str, Subscription], generation: int) -> dict[str, Assignment]:
        """The leader's ``onLeaderElected``, by the membership core's rules."""
        try:
            decision = self.core.lead(self.assignor, self.ctx.partitions_per_topic, subscriptions, generation)
        except InvalidAssignment as exc:
            raise SimulationError(str(exc)) from exc
        self.ctx.leader_assigned(self)
        return decision.assignments

    def on_sync_response(self, response: SyncResponse) -> None:
        """SyncGroup answered: adopt the assignment; the callbacks run as this client runs them (once
        woken, under contention)."""
        self._when_woken(self._sync_answered, response)

    def _sync_answered(self, response: SyncResponse) -> None:
        if self.state != "syncing":
            return
        if response.error is not None:
            self._failed(response.error)
            return
        ctx = self.ctx
        self.generation = response.generation
        self.state = "stable"
        self._in_round = False
        outcome = self.core.on_sync(
            response.generation, Assignment(list(response.partitions), response.user_data), self.topics, self.assignor
        )
        if outcome.follow_up:
            ctx.emit(self.name, "sync", gen=response.generation, protocol=ctx.protocol_name, follow_up=True)
        else:
            ctx.emit(self.name, "sync", gen=response.generation, protocol=ctx.protocol_name)
        self._schedule_heartbeat(ctx.loop.now + self._heartbeat_period_s())
        if outcome.reschedule:
            ctx.loop.cancel(self._scheduled_rejoin)
            self._scheduled_rejoin = None
            if outcome.rejoin_after_s is not None:
                self._scheduled_rejoin = ctx.loop.after(outcome.rejoin_after_s, self._scheduled_rejoin_due)
        if self._close_after_round:
            self._leave()  # what it was just assigned, it gives up at once
        elif self.client == "librdkafka":
            self._callbacks_pending = True
            self._when_polling(self._run_callbacks, outcome, latency=False)
        else:
            self._run_callbacks(outcome)

    def _run_callbacks(self, outcome: SyncOutcome) -> None:
        """Revoke (commit, callback), then take the added partitions, then rejoin when the core says so."""
        if self.state == "down":
            return
        ctx = self.ctx
        if outcome.revoked:
            ctx.emit(self.name, "cb_revoked", outcome.revoked)
            if self._commits_revocations():
                self._revoke_then(self._assigned, outcome, in_round=True)
                self.poll.set_consuming(self.consuming - outcome.revoked)
                return
            self.poll.set_consuming(self.consuming - outcome.revoked)
            delay = ctx.latency("revocation_ms")
            self._stay_in_poll(ctx.loop.now + delay)
            ctx.loop.after(delay, ctx.emit, self.name, "cb_revoked_done")
            ctx.loop.after(delay, self._assigned, outcome)
        else:
            self._assigned(outcome)

    # -- the revocation's commit (revocation_commit_s) ------------------------------------------
    def _commits_revocations(self) -> bool:
        """Whether a revocation commits as a round trip under contention (see the module docstring)."""
        return self.revocation_commit_s is not None and self.contention is not None and self.client == "aiokafka"

    def _revoke_then(self, fn: Callable[..., Any], *args: Any, in_round: bool) -> None:
        """The revocation callback: the periodic commit in flight answered, then its own commit;
        ``cb_revoked_done`` and ``fn(*args)`` once that is answered. ``in_round``: called back after a
        SyncGroup (the round just ended), else before a JoinGroup or a LeaveGroup."""
        commits, wait_s = 1, 0.0
        last = self._last_commit_t()
        if last is not None and self.poll.consuming:  # (called before the revoked stop being consumed)
            if in_round and self._join_answered_t is not None and last > self._join_answered_t:
                commits = 2  # queued behind the SyncGroup: answered after the round
            else:
                assert self.contention is not None and self.revocation_commit_s is not None
                mean_round_trip = self.contention.mean_wait_s() + self.revocation_commit_s
                wait_s = max(0.0, last + mean_round_trip - self.ctx.loop.now)
        self.ctx.loop.after(wait_s, self._commit_round_trip, commits, fn, args)

    def _commit_round_trip(self, commits: int, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        """One OffsetCommit answered: a wake-up and ``revocation_commit_s`` of a core (first come, first served)."""
        assert self.contention is not None
        took = self.contention.reaction_s(self.ctx.loop.now, self._cpu_rng, self.revocation_commit_s)
        if commits > 1:
            self.ctx.loop.after(took, self._commit_round_trip, commits - 1, fn, args)
            return
        self.ctx.loop.after(took, self.ctx.emit, self.name, "cb_revoked_done")
        self.ctx.loop.after(took, fn, *args)

    def _assigned(self, outcome: SyncOutcome) -> None:
        if self.state == "down":
            return
        self.poll.set_consuming((self.consuming - outcome.revoked) | outcome.added)
        self.ctx.emit(self.name, "cb_assigned", outcome.added)
        self._callbacks_pending = False
        if self.client == "librdkafka":
            self._assign_call_t = self.ctx.loop.now  # restarts the max.poll.interval.ms check's timer
            self._librdkafka_woken()  # the assign call is an operation on its main thread's queue
        if outcome.rejoin is not None:
            if outcome.revoked:
                self._skip_join_backoff = True  # librdkafka: "rejoining group to redistribute..."
                if self._join_timer is not None:  # a held JoinGroup goes now
                    self._send_join()
            self.request_rejoin()

    def _scheduled_rejoin_due(self) -> None:
        self._scheduled_rejoin = None
        self.request_rejoin()

    def _failed(self, error: str) -> None:
        """A join or sync refused: fenced members lose their partitions, everyone rejoins (a member
        waiting to close closes instead)."""
        self.state = "unjoined"
        self._in_round = False
        if error in FENCING_ERRORS:
            self._fenced(error)
        if self._close_after_round:
            self._leave()
            return
        self.request_rejoin()

    def _fenced(self, error: str) -> None:
        self._lost = True
        self.generation = -1
        if error == "UNKNOWN_MEMBER_ID":
            self._known_id = False

    # -- heartbeats ----------------------------------------------------------------------------
    def _schedule_heartbeat(self, t: float) -> None:
        if self.client == "librdkafka" and self._last_heartbeat is not None:
            # Its heartbeat interval runs from the last heartbeat sent, whatever happened since
            # (``rkcg_heartbeat_intvl`` is an rd_interval nothing resets on SyncGroup).
            t = self._last_heartbeat + self._heartbeat_period_s()
        self.ctx.loop.cancel(self._heartbeat_timer)
        self.next_heartbeat_t = t
        self._heartbeat_timer = self.ctx.loop.at(max(t, self.ctx.loop.now), self._heartbeat, background=True)
        if self.client == "librdkafka" and t <= self.ctx.loop.now:
            self._librdkafka_woken()  # the answer that brought us here woke its main thread

    def _librdkafka_woken(self) -> None:
        """librdkafka's main thread woke for something else (a broker's answer, an assign call): a
        heartbeat that is due goes now."""
        if self.state == "stable" and self.next_heartbeat_t is not None and self.next_heartbeat_t <= self.ctx.loop.now:
            self.ctx.loop.cancel(self._heartbeat_timer)
            self._heartbeat_timer = None
            self._send_heartbeat()

    def _heartbeat(self) -> None:
        self._heartbeat_timer = None
        if self.state != "stable":
            return
        if self.client == "librdkafka":
            wakeup = self._librdkafka_wakeup(self.ctx.loop.now)
            if wakeup > self.ctx.loop.now + 1e-9:
                self._heartbeat_timer = self.ctx.loop.at(wakeup, self._heartbeat, background=True)
                return
        self._send_heartbeat()

    def _send_heartbeat(self) -> None:
        ctx = self.ctx
        self._last_heartbeat = ctx.loop.now
        ctx.loop.after(ctx.latency("network_ms"), ctx.coordinator.heartbeat, self, self.generation, background=True)
        self._schedule_heartbeat(ctx.loop.now + self._heartbeat_period_s())

    def _heartbeat_period_s(self) -> float:
        """The heartbeat interval plus this heartbeat's lateness: uniform from 0 to twice
        ``heartbeat_lag_s`` (a timer that wakes late, a busy loop), drawn per heartbeat, plus under
        CPU contention the wake-up's wait for a core."""
        period = self.ctx.heartbeat_s
        if self.heartbeat_lag_s > 0:
            period += self._hb_rng.uniform(0.0, 2 * self.heartbeat_lag_s)
        if self.contention is not None:
            period += self.contention.lateness_s(self._cpu_rng)
        return period

    def _librdkafka_wakeup(self, t: float) -> float:
        """When librdkafka's main thread next runs its group logic, at or after ``t``.

        On the classic protocol nothing times its heartbeats: ``rd_kafka_cgrp_serve`` sends one that
        is due only when the main thread wakes, for an operation on its queue (here the
        application's commit, at the first turn of its poll loop past each commit tick) or a timer
        (``max.poll.interval.ms``'s check every 500 ms from the last assign call, the generic 1 s
        timer). So its heartbeats go further apart than the interval (250-850 ms measured for
        250 ms), and a survivor hears of a rebalance later than the interval says."""
        ticks = [
            self._timer_origin_s
            + LIBRDKAFKA_GENERIC_TIMER_S * math.ceil((t - self._timer_origin_s) / LIBRDKAFKA_GENERIC_TIMER_S - 1e-9)
        ]
        if self._assign_call_t is not None:
            ticks.append(
                self._assign_call_t
                + LIBRDKAFKA_MAX_POLL_CHECK_S
                * math.ceil((t - self._assign_call_t) / LIBRDKAFKA_MAX_POLL_CHECK_S - 1e-9)
            )
        commit = self._next_commit_t(t)
        if commit is not None:
            ticks.append(commit)
        return max(t, min(ticks))

    def _next_commit_t(self, t: float) -> float | None:
        """When the application's next periodic OffsetCommit leaves, at or after ``t`` (None: it
        commits none, or owns nothing to commit); the counterpart of :meth:`_last_commit_t`."""
        interval, start = self.commit_interval_s, self._subscribed_at
        if not interval or start is None or not self.poll.consuming:
            return None
        if self.poll.processing.busy and self.poll.batch_end is not None:
            return max(t, self.poll.next_poll())  # batches outlast a tick: it commits after each
        first = start + interval
        return first + interval * max(0, math.ceil((t - first) / interval - 1e-9))

    def on_heartbeat_response(self, error: str | None) -> None:
        """REBALANCE_IN_PROGRESS: rejoin when this client's loop gets to it; fenced: partitions lost, rejoin."""
        if error is None or self.state != "stable":
            return
        if self._callbacks_pending and self.core.cooperative and error not in FENCING_ERRORS:
            return  # librdkafka awaits the application's assign call; the next heartbeat asks again
        self.state = "unjoined"
        if error in FENCING_ERRORS:
            self._fenced(error)
        self.request_rejoin(self._reaction_s())
