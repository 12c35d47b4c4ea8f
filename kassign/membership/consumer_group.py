"""One member of the next-generation consumer group protocol (KIP-848, ConsumerGroupHeartbeat, API 68),
with the rules of Java's ``ConsumerMembershipManager`` and nothing else: no client, no clock, no I/O.

The broker computes every assignment; the member only heartbeats and reconciles. A driver feeds
:class:`ConsumerGroupMember` what happened and carries out what it answers:

1. ``subscribe(topics)`` -- the member is JOINING: the next heartbeat is due at once, with epoch 0
   and every field (a *full* heartbeat);
2. ``heartbeat_delay(elapsed)`` says when the next heartbeat is due (now when joining, acknowledging
   or leaving; else after the interval the broker returned); ``build_heartbeat()`` is that
   heartbeat: later heartbeats are *incremental* (a field the broker already has goes out as null,
   or -1 for the rebalance timeout), and every failed one makes the next one full again;
3. ``on_heartbeat_response(response)`` adopts the member id, epoch, interval and target assignment,
   or handles the error (:data:`ERROR_NAMES`): FENCED_MEMBER_EPOCH / UNKNOWN_MEMBER_ID lose
   every partition (``on_partitions_lost``) and rejoin at epoch 0 once the driver says
   ``partitions_lost_done()``; a lost answer or a retriable error is retried after the backoff
   (a moved coordinator: as soon as it is found again), not on the interval;
   TOPIC_AUTHORIZATION_FAILED is reported to the application (:class:`Report`) and retried;
   UNRELEASED_INSTANCE_ID, GROUP_MAX_SIZE_REACHED and the like are fatal
   (:class:`ConsumerGroupFatalError`); UNSUPPORTED_VERSION names the broker;
4. ``maybe_reconcile(names)`` turns a new target assignment (topic ids) into a
   :class:`Reconciliation`, in order: commit what is revoked, ``on_partitions_revoked`` for what
   is no longer assigned, then ``on_partitions_assigned`` for what is new; the driver reports
   ``reconciliation_done`` and the next heartbeat acknowledges the new owned set. Every new target
   is acknowledged, even one equal to what the member owns (it carries a local epoch, as Java's
   ``LocalAssignment``): a target that grew and shrank back before the member reconciled it still
   answers the broker's revocation request. The broker only
   ever assigns a partition nobody owns any more: it keeps a partition away from its new owner
   until the old owner's heartbeat no longer lists it, so the member takes what it is given at once.
   Topic ids resolve through the driver's ``names`` lookup; a partition of an id it cannot name
   yet waits (``unresolved_topic_ids``) for metadata;
5. ``leave()`` gives everything up (revoked after a commit, or lost when the member is no longer in
   the group) and, once the driver says ``leave_prepared()``, the next heartbeat leaves with epoch
   -1 (a static member: -2, a temporary leave that keeps its assignment for the session timeout),
   without waiting for a heartbeat in flight.

``commit_identity()`` is what an OffsetCommit (v9+) carries, so a commit from a fenced member's old
epoch is refused by the broker (STALE_MEMBER_EPOCH / UNKNOWN_MEMBER_ID).
"""

from __future__ import annotations

import base64
import enum
import logging
import uuid
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from kassign.model import TopicPartition
from kassign.protocol.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    TopicIdPartitions,
)

log = logging.getLogger(__name__)

__all__ = [
    "JOIN_EPOCH",
    "LEAVE_EPOCH",
    "STATIC_LEAVE_EPOCH",
    "ERROR_NAMES",
    "MemberState",
    "TopicIdPartition",
    "ConsumerGroupFatalError",
    "CommitOffsets",
    "RevokePartitions",
    "AssignPartitions",
    "LosePartitions",
    "FindCoordinator",
    "Backoff",
    "Report",
    "Fail",
    "Action",
    "Reconciliation",
    "ConsumerGroupMember",
    "new_member_id",
]

#: The epoch a member joins with.
JOIN_EPOCH = 0
#: The epoch a member leaves with.
LEAVE_EPOCH = -1
#: The epoch a static member leaves with for now: the broker keeps its assignment for the session timeout.
STATIC_LEAVE_EPOCH = -2

#: The error codes a ConsumerGroupHeartbeat (and an OffsetCommit v9+) may answer with, by name.
ERROR_NAMES: dict[int, str] = {
    0: "NONE",
    3: "UNKNOWN_TOPIC_OR_PARTITION",
    7: "REQUEST_TIMED_OUT",
    14: "COORDINATOR_LOAD_IN_PROGRESS",
    15: "COORDINATOR_NOT_AVAILABLE",
    16: "NOT_COORDINATOR",
    25: "UNKNOWN_MEMBER_ID",
    29: "TOPIC_AUTHORIZATION_FAILED",
    30: "GROUP_AUTHORIZATION_FAILED",
    35: "UNSUPPORTED_VERSION",
    42: "INVALID_REQUEST",
    69: "GROUP_ID_NOT_FOUND",
    81: "GROUP_MAX_SIZE_REACHED",
    82: "FENCED_INSTANCE_ID",
    100: "UNKNOWN_TOPIC_ID",
    110: "FENCED_MEMBER_EPOCH",
    111: "UNRELEASED_INSTANCE_ID",
    112: "UNSUPPORTED_ASSIGNOR",
    113: "STALE_MEMBER_EPOCH",
    128: "INVALID_REGULAR_EXPRESSION",
}

