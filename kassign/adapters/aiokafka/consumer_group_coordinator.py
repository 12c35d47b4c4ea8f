"""kassign's coordinator for aiokafka on the next-generation consumer group protocol (KIP-848).

The broker assigns; this coordinator heartbeats and reconciles. The decisions are
:class:`kassign.membership.ConsumerGroupMember`'s; this module carries them out with kassign's
codecs over aiokafka's coordinator connection:

* ConsumerGroupHeartbeat (API 68) on the interval the broker returns, at once when joining,
  acknowledging or leaving; one heartbeat task beside the coordination routine, so a slow listener
  never stops the heartbeats;
* reconciliation in the coordination routine: the revoked partitions are paused, committed (with
  auto-commit) and handed to ``on_partitions_revoked``; then the new assignment is installed keeping
  the positions of what stays, ``on_partitions_assigned`` gets what is new, and the next heartbeat
  acknowledges the owned set;
* the broker names topics by id: the coordinator names them with a Metadata v12+ request
  (:mod:`kassign.protocol.metadata`), asked only for ids it has not seen;
* fenced (FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID, or its session expired): every partition goes to
  ``on_partitions_lost`` (``on_partitions_revoked`` for listeners without it), uncommitted, and the
  member joins again at epoch 0; fatal errors (UNRELEASED_INSTANCE_ID, GROUP_MAX_SIZE_REACHED,
  UNSUPPORTED_VERSION, ...) are raised from ``getmany()``/``getone()`` as :class:`GroupProtocolError`
  (an authorization failure as aiokafka's ``GroupAuthorizationFailedError`` /
  ``TopicAuthorizationFailedError``, as on the classic protocol); TOPIC_AUTHORIZATION_FAILED is
  raised once and the member carries on, retrying (Java, KAFKA-18813);
* a failed heartbeat is retried after the retry backoff (doubling up to 1 s), a moved coordinator
  as soon as it is found again, not after the rest of the interval;
* offsets are committed with OffsetCommit v9+ carrying the member id and epoch, so a fenced member's
  late commit is refused by the broker, and read with OffsetFetch v9+ carrying them too (a fetch
  from a stale epoch is retried once the heartbeat has caught up), ``require_stable`` as Java's;
* closing (or unsubscribing) revokes everything (lost, when the member is no longer in the group)
  and leaves with epoch -1 -- at once, beside a heartbeat still in flight; a static member
  (``group_instance_id``) leaves with -2, so a restart within the session timeout gets its
  partitions back without a reassignment.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
import uuid
from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet
from typing import Any

import aiokafka.errors as Errors
from aiokafka.consumer.group_coordinator import GroupCoordinator
from aiokafka.structs import OffsetAndMetadata
from aiokafka.structs import TopicPartition as AioTopicPartition

from kassign.adapters.aiokafka.commit_guard import CommitGuard, rebalance_in_progress
from kassign.adapters.aiokafka.handover import (
    aio_partitions,
    call_listener,
    consumed_offsets,
    install,
    kassign_partitions,
    pause,
)
from kassign.adapters.aiokafka.internals import close_started, poll_waiting
from kassign.adapters.aiokafka.listener_hooks import ConsumerGroupHooks
from kassign.membership.consumer_group import (
    ERROR_NAMES,
    Action,
    Backoff,
    ConsumerGroupFatalError,
    ConsumerGroupMember,
    Fail,
    FindCoordinator,
    LosePartitions,
    MemberState,
    Reconciliation,
    Report,
    RevokePartitions,
)
from kassign.protocol import AiokafkaRequest, UnsupportedApiVersion
from kassign.protocol.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
from kassign.protocol.flexible_wire import ZERO_UUID
from kassign.protocol.metadata import MetadataRequest
from kassign.protocol.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from kassign.protocol.offset_fetch import OffsetFetchRequest, OffsetFetchRequestGroup, OffsetFetchRequestTopics

log = logging.getLogger(__name__)

__all__ = [
    "ConsumerGroupCoordinator",
    "GroupProtocolError",
    "GroupAuthorizationFailed",
    "TopicAuthorizationFailed",
    "StaleMemberEpochError",
]

# The longest the heartbeat task sleeps without looking at the poll timer and the member's state.
_IDLE_CHECK_S = 1.0
# How long a closing member waits for its leave heartbeat to be answered.
_LEAVE_WAIT_S = 5.0
# Java's retry.backoff.max.ms: aiokafka has only retry_backoff_ms, the first step.
_RETRY_BACKOFF_MAX_MS = 1000


class GroupProtocolError(Errors.KafkaError):
    """A KIP-848 error from the group coordinator (UNRELEASED_INSTANCE_ID, GROUP_MAX_SIZE_REACHED,
    UNSUPPORTED_VERSION, ...); ``error`` is Kafka's error name. Most end the membership; see the
    authorization subclasses, which are also aiokafka's own error classes."""

    def __init__(self, message: str, error: str = "", failure: ConsumerGroupFatalError | None = None) -> None:
        super().__init__(message)
        self.error = error
        self.failure = failure

    @classmethod
    def of(cls, failure: ConsumerGroupFatalError) -> GroupProtocolError:
        """The error to raise for ``failure``: an authorization failure gets the class users catch."""
        kind = {
            "GROUP_AUTHORIZATION_FAILED": GroupAuthorizationFailed,
            "TOPIC_AUTHORIZATION_FAILED": TopicAuthorizationFailed,
        }.get(failure.error, cls)
        return kind(str(failure), failure.error, failure)

    def __reduce__(self) -> tuple[Any, ...]:
        # aiokafka copies the exception for every waiter it fails.
        return type(self), (self.args[0] if self.args else "", self.error, self.failure)


