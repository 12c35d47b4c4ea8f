"""A simulated consumer on KIP-848's consumer group protocol: the rules of
:class:`kassign.membership.ConsumerGroupMember` (the object kassign's aiokafka consumer runs with
``group_protocol="consumer"``) driven on the simulator's clock, inside a poll loop.

The member heartbeats on its own timer (the interval the broker returns; at once while joining,
acknowledging or leaving). When an answer brings a new assignment it reconciles: revoke (a commit,
then ``on_partitions_revoked``), then assign, then acknowledge with an immediate heartbeat listing
what it now owns. Where the poll loop comes in, per client (``client``):

* ``aiokafka`` (kassign): the coordinator task reconciles at once; callbacks do not wait for the
  application's batch;
* ``java`` (kafka-clients 4's ``AsyncKafkaConsumer``) and ``librdkafka``: heartbeats go from a
  background thread, but the listener's callbacks run in the application thread, inside ``poll()``:
  a reconciliation waits for the batch in hand.

``close()`` waits for the batch in hand, revokes everything, and leaves with epoch -1 at once; a
crash sends nothing and the broker finds out from the session timeout.

With CPU contention (``contention``, :mod:`kassign.sim.contention`; off unless
``SimConfig.cpu_cores`` is set) each heartbeat the timer sends is late by a wait for a core, which
carries over (the next is due an interval after it was sent), and a new assignment is reconciled only
once the member is woken and served by a core.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from kassign.membership.consumer_group import (
    ConsumerGroupMember,
    Fail,
    LosePartitions,
    MemberState,
    Reconciliation,
    RevokePartitions,
)
from kassign.model import TopicPartition
from kassign.protocol.consumer_group_heartbeat import ConsumerGroupHeartbeatResponse
from kassign.sim.engine import Timer
from kassign.sim.member import CLIENT_KINDS, GroupContext, SimulationError
from kassign.sim.poll_loop import PollLoop
from kassign.sim.processing import Processing

if TYPE_CHECKING:
    from kassign.sim.contention import CpuContention

__all__ = ["ConsumerGroupSimMember"]


class ConsumerGroupSimMember:
    """One incarnation of a KIP-848 consumer: ``name`` is its id in the timeline (``m1``...), ``id``
    its member id (a new one per restart). ``client``: one of :data:`~kassign.sim.member.CLIENT_KINDS`;
    ``contention``: see the module docstring."""

    def __init__(
        self,
        name: str,
        incarnation: int,
        ctx: GroupContext,
        topics: Iterable[str],
        *,
        client: str = "java",
        processing: Processing | None = None,
        rng: random.Random | None = None,
        rebalance_timeout_ms: int = 300_000,
        contention: CpuContention | None = None,
    ) -> None:
        if client not in CLIENT_KINDS:
            raise ValueError(f"unknown client {client!r}; expected one of {CLIENT_KINDS}")
        self.name = name
        self.id = f"{name}-{incarnation}"
        self.ctx = ctx
        self.topics = sorted(set(topics))
        self.client = client
        self.instance_id: str | None = None
        self.core = ConsumerGroupMember("sim", member_id=self.id, rebalance_timeout_ms=rebalance_timeout_ms)
        self.poll = PollLoop(ctx.loop, processing or Processing(), rng or random.Random(self.id))
        self._down = True  # not started, closed or crashed
        self.next_heartbeat_t: float | None = None
        self._last_sent: float | None = None
        self._heartbeat_timer: Timer | None = None
        self._reconciliation: Timer | None = None
        self._closing = False
        self._leaving = False  # partitions given up; the next heartbeat leaves
        # CPU contention's waits, from a generator of its own (seeded from the batches' one without
        # drawing from it), and the wait of the heartbeat the timer sends next.
        self.contention = contention
        self._cpu_rng = random.Random(hash(self.poll.rng.getstate()[1]) + 2)
        self._late_s = 0.0

    @property
    def generation(self) -> int:
        """The member epoch (what the simulation compares with the group's)."""
        return self.core.member_epoch

    @property
    def owned(self) -> frozenset[TopicPartition]:
        """What the member owns by the protocol's count (reconciled)."""
        return self.core.owned

    @property
    def consuming(self) -> set[TopicPartition]:
        return self.poll.consuming

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self) -> None:
        """The consumer subscribes and, after starting up, heartbeats with epoch 0."""
        self._down = False
        self.ctx.emit(self.name, "subscribed")
        self.ctx.loop.after(self.ctx.latency("startup_ms"), self._subscribe)

    def _subscribe(self) -> None:
        if self._down:
            return
        self._act(self.core.subscribe(self.topics))
        self._pump()

    def close(self) -> None:
        """``consumer.close()`` once the batch in hand is done: revoke everything, then leave (epoch -1)."""
        if self._down or self._closing:
            return
        self._closing = True
        self.poll.at_next_poll(self._close_now)

    def _close_now(self) -> None:
        if self._down:
            return
        ctx = self.ctx
        ctx.emit(self.name, "closing")
        ctx.loop.cancel(self._reconciliation)
        self._reconciliation = None
        delay = 0.0
        for action in self.core.leave():
            if isinstance(action, LosePartitions) and action.partitions:
                ctx.emit(self.name, "cb_lost", action.partitions)
            elif isinstance(action, RevokePartitions):
                ctx.emit(self.name, "cb_revoked", action.partitions)
                delay = ctx.latency("revocation_ms")
                ctx.loop.after(delay, ctx.emit, self.name, "cb_revoked_done")
        self.poll.set_consuming(set())
        ctx.loop.after(delay, self._leave_prepared)

    def _leave_prepared(self) -> None:
        self.core.leave_prepared()
        if self.core.state is not MemberState.LEAVING:  # not in the group (fenced, never joined): nothing to send
            self._stop()
            self.ctx.emit(self.name, "closed")
            return
        self._leaving = True
        self._pump()  # the leave goes out at once, or as soon as the heartbeat in flight is answered

    def crash(self) -> None:
        """The process dies: no callbacks, no leave; the broker finds out from the session timeout."""
        if self._down:
            return
        self._stop()
        self.poll.set_consuming(set())
        self.ctx.emit(self.name, "crash")

    def change_subscription(self, topics: Iterable[str]) -> None:
        """``consumer.subscribe(topics)``: the next heartbeat carries it."""
        self.topics = sorted(set(topics))
        if not self._down:
            self._act(self.core.subscribe(self.topics))
            self._pump()

    def request_rejoin(self) -> None:
        """Nothing to do on this protocol: the broker notices metadata and subscription changes itself."""

    def _stop(self) -> None:
        self._down = True
        self.ctx.loop.cancel(self._heartbeat_timer)
        self.ctx.loop.cancel(self._reconciliation)
        self._heartbeat_timer = self._reconciliation = None
        self.next_heartbeat_t = None

    # -- heartbeats ----------------------------------------------------------------------------
    def _pump(self) -> None:
        """(Re)arm the heartbeat timer for when the core says the next heartbeat is due."""
        if self._down:
            return
        ctx = self.ctx
        since = ctx.loop.now - self._last_sent if self._last_sent is not None else 0.0
        delay = self.core.heartbeat_delay(since)
        ctx.loop.cancel(self._heartbeat_timer)
        self._heartbeat_timer = None
        self.next_heartbeat_t = None
        if delay is not None:
            if delay > 0:
                delay += self._late_s  # a timer's wake-up waits for a core (0 without contention)
            self.next_heartbeat_t = ctx.loop.now + delay
            self._heartbeat_timer = ctx.loop.after(delay, self._send_heartbeat, background=True)

    def _send_heartbeat(self) -> None:
        self._heartbeat_timer = None
        request = self.core.build_heartbeat()
        if request is None:
            return
        self._last_sent = self.ctx.loop.now
        if self.contention is not None:
            self._late_s = self.contention.lateness_s(self._cpu_rng)
        self.ctx.loop.after(
            self.ctx.latency("network_ms"), self.ctx.coordinator.heartbeat, self, request, background=True
        )
        if self._leaving:  # that was the leave: the consumer is closed once its answer is back
            self._stop()
            self.ctx.loop.after(2 * self.ctx.latency("network_ms"), self.ctx.emit, self.name, "closed")

    def on_heartbeat_response(self, response: ConsumerGroupHeartbeatResponse) -> None:
        """The broker's answer: adopt it, reconcile if the assignment changed, re-arm the timer."""
        if self._down:
            return
        if self._leaving:  # an answer to the heartbeat before the leave: now the leave goes
            self.core.on_heartbeat_response(response)
            self._pump()
            return
        self._act(self.core.on_heartbeat_response(response))
        self._maybe_reconcile()
        self._pump()

    def _act(self, actions: list[Any]) -> None:
        for action in actions:
            if isinstance(action, LosePartitions):
                if action.partitions:
                    self.ctx.emit(self.name, "cb_lost", action.partitions)
                self.poll.set_consuming(set())
                self.core.partitions_lost_done()
            elif isinstance(action, Fail):
                raise SimulationError(f"member {self.id}: {action.error}")

    @property
    def state(self) -> str:
        """``down``, ``reconciling``, ``stable`` or ``joining`` (anything else in the group's
        protocol), from the core's state and the reconciliation under way."""
        if self._down:
            return "down"
        if self._reconciliation is not None or self.core.state is MemberState.RECONCILING:
            return "reconciling"
        return "stable" if self.core.state is MemberState.STABLE else "joining"

    # -- reconciliation ------------------------------------------------------------------------
    def _maybe_reconcile(self) -> None:
        if self._reconciliation is not None:
            return
        rec = self.core.maybe_reconcile(self.ctx.coordinator.topic_name)
        if rec is None:
            return
        ctx = self.ctx
        woken = 0.0 if self.contention is None else self.contention.reaction_s(ctx.loop.now, self._cpu_rng)
        if self.client == "aiokafka":
            self._reconciliation = ctx.loop.after(ctx.latency("poll_ms") + woken, self._revoke, rec)
        else:  # the listener runs in the application thread, inside poll()
            self._reconciliation = self.poll.at_next_poll(self._revoke, rec, extra_s=ctx.latency("poll_ms") + woken)

    def _revoke(self, rec: Reconciliation) -> None:
        ctx = self.ctx
        if not self.core.still_reconciling(rec):
            self._reconciliation = None
            return
        if not rec.revoked:
            self._assign(rec)
            return
        ctx.emit(self.name, "cb_revoked", rec.revoked)
        self.poll.set_consuming(self.poll.consuming - rec.revoked)
        delay = ctx.latency("revocation_ms")  # the commit of what is revoked, then the callback
        if self.client != "aiokafka":
            self.poll.hold_until(ctx.loop.now + delay)
        ctx.loop.after(delay, ctx.emit, self.name, "cb_revoked_done")
        self._reconciliation = ctx.loop.after(delay, self._assign, rec)

    def _assign(self, rec: Reconciliation) -> None:
        self._reconciliation = None
        if self._down or not self.core.still_reconciling(rec):
            return
        self.poll.set_consuming(set(rec.assigned))
        self.ctx.emit(self.name, "cb_assigned", rec.added, gen=rec.epoch)
        self.core.reconciliation_done(rec)
        self._pump()  # the acknowledgement goes out at once