# Errors after which the member is out of the group: it loses its partitions and joins again at epoch 0.
_FENCING = frozenset({"FENCED_MEMBER_EPOCH", "UNKNOWN_MEMBER_ID"})
# Errors that only mean "find the coordinator again" (retried at once once it is known).
_COORDINATOR_MOVED = frozenset({"NOT_COORDINATOR", "COORDINATOR_NOT_AVAILABLE"})
# Errors retried after the backoff.
_RETRIABLE = frozenset({"COORDINATOR_LOAD_IN_PROGRESS", "REQUEST_TIMED_OUT"})
# Errors reported to the application while the member stays as it is and retries after the backoff: the
# missing ACL may be added (Java, KAFKA-18813).
_REPORTED = frozenset({"TOPIC_AUTHORIZATION_FAILED"})


class MemberState(enum.Enum):
    """Where the member stands, as Java's ``MemberState`` names it."""

    #: Not subscribed: no heartbeats (it may still commit outside the group).
    UNSUBSCRIBED = "unsubscribed"
    #: Heartbeating with epoch 0 (full heartbeats, at once) until the broker gives it an epoch.
    JOINING = "joining"
    #: A target assignment differs from what the member owns: it revokes and assigns.
    RECONCILING = "reconciling"
    #: Reconciled: the next heartbeat, sent at once, carries the new owned partitions.
    ACKNOWLEDGING = "acknowledging"
    #: Owns what the broker assigned; heartbeats on the interval.
    STABLE = "stable"
    #: Fenced (FENCED_MEMBER_EPOCH / UNKNOWN_MEMBER_ID): losing its partitions, then joining at epoch 0.
    FENCED = "fenced"
    #: Leaving: giving up its partitions (callbacks), heartbeating meanwhile.
    PREPARE_LEAVING = "prepare_leaving"
    #: Partitions given up: the next heartbeat, sent at once, leaves with epoch -1 (or -2).
    LEAVING = "leaving"
    #: Left because the application stopped polling (max poll interval): joins again on the next poll.
    STALE = "stale"
    #: An error the member cannot recover from; no more heartbeats.
    FATAL = "fatal"


#: States in which a new target assignment is taken (Java's ``canHandleNewAssignment``).
_ACCEPTS_ASSIGNMENT = frozenset(
    {MemberState.JOINING, MemberState.RECONCILING, MemberState.ACKNOWLEDGING, MemberState.STABLE}
)
#: States that send no heartbeat at all.
_SILENT = frozenset({MemberState.UNSUBSCRIBED, MemberState.FENCED, MemberState.STALE, MemberState.FATAL})
#: States whose heartbeat goes out at once rather than on the interval.
_URGENT = frozenset({MemberState.JOINING, MemberState.ACKNOWLEDGING, MemberState.LEAVING})
#: States of a member that has left: the answer to its leave heartbeat finds it in one of these.
_LEFT = frozenset({MemberState.UNSUBSCRIBED, MemberState.STALE})


class TopicIdPartition(NamedTuple):
    """A partition named by its topic's id, as the protocol names it."""

    topic_id: uuid.UUID
    partition: int


class ConsumerGroupFatalError(Exception):
    """An error that ends the membership: the application must act (``error`` names Kafka's error)."""

    def __init__(self, error: str, message: str, code: int | None = None) -> None:
        super().__init__(f"{error}: {message}" if message else error)
        self.error = error
        self.message = message
        self.code = code


# -- actions: what the driver does ------------------------------------------------------------

_NONE: frozenset[TopicPartition] = frozenset()


@dataclass(frozen=True)
class CommitOffsets:
    """Commit the consumed positions of ``partitions`` (when the driver auto-commits) before what follows."""

    partitions: frozenset[TopicPartition]


@dataclass(frozen=True)
class RevokePartitions:
    """Stop consuming ``partitions`` and call ``on_partitions_revoked(partitions)``."""

    partitions: frozenset[TopicPartition]


@dataclass(frozen=True)
class AssignPartitions:
    """Consume ``assigned`` (keeping the positions of what was owned before) and call
    ``on_partitions_assigned(added)`` -- always, even with nothing added, as Java does."""

    assigned: frozenset[TopicPartition]
    added: frozenset[TopicPartition]


@dataclass(frozen=True)
class LosePartitions:
    """The member is out of the group: drop every partition it still holds, uncommitted, and call
    ``on_partitions_lost``; then call :meth:`ConsumerGroupMember.partitions_lost_done`.
    ``partitions`` is what the member owned by the protocol's count; ``reason`` says why it is out
    (for the error of a commit it can no longer make)."""

    partitions: frozenset[TopicPartition]
    reason: str = field(default="", compare=False)  # words for a person, not part of the step


@dataclass(frozen=True)
class FindCoordinator:
    """The coordinator moved or is unavailable: look it up again; the next heartbeat goes out as soon as it is known."""

    reason: str


