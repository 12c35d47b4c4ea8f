"""kassign's group coordinator for aiokafka: full subscriptions and the cooperative protocol (KIP-429).

It replaces the parts of aiokafka's ``GroupCoordinator`` that decide what a member sends, what the
leader computes and what a member does with its assignment, as Java's ConsumerCoordinator does.
The decisions are :class:`kassign.membership.ClassicMember`'s (the rules the simulator runs too);
this module carries them out with aiokafka's requests, fetch state and listener calls:

* JoinGroup carries one v3 subscription per assignor (topics, user data, owned partitions,
  generation, rack), all protocols in a single request;
* the leader decodes every member's full subscription with kassign's codecs, runs the chosen
  assignor and, under the cooperative protocol, refuses assignments that hand a partition to one
  member while another still owns it;
* COOPERATIVE (every assignor supports it): the member keeps its partitions through the rebalance,
  revokes only ``owned - assigned`` after SyncGroup (committing them first when auto-commit is on),
  adds only ``assigned - owned`` keeping the positions of what it kept, and rejoins at once when it
  revoked something so the follow-up rebalance hands the freed partitions out;
* EAGER: everything is revoked before joining, as aiokafka does;
* partitions lost to a generation reset (fenced, session expired) go to the listener's
  ``on_partitions_lost`` when it has one (else ``on_partitions_revoked``) and are not committed;
* a static member (``group_instance_id``) heartbeats with its instance id, so one replaced by a
  new instance is answered FENCED_INSTANCE_ID (to a Heartbeat, JoinGroup or SyncGroup): it loses its
  partitions, never rejoins, and every ``getmany()``/``getone()`` raises
  :class:`FencedInstanceIdError` (as Java's poll does);
* ILLEGAL_GENERATION (Heartbeat, SyncGroup) resets the generation and keeps the member id, as Java
  (KAFKA-13419); a dynamic member with a member id leaves on close, even before its first generation;
* a commit answered REBALANCE_IN_PROGRESS, or ILLEGAL_GENERATION for the generation the member is
  leaving through a round, waits for that round (at most the rebalance timeout) and goes out again
  under the new generation for the partitions held throughout (``ClassicMember.held_since``), where
  Java raises RebalanceInProgressException for the application to retry after ``poll()``; a member
  that really lost its generation gets ``CommitFailedError`` naming why (session expired,
  max_poll_interval_ms exceeded, fenced by a newer instance);
* a member whose application has not polled for ``max_poll_interval_ms`` leaves as Java's does: its
  partitions are lost (``on_partitions_lost``, not committed, no longer fetched), one WARNING names
  the setting, and its next ``getmany()`` rejoins;
* a rack-aware leader (some member names its rack) rebalances when partitions' replica racks change
  (KIP-881); an assignor raising in ``on_assignment`` is reported from the next poll, the round completes;
* an assignor with group-wide state (the delayed assignor) gets it sent to every member and
  received back through ``on_assignment_user_data``; when it then asks for a rejoin after
  ``rejoin_after_s`` seconds (its delay ends) the member rejoins then, starting the follow-up round;
* a listener with ``rebalance_started(generation)`` / ``rebalance_completed(ok, generation, error)``
  hooks (kassign's telemetry listener) hears when each JoinGroup/SyncGroup round starts and ends;
* ``fast_follow_up`` (on in ``CooperativeConsumer`` by default; :mod:`kassign.membership.follow_up`): a
  leader whose assignor withheld partitions marks every assignment, and a marked member rejoins without
  waiting for its next heartbeat (once per marked generation; the leader marks at most one generation
  in a row that withholds again what the one before withheld with no new member, so a broker without
  a join barrier gets no storm).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import aiokafka.errors as Errors
from aiokafka.consumer.group_coordinator import CoordinatorGroupRebalance, GroupCoordinator
from aiokafka.coordinator.protocol import ConsumerProtocol
from aiokafka.protocol.commit import OffsetCommitRequest
from aiokafka.protocol.group import HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest, SyncGroupRequest
from aiokafka.structs import TopicPartition as AioTopicPartition

from kassign.adapters.aiokafka.commit_guard import CommitGuard, rebalance_in_progress
from kassign.adapters.aiokafka.group_protocol import (
    as_kafka_error,
    cluster_inputs,
    encode_group_assignment,
    read_member_subscriptions,
    replica_racks,
)
from kassign.adapters.aiokafka.handover import aio_partitions, call_listener, install, kassign_partitions, pause
from kassign.adapters.aiokafka.internals import close_started, wait_for_metadata
from kassign.adapters.aiokafka.listener_hooks import call_hook
from kassign.adapters.aiokafka.static_heartbeat import (
    FENCED_INSTANCE_ID,
    FencedInstanceIdError,
    InstanceHeartbeatRequest,
)
from kassign.assignors.base import PartitionAssignor
from kassign.membership import ClassicMember, InvalidAssignment, select_rebalance_protocol
from kassign.membership.classic import FATAL_FENCING_ERRORS, MEMBER_ID_KEPT_ERRORS
from kassign.model import RebalanceProtocol
from kassign.protocol import (
    AiokafkaRequest,
    MetadataRequest,
    ProtocolError,
    UnsupportedApiVersion,
    decode_assignment,
    encode_subscription,
)

log = logging.getLogger(__name__)

__all__ = ["KassignGroupCoordinator"]

_NO_MEMBER_ID = JoinGroupRequest.UNKNOWN_MEMBER_ID
# A round that failed with these rejoins at once, as Java's joinGroupIfNeeded does; aiokafka waits
# retry_backoff_ms after any failed round. A SyncGroup answered REBALANCE_IN_PROGRESS (another
# member's JoinGroup opened the next round first) is the common one: the next round's barrier waits
# for this member, so the backoff delayed the whole group (100 ms in 3 of 10 six-member scale-outs).
# Java's list also has MEMBER_ID_REQUIRED, which never ends a round here: perform_group_join repeats
# that JoinGroup at once itself.
_REJOIN_AT_ONCE = frozenset({"REBALANCE_IN_PROGRESS", "UNKNOWN_MEMBER_ID", "ILLEGAL_GENERATION"})
_NO_GENERATION = OffsetCommitRequest.DEFAULT_GENERATION_ID
# aiokafka keys its connections by (node, group): a key of our own is a connection of our own, for
# the requests that must not queue behind a JoinGroup waiting at the join barrier on the coordinator
# connection (the broker reads one request per connection at a time).
_BESIDE_THE_JOIN = "kassign-beside-join"


def _error_name(code: int) -> str:
    """Kafka's name of an error code (aiokafka's ``for_code`` knows no FENCED_INSTANCE_ID)."""
    return "FENCED_INSTANCE_ID" if code == FENCED_INSTANCE_ID else Errors.for_code(code).message


_aio = aio_partitions


class _Rebalance(CoordinatorGroupRebalance):
    """One JoinGroup/SyncGroup round with every protocol in a single JoinGroup request."""

    #: The JoinGroup error of this round, by name (None when JoinGroup succeeded or was not answered).
    join_error: str | None = None

    async def perform_group_join(self) -> tuple[str, bytes] | None:
        coordinator: KassignGroupCoordinator = self._coordinator
        topics = self._subscription.topics
        protocols = [(assignor.name, coordinator.join_metadata(assignor, topics)) for assignor in self._assignors]
        log.info(
            "(Re-)joining group %s (%s protocol, owning %d partitions)",
            self.group_id,
            coordinator.rebalance_protocol.name,
            len(coordinator.owned_partitions),
        )
        while True:
            if coordinator.closing:
                return None  # a closing member leaves instead of joining
            request = JoinGroupRequest(
                self.group_id,
                self._session_timeout_ms,
                self._rebalance_timeout_ms,
                coordinator.member_id,
                coordinator._group_instance_id,
                ConsumerProtocol.PROTOCOL_TYPE,
                protocols,
            )
            coordinator._join_in_flight = True
            try:
                response = await coordinator._send_req(request)
            except Errors.KafkaError:
                return None  # connection trouble: the coordinator lookup backs off
            finally:
                coordinator._join_in_flight = False
            if not self._subscription.active or coordinator.closing:
                return None  # closed meanwhile: no SyncGroup, nothing installed; close() has left
            error_type = Errors.for_code(response.error_code)
            if error_type is not Errors.MemberIdRequired:
                self.join_error = _error_name(response.error_code) if error_type is not Errors.NoError else None
                break
            # KIP-394: the broker hands out the member id and wants the join repeated with it.
            coordinator.member_id = response.member_id

        if error_type is Errors.NoError:
            coordinator.member_id = response.member_id
            coordinator.generation = response.generation_id
            coordinator._membership_moved()  # a cooperative commit refused for the old generation goes again
            log.info(
                "Joined group %s (generation %s) as %s, protocol %s",
                self.group_id,
                response.generation_id,
                response.member_id,
                response.group_protocol,
            )
            if response.leader_id == response.member_id:
                assignment_bytes = await self._on_join_leader(response)
            else:
                assignment_bytes = await self._on_join_follower()
            if assignment_bytes is None:
                return None
            return response.group_protocol, assignment_bytes
        await self._on_join_error(error_type)
        return None

    async def _on_join_error(self, error_type: type[Errors.KafkaError]) -> None:
        coordinator = self._coordinator
        if self.join_error in FATAL_FENCING_ERRORS:
            # Java: fatal whatever the generation -- another instance now holds this instance id.
            raise coordinator.fenced_instance_error()
        if error_type is Errors.GroupLoadInProgressError:
            await asyncio.sleep(self._retry_backoff_ms / 1000)
        elif error_type in (Errors.UnknownMemberIdError, Errors.IllegalGenerationError):
            log.info("JoinGroup for %s: %s, rejoining as a new member", self.group_id, error_type.__name__)
            coordinator.reset_generation()
        elif error_type in (Errors.GroupCoordinatorNotAvailableError, Errors.NotCoordinatorForGroupError):
            coordinator.coordinator_dead()
        elif error_type is Errors.RebalanceInProgressError:
            pass  # rejoin at once (see _REJOIN_AT_ONCE)
        elif error_type is Errors.GroupAuthorizationFailedError:
            raise error_type(self.group_id)
        else:
            error = error_type()
            log.error("JoinGroup for group %s failed: %r", self.group_id, error)
            raise error

    async def _send_sync_group_request(self, request: Any) -> bytes | None:
        try:
            return await super()._send_sync_group_request(request)
        except Errors.KafkaError:
            if self._coordinator._fenced:  # aiokafka reads FENCED_INSTANCE_ID as an unknown error
                raise self._coordinator.fenced_instance_error() from None
            raise


class KassignGroupCoordinator(CommitGuard, GroupCoordinator):
    """aiokafka's GroupCoordinator with kassign's subscriptions, leader and (when every assignor
    supports it) the incremental cooperative rebalance protocol.

    ``assignors`` are kassign assignor instances belonging to this consumer alone.
    """

    # Set by aiokafka's GroupCoordinator (untyped) or reset here.
    generation: int
    _group_subscription: set[str] | None

    def __init__(
        self,
        client: Any,
        subscription: Any,
        *,
        assignors: Sequence[PartitionAssignor],
        client_rack: str | None = None,
        fast_follow_up: bool = False,
        **kwargs: Any,
    ) -> None:
        self._protocol = select_rebalance_protocol(assignors)
        self._client_rack = client_rack
        self._init_member_state(fast_follow_up)
        super().__init__(client, subscription, assignors=tuple(assignors), **kwargs)

    def _init_member_state(self, fast_follow_up: bool = False) -> None:
        """kassign's own member state, as a new member has it (also used by tests that skip the network)."""
        # The member's rules and what it owns (kassign.membership). What it owns is tracked apart from
        # aiokafka's subscription because a subscription change drops aiokafka's assignment while a
        # cooperative member keeps consuming what is still subscribed.
        self._member = ClassicMember(self._protocol, fast_follow_up=fast_follow_up)
        self._init_commit_guard()
        # The aiokafka Assignment holding the owned partitions' positions.
        self._owned_assignment: Any = None
        self._commit_sent_as: tuple[int, str] | None = None
        self._commit_response_for: tuple[int, str] | None = None
        self._commit_reset_wanted = False
        self._joining = False
        # The assignor's requested rejoin (its delay ending), pending until it fires or a new
        # assignment, leaving or closing replaces it.
        self._scheduled_rejoin: asyncio.TimerHandle | None = None
        self._fenced = False  # a replaced static member: final
        self._fenced_out = False  # fenced and its partitions given up: every poll raises FencedInstanceIdError
        # Set by _send_req from an ILLEGAL_GENERATION answer, read by the reset_generation aiokafka calls next.
        self._member_id_kept = False
        # Leader: whether the last assignment was rack-aware (some member named its rack), so that the
        # metadata snapshot also watches the racks of the partitions' replicas (KIP-881).
        self._rack_aware = False
        self._leave_in_flight: asyncio.Future[None] | None = None
        self._beside_opening: asyncio.Future[bool] | None = None  # see _open_beside_the_join
        self._join_in_flight = False  # a JoinGroup sent and not answered (waiting at the join barrier)
        self._sync_error: str | None = None  # the error answering this round's SyncGroup (set by _send_req)
        self._listener_error: Exception | None = None  # raised from the next getmany()/getone()
        # The owned topics' ids, read beside aiokafka's metadata (see _check_topic_ids).
        self._topic_ids_task: asyncio.Future[None] | None = None
        self._topic_ids_stale = False  # a metadata update came while a read was in flight
        self._topic_ids_unsupported = False  # the brokers answer no Metadata v12+ (Kafka < 3.1)
        self._in_round = False  # from JoinGroup to the end of the assignment's listener calls

    @property
    def closing(self) -> bool:
        """Whether ``close()`` has begun."""
        return close_started(self)

    @property
    def rebalance_protocol(self) -> RebalanceProtocol:
        """EAGER or COOPERATIVE: the most capable protocol all of this consumer's assignors support."""
        return self._protocol

    @property
    def owned_partitions(self) -> frozenset[AioTopicPartition]:
        """The partitions this member owns right now (kept through cooperative rebalances)."""
        return frozenset(_aio(self._member.owned))

    def join_metadata(self, assignor: PartitionAssignor, topics: Iterable[str]) -> bytes:
        """This member's JoinGroup metadata for one protocol."""
        topics = set(topics)
        return encode_subscription(
            self._member.subscription(topics, assignor.subscription_user_data(topics), rack=self._client_rack)
        )

    # -- joining ---------------------------------------------------------------------------

    def _generation_reset(self) -> bool:
        return self.generation < 0 or self.member_id == _NO_MEMBER_ID

    async def _on_join_prepare(self, previous_assignment: Any) -> None:
        self._group_subscription = None
        await self._maybe_lose_partitions()
        if self._protocol is RebalanceProtocol.EAGER:
            self._subscription.begin_reassignment()
        # Eager: revoke everything; cooperative: keep everything still subscribed, revoke the rest now.
        preparation = self._member.prepare_join(self._subscription.topics)
        if preparation.revoked:
            await self._revoke_partitions(_aio(preparation.revoked))
        subscription = self._subscription.subscription
        owned = self.owned_partitions
        if owned and subscription is not None and subscription.assignment is None:
            # The subscription changed, which drops aiokafka's assignment: go on consuming what
            # is kept while the group rebalances.
            self._install(owned, carried=owned)

    async def _maybe_lose_partitions(self) -> None:
        if self._member.owned and self._generation_reset():
            await self._lose_partitions(_aio(self._member.lose_all()))
            self._fetch_only_owned()

    async def _do_rejoin_group(self, subscription: Any) -> bool:
        self._in_round = True
        try:
            return await self._join_and_sync(subscription)
        finally:
            self._in_round = False
            # Topic ids read during the round wait for it: a loss applied while the round hands out
            # the same partitions by name would carry the old topic's positions into the new one.
            if not self.closing and (self._topic_ids_stale or self._member.topics_without_ids):
                self._check_topic_ids()

    async def _join_and_sync(self, subscription: Any) -> bool:
        await self._maybe_lose_partitions()
        rebalance = _Rebalance(
            self,
            self.group_id,
            self.coordinator_id,
            subscription,
            self._assignors,
            self._session_timeout_ms,
            self._retry_backoff_ms,
        )
        self._joining = True
        self._sync_error = None
        self._call_hook("rebalance_started", self.generation if self.generation >= 0 else None)
        try:
            result = await rebalance.perform_group_join()
        except Exception as exc:
            self._call_hook("rebalance_completed", False, None, exc)
            if isinstance(exc, FencedInstanceIdError):
                await self._fence()
            raise
        finally:
            self._joining = False
        if not subscription.active:
            self._call_hook("rebalance_completed", False, None, "subscription changed during the rebalance")
            log.debug("subscription changed during the rebalance of group %s; rejoining", self.group_id)
            return False
        if result is None:
            failure = rebalance.join_error or self._sync_error
            self._call_hook("rebalance_completed", False, None, failure)
            if failure not in _REJOIN_AT_ONCE:
                await asyncio.sleep(self._retry_backoff_ms / 1000)
            return False
        self._call_hook("rebalance_completed", True, self.generation, None)
        protocol, assignment_bytes = result
        await self._on_join_complete(self.generation, self.member_id, protocol, assignment_bytes)
        self._open_beside_the_join()
        return True

    def _open_beside_the_join(self) -> None:
        """Open (or keep) the connection for requests sent beside a pending JoinGroup, in the
        background, now that a round has completed. Opened on first use, it was opened inside the
        next round, when every member of a large group wants the machine at once: at 24 members a
        moved partition waited 0.25 s instead of 0.16 s (docs/scale.md). Called again after every
        heartbeat answered without error: an open connection is kept at no cost, a closed one (idle,
        or lost) opens again between rounds."""
        if self.coordinator_id is None or (self._beside_opening is not None and not self._beside_opening.done()):
            return
        self._beside_opening = asyncio.ensure_future(self._client.ready(self.coordinator_id, group=_BESIDE_THE_JOIN))

    def _call_hook(self, name: str, *args: Any) -> None:
        """Call the listener's telemetry hook ``name`` if it has one; its failures are only logged."""
        call_hook(self._subscription.listener, name, *args, group_id=self.group_id)

    # -- leader ----------------------------------------------------------------------------

    async def _perform_assignment(self, response: Any) -> dict[str, bytes]:
        assignor = self._lookup_assignor(response.group_protocol)
        if assignor is None:
            raise Errors.KafkaError(
                f"group {self.group_id} chose protocol {response.group_protocol!r}, which this consumer did not offer"
            )
        subscriptions, unreadable = read_member_subscriptions(response.members)
        all_topics = {topic for sub in subscriptions.values() for topic in sub.topics}
        # The leader watches every topic the group subscribes to, so metadata changes reach it.
        self._group_subscription = all_topics
        if not self._subscription.subscribed_pattern:
            self._client.set_topics(all_topics)
        await wait_for_metadata(self._client)
        partitions_per_topic, racks = cluster_inputs(self._cluster, subscriptions)
        self._rack_aware = any(sub.rack_id for sub in subscriptions.values())
        try:
            decision = self._member.lead(
                assignor,
                partitions_per_topic,
                subscriptions,
                self.generation,
                unreadable=unreadable,
                partition_racks=racks,
            )
        except InvalidAssignment as exc:
            raise as_kafka_error(exc) from exc
        self._metadata_snapshot = self._get_metadata_snapshot()
        return encode_group_assignment(decision)

    def _get_metadata_snapshot(self) -> Any:
        """What the leader watches for a rebalance: partitions per subscribed topic (aiokafka's) and,
        when the assignment was rack-aware, the racks of every partition's replicas (KIP-881, as Java's
        ``MetadataSnapshot``), so that a reassignment of replicas across racks rebalances the group.

        Java watches racks when the leader itself has a rack; kassign when any member does, because
        that is when its leader hands racks to the assignor (a rack-less leader may lead racked members).
        """
        counts = super()._get_metadata_snapshot()
        if not self._rack_aware:
            return counts
        return counts, replica_racks(self._cluster, counts)

    # -- a topic deleted and created again --------------------------------------------------

    def _handle_metadata_update(self, cluster: Any) -> None:
        super()._handle_metadata_update(cluster)
        self._check_topic_ids()

    def _check_topic_ids(self) -> None:
        """Read the ids of the topics this member owns partitions of, in the background, for
        :meth:`ClassicMember.topic_ids_seen`: a topic deleted and created again under its name keeps
        its partition count as often as not, so neither aiokafka's metadata snapshot (partition counts,
        as Java's) nor the assignment (names) can tell, and the member would go on with the old topic's
        positions -- past the new topic's records, or before them. aiokafka's Metadata (v5 and older)
        has no ids, so they are read with Metadata v12+, after every metadata update aiokafka makes and
        after a round that gave partitions of a topic whose id is not yet known."""
        if self._topic_ids_unsupported or not self._member.owned:
            return
        if self._in_round or (self._topic_ids_task is not None and not self._topic_ids_task.done()):
            self._topic_ids_stale = True
            return
        self._topic_ids_task = asyncio.ensure_future(self._read_topic_ids())

    async def _read_topic_ids(self) -> None:
        self._topic_ids_stale = True
        while self._topic_ids_stale and self._member.owned and self.coordinator_id is not None:
            self._topic_ids_stale = False
            topics = sorted({tp.topic for tp in self._member.owned})
            try:
                response = await self._client.send(
                    self.coordinator_id, AiokafkaRequest(MetadataRequest.for_topics(topics))
                )
            except UnsupportedApiVersion as err:
                log.info(
                    "group %s: no topic ids from the brokers (%s); a topic re-created is not noticed",
                    self.group_id,
                    err,
                )
                self._topic_ids_unsupported = True
                return
            except Errors.KafkaError as err:
                log.debug("group %s: reading topic ids of %s failed: %r", self.group_id, topics, err)
                return  # the next metadata update reads them again
            if self._in_round:
                self._topic_ids_stale = True  # read again once the round is over
                return
            lost = self._member.topic_ids_seen({name: tid for tid, name in response.topic_names().items()})
            if lost:
                log.warning(
                    "group %s: %s deleted and created again (a new topic id): lost %s; rejoining",
                    self.group_id,
                    sorted({tp.topic for tp in lost}),
                    sorted(lost),
                )
                await self._lose_partitions(_aio(lost), logged=True)
                self._fetch_only_owned()
                self.request_rejoin()

    # -- after SyncGroup -------------------------------------------------------------------

    async def _on_join_complete(
        self, generation: int, member_id: str, protocol: str, member_assignment_bytes: bytes
    ) -> None:
        assignor = self._lookup_assignor(protocol)
        if assignor is None:
            raise Errors.KafkaError(
                f"group {self.group_id} chose protocol {protocol!r}, which this consumer did not offer"
            )
        try:
            received = decode_assignment(member_assignment_bytes)
        except ProtocolError as exc:
            raise Errors.KafkaError(f"group {self.group_id}: unreadable assignment from the leader: {exc}") from exc
        outcome = self._member.on_sync(generation, received, self._subscription.topics, assignor)
        # The member knows what it owns: commits that met this rebalance complete for what it kept.
        self._rounds_completed += 1
        self._membership_moved()
        if outcome.assignor_error is not None and self._listener_error is None:
            # As a listener's: raised from the next getmany()/getone(), once the round is complete.
            self._listener_error = outcome.assignor_error
        if outcome.reschedule:
            self._reschedule_rejoin(assignor, outcome.rejoin_after_s)
        if outcome.revoked:
            await self._revoke_partitions(_aio(outcome.revoked))

        current = self._subscription.subscription.assignment
        if (
            self._protocol is RebalanceProtocol.COOPERATIVE
            and not outcome.changed
            and self._owned_assignment is not None
            and current is self._owned_assignment
        ):
            # Nothing changed for this member: a new aiokafka Assignment would make the fetcher drop
            # the records it prefetched for every partition and fetch them again, pausing them all.
            log.debug("group %s generation %s: assignment unchanged; fetching goes on", self.group_id, generation)
        else:
            self._install(_aio(outcome.assigned), carried=_aio(outcome.kept))
            await self._stop_commit_offsets_refresh_task()
            self.start_commit_offsets_refresh_task(self._subscription.subscription.assignment)
        log.info(
            "group %s generation %s: assigned %s, added %s, revoked %s",
            self.group_id,
            generation,
            sorted(outcome.assigned),
            sorted(outcome.added),
            sorted(outcome.revoked),
        )
        await self._call_listener("on_partitions_assigned", _aio(outcome.added))
        if outcome.rejoin is not None:
            log.info("group %s generation %s: rejoining (%s)", self.group_id, generation, outcome.rejoin)
            self.request_rejoin()

    def _reschedule_rejoin(self, assignor: PartitionAssignor, delay_s: float | None) -> None:
        """The assignor's rejoin schedule (its delay ending) replaces the previous one."""
        self._cancel_scheduled_rejoin()
        if delay_s is None:
            return
        log.info("group %s: assignor %s asks for a rebalance in %.3f s", self.group_id, assignor.name, delay_s)
        self._scheduled_rejoin = asyncio.get_running_loop().call_later(delay_s, self._scheduled_rejoin_due)

    def _scheduled_rejoin_due(self) -> None:
        self._scheduled_rejoin = None
        log.info("group %s: the assignor's delay ended; rejoining", self.group_id)
        self.request_rejoin()

    def _cancel_scheduled_rejoin(self) -> None:
        if self._scheduled_rejoin is not None:
            self._scheduled_rejoin.cancel()
            self._scheduled_rejoin = None

    def _install(self, partitions: Iterable[AioTopicPartition], *, carried: Iterable[AioTopicPartition]) -> None:
        """Make ``partitions`` the subscription's assignment, keeping the fetch state (position,
        pause, pending committed-offset requests) of the ``carried`` ones."""
        self._owned_assignment = install(self._subscription, self._owned_assignment, partitions, carried)

    # -- giving partitions up --------------------------------------------------------------

    def _fetch_only_owned(self) -> None:
        """After a loss: aiokafka fetches only what the member still owns (their fetch state kept),
        when the group assigns the subscription's partitions (not after a manual ``assign()``)."""
        if self._subscription.subscription is not None and self._subscription.partitions_auto_assigned():
            owned = self.owned_partitions
            self._install(owned, carried=owned)

    async def _revoke_partitions(self, partitions: Iterable[AioTopicPartition], *, commit: bool = True) -> None:
        """Stop consuming ``partitions`` (the membership core no longer counts them as owned), commit
        them (when ``commit`` and auto-commit are on) and tell the listener."""
        partitions = frozenset(partitions)
        assignment = self._owned_assignment
        pause(assignment, partitions)
        if commit and self._enable_auto_commit and assignment is not None:
            await self._commit_revoked(assignment, partitions)
        log.info("group %s: revoking %s", self.group_id, sorted(partitions))
        await self._call_listener("on_partitions_revoked", partitions)

    async def _lose_partitions(self, partitions: Iterable[AioTopicPartition], *, logged: bool = False) -> None:
        """Partitions that may already belong to someone else: no commit, ``on_partitions_lost``.
        ``logged``: the caller has already said why, at WARNING."""
        if not logged:
            log.warning("group %s: lost %s (generation reset)", self.group_id, sorted(partitions))
        listener = self._subscription.listener
        method = "on_partitions_lost" if hasattr(listener, "on_partitions_lost") else "on_partitions_revoked"
        await self._call_listener(method, partitions)

    async def _call_listener(self, method: str, partitions: Iterable[AioTopicPartition]) -> None:
        """Call the listener; the rebalance goes on whatever it does. As in Java and kafka-python, an
        exception it raises reaches the application from the next ``getmany()``/``getone()`` (the first
        one, if several are pending), and a slow call is warned about: the group's round waits for it."""
        error = await call_listener(
            self._subscription.listener,
            method,
            partitions,
            group_id=self.group_id,
            rebalance_timeout_s=self._rebalance_timeout_ms / 1000,
        )
        if error is not None and self._listener_error is None:
            self._listener_error = error

    def check_errors(self) -> None:
        """aiokafka's check (called by ``getmany()``/``getone()``), then a pending listener or assignor
        exception, then -- on every call, as Java's poll -- the fencing of a replaced static member."""
        super().check_errors()
        if self._listener_error is not None:
            exc, self._listener_error = self._listener_error, None
            raise exc
        if self._fenced_out:
            raise self.fenced_instance_error()

    async def close(self) -> None:
        self._cancel_scheduled_rejoin()
        for task in (self._beside_opening, self._topic_ids_task):
            if task is not None:
                task.cancel()
        early_leave = None
        if self._join_in_flight and self._group_instance_id is None:
            # As Java's close: leave at once, even with a JoinGroup in flight. aiokafka would first
            # finish the round, take the partitions it hands out, give them back and leave, forcing
            # one more rebalance on the group. The broker answers the pending JoinGroup with
            # UNKNOWN_MEMBER_ID and the coordination routine, now closing, ends.
            log.info("group %s: closing during a rebalance; leaving at once", self.group_id)
            early_leave = asyncio.ensure_future(self._maybe_leave_group())
        await super().close()  # marks the coordinator closing first, then waits for its routine
        if early_leave is not None:
            await early_leave

    async def _maybe_leave_group(self) -> None:
        # One leave at a time: a close that left early during a rebalance calls this again at its end.
        if self._leave_in_flight is None:
            self._leave_in_flight = asyncio.ensure_future(self._leave_group())
        leave = self._leave_in_flight
        try:
            await asyncio.shield(leave)
        finally:
            if self._leave_in_flight is leave and leave.done():
                self._leave_in_flight = None

    async def _leave_group(self) -> None:
        # Leaving (close, unsubscribe, poll timeout) gives everything up first, as Java's onLeavePrepare.
        self._cancel_scheduled_rejoin()
        poll_timeout = self._poll_timed_out()
        # Java: a member whose poll timer expired has lost its partitions (onPartitionsLost, no commit):
        # its processing may be running still, and the group hands them to others at once.
        departure = self._member.leave(generation_reset=poll_timeout or self._generation_reset())
        if poll_timeout:
            self._lost_cause = (
                f"max_poll_interval_ms={self._max_poll_interval_ms()} exceeded: it left the group "
                "and rejoins on its next getmany()"
            )
            log.warning(
                "group %s: %.1f s without getmany()/getone(), more than max_poll_interval_ms=%d: member %s "
                "leaves the group, its partitions %s are lost (on_partitions_lost, not committed) and it "
                "rejoins on its next getmany(); raise max_poll_interval_ms or lower max_poll_records if "
                "processing takes this long",
                self.group_id,
                self._subscription.fetcher_idle_time,
                self._max_poll_interval_ms(),
                self.member_id,
                sorted(_aio(departure.lost)),
            )
        else:
            self._lost_cause = "it left the group"
        if departure.lost:
            await self._lose_partitions(_aio(departure.lost), logged=poll_timeout)
        if poll_timeout:
            self._fetch_only_owned()  # no more records of the partitions it lost
        if departure.revoked:
            # The coordination routine has already made its last auto-commit.
            await self._revoke_partitions(_aio(departure.revoked), commit=False)
        # Java's maybeLeaveGroup: a dynamic member leaves whenever it has a member id, also before its
        # first generation (closed during its first join): the coordinator counts it among the joining
        # members and would hand it partitions. Static members never leave (their session decides).
        if self._group_instance_id is None and self.member_id != _NO_MEMBER_ID and self.coordinator_id is not None:
            if self._join_in_flight:
                await self._leave_beside_the_join()
                return
            try:
                response = await self._send_req(LeaveGroupRequest(self.group_id, self.member_id))
                log.info(
                    "group %s: LeaveGroup of %s answered %s",
                    self.group_id,
                    self.member_id,
                    _error_name(response.error_code),
                )
            except Errors.KafkaError as err:
                log.error("group %s: LeaveGroup failed: %r", self.group_id, err)
        self.reset_generation()

    async def _stop_heartbeat_task(self) -> None:
        # aiokafka's heartbeat routine leaves the group (max_poll_interval_ms) outside its handling of
        # cancellation: cancelled there by a rejoin, it ends cancelled, and aiokafka's ``await`` of it
        # raised CancelledError into the coordination routine, which died (the member never rejoined).
        task = self._heartbeat_task
        if task is not None and not task.done():
            task.cancel()
            await asyncio.wait([task])
        await super()._stop_heartbeat_task()

    async def _leave_beside_the_join(self) -> None:
        """LeaveGroup on a connection of its own: the broker handles one request per connection at a
        time, the coordinator connection is held by a JoinGroup waiting at the join barrier and the
        default one by long-polling fetches, so a LeaveGroup sent on either would only be read after
        the round this member is leaving has completed with it."""
        request = LeaveGroupRequest(self.group_id, self.member_id)
        try:
            response = await self._client.send(self.coordinator_id, request, group=_BESIDE_THE_JOIN)
            error = Errors.for_code(response.error_code)
            log.info("group %s: LeaveGroup beside the pending JoinGroup answered %s", self.group_id, error.__name__)
        except Errors.KafkaError as err:
            log.error("group %s: LeaveGroup failed: %r", self.group_id, err)
        self.reset_generation()

    # -- commits racing a rebalance --------------------------------------------------------
    # aiokafka resets the member (losing every partition) when a commit fails with ILLEGAL_GENERATION
    # or UNKNOWN_MEMBER_ID. Commits here run concurrently with the rebalance, so those answers often
    # only mean "the group is rebalancing": as Java does, the member resets only when its generation
    # is unchanged and the member id is unknown; ILLEGAL_GENERATION from a known member just rejoins.

    # A commit issued while this member's JoinGroup is out goes beside it (_send_beside_the_join): a
    # group preparing its rebalance accepts it; one issued while its SyncGroup is out is read after it.
    # Java fails both at once, before sending, with RebalanceInProgressException and lets the
    # application retry after poll(). A commit that meets a rebalance all the same (ILLEGAL_GENERATION
    # for the generation the member is leaving, REBALANCE_IN_PROGRESS) is not the application's
    # failure: its partitions are still its own unless the round takes them. It waits for the round,
    # at most the rebalance timeout, and goes out again under the new generation for the partitions
    # the member kept.

    def _poll_timed_out(self) -> bool:
        """Java's poll timer: no getmany()/getone() for max_poll_interval_ms (aiokafka's heartbeat then leaves)."""
        return (
            not self.closing
            and self._subscription.subscription is not None
            and self._subscription.fetcher_idle_time >= self._max_poll_interval
        )

    def _max_poll_interval_ms(self) -> int:
        return round(self._max_poll_interval * 1000)

    def _out_of_group(self) -> bool:
        # The membership ended (left, fenced, session expired) and no round has given it a generation again.
        return self.generation == _NO_GENERATION and self._lost_cause is not None

    def _unknown_member_cause(self) -> str:
        return (
            f"the coordinator no longer knows member {self.member_id}: its session expired "
            f"(session_timeout_ms={self._session_timeout_ms}) or it was removed from the group"
        )

    def _commit_issued_under(self) -> tuple[int, int]:
        return self.generation, self._rounds_completed

    def _membership_lost_cause(self) -> str:
        return self._lost_cause or f"member {self.member_id or '(none)'} of group {self.group_id} lost its generation"

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
        issued_generation, _ = issued_under
        sent_generation, sent_rounds = sent_under
        if (
            isinstance(exc, Errors.UnknownMemberIdError)
            or self._resets != issued_after
            or issued_generation == _NO_GENERATION
        ):
            raise self._membership_lost_error() from exc
        if self.closing or asyncio.current_task() is getattr(self, "_coordination_task", None):
            # Closing, or called from a rebalance listener, whose round cannot complete while it waits.
            raise rebalance_in_progress(
                f"group {self.group_id}: commit met a rebalance ({type(exc).__name__}) while "
                f"{'closing' if self.closing else 'in a rebalance listener'}; commit again after the round"
            ) from exc
        await self._wait_for_round(sent_generation, sent_rounds, issued_after, exc, rebalance_met_at)
        held, gone = self._member.held_since(issued_generation, kassign_partitions(offsets))
        return self._keep_held(
            offsets,
            frozenset(_aio(held)),
            frozenset(_aio(gone)),
            consumed=consumed,
            refused=refused,
            now_under=f"generation {self.generation}",
        )

    def _may_commit_again(self, sent_generation: int, sent_rounds: int) -> bool:
        """Whether a commit that met a rebalance may go out again now. Once a round completed after it was
        sent: the member knows what it kept. A cooperative member also once its JoinGroup has been
        answered with a newer generation than the commit named: nothing it owns is handed on before
        it revokes it, after its SyncGroup's answer, and a commit sent now waits behind that SyncGroup
        on the coordinator connection, read once the group is stable. Waiting for the round instead
        cost an owner's revocation a second round trip (the application waits for its commit in flight
        before committing the revoked partitions): at 96 members nearly every owner has a commit in
        flight when the join phase ends."""
        if self._rounds_completed > sent_rounds and not self._joining:
            return True
        return (
            self._protocol is RebalanceProtocol.COOPERATIVE
            and self.generation > sent_generation
            and not self._join_in_flight
        )

    async def _wait_for_round(
        self,
        sent_generation: int,
        sent_rounds: int,
        issued_after: int,
        exc: Errors.KafkaError,
        rebalance_met_at: float,
    ) -> None:
        """Until the commit may go out again (:meth:`_may_commit_again`); at most the rebalance timeout
        from ``rebalance_met_at``, then aiokafka's retriable RebalanceInProgressError."""
        deadline = rebalance_met_at + self._rebalance_timeout_ms / 1000
        while not self._may_commit_again(sent_generation, sent_rounds):
            if self._resets != issued_after:
                raise self._membership_lost_error() from exc
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self.closing:
                raise rebalance_in_progress(
                    f"group {self.group_id}: commit met a rebalance that did not complete within rebalance_timeout_ms="
                    f"{self._rebalance_timeout_ms}; commit again after the next getmany()"
                ) from exc
            await self._wait_membership_moved(min(remaining, self._retry_backoff_ms / 1000 * 10))

    # -- static members ----------------------------------------------------------------------

    def need_rejoin(self, subscription: Any) -> bool:
        return not self._fenced and super().need_rejoin(subscription)

    async def _do_heartbeat(self) -> bool:
        if self._fenced:
            return False
        if self.generation == _NO_GENERATION:
            # Reset, member id kept (ILLEGAL_GENERATION): a rejoin is pending and there is no generation
            # to heartbeat for (Java's heartbeat thread pauses while unjoined); nothing failed either.
            return True
        try:
            alive = await super()._do_heartbeat()
        except Errors.KafkaError:
            if not self._fenced:
                raise
        else:
            if alive and not self._joining and not self._rejoin_needed_fut.done():
                # aiokafka closes a connection idle for connections_max_idle_ms (9 minutes): a group
                # stable for longer would otherwise open it inside its next round again. Not when
                # the answer was REBALANCE_IN_PROGRESS (alive too): that round starts now.
                self._open_beside_the_join()
            return alive
        await self._fence()
        raise self.fenced_instance_error()

    def fenced_instance_error(self) -> FencedInstanceIdError:
        """The error a replaced static member raises."""
        return FencedInstanceIdError(f"group {self.group_id}: instance {self._group_instance_id}")

    async def _fence(self) -> None:
        """FENCED_INSTANCE_ID answered a JoinGroup, SyncGroup or Heartbeat. Final, as in Java: what this
        member owned may already be its replacement's, so it is lost (no commit) and no longer fetched;
        the member never rejoins, and every poll raises :class:`FencedInstanceIdError`."""
        log.error(
            "group %s: static member %s was fenced by another instance with the same id; its partitions "
            "are lost and it will not rejoin",
            self.group_id,
            self._group_instance_id,
        )
        self._fenced = True
        self._cancel_scheduled_rejoin()
        self._resets += 1  # a commit issued before now (maybe waiting for this round) is refused
        self._membership_moved()
        lost = self._member.lose_all()
        if lost:
            await self._lose_partitions(_aio(lost))
        self._fetch_only_owned()
        self._fenced_out = True

    async def _send_req(self, request: Any) -> Any:
        sent = request
        if isinstance(request, HeartbeatRequest) and self._group_instance_id is not None:
            request = InstanceHeartbeatRequest(self.group_id, self.generation, self.member_id, self._group_instance_id)
        self._member_id_kept = False
        if isinstance(request, OffsetCommitRequest) and self._join_in_flight:
            response = await self._send_beside_the_join(request)
        else:
            response = await super()._send_req(request)
        code = getattr(response, "error_code", None)
        error = None if code is None else _error_name(code)
        if error in FATAL_FENCING_ERRORS:
            self._fenced = True
            self._lost_cause = f"fenced by a newer instance with group_instance_id {self._group_instance_id}"
        elif error == "UNKNOWN_MEMBER_ID":
            self._lost_cause = self._unknown_member_cause()
        elif error in MEMBER_ID_KEPT_ERRORS and isinstance(sent, (HeartbeatRequest, SyncGroupRequest)):
            # aiokafka resets the member on this answer (its next step, with no await in between);
            # reset_generation then keeps the member id, as Java does (KAFKA-13419).
            self._member_id_kept = True
        if isinstance(sent, SyncGroupRequest):
            self._sync_error = error if code else None
        if isinstance(request, OffsetCommitRequest):
            # Set until _do_commit_offsets has handled this response, which it does without awaiting.
            self._commit_response_for = self._commit_sent_as
        return response

    async def _send_beside_the_join(self, request: Any) -> Any:
        """A commit issued while this member's JoinGroup waits at the join barrier, sent on a connection
        of its own: behind the JoinGroup the broker would read it only after the join phase, and refuse
        it (ILLEGAL_GENERATION); beside it, a group preparing its rebalance accepts it. Not while the
        SyncGroup is out: the group completing its rebalance would refuse it there, and behind the
        SyncGroup it is read once the group is stable. Errors as aiokafka's ``_send_req``."""
        node_id = self.coordinator_id
        if node_id is None:
            raise Errors.GroupCoordinatorNotAvailableError()
        try:
            return await self._client.send(node_id, request, group=_BESIDE_THE_JOIN)
        except Errors.KafkaError as err:
            log.error(
                "group %s: commit beside the JoinGroup to node %s failed (%r): coordinator dead",
                self.group_id,
                node_id,
                err,
            )
            self.coordinator_dead()
            raise

    async def _do_commit_offsets(self, assignment: Any, offsets: Mapping[Any, Any]) -> None:
        # The request is built from these before the first await; commits run one at a time
        # (under the commit lock).
        self._commit_sent_as = (self.generation, self.member_id)
        try:
            await super()._do_commit_offsets(assignment, offsets)
        except Errors.UnknownMemberIdError:
            if self._commit_reset_wanted and self._commit_response_for == (self.generation, self.member_id):
                self._lost_cause = self._unknown_member_cause()
                super().reset_generation()
            raise
        except Errors.IllegalGenerationError:
            # A commit sent under a generation the member has since left needs no round of its own.
            if not self._joining and self._commit_response_for == (self.generation, self.member_id):
                log.info(
                    "group %s: commit answered ILLEGAL_GENERATION; rejoining, keeping owned partitions", self.group_id
                )
                super().request_rejoin()
            raise
        finally:
            self._commit_sent_as = self._commit_response_for = None
            self._commit_reset_wanted = False

    def reset_generation(self) -> None:
        if self._commit_response_for is not None:
            self._commit_reset_wanted = True  # decided by _do_commit_offsets from the error
            return
        if self._member_id_kept:
            # ILLEGAL_GENERATION (Heartbeat, SyncGroup): the coordinator still knows this member id. Rejoining
            # under it replaces the member; an empty id would add a second one, and the group would keep
            # the abandoned one (and hand it partitions) until its session expired.
            self._member_id_kept = False
            log.info("group %s: generation %s reset, rejoining as %s", self.group_id, self.generation, self.member_id)
            self._lost_cause = f"the coordinator ended generation {self.generation} (ILLEGAL_GENERATION)"
            self.generation = _NO_GENERATION
            self._resets += 1  # what it owned is lost: a commit issued before now never goes out
            self.request_rejoin()
            self._membership_moved()
            return
        super().reset_generation()

    def request_rejoin(self) -> None:
        # A commit answered REBALANCE_IN_PROGRESS while this member is joining needs no extra round.
        if self._commit_response_for is not None and self._joining:
            return
        super().request_rejoin()