class GroupAuthorizationFailed(GroupProtocolError, Errors.GroupAuthorizationFailedError):
    """GROUP_AUTHORIZATION_FAILED: the principal may not use the group (raised as aiokafka's
    ``GroupAuthorizationFailedError``, the class the classic protocol raises; fatal for the member)."""


class TopicAuthorizationFailed(GroupProtocolError, Errors.TopicAuthorizationFailedError):
    """TOPIC_AUTHORIZATION_FAILED: the principal may not read a subscribed topic (raised once as
    aiokafka's ``TopicAuthorizationFailedError``; the member carries on, so a new ACL is picked up)."""


class StaleMemberEpochError(Errors.CommitFailedError):
    """OffsetCommit answered STALE_MEMBER_EPOCH: the member's epoch moved on since the commit was built."""


class StaleMemberEpochFetch(Errors.KafkaError):
    """OffsetFetch answered STALE_MEMBER_EPOCH: retried once the heartbeat has the current epoch."""

    retriable = True


class ConsumerGroupCoordinator(CommitGuard, GroupCoordinator):
    """aiokafka's GroupCoordinator on the consumer group protocol (KIP-848): heartbeats, reconciliation,
    member-epoch commits. ``server_assignor``: Java's ``group.remote.assignor`` (``"uniform"``,
    ``"range"``, or None for the group's default)."""

    # Started by aiokafka's GroupCoordinator (untyped), cleared here.
    _commit_refresh_task: asyncio.Task[None] | None

    def __init__(
        self,
        client: Any,
        subscription: Any,
        *,
        server_assignor: str | None = None,
        client_rack: str | None = None,
        **kwargs: Any,
    ) -> None:
        group_id = kwargs.get("group_id") or "aiokafka-default-group"
        # The member exists before aiokafka's constructor starts the coordination routine.
        self._member = ConsumerGroupMember(
            group_id,
            instance_id=kwargs.get("group_instance_id"),
            rack_id=client_rack,
            # Java's rebalance timeout on this protocol is the max poll interval.
            rebalance_timeout_ms=kwargs.get("max_poll_interval_ms", 300_000),
            server_assignor=server_assignor,
            retry_backoff_ms=kwargs.get("retry_backoff_ms", 100),
            retry_backoff_max_ms=max(_RETRY_BACKOFF_MAX_MS, kwargs.get("retry_backoff_ms", 100)),
        )
        self._held: frozenset[AioTopicPartition] = frozenset()  # what this consumer actually consumes
        # Positions of held partitions whose topic a subscribe() dropped: aiokafka's new subscription
        # no longer has them, yet their revocation (the broker's next target) must commit them.
        self._dropped_positions: dict[AioTopicPartition, OffsetAndMetadata] = {}
        self._owned_assignment: Any = None
        self._topic_names: dict[uuid.UUID, str] = {}
        self._topic_ids: dict[str, uuid.UUID] = {}
        self._pending: collections.deque[Action] = collections.deque()  # from the heartbeat task
        self._wake = asyncio.Event()  # the coordination routine has work
        self._heartbeat_wake = asyncio.Event()  # a heartbeat may be due
        self._heartbeat_loop_task: asyncio.Task[None] | None = None
        self._metadata_task: asyncio.Task[None] | None = None
        self._fatal_error: GroupProtocolError | None = None
        self._reported_error: Errors.KafkaError | None = None  # raised once, the member carries on
        self._listener_error: Exception | None = None
        # The listener's telemetry hooks, called where Java records its rebalance and heartbeat metrics.
        self._hooks = ConsumerGroupHooks(subscription, group_id)
        # A commit issued while the member held its partitions never goes out after it lost them and
        # joined again under a new epoch (CommitGuard counts each end of a membership as a reset).
        self._init_commit_guard()
        super().__init__(client, subscription, **kwargs)

    # aiokafka reads and writes these; on this protocol they follow the member.
    @property
    def generation(self) -> int:
        """The member epoch (-1 when the member has none)."""
        epoch = self._member.member_epoch
        return epoch if epoch > 0 else -1

    @generation.setter
    def generation(self, value: int) -> None:
        pass  # aiokafka resets it; the member's epoch is the protocol's

    @property
    def member_id(self) -> str:
        """This member's id (kept for the consumer's whole life, as KIP-1082 wants)."""
        return self._member.member_id

    @member_id.setter
    def member_id(self, value: str) -> None:
        pass

    @property
    def member(self) -> ConsumerGroupMember:
        """The membership state machine (read it; the coordinator drives it)."""
        return self._member

    @property
    def owned_partitions(self) -> frozenset[AioTopicPartition]:
        """The partitions this member consumes right now."""
        return self._held

    @property
    def closing(self) -> bool:
        return close_started(self)

    def _on_metadata_change(self) -> None:
        # Partition counts and pattern matches change on the broker's side of this protocol: nothing
        # to rejoin, but names may have become resolvable.
        self._wake.set()

    def request_rejoin(self) -> None:
        # aiokafka asks for a rejoin on metadata changes and some commit errors; the broker decides here.
        self._wake.set()

    def reset_generation(self) -> None:
        # aiokafka resets on some commit errors; here the heartbeat's answer decides (FENCED_MEMBER_EPOCH,
        # UNKNOWN_MEMBER_ID), and _membership_ended counts the reset for the commit guard.
        self._wake.set()

    def _membership_ended(self, cause: str = "") -> None:
        """The member lost or gave up its partitions (``cause``: why, for the error of a commit it can no
        longer make): commits issued before now must not go out."""
        self._resets += 1
        if cause:
            self._lost_cause = cause
        self._membership_moved()

    # -- the coordination routine ------------------------------------------------------------

    async def _coordination_routine(self) -> None:
        try:
            await self._run()
        except asyncio.CancelledError:
            raise
        except Errors.KafkaError as exc:
            # A Kafka error keeps its class (what users catch), in one log line.
            log.error("group %s: the consumer group coordination stopped: %r", self.group_id, exc)
            self._subscription.abort_waiters(exc)
            raise
        except Exception as exc:
            log.exception("group %s: unexpected error in the consumer group coordination", self.group_id)
            kafka_exc = Errors.KafkaError(f"Unexpected error during coordination {exc!r}")
            self._subscription.abort_waiters(kafka_exc)
            raise kafka_exc from exc

    async def _run(self) -> None:
        self._heartbeat_loop_task = asyncio.ensure_future(self._heartbeat_loop())
        seen: Any = None  # the aiokafka Subscription last handed to the member
        while not self.closing:
            subscription = self._subscription.subscription
            if subscription is None or not subscription.active:
                await asyncio.wait(
                    [asyncio.ensure_future(self._subscription.wait_for_subscription()), self._closing],
                    return_when=asyncio.FIRST_COMPLETED,
                )
                continue
            if subscription is not seen:
                seen = subscription
                self._on_subscription(subscription)
            if not self._subscription.partitions_auto_assigned():
                await self._idle(subscription, None)
                continue
            await self._do_pending()
            if self._member.state is MemberState.FATAL:
                await self._idle(subscription, None)
                continue
            before = self._member.state
            rec = self._member.maybe_reconcile(self._name_of)
            self._hooks.transition(before, self._member)
            if self._member.state is MemberState.ACKNOWLEDGING:
                self._heartbeat_wake.set()  # a new target that changes nothing is acknowledged at once
            if self._member.unresolved_topic_ids:
                self._resolve_later(self._member.unresolved_topic_ids)
            if rec is not None:
                await self._reconcile(rec)
                continue
            timeout = None
            assignment = subscription.assignment
            if assignment is not None and self._member.commit_identity() is not None:
                try:
                    timeout = await self._maybe_do_autocommit(assignment)
                except Errors.KafkaError as err:
                    log.warning("group %s: auto-commit failed: %r", self.group_id, err)
                    # Retriable: after the backoff; refused for good: at the next interval (the deadline).
                    timeout = max(self._retry_backoff_ms / 1000, self._next_autocommit_deadline - time.monotonic())
            await self._idle(subscription, timeout)
        # Closing: the last auto-commit while the member still has its epoch (close() leaves next).
        assignment = self._owned_assignment
        if assignment is not None and self._held and self._member.commit_identity() is not None:
            try:
                await self._maybe_do_last_autocommit(assignment)
            except Errors.KafkaError as err:
                log.error("group %s: the last auto-commit failed: %r", self.group_id, err)
            if self._enable_auto_commit and self._dropped_positions:
                await self._commit_revoked(assignment, frozenset(self._dropped_positions))

    async def _idle(self, subscription: Any, timeout: float | None) -> None:
        """Until there is work: a wake-up, a subscription change, closing, or ``timeout`` seconds."""
        waits = [asyncio.ensure_future(self._wake.wait()), self._closing, subscription.unsubscribe_future]
        if self._heartbeat_loop_task is not None:
            waits.append(self._heartbeat_loop_task)
        if self._commit_refresh_task is not None:
            waits.append(self._commit_refresh_task)
        await asyncio.wait(waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        waits[0].cancel()
        self._wake.clear()
        refresh = self._commit_refresh_task
        if refresh is not None and refresh.done() and not refresh.cancelled():
            error = refresh.exception()
            if isinstance(error, Errors.KafkaError):
                # OffsetFetch refused (GROUP_AUTHORIZATION_FAILED, ...): raised once to the application,
                # as aiokafka does on the classic protocol, and fetched again later.
                log.error("group %s: fetching committed offsets failed: %r", self.group_id, error)
                self._report(error)
                self._commit_refresh_task = None
                await asyncio.sleep(_RETRY_BACKOFF_MAX_MS / 1000)
                if self._owned_assignment is not None and self._owned_assignment.active:
                    self.start_commit_offsets_refresh_task(self._owned_assignment)
            elif error is not None:
                raise error
        task = self._heartbeat_loop_task
        if task is not None and task.done() and not task.cancelled() and task.exception() is not None:
            raise task.exception()  # type: ignore[misc]

    def _on_subscription(self, subscription: Any) -> None:
        """A new aiokafka subscription (subscribe(), or a pattern matching other topics): hand it to the
        member, and keep consuming the held partitions still subscribed (aiokafka dropped its assignment)."""
        if not self._subscription.partitions_auto_assigned():
            return
        pattern = self._subscription.subscribed_pattern
        if pattern is not None:
            self._member.subscribe(regex=pattern.pattern)
        elif subscription.topics:
            self._member.subscribe(subscription.topics)
        self._heartbeat_wake.set()
        if self._held and subscription.assignment is None:
            keep = frozenset(tp for tp in self._held if tp.topic in subscription.topics)
            self._dropped_positions.update(consumed_offsets(self._owned_assignment, self._held - keep))
            # Partitions of topics no longer subscribed stay held (not fetched) until the broker's
            # next assignment revokes them: they are revoked once, through the listener.
            self._owned_assignment = install(self._subscription, self._owned_assignment, keep, keep)

    async def _do_pending(self) -> None:
        """Carry out what the heartbeat task decided: losing partitions, failing."""
        while self._pending:
            action = self._pending.popleft()
            if isinstance(action, LosePartitions):
                self._membership_ended(action.reason)
                await self._lose_held()
                self._member.partitions_lost_done()
                self._heartbeat_wake.set()
            elif isinstance(action, Fail):
                self._fail(action.error)
            elif isinstance(action, Report):
                self._report(GroupProtocolError.of(action.error))

    def _fail(self, failure: ConsumerGroupFatalError) -> None:
        error = GroupProtocolError.of(failure)
        self._fatal_error = error
        self._subscription.abort_waiters(error)

    def _report(self, error: Errors.KafkaError) -> None:
        """Raise ``error`` once: to a getone()/getmany() waiting now, else from the next call."""
        subscription = self._subscription
        if poll_waiting(subscription):
            subscription.abort_waiters(error)
        elif self._reported_error is None:
            self._reported_error = error

    # -- reconciling -------------------------------------------------------------------------

    def _name_of(self, topic_id: uuid.UUID) -> str | None:
        """The name of a topic id, if known and subscribed (a topic no longer subscribed waits for
        the broker's next assignment, which will not have it)."""
        name = self._topic_names.get(topic_id)
        subscription = self._subscription.subscription
        if name is None or subscription is None or name not in subscription.topics:
            return None
        return name

    def _resolve_later(self, topic_ids: Iterable[uuid.UUID]) -> None:
        if self._metadata_task is None or self._metadata_task.done():
            self._metadata_task = asyncio.ensure_future(self._resolve(frozenset(topic_ids)))

    async def _resolve(self, topic_ids: frozenset[uuid.UUID]) -> None:
        """Name ``topic_ids`` with a Metadata v12+ request: first for the subscribed topics, then (a
        regex subscription, or topics renamed meanwhile) for every topic."""
        subscription = self._subscription.subscription
        subscribed = sorted(subscription.topics) if subscription is not None else []
        for names in ([subscribed] if subscribed else []) + [None]:
            try:
                if await self._read_topic_ids(names) is None:
                    return
            except (Errors.KafkaError, UnsupportedApiVersion) as err:
                log.warning("group %s: naming topic ids %s failed: %r", self.group_id, sorted(map(str, topic_ids)), err)
                await asyncio.sleep(self._retry_backoff_ms / 1000)
                break
            if topic_ids <= self._topic_names.keys():
                break
        self._wake.set()

    async def _read_topic_ids(self, names: list[str] | None) -> dict[uuid.UUID, str] | None:
        """Metadata v12+ for ``names`` (None: every topic) from the coordinator's node, never creating a
        topic: the topics found, name by id, learnt in both name maps; None while no coordinator is known."""
        await self.ensure_coordinator_known()
        node = self.coordinator_id
        if node is None:
            return None
        response = await self._client.send(node, AiokafkaRequest(MetadataRequest.for_topics(names)))
        found: dict[uuid.UUID, str] = response.topic_names()
        self._topic_names.update(found)
        self._topic_ids.update({name: tid for tid, name in found.items()})
        return found

    async def _reconcile(self, rec: Reconciliation) -> None:
        member = self._member
        if rec.revoked:
            revoked = aio_partitions(rec.revoked)
            await self._revoke(revoked, commit=self._enable_auto_commit)
            if not member.still_reconciling(rec):
                return  # fenced or leaving meanwhile: what is held is lost or revoked by that path
        subscription = self._subscription.subscription
        if subscription is None:
            return
        assigned = frozenset(tp for tp in aio_partitions(rec.assigned) if tp.topic in subscription.topics)
        kept = frozenset(aio_partitions(rec.kept)) & assigned
        current = subscription.assignment
        if not (current is not None and current is self._owned_assignment and current.tps == assigned):
            self._owned_assignment = install(self._subscription, self._owned_assignment, assigned, kept)
            await self._stop_commit_offsets_refresh_task()
            self.start_commit_offsets_refresh_task(self._owned_assignment)
        self._held = assigned
        log.info(
            "group %s epoch %s: assigned %s, added %s, revoked %s",
            self.group_id,
            rec.epoch,
            sorted(rec.assigned),
            sorted(rec.added),
            sorted(rec.revoked),
        )
        await self._call_listener("on_partitions_assigned", aio_partitions(rec.added))
        before = member.state
        done = member.reconciliation_done(rec)
        self._hooks.transition(before, member)
        if done:
            self._heartbeat_wake.set()  # the acknowledgement goes out now

    async def _revoke(self, partitions: AbstractSet[AioTopicPartition], *, commit: bool) -> None:
        """Stop consuming ``partitions``, commit them (``commit``), then ``on_partitions_revoked``."""
        assignment = self._owned_assignment
        pause(assignment, partitions)
        # No longer held from here on: a leave starting meanwhile (unsubscribe) must not revoke them twice.
        self._held = self._held - partitions
        if commit and assignment is not None:
            await self._commit_revoked(assignment, partitions)
        for tp in partitions:
            self._dropped_positions.pop(tp, None)
        log.info("group %s: revoking %s", self.group_id, sorted(partitions))
        await self._call_listener("on_partitions_revoked", partitions)

    def _revoked_offsets(self, assignment: Any, partitions: AbstractSet[AioTopicPartition]) -> dict[Any, Any]:
        # A partition of a dropped topic is no longer in aiokafka's assignment: its position was kept aside.
        offsets = super()._revoked_offsets(assignment, partitions)
        offsets.update({tp: o for tp, o in self._dropped_positions.items() if tp in partitions})
        return offsets

    def _retry_revocation_commit(self, err: Errors.KafkaError) -> bool:
        # A stale epoch is retried with the newest one, as Java does while revoking.
        return bool(err.retriable) or isinstance(err, StaleMemberEpochError)

    async def _lose_held(self) -> None:
        """Drop everything held, uncommitted: ``on_partitions_lost`` (``on_partitions_revoked`` for a
        listener without it)."""
        lost, self._held = self._held, frozenset()
        self._dropped_positions.clear()  # lost partitions are never committed
        subscription = self._subscription.subscription
        if subscription is not None and self._subscription.partitions_auto_assigned():
            pause(self._owned_assignment, lost)
            self._owned_assignment = install(self._subscription, self._owned_assignment, (), ())
        if not lost:
            return
        log.warning("group %s: lost %s (the member is out of the group)", self.group_id, sorted(lost))
        listener = self._subscription.listener
        method = "on_partitions_lost" if hasattr(listener, "on_partitions_lost") else "on_partitions_revoked"
        await self._call_listener(method, lost)

    async def _call_listener(self, method: str, partitions: Iterable[AioTopicPartition]) -> None:
        error = await call_listener(
            self._subscription.listener,
            method,
            partitions,
            group_id=self.group_id,
            rebalance_timeout_s=self._member.rebalance_timeout_ms / 1000,
        )
        if error is not None and self._listener_error is None:
            self._listener_error = error

    def check_errors(self) -> None:
        """aiokafka's checks, then a fatal group error (every time: the membership is over), then a
        reported one (TOPIC_AUTHORIZATION_FAILED, once), then a pending listener exception (once)."""
        super().check_errors()
        if self._fatal_error is not None:
            raise self._fatal_error
        if self._reported_error is not None:
            reported, self._reported_error = self._reported_error, None
            raise reported
        if self._listener_error is not None:
            exc, self._listener_error = self._listener_error, None
            raise exc

    # -- heartbeats --------------------------------------------------------------------------

    async def _heartbeat_loop(self) -> None:
        member = self._member
        last_sent = float("-inf")
        while True:
            self._check_poll_timer()
            delay = member.heartbeat_delay(time.monotonic() - last_sent)
            if delay is None or delay > 0:
                wait = _IDLE_CHECK_S if delay is None else min(delay, _IDLE_CHECK_S)
                self._heartbeat_wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._heartbeat_wake.wait(), wait)
                continue
            try:
                await self.ensure_coordinator_known()
            except Errors.GroupAuthorizationFailedError as err:
                # FindCoordinator refused (no Describe on the group): Java reports it and keeps looking
                # the coordinator up after the backoff, so an ACL added later is picked up.
                self._report(
                    GroupAuthorizationFailed(
                        f"group {self.group_id}: FindCoordinator: GROUP_AUTHORIZATION_FAILED",
                        "GROUP_AUTHORIZATION_FAILED",
                    )
                )
                log.error("group %s: not authorized to find the coordinator (%s); retrying", self.group_id, err)
                member.on_heartbeat_failure("FindCoordinator: GROUP_AUTHORIZATION_FAILED")
                last_sent = time.monotonic()
                continue
            if self.coordinator_id is None and not self.closing:
                continue
            member.broker = self._describe_node(self.coordinator_id)
            before = member.state
            request = member.build_heartbeat()
            self._hooks.transition(before, member)  # acknowledging may go back to reconciling
            if request is None:
                continue
            last_sent = time.monotonic()
            actions = await self._send_heartbeat(request)
            for action in actions:
                if isinstance(action, FindCoordinator):
                    self.coordinator_dead()  # looked up again before the next heartbeat, which goes at once
                elif isinstance(action, Backoff):
                    pass  # the member's heartbeat_delay says when the retry is due
                else:
                    self._pending.append(action)
            self._wake.set()  # a new target, a loss or a failure for the coordination routine

    async def _send_heartbeat(self, request: ConsumerGroupHeartbeatRequest) -> list[Action]:
        member = self._member
        log.debug("group %s: heartbeat %s", self.group_id, request)
        sent = time.monotonic()
        try:
            response = await self._send_req(AiokafkaRequest(request))
        except UnsupportedApiVersion as err:
            self._hooks.heartbeat_unanswered((time.monotonic() - sent) * 1000, err, member.member_epoch)
            return member.on_unsupported_version(str(err))
        except Errors.KafkaError as err:
            self._hooks.heartbeat_unanswered((time.monotonic() - sent) * 1000, err, member.member_epoch)
            if request.member_epoch < 0:
                return []  # a leave is sent once
            return member.on_heartbeat_failure(repr(err))
        error = ERROR_NAMES.get(response.error_code, f"ERROR_{response.error_code}") if response.error_code else None
        self._hooks.heartbeat_answered((time.monotonic() - sent) * 1000, error, member.member_epoch)
        before, epoch = member.state, member.member_epoch
        actions = member.on_heartbeat_response(response)
        self._hooks.transition(before, member)
        if member.member_epoch != epoch:
            self._membership_moved()  # a commit waiting for a newer epoch goes again
        return actions

    def _check_poll_timer(self) -> None:
        """Leave when the application stopped polling for longer than ``max_poll_interval_ms`` (its
        partitions are lost); join again when it polls."""
        idle = self._subscription.fetcher_idle_time
        if self._member.state is MemberState.STALE:
            if idle < self._max_poll_interval:
                log.info("group %s: polling again; rejoining", self.group_id)
                self._member.poll_resumed()
        elif self._member.in_group and idle >= self._max_poll_interval:
            log.warning(
                "group %s: %.1f s without getmany()/getone(), more than max_poll_interval_ms=%d: member %s "
                "leaves the group, its partitions %s are lost (on_partitions_lost, not committed) and it "
                "rejoins on its next getmany(); raise max_poll_interval_ms or lower max_poll_records if "
                "processing takes this long",
                self.group_id,
                idle,
                round(self._max_poll_interval * 1000),
                self._member.member_id,
                sorted(self._held),
            )
            self._pending.extend(self._member.poll_timer_expired())
            self._wake.set()

    def _describe_node(self, node_id: Any) -> str:
        meta = self._client.cluster.broker_metadata(node_id) if node_id is not None else None
        return f"node {node_id} ({meta.host}:{meta.port})" if meta is not None else f"node {node_id}"

    # -- leaving -----------------------------------------------------------------------------

    async def close(self) -> None:
        await super().close()  # ends the coordination routine (last auto-commit), then leaves
        await self._stop_task(self._metadata_task)
        await self._stop_task(self._heartbeat_loop_task)

    @staticmethod
    async def _stop_task(task: asyncio.Task[None] | None) -> None:
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _maybe_leave_group(self) -> None:
        """Leave (close, unsubscribe): revoke (or lose) everything, then one leave heartbeat, epoch -1
        (a static member: -2)."""
        await self._do_pending()
        actions = self._member.leave()
        for action in actions:
            if isinstance(action, LosePartitions):
                self._membership_ended(action.reason)
                await self._lose_held()
            elif isinstance(action, RevokePartitions):
                # The coordination routine already made the last auto-commit (when closing); an
                # unsubscribe commits through the listener, as the application decides.
                await self._revoke(self._held, commit=False)
        if self._held:
            await self._lose_held()
        self._member.leave_prepared()
        self._membership_ended("it left the group")
        # Built here, at once: the leave goes even while the heartbeat task waits for an answer (as
        # Java), so a slow coordinator cannot make a close with a deadline miss it.
        request = self._member.build_heartbeat()
        if request is None:
            return
        try:
            await asyncio.wait_for(self._send_leave(request), _LEAVE_WAIT_S)
        except TimeoutError:
            log.warning("group %s: the leave heartbeat was not answered within %.0f s", self.group_id, _LEAVE_WAIT_S)
            return
        log.info("group %s: member %s left the group", self.group_id, self._member.member_id)

    async def _send_leave(self, request: ConsumerGroupHeartbeatRequest) -> None:
        try:
            await self.ensure_coordinator_known()
        except Errors.KafkaError as err:
            log.warning("group %s: no coordinator to send the leave to: %r", self.group_id, err)
            return
        if self.coordinator_id is not None:
            self._pending.extend(await self._send_heartbeat(request))

    # -- commits -----------------------------------------------------------------------------
    # A commit carries the member epoch it is sent with. The broker moves a member to a new epoch
    # when it reaches a new target (often keeping every partition it had), and answers a commit sent
    # with the previous epoch STALE_MEMBER_EPOCH. Java's commitSync raises CommitFailedException then;
    # here, as on the classic protocol, the commit waits for the heartbeat that brings the new epoch
    # (sent at once) and goes out again for the partitions the member held throughout.

    def _met_rebalance(self, err: Errors.KafkaError) -> bool:
        return isinstance(err, (StaleMemberEpochError, Errors.UnknownMemberIdError))

    def _commit_issued_under(self) -> tuple[int, int]:
        return self._member.member_epoch, self._member.ownership_mark

    def _out_of_group(self) -> bool:
        # The membership ended (left after max_poll_interval_ms, fenced) and the member is not back yet.
        return not self._member.in_group and self._lost_cause is not None

    async def _commit_after_rebalance(
        self,
        exc: Errors.KafkaError,
        offsets: Mapping[Any, Any],
        *,
        issued_after: int,
        issued_under: Any,
        sent_under: Any,
        consumed: bool,
        refused: Exception | None,
        rebalance_met_at: float,
    ) -> tuple[Mapping[Any, Any], Exception | None]:
        issued_epoch, issued_mark = issued_under
        sent_epoch, _ = sent_under
        if isinstance(exc, Errors.UnknownMemberIdError) or self._resets != issued_after or issued_epoch <= 0:
            raise self._membership_lost_error() from exc
        await self._wait_for_newer_epoch(sent_epoch, issued_after, exc, rebalance_met_at)
        held, gone = self._member.held_since(issued_mark, kassign_partitions(offsets))
        held_aio = frozenset(aio_partitions(held)) & self._held  # not those being revoked right now
        gone_aio = frozenset(aio_partitions(gone)) | (frozenset(aio_partitions(held)) - held_aio)
        return self._keep_held(
            offsets,
            held_aio,
            gone_aio,
            consumed=consumed,
            refused=refused,
            now_under=f"member epoch {self._member.member_epoch}",
        )

    async def _wait_for_newer_epoch(
        self, sent_epoch: int, issued_after: int, exc: Errors.KafkaError, rebalance_met_at: float
    ) -> None:
        """Until the heartbeat brought an epoch newer than ``sent_epoch`` (the STALE_MEMBER_EPOCH answer
        woke it); at most the rebalance timeout from ``rebalance_met_at``, then aiokafka's retriable
        RebalanceInProgressError."""
        deadline = rebalance_met_at + self._member.rebalance_timeout_ms / 1000
        while not (self._member.in_group and self._member.member_epoch > sent_epoch):
            if self._resets != issued_after:
                raise self._membership_lost_error() from exc
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self.closing:
                raise rebalance_in_progress(
                    f"group {self.group_id}: commit answered STALE_MEMBER_EPOCH (sent at epoch {sent_epoch}) and no "
                    f"newer epoch came within {self._member.rebalance_timeout_ms} ms; commit again after the next "
                    "getmany()"
                ) from exc
            self._heartbeat_wake.set()
            await self._wait_membership_moved(min(remaining, self._retry_backoff_ms / 1000 * 10))

    async def _do_commit_offsets(self, assignment: Any, offsets: Mapping[Any, Any]) -> None:
        """OffsetCommit v9+ with this member's id and epoch: the broker refuses it once the member is
        fenced (UNKNOWN_MEMBER_ID) or its epoch moved on (STALE_MEMBER_EPOCH).

        An owned topic is named by the id the member owns it under. A topic leaving the member (its id
        gone from the target) may have been deleted and created again under its name: by id (version
        10) the broker refuses the old topic's offsets; a broker that commits only by name (Kafka
        before 4.2) gets them only while the metadata still gives the name the owned id."""
        offsets = await self._offsets_of_live_topics(offsets)
        if not offsets:
            return
        identity = self._member.commit_identity()
        if identity is None:
            raise Errors.CommitFailedError(
                f"group {self.group_id}: member {self._member.member_id} has no epoch to commit with "
                f"(state {self._member.state.name}); its partitions may already be another member's"
            )
        owned_ids = self._member.owned_topic_ids
        topic_ids = {tp.topic: owned_ids.get(tp.topic) or self._topic_ids.get(tp.topic) for tp in offsets}
        leaving_ids = self._member.leaving_topic_ids  # a property computed afresh: once per commit
        leaving = {topic for topic in topic_ids if owned_ids.get(topic) in leaving_ids}
        try:
            if leaving and all(topic_ids.values()):
                try:
                    response = await self._send_commit(offsets, topic_ids, identity, by_id=True)
                except UnsupportedApiVersion:
                    response = None  # OffsetCommit v9 at most: by name
                if response is not None:
                    self._raise_commit_errors(response, deleted_ok=leaving)
                    return
            if leaving:
                offsets = await self._offsets_still_named(offsets, leaving)
                if not offsets:
                    return
            self._raise_commit_errors(
                await self._send_commit(offsets, topic_ids, identity, by_id=None if all(topic_ids.values()) else False)
            )
        except UnsupportedApiVersion as err:
            raise Errors.UnsupportedVersionError(f"OffsetCommit v9+ (member epochs): {err}") from err

    async def _send_commit(
        self,
        offsets: Mapping[Any, Any],
        topic_ids: Mapping[str, uuid.UUID | None],
        identity: tuple[str, int],
        *,
        by_id: bool | None,
    ) -> Any:
        """One OffsetCommit of ``offsets``: by topic id (version 10) when ``by_id``, by name (version 9)
        when False, the highest version the broker has when None."""
        member_id, epoch = identity
        by_topic: dict[str, list[OffsetCommitRequestPartition]] = collections.defaultdict(list)
        for tp, offset in offsets.items():
            by_topic[tp.topic].append(OffsetCommitRequestPartition(tp.partition, offset.offset, -1, offset.metadata))
        request = OffsetCommitRequest(
            self.group_id,
            epoch,
            member_id,
            self._member.instance_id,
            [
                OffsetCommitRequestTopic(
                    topic, topic_ids.get(topic) or ZERO_UUID, sorted(parts, key=lambda p: p.partition_index)
                )
                for topic, parts in sorted(by_topic.items())
            ],
        )
        log.debug("group %s: committing %s at epoch %s", self.group_id, offsets, epoch)
        return await self._send_req(
            AiokafkaRequest(request, min_version=10 if by_id else None, max_version=9 if by_id is False else None)
        )

    def _raise_commit_errors(self, response: Any, *, deleted_ok: AbstractSet[str] = frozenset()) -> None:
        """The first partition error of an OffsetCommit answer, raised; UNKNOWN_TOPIC_ID for a topic of
        ``deleted_ok`` (leaving the member, committed by id) only says the topic was deleted."""
        errors: list[Errors.KafkaError] = []
        deleted: list[str] = []
        for topic in response.topics:
            name = topic.name or self._topic_names.get(topic.topic_id, str(topic.topic_id))
            for part in topic.partitions:
                if ERROR_NAMES.get(part.error_code) == "UNKNOWN_TOPIC_ID" and name in deleted_ok:
                    deleted.append(f"{name}-{part.partition_index}")
                elif part.error_code:
                    errors.append(self._commit_error(name, part.partition_index, part.error_code))
        if deleted:
            log.warning("group %s: not committed %s: their topic was deleted", self.group_id, deleted)
        if errors:
            raise errors[0]

    async def _offsets_still_named(self, offsets: Mapping[Any, Any], topics: AbstractSet[str]) -> Mapping[Any, Any]:
        """``offsets`` less those of ``topics`` whose names the metadata no longer gives the id this
        member owns them under (deleted, perhaps created again): committed by name, they would land
        on whatever topic has the name now."""
        found = await self._read_topic_ids(sorted(topics))
        if found is None:
            raise Errors.CoordinatorNotAvailableError(self.group_id)
        now = {name: tid for tid, name in found.items()}
        return self._without_topics_gone(offsets, {topic: now.get(topic) for topic in topics})

    async def _offsets_of_live_topics(self, offsets: Mapping[Any, Any]) -> Mapping[Any, Any]:
        """``offsets`` less those of a topic deleted and created again under its name: owned under one
        id while the metadata names another. Their topic is gone, and by name (OffsetCommit v9, Kafka
        before 4.2) they would land on the new topic, whose first records would then never be read.
        A target naming topic ids not yet known may hold such a new topic, so those are named first."""
        pending = self._member.unresolved_topic_ids - self._topic_names.keys()
        if pending:
            self._resolve_later(pending)
            if self._metadata_task is not None:
                await asyncio.wait([self._metadata_task])
        return self._without_topics_gone(offsets, self._topic_ids)

    def _without_topics_gone(
        self, offsets: Mapping[Any, Any], named: Mapping[str, uuid.UUID | None]
    ) -> Mapping[Any, Any]:
        """``offsets`` less those of owned topics whose names have another id now (``named``: the id
        of each name the metadata answered for, None for no such topic)."""
        owned = self._member.owned_topic_ids
        gone = {
            tp.topic for tp in offsets if tp.topic in owned and tp.topic in named and named[tp.topic] != owned[tp.topic]
        }
        if not gone:
            return offsets
        log.warning(
            "group %s: not committing %s: %s deleted (the offsets were the old topic's)",
            self.group_id,
            sorted(tp for tp in offsets if tp.topic in gone),
            ", ".join(f"{topic} (id {owned[topic]})" for topic in sorted(gone)),
        )
        return {tp: offset for tp, offset in offsets.items() if tp.topic not in gone}

    async def _do_fetch_commit_offsets(self, partitions: Iterable[Any]) -> dict[Any, Any]:
        """OffsetFetch v9+ as Java's consumer sends it: with this member's id and epoch while it is in
        the group (the broker refuses a fetch from a stale epoch, retried once the heartbeat has
        caught up, or from a member it no longer has) and ``require_stable`` (offsets of pending
        transactional commits are waited for, UNSTABLE_OFFSET_COMMIT retried)."""
        by_topic: dict[str, list[int]] = collections.defaultdict(list)
        for tp in partitions:
            by_topic[tp.topic].append(tp.partition)
        identity = self._member.commit_identity()
        member_id, epoch = identity if identity is not None else (None, -1)
        ids_known = all(topic in self._topic_ids for topic in by_topic)
        request = OffsetFetchRequest(
            [
                OffsetFetchRequestGroup(
                    self.group_id,
                    member_id,
                    epoch,
                    [
                        OffsetFetchRequestTopics(topic, self._topic_ids.get(topic, ZERO_UUID), sorted(parts))
                        for topic, parts in sorted(by_topic.items())
                    ],
                )
            ],
            require_stable=True,
        )
        try:
            # Version 10 names topics by id: only when every id is known.
            response = await self._send_req(AiokafkaRequest(request, max_version=None if ids_known else 9))
        except UnsupportedApiVersion as err:
            raise Errors.UnsupportedVersionError(f"OffsetFetch v9+ (member epochs): {err}") from err
        offsets: dict[Any, Any] = {}
        for group in response.groups:
            if group.error_code:
                raise self._fetch_error(group.error_code)
            for topic in group.topics:
                name = topic.name or self._topic_names.get(topic.topic_id, str(topic.topic_id))
                for part in topic.partitions:
                    if part.error_code == Errors.UnknownTopicOrPartitionError.errno:
                        log.warning(
                            "group %s: OffsetFetch: unknown partition %s-%s", self.group_id, name, part.partition_index
                        )
                        continue
                    if part.error_code:
                        raise self._fetch_error(part.error_code)
                    if part.committed_offset >= 0:
                        offsets[AioTopicPartition(name, part.partition_index)] = OffsetAndMetadata(
                            part.committed_offset, part.metadata or ""
                        )
        return offsets

    def _fetch_error(self, code: int) -> Errors.KafkaError:
        """An OffsetFetch error as aiokafka's fetch loop expects it: retriable ones are retried."""
        return self._member_request_error(
            code, StaleMemberEpochFetch(f"group {self.group_id}: OffsetFetch with a stale member epoch")
        )

    def _commit_error(self, topic: str, partition: int, code: int) -> Errors.KafkaError:
        log.error(
            "group %s: committing %s-%s failed: %s", self.group_id, topic, partition, ERROR_NAMES.get(code) or code
        )
        return self._member_request_error(
            code, StaleMemberEpochError(f"group {self.group_id}: {topic}-{partition}: stale member epoch")
        )

    def _member_request_error(self, code: int, stale: Errors.KafkaError) -> Errors.KafkaError:
        """The error of a request that carried this member's epoch (OffsetCommit, OffsetFetch):
        ``stale`` for STALE_MEMBER_EPOCH (and the heartbeat goes at once, to learn the current epoch)."""
        name = ERROR_NAMES.get(code)
        if name == "STALE_MEMBER_EPOCH":
            self._heartbeat_wake.set()
            return stale
        if name == "UNKNOWN_MEMBER_ID":
            return Errors.UnknownMemberIdError(self.group_id)
        if name in ("NOT_COORDINATOR", "COORDINATOR_NOT_AVAILABLE"):
            self.coordinator_dead()
        if code == Errors.GroupAuthorizationFailedError.errno:
            return Errors.GroupAuthorizationFailedError(self.group_id)
        return Errors.for_code(code)()