@dataclass(frozen=True)
class Backoff:
    """The heartbeat is retried after the retry backoff (:meth:`ConsumerGroupMember.heartbeat_delay` says when)."""

    reason: str


@dataclass(frozen=True)
class Report:
    """Raise ``error`` to the application once (from its next poll); the member carries on and retries."""

    error: ConsumerGroupFatalError


@dataclass(frozen=True)
class Fail:
    """Raise ``error`` to the application; the member is FATAL."""

    error: ConsumerGroupFatalError


Action = (
    CommitOffsets | RevokePartitions | AssignPartitions | LosePartitions | FindCoordinator | Backoff | Report | Fail
)


@dataclass(frozen=True)
class Reconciliation:
    """One step from what the member owns to (the resolvable part of) its target assignment.

    ``actions`` in order: commit then revoke ``revoked`` (only when there is any), then assign
    ``assigned`` with ``added`` new. ``epoch``: the member epoch it started in. When the driver has
    carried them out it calls :meth:`ConsumerGroupMember.reconciliation_done`; between steps,
    :meth:`ConsumerGroupMember.still_reconciling` says whether to go on (a fenced member stops).
    """

    epoch: int
    assigned: frozenset[TopicPartition]
    added: frozenset[TopicPartition]
    revoked: frozenset[TopicPartition]
    kept: frozenset[TopicPartition]
    assigned_ids: frozenset[TopicIdPartition] = field(repr=False, default=frozenset())
    names: Mapping[uuid.UUID, str] = field(repr=False, default_factory=dict)
    #: The local epoch of the target this step reconciles (see ConsumerGroupMember's ``_target_epoch``).
    target_epoch: int = field(repr=False, default=0)

    @property
    def actions(self) -> list[Action]:
        """What to do, in order."""
        steps: list[Action] = []
        if self.revoked:
            steps += [CommitOffsets(self.revoked), RevokePartitions(self.revoked)]
        steps.append(AssignPartitions(self.assigned, self.added))
        return steps


def new_member_id() -> str:
    """A member id as kafka-clients 4.x makes one (KIP-1082): a random UUID, URL-safe base64, no padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode("ascii")


@dataclass
class _Sent:
    """What the broker already has from this member's last heartbeats (``None``: unknown, send it)."""

    rebalance_timeout_ms: int | None = None
    topics: frozenset[str] | None = None
    regex: str | None = None  # "": no regex
    server_assignor: str | None = None
    rack_id: str | None = None
    owned: frozenset[TopicIdPartition] | None = None


