"""``CooperativeConsumer``: an AIOKafkaConsumer whose group membership is kassign's.

Everything but group membership is AIOKafkaConsumer's own API, unchanged. The difference is the
coordinator: members send full v3 subscriptions, the leader reads them with kassign's codecs, and
when every listed assignor supports it the group rebalances cooperatively (KIP-429): partitions
that stay keep being fetched, processed and committed through the rebalance.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from aiokafka import AIOKafkaConsumer
from aiokafka.errors import IllegalStateError
from aiokafka.util import get_running_loop

from kassign.adapters.aiokafka.assignors import CooperativeStickyAssignor, core_assignor_for
from kassign.adapters.aiokafka.consumer_group_coordinator import ConsumerGroupCoordinator
from kassign.adapters.aiokafka.coordinator import KassignGroupCoordinator
from kassign.adapters.aiokafka.internals import check_version, coordinator_settings, make_fetcher
from kassign.membership import select_rebalance_protocol
from kassign.model import RebalanceProtocol

log = logging.getLogger(__name__)

__all__ = ["CooperativeConsumer", "GROUP_PROTOCOLS"]

#: The values of ``group_protocol``, as Java's ``group.protocol`` names them.
GROUP_PROTOCOLS = ("classic", "consumer")
_DEFAULT_STRATEGY = (CooperativeStickyAssignor,)
# Settings the broker owns on the consumer protocol; Java refuses them there too.
_CLASSIC_ONLY = {
    "session_timeout_ms": "the group's consumer.session.timeout.ms (broker: group.consumer.session.timeout.ms)",
    "heartbeat_interval_ms": (
        "the group's consumer.heartbeat.interval.ms (broker: group.consumer.heartbeat.interval.ms)"
    ),
}


class CooperativeConsumer(AIOKafkaConsumer):
    """AIOKafkaConsumer with kassign's assignors and the cooperative rebalance protocol.

    ``partition_assignment_strategy`` takes kassign's drop-in assignors (classes or instances) or
    kassign assignors; it defaults to ``(CooperativeStickyAssignor,)``. The rebalance protocol is the
    most capable one every listed assignor supports, as in Java: ``(CooperativeStickyAssignor,)``
    is cooperative, ``(RangeAssignor, CooperativeStickyAssignor)`` is eager (the first step of a
    rolling upgrade). Each consumer gets its own assignor instances.

    A rebalance listener may define ``on_partitions_lost(partitions)``: it then receives partitions
    lost to a generation reset (not committed) instead of ``on_partitions_revoked``. Under the
    cooperative protocol ``on_partitions_revoked`` receives only the partitions that move away and
    ``on_partitions_assigned`` only the ones that are new (possibly none).

    ``fast_follow_up`` (on by default; cooperative protocol only) starts the follow-up rebalance of
    a round that withheld partitions without waiting for the members' next heartbeat: a kassign
    leader marks the assignments and marked kassign members rejoin at once (see
    :mod:`kassign.membership.follow_up`). Measured on Apache Kafka 4.4 it cuts a scale-out's
    unowned partition-seconds about 20-fold against plain KIP-429 and below eager's; on a broker
    without a join barrier (Tansu) it can add rounds instead, so ``fast_follow_up=False`` gives the
    plain KIP-429 behaviour. Java and librdkafka members in the same group ignore the mark.

    ``group_instance_id`` (static membership, KIP-345) is what makes a rolling restart cheap: a
    member restarted within the session timeout gets its own partitions back without a rebalance.

    ``group_protocol`` (Java's ``group.protocol``): ``"classic"`` (the default: JoinGroup/SyncGroup,
    everything above) or ``"consumer"``, the next-generation protocol of KIP-848 (Apache Kafka 4.0+):
    the broker assigns with its ``group_remote_assignor`` (Java's ``group.remote.assignor``:
    ``"uniform"``, ``"range"``, or None for the group's default), the consumer heartbeats and
    reconciles, with the same listener calls (revoked: only what is taken away; assigned: only what
    is added; lost: on fencing), and commits carry its member epoch. The broker owns the session
    timeout and heartbeat interval there, so ``session_timeout_ms``, ``heartbeat_interval_ms`` and
    ``partition_assignment_strategy`` are refused with it, as Java refuses them.
    """

    _fetcher: Any  # built by start() (aiokafka's attribute, untyped)

    def __init__(
        self,
        *topics: str,
        partition_assignment_strategy: Sequence[Any] = _DEFAULT_STRATEGY,
        client_rack: str | None = None,
        fast_follow_up: bool = True,
        group_protocol: str = "classic",
        group_remote_assignor: str | None = None,
        **kwargs: Any,
    ) -> None:
        check_version()
        if group_protocol not in GROUP_PROTOCOLS:
            raise ValueError(f"group_protocol must be one of {GROUP_PROTOCOLS}, got {group_protocol!r}")
        if group_protocol == "classic" and group_remote_assignor is not None:
            raise ValueError(
                "group_remote_assignor applies to group_protocol='consumer' only (the broker assigns "
                "there); the classic protocol assigns with partition_assignment_strategy"
            )
        if group_protocol == "consumer":
            if group_remote_assignor is not None and (
                not isinstance(group_remote_assignor, str) or not group_remote_assignor
            ):
                raise ValueError(
                    f"group_remote_assignor must name a broker-side assignor such as 'uniform' or "
                    f"'range', got {group_remote_assignor!r}"
                )
            if partition_assignment_strategy is not _DEFAULT_STRATEGY:
                raise ValueError(
                    "partition_assignment_strategy cannot be set with group_protocol='consumer': the "
                    "broker assigns (choose its assignor with group_remote_assignor)"
                )
            refused = sorted(set(kwargs) & set(_CLASSIC_ONLY))
            if refused:
                raise ValueError(
                    f"{', '.join(refused)} cannot be set with group_protocol='consumer': the broker owns "
                    + "; ".join(f"{k} as {_CLASSIC_ONLY[k]}" for k in refused)
                )
        self._kassign_group_protocol = group_protocol
        self._kassign_remote_assignor = group_remote_assignor
        self._kassign_fast_follow_up = fast_follow_up
        if isinstance(partition_assignment_strategy, (str, bytes)) or not partition_assignment_strategy:
            raise ValueError(
                f"partition_assignment_strategy must list assignors, got {partition_assignment_strategy!r}"
            )
        self._kassign_assignors = [core_assignor_for(s) for s in partition_assignment_strategy]
        self._kassign_protocol = select_rebalance_protocol(self._kassign_assignors)
        super().__init__(
            *topics,
            partition_assignment_strategy=tuple(self._kassign_assignors),
            client_rack=client_rack,
            **kwargs,
        )

    @property
    def rebalance_protocol(self) -> RebalanceProtocol:
        """The protocol this consumer rebalances with (chosen from its assignors; always cooperative
        on the consumer group protocol, whose reconciliation is incremental)."""
        if self._kassign_group_protocol == "consumer":
            return RebalanceProtocol.COOPERATIVE
        return self._kassign_protocol

    @property
    def group_protocol(self) -> str:
        """``"classic"`` or ``"consumer"`` (KIP-848), as given."""
        return self._kassign_group_protocol

    async def commit(self, offsets: Any = None) -> None:
        """AIOKafkaConsumer.commit. On the classic protocol a commit that meets a rebalance waits for the
        round (at most the rebalance timeout) and is completed under the new generation for the
        partitions this member kept; offsets of partitions the round took away are never committed
        after the loss. Without ``offsets`` those are left out (the revoke listener commits them);
        explicit ``offsets`` naming them raise :class:`~aiokafka.errors.CommitFailedError` once the
        kept ones are committed. A round that does not complete in time raises aiokafka's retriable
        :class:`~aiokafka.errors.RebalanceInProgressError`. A member out of its group (it left after
        ``max_poll_interval_ms``, was fenced, or its session expired) raises CommitFailedError naming
        why until its next ``getmany()`` has it join again."""
        if self._group_id is None or self._coordinator is None:
            await super().commit(offsets)  # aiokafka's errors: no group, not started
            return
        self._coordinator.check_membership_for_commit()
        if offsets is not None:
            await super().commit(offsets)
            return
        subscription = self._subscription.subscription
        if subscription is None:
            raise IllegalStateError("Not subscribed to any topics")
        assignment = subscription.assignment
        if assignment is None:
            raise IllegalStateError("No partitions assigned")
        await self._coordinator.commit_offsets(assignment, assignment.all_consumed_offsets(), consumed=True)

    async def start(self) -> None:
        """Connect, load metadata and, with a ``group_id``, join the group through kassign's
        coordinator (AIOKafkaConsumer.start with that one difference)."""
        if self._group_id is None:
            await super().start()
            return
        assert self._loop is get_running_loop(), "Please create objects with the same loop as running with"
        assert self._fetcher is None, "Did you call `start` twice?"
        await self._client.bootstrap()
        await self._wait_topics()
        self._fetcher = make_fetcher(self)
        if self._kassign_group_protocol == "consumer":
            self._coordinator = ConsumerGroupCoordinator(
                self._client,
                self._subscription,
                server_assignor=self._kassign_remote_assignor,
                client_rack=self._client_rack,
                **coordinator_settings(self),
            )
        else:
            self._coordinator = KassignGroupCoordinator(
                self._client,
                self._subscription,
                assignors=self._kassign_assignors,
                client_rack=self._client_rack,
                fast_follow_up=self._kassign_fast_follow_up,
                **coordinator_settings(self),
            )
        subscription = self._subscription.subscription
        if subscription is not None:
            if self._subscription.partitions_auto_assigned():
                await self._subscription.wait_for_assignment()
            else:
                # assign() came before start(): refresh committed offsets as aiokafka does.
                self._coordinator.start_commit_offsets_refresh_task(subscription.assignment)