class ConsumerGroupMember:
    """A consumer's membership in a KIP-848 consumer group: state, epoch, owned partitions and the
    decisions of each heartbeat.

    ``member_id``: kept for the member's whole life (a fresh :func:`new_member_id` by default; the
    broker's answer wins if it sends another). ``instance_id``: static membership (KIP-345).
    ``rebalance_timeout_ms``: how long the broker waits for this member to revoke.
    ``server_assignor``: the broker-side assignor to ask for (``"uniform"``, ``"range"``), or None for
    the group's default. ``broker``: names the coordinator in errors (the driver may update it).
    ``retry_backoff_ms`` / ``retry_backoff_max_ms``: a failed heartbeat is retried after the first,
    doubling with each further failure up to the second (Java's ``retry.backoff.ms`` and
    ``retry.backoff.max.ms``, without the jitter: the member is deterministic).
    """

    def __init__(
        self,
        group_id: str,
        *,
        member_id: str | None = None,
        instance_id: str | None = None,
        rack_id: str | None = None,
        rebalance_timeout_ms: int = 300_000,
        server_assignor: str | None = None,
        broker: str | None = None,
        retry_backoff_ms: int = 100,
        retry_backoff_max_ms: int = 1000,
    ) -> None:
        if not group_id:
            raise ValueError("a consumer group member needs a group id")
        if rebalance_timeout_ms <= 0:
            raise ValueError(f"rebalance_timeout_ms must be positive, got {rebalance_timeout_ms!r}")
        self.group_id = group_id
        self.member_id = member_id or new_member_id()
        self.instance_id = instance_id
        self.rack_id = rack_id
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.server_assignor = server_assignor
        self.broker = broker
        if retry_backoff_ms < 0 or retry_backoff_max_ms < retry_backoff_ms:
            raise ValueError(
                f"retry backoff must be 0 <= retry_backoff_ms <= retry_backoff_max_ms, got "
                f"{retry_backoff_ms!r} and {retry_backoff_max_ms!r}"
            )
        self.retry_backoff_ms = retry_backoff_ms
        self.retry_backoff_max_ms = retry_backoff_max_ms
        self.state = MemberState.UNSUBSCRIBED
        self.member_epoch = JOIN_EPOCH
        #: The interval the broker asks for (0 until its first answer).
        self.heartbeat_interval_ms = 0
        self.fatal_error: ConsumerGroupFatalError | None = None
        self._topics: frozenset[str] = frozenset()
        self._regex: str | None = None
        self._target: frozenset[TopicIdPartition] | None = None  # the last assignment the broker sent
        self._current: frozenset[TopicIdPartition] = frozenset()  # what the member owns (reconciled)
        # Local epochs (Java's LocalAssignment): every target that differs from the one before gets the
        # next one, and the member acknowledges each -- even a target equal to what it owns, which the
        # broker may still be waiting for (it grew and shrank back before the member reconciled it).
        self._target_epoch = 0  # never reset: an old acknowledgement can never pass for a new one
        # The target epoch the owned partitions were reconciled (or acknowledged) for; -1 until an
        # assignment is reconciled after joining: the first one always is, even when empty, so the
        # application hears on_partitions_assigned once it is in the group (as in Java).
        self._current_epoch = -1
        self._names: dict[uuid.UUID, str] = {}  # names of owned topics, kept even if metadata loses them
        # Ownership marks: reconciliations completed so far (never reset) and, per owned partition, the
        # one that gave it to the member -- a commit issued at one mark may complete later only for
        # partitions held without interruption since (held_since).
        self._reconciliations = 0
        self._acquired: dict[TopicIdPartition, int] = {}
        self._reconciling: Reconciliation | None = None
        self._unresolved: frozenset[uuid.UUID] = frozenset()
        self._sent = _Sent()
        self._in_flight = False
        self._stale_leave = False  # LEAVING because the application stopped polling
        # Failed heartbeats in a row: the next is due after a backoff (0: as soon as the coordinator is
        # found again), not on the interval.
        self._failures = 0
        self._retry_in_ms: int | None = None
        self._regex_sent = False  # a regex went out once: dropping it must be said, even in a full heartbeat

    # -- what the member owns ----------------------------------------------------------------

    @property
    def owned(self) -> frozenset[TopicPartition]:
        """The partitions this member owns (reconciled), by name."""
        return frozenset(TopicPartition(self._names[p.topic_id], p.partition) for p in self._current)

    @property
    def ownership_mark(self) -> int:
        """A mark of what the member owns now, for :meth:`held_since` (grows with every reconciliation)."""
        return self._reconciliations

    def held_since(
        self, mark: int, partitions: Iterable[TopicPartition]
    ) -> tuple[frozenset[TopicPartition], frozenset[TopicPartition]]:
        """Of ``partitions``, those owned without interruption since :attr:`ownership_mark` was ``mark``
        (a commit issued then may still be completed for them) and the others (revoked or lost since,
        perhaps assigned again: another member may have processed them meanwhile)."""
        since = {
            TopicPartition(self._names[p.topic_id], p.partition): self._acquired.get(p, mark + 1) for p in self._current
        }
        partitions = frozenset(partitions)
        held = frozenset(tp for tp in partitions if since.get(tp, mark + 1) <= mark)
        return held, partitions - held

    @property
    def owned_ids(self) -> frozenset[TopicIdPartition]:
        """The partitions this member owns, by topic id (what its heartbeats report)."""
        return self._current

    @property
    def owned_topic_ids(self) -> dict[str, uuid.UUID]:
        """The topic id of each topic name this member owns partitions of: what its offsets belong to.
        A topic deleted and created again keeps its name under a new id, so a commit names the owned
        id, not whatever id the name has now."""
        return {self._names[p.topic_id]: p.topic_id for p in self._current}

    @property
    def leaving_topic_ids(self) -> frozenset[uuid.UUID]:
        """Ids of topics the member owns partitions of and its target has none of: taken from it, or
        deleted."""
        targeted = {p.topic_id for p in self._target or ()}
        return frozenset(p.topic_id for p in self._current if p.topic_id not in targeted)

    @property
    def subscribed_topics(self) -> frozenset[str]:
        """The topic names subscribed to (empty with a regex subscription)."""
        return self._topics

    @property
    def subscribed_regex(self) -> str | None:
        """The broker-side regex subscribed to, if any."""
        return self._regex

    @property
    def target(self) -> frozenset[TopicIdPartition] | None:
        """The last assignment the broker sent (None before any)."""
        return self._target

    @property
    def unresolved_topic_ids(self) -> frozenset[uuid.UUID]:
        """Topic ids of the target assignment the last :meth:`maybe_reconcile` could not name: fetch
        their metadata, then call :meth:`maybe_reconcile` again."""
        return self._unresolved

    @property
    def in_group(self) -> bool:
        """Whether the broker counts this member in the group with a positive epoch."""
        return self.member_epoch > 0 and self.state in (
            MemberState.RECONCILING,
            MemberState.ACKNOWLEDGING,
            MemberState.STABLE,
            MemberState.PREPARE_LEAVING,
        )

    def commit_identity(self) -> tuple[str, int] | None:
        """``(member_id, member_epoch)`` for an OffsetCommit v9+, or None when the member has no epoch
        to commit with (joining, fenced, left): such a commit would be refused anyway."""
        if self.member_epoch > 0 and self.state in (
            MemberState.RECONCILING,
            MemberState.ACKNOWLEDGING,
            MemberState.STABLE,
            MemberState.PREPARE_LEAVING,
            MemberState.JOINING,
        ):
            return self.member_id, self.member_epoch
        return None

    # -- subscription ------------------------------------------------------------------------

    def subscribe(self, topics: Iterable[str] | None = None, *, regex: str | None = None) -> list[Action]:
        """Subscribe to ``topics`` (or the broker-side ``regex``, RE2/J syntax). An unsubscribed member
        starts joining; a member in the group sends the new subscription with its next heartbeat."""
        names = frozenset(topics or ())
        if regex is None and not names:
            raise ValueError("subscribe to at least one topic, or a regex")
        if regex is not None and names:
            raise ValueError("subscribe to topics or to a regex, not both")
        if self.state is MemberState.FATAL:
            assert self.fatal_error is not None
            return [Fail(self.fatal_error)]
        self._topics, self._regex = names, regex
        if self.state is MemberState.UNSUBSCRIBED:
            self._join()
        return []

    def _join(self) -> None:
        log.info("group %s: member %s joining (epoch 0)", self.group_id, self.member_id)
        self.state = MemberState.JOINING
        self.member_epoch = JOIN_EPOCH
        self._target = None
        self._reconciling = None
        self._current_epoch = -1
        self._unresolved = frozenset()
        self._sent = _Sent()  # a join carries every field
        self._failures, self._retry_in_ms = 0, None

    # -- heartbeats --------------------------------------------------------------------------

    def heartbeat_delay(self, since_last_s: float) -> float | None:
        """Seconds until the next heartbeat is due, ``since_last_s`` after the last one was sent:
        0 when it is due now, None when none is (no heartbeats in this state, or one in flight).
        After a failed heartbeat: the retry backoff (0 after a coordinator error: the driver finds
        the coordinator first). A leave is due at once, even with a heartbeat in flight (as Java)."""
        if self.state is MemberState.LEAVING:
            return 0.0
        if self.state in _SILENT or self._in_flight:
            return None
        if self._retry_in_ms is not None:
            return max(0.0, self._retry_in_ms / 1000 - since_last_s)
        if self.state in _URGENT:
            return 0.0
        return max(0.0, self.heartbeat_interval_ms / 1000 - since_last_s)

    def _retry_after_backoff(self) -> int:
        """Schedule the retry of a failed heartbeat: ``retry_backoff_ms``, doubled per failure in a row."""
        self._failures += 1
        self._retry_in_ms = min(self.retry_backoff_max_ms, self.retry_backoff_ms * 2 ** min(self._failures - 1, 30))
        return self._retry_in_ms

    def build_heartbeat(self) -> ConsumerGroupHeartbeatRequest | None:
        """The heartbeat to send now (the driver sends it and reports the answer), or None in a state
        that sends none. Fields the broker already has go out as null (-1 for the rebalance timeout).
        Acknowledging sends the owned partitions; leaving sends epoch -1 (-2 for a static member),
        even while another heartbeat is in flight."""
        if self.state is not MemberState.LEAVING and (self.state in _SILENT or self._in_flight):
            return None
        self._retry_in_ms = None
        if self.state is MemberState.LEAVING:
            request = ConsumerGroupHeartbeatRequest(
                self.group_id, self.member_id, self.member_epoch, instance_id=self.instance_id
            )
            # A leave heartbeat is sent once and not retried (as Java): the member is out either way.
            self.state = MemberState.STALE if self._stale_leave else MemberState.UNSUBSCRIBED
            self._stale_leave = False
            self._sent = _Sent()
            return request

        sent = self._sent
        reported = self._reported_owned()
        # Java sends an empty regex to drop a regex subscription (null would mean "unchanged"); a member
        # that never sent one sends nothing (a version-0 heartbeat cannot carry the field).
        regex = self._regex or ""
        send_regex = sent.regex != regex and (regex != "" or sent.regex is not None or self._regex_sent)
        request = ConsumerGroupHeartbeatRequest(
            self.group_id,
            self.member_id,
            self.member_epoch,
            # Java sends the instance id with every heartbeat: the broker checks it against the member.
            instance_id=self.instance_id,
            rack_id=self.rack_id if sent.rack_id != self.rack_id else None,
            rebalance_timeout_ms=(
                self.rebalance_timeout_ms if sent.rebalance_timeout_ms != self.rebalance_timeout_ms else -1
            ),
            # With a regex the names are empty: the broker subscribes the member to both.
            subscribed_topic_names=sorted(self._topics) if sent.topics != self._topics else None,
            subscribed_topic_regex=regex if send_regex else None,
            server_assignor=(
                self.server_assignor
                if self.server_assignor is not None and sent.server_assignor != self.server_assignor
                else None
            ),
            topic_partitions=(
                _wire_partitions(reported)
                if sent.owned != reported or self.state is MemberState.ACKNOWLEDGING
                else None
            ),
        )
        self._sent = _Sent(
            self.rebalance_timeout_ms,
            self._topics,
            regex if send_regex else sent.regex,
            self.server_assignor,
            self.rack_id,
            reported,
        )
        self._regex_sent = self._regex_sent or bool(self._regex)
        self._in_flight = True
        if self.state is MemberState.ACKNOWLEDGING:
            # The acknowledgement is on its way; anything newer waits for the next reconciliation.
            self.state = MemberState.STABLE if self._target_reconciled() else MemberState.RECONCILING
        return request

    def _reported_owned(self) -> frozenset[TopicIdPartition]:
        """The partitions a heartbeat says the member owns: what it owns, and while it reconciles, also
        what it is taking or about to take (the reconciliation under way and the target after it).

        Java reports only the reconciled assignment, at the latest epoch. A heartbeat at epoch E that
        omits partitions the member is still being given at E (an acknowledgement of the epoch before,
        overtaken by E's answer; a full heartbeat after a failure) tells the broker those are not
        owned: if its next target takes them away, it skips the revocation and hands them on at once,
        while the member's ``on_partitions_assigned`` for them is starting. Reporting more only makes
        the broker wait for a revocation the member then acknowledges."""
        owned = self._current | (self._target or frozenset())  # a reconciled target adds nothing
        if self._reconciling is not None:
            owned = owned | self._reconciling.assigned_ids
        return owned

    def on_heartbeat_response(self, response: ConsumerGroupHeartbeatResponse) -> list[Action]:
        """Handle the broker's answer to the heartbeat last built."""
        self._in_flight = False
        error = ERROR_NAMES.get(response.error_code, f"ERROR_{response.error_code}")
        if response.error_code != 0:
            return self._on_error(error, response.error_message or "", response.error_code)
        self._failures, self._retry_in_ms = 0, None
        if self.state in (
            MemberState.UNSUBSCRIBED,
            MemberState.LEAVING,
            MemberState.STALE,
            MemberState.FENCED,
            MemberState.FATAL,
        ):
            log.debug("group %s: heartbeat answer ignored in state %s", self.group_id, self.state.name)
            return []
        if response.member_id:
            self.member_id = response.member_id
        if response.member_epoch != self.member_epoch:
            log.info(
                "group %s: member %s epoch %s -> %s",
                self.group_id,
                self.member_id,
                self.member_epoch,
                response.member_epoch,
            )
        self.member_epoch = response.member_epoch
        self.heartbeat_interval_ms = response.heartbeat_interval_ms
        if response.assignment is not None and self.state in _ACCEPTS_ASSIGNMENT:
            target = frozenset(
                TopicIdPartition(t.topic_id, p) for t in response.assignment.topic_partitions for p in t.partitions
            )
            if target != self._target:
                self._target_epoch += 1
            self._target = target
            if self.state is MemberState.ACKNOWLEDGING:
                pass  # the acknowledgement still goes out at once; building it moves on to the new target
            elif not self._target_reconciled() or self._reconciling is not None:
                self.state = MemberState.RECONCILING
            elif self.state in (MemberState.JOINING, MemberState.RECONCILING):
                self.state = MemberState.STABLE
        elif self.state is MemberState.JOINING:
            # Joined without an assignment in the answer (a broker always sends one on a join; this keeps
            # a member from heartbeating in a tight loop if one does not): it owns nothing until one comes.
            self.state = MemberState.STABLE
        return []

    def on_heartbeat_failure(self, reason: str) -> list[Action]:
        """The heartbeat got no answer (connection lost, timed out): the next one is full, after the
        backoff; the driver looks the coordinator up again first (it may be the node that went away)."""
        self._in_flight = False
        self._sent = _Sent()
        backoff = self._retry_after_backoff()
        log.info("group %s: heartbeat failed (%s); retrying in %s ms with every field", self.group_id, reason, backoff)
        return [Backoff(reason)]

    def on_unsupported_version(self, detail: str = "") -> list[Action]:
        """The broker has no ConsumerGroupHeartbeat (an older Kafka, or the protocol switched off):
        fatal, with an error naming the broker."""
        self._in_flight = False
        return self._fatal("UNSUPPORTED_VERSION", detail, 35)

    def _on_error(self, error: str, message: str, code: int) -> list[Action]:
        # Any error: the broker may have lost track of what it had, so the next heartbeat is full (as Java).
        self._sent = _Sent()
        if error == "GROUP_ID_NOT_FOUND" and self.state in _LEFT:
            # The answer to a leave from a group the broker no longer (or never) had: the member is out
            # either way (Java ignores it too).
            log.debug("group %s: GROUP_ID_NOT_FOUND answering the leave; ignored", self.group_id)
            return []
        if error in _COORDINATOR_MOVED:
            # Java skips the backoff: the heartbeat goes as soon as the coordinator is found again.
            self._failures, self._retry_in_ms = 0, 0
            return [FindCoordinator(error)]
        if error in _RETRIABLE:
            self._retry_after_backoff()
            return [Backoff(error)]
        if error in _REPORTED:
            if self.state in _SILENT:
                return []
            failure = ConsumerGroupFatalError(error, message, code)
            log.warning(
                "group %s: member %s: %s; retrying in %s ms",
                self.group_id,
                self.member_id,
                failure,
                self._retry_after_backoff(),
            )
            return [Report(failure), Backoff(error)]
        if error in _FENCING:
            return self._fenced(error, message)
        if error == "UNSUPPORTED_VERSION":
            return self._fatal(error, message, code)
        # UNRELEASED_INSTANCE_ID, FENCED_INSTANCE_ID, GROUP_MAX_SIZE_REACHED, UNSUPPORTED_ASSIGNOR,
        # INVALID_REQUEST, GROUP_AUTHORIZATION_FAILED, INVALID_REGULAR_EXPRESSION and anything unknown.
        return self._fatal(error, message, code)

    def _fenced(self, error: str, message: str) -> list[Action]:
        if self.state is MemberState.PREPARE_LEAVING or self.state is MemberState.LEAVING:
            # Already giving everything up: no leave heartbeat (the broker dropped the member) and no rejoin.
            log.info("group %s: %s while leaving; the member is out", self.group_id, error)
            self.state = MemberState.UNSUBSCRIBED
            self.member_epoch = JOIN_EPOCH
            return []
        if self.state in (MemberState.UNSUBSCRIBED, MemberState.STALE, MemberState.FATAL, MemberState.FENCED):
            return []
        log.warning(
            "group %s: member %s fenced at epoch %s (%s%s); losing its partitions and rejoining",
            self.group_id,
            self.member_id,
            self.member_epoch,
            error,
            f": {message}" if message else "",
        )
        lost = self.owned
        reason = (
            f"the coordinator fenced member {self.member_id} at epoch {self.member_epoch} ({error}): its "
            "session expired or it was removed from the group"
        )
        self.state = MemberState.FENCED
        self.member_epoch = JOIN_EPOCH
        self._clear_assignment()
        return [LosePartitions(lost, reason)]

    def _fatal(self, error: str, message: str, code: int | None) -> list[Action]:
        if error == "UNSUPPORTED_VERSION":
            where = f"broker {self.broker}" if self.broker else "the group coordinator"
            message = (
                f"{where} does not support the consumer group protocol (KIP-848, ConsumerGroupHeartbeat): it "
                "needs Apache Kafka 4.0 or newer with group.coordinator.rebalance.protocols including "
                "'consumer'; "
                f"use group_protocol='classic' with this cluster" + (f" ({message})" if message else "")
            )
        failure = ConsumerGroupFatalError(error, message, code)
        log.error("group %s: member %s failed: %s", self.group_id, self.member_id, failure)
        previous = self.state
        self.state = MemberState.FATAL
        self.member_epoch = JOIN_EPOCH  # no epoch left to commit or heartbeat with
        self.fatal_error = failure
        actions: list[Action] = []
        left = (MemberState.UNSUBSCRIBED, MemberState.PREPARE_LEAVING, MemberState.LEAVING)
        if previous not in left and self._current:
            actions.append(LosePartitions(self.owned, f"the member failed ({error})"))
        self._clear_assignment()
        actions.append(Fail(failure))
        return actions

    def _clear_assignment(self) -> None:
        self._current = frozenset()
        self._acquired = {}
        self._current_epoch = -1
        self._names = {}
        self._target = None
        self._reconciling = None
        self._unresolved = frozenset()

    def partitions_lost_done(self) -> None:
        """The driver has dropped what :class:`LosePartitions` asked; a fenced member joins again (epoch 0)."""
        if self.state is MemberState.FENCED:
            self._join()

    # -- reconciliation ----------------------------------------------------------------------

    @property
    def _reconciled_once(self) -> bool:
        """Whether an assignment was reconciled since joining."""
        return self._current_epoch >= 0

    def _target_reconciled(self) -> bool:
        # A target's epoch is at least 1, so an equal current epoch means it was reconciled since joining.
        return self._target is None or (self._target == self._current and self._current_epoch == self._target_epoch)

    def maybe_reconcile(
        self, names: Callable[[uuid.UUID], str | None] | Mapping[uuid.UUID, str]
    ) -> Reconciliation | None:
        """The next step towards the target assignment, or None (nothing to do, one in progress, or
        only partitions of topics ``names`` cannot name yet: see :attr:`unresolved_topic_ids`)."""
        if self.state is not MemberState.RECONCILING or self._reconciling is not None or self._target is None:
            return None
        lookup = names.get if isinstance(names, Mapping) else names
        resolved: dict[uuid.UUID, str] = {}
        unresolved: set[uuid.UUID] = set()
        for topic_id in {p.topic_id for p in self._target}:
            name = self._names.get(topic_id) or lookup(topic_id)
            if name is None:
                unresolved.add(topic_id)
            else:
                resolved[topic_id] = name
        self._unresolved = frozenset(unresolved)
        assigned_ids = frozenset(p for p in self._target if p.topic_id in resolved)
        if unresolved:
            log.info("group %s: waiting for metadata of topic ids %s", self.group_id, sorted(map(str, unresolved)))
        if assigned_ids == self._current and (self._reconciled_once or unresolved):
            # The resolvable part is what the member owns already; the rest waits for metadata (a
            # member that just joined waits for it too, rather than first hearing of an empty assignment).
            if self._reconciled_once and self._current_epoch != self._target_epoch:
                # A new target all the same: the broker may be waiting for this member to revoke what
                # the target before asked for, so it hears the owned partitions again (Java bumps the
                # local epoch and acknowledges).
                log.info(
                    "group %s: new target at epoch %s needs no change; acknowledging %s",
                    self.group_id,
                    self.member_epoch,
                    sorted(self.owned),
                )
                self._current_epoch = self._target_epoch
                self.state = MemberState.ACKNOWLEDGING
            return None
        names_by_id = {**self._names, **resolved}

        def named(ps: Iterable[TopicIdPartition]) -> frozenset[TopicPartition]:
            return frozenset(TopicPartition(names_by_id[p.topic_id], p.partition) for p in ps)

        rec = Reconciliation(
            epoch=self.member_epoch,
            assigned=named(assigned_ids),
            added=named(assigned_ids - self._current),
            revoked=named(self._current - assigned_ids),
            kept=named(assigned_ids & self._current),
            assigned_ids=assigned_ids,
            names={tid: names_by_id[tid] for tid in {p.topic_id for p in assigned_ids}},
            target_epoch=self._target_epoch,
        )
        log.info(
            "group %s: reconciling at epoch %s: assigned %s, added %s, revoked %s",
            self.group_id,
            self.member_epoch,
            sorted(rec.assigned),
            sorted(rec.added),
            sorted(rec.revoked),
        )
        self._reconciling = rec
        return rec

    def still_reconciling(self, rec: Reconciliation) -> bool:
        """Whether ``rec`` is still the member's reconciliation (not after a fencing, a leave or a fatal error)."""
        return self._reconciling is rec and self.state is MemberState.RECONCILING

    def reconciliation_done(self, rec: Reconciliation) -> bool:
        """The driver carried ``rec`` out: the member owns ``rec.assigned`` and acknowledges it with its
        next heartbeat (at once). False when ``rec`` was abandoned meanwhile (fenced, leaving): the
        driver then holds partitions the member does not count, and must drop them."""
        if not self.still_reconciling(rec):
            log.info("group %s: reconciliation no longer relevant (state %s)", self.group_id, self.state.name)
            return False
        self._reconciliations += 1
        self._acquired = {p: self._acquired.get(p, self._reconciliations) for p in rec.assigned_ids}
        self._current = rec.assigned_ids
        self._current_epoch = rec.target_epoch
        self._names = dict(rec.names)
        self._reconciling = None
        self.state = MemberState.ACKNOWLEDGING
        return True

    # -- leaving -----------------------------------------------------------------------------

    def leave(self) -> list[Action]:
        """Leave the group (close, unsubscribe): give every partition up -- revoked after a commit while
        the member is in the group, lost when it is not -- then call :meth:`leave_prepared`."""
        if self.state in (MemberState.PREPARE_LEAVING, MemberState.LEAVING):
            return []
        if self.state in (MemberState.UNSUBSCRIBED, MemberState.FATAL, MemberState.STALE, MemberState.FENCED):
            # Not in the group: nothing to send (a fenced member's lost partitions are released already
            # or being released by its LosePartitions).
            if self.state is not MemberState.FATAL:
                self.state = MemberState.UNSUBSCRIBED
                self.member_epoch = JOIN_EPOCH
            self._topics, self._regex = frozenset(), None
            return []
        owned = self.owned
        in_group = self.member_epoch > 0
        self.state = MemberState.PREPARE_LEAVING
        self._reconciling = None
        if not owned:
            return []
        if in_group:
            return [CommitOffsets(owned), RevokePartitions(owned)]
        return [LosePartitions(owned, "it left the group")]

    def leave_prepared(self) -> None:
        """The partitions are given up: the next heartbeat (due at once) leaves the group."""
        if self.state is not MemberState.PREPARE_LEAVING:
            return
        self._topics, self._regex = frozenset(), None
        self._clear_assignment()
        # Even a member still joining sends the leave: the broker may have taken a join whose answer is lost.
        self.member_epoch = STATIC_LEAVE_EPOCH if self.instance_id is not None else LEAVE_EPOCH
        self.state = MemberState.LEAVING

    def poll_timer_expired(self) -> list[Action]:
        """The application stopped polling for longer than its max poll interval: lose everything and
        leave (Java's STALE member); :meth:`poll_resumed` joins again."""
        if self.state in (
            MemberState.UNSUBSCRIBED,
            MemberState.FATAL,
            MemberState.STALE,
            MemberState.FENCED,
            MemberState.PREPARE_LEAVING,
            MemberState.LEAVING,
        ):
            return []
        # The driver says so once, with the setting to change; here it is only the protocol's step.
        log.info(
            "group %s: member %s did not poll within the max poll interval; leaving the group",
            self.group_id,
            self.member_id,
        )
        lost = self.owned
        self._clear_assignment()
        self.member_epoch = STATIC_LEAVE_EPOCH if self.instance_id is not None else LEAVE_EPOCH
        self.state = MemberState.LEAVING
        self._stale_leave = True
        return [
            LosePartitions(
                lost,
                f"max_poll_interval_ms={self.rebalance_timeout_ms} exceeded: it left the group "
                "and rejoins when the application polls again",
            )
        ]

    def poll_resumed(self) -> None:
        """The application polls again: a stale member joins again."""
        if self.state is MemberState.STALE:
            self._join()


def _wire_partitions(partitions: Collection[TopicIdPartition]) -> list[TopicIdPartitions]:
    by_topic: dict[uuid.UUID, list[int]] = {}
    for p in partitions:
        by_topic.setdefault(p.topic_id, []).append(p.partition)
    return [TopicIdPartitions(tid, sorted(ps)) for tid, ps in sorted(by_topic.items(), key=lambda kv: str(kv[0]))]
