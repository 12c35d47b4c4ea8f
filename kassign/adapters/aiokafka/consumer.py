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
from aiokafka.consumer.fetcher import Fetcher
from aiokafka.util import get_running_loop

from kassign.adapters.aiokafka.assignors import CooperativeStickyAssignor, core_assignor_for
from kassign.adapters.aiokafka.coordinator import KassignGroupCoordinator
from kassign.membership import select_rebalance_protocol
from kassign.model import RebalanceProtocol

log = logging.getLogger(__name__)

__all__ = ["CooperativeConsumer"]


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
    """

    def __init__(
        self,
        *topics: str,
        partition_assignment_strategy: Sequence[Any] = (CooperativeStickyAssignor,),
        client_rack: str | None = None,
        fast_follow_up: bool = True,
        **kwargs: Any,
    ) -> None:
        self._kassign_fast_follow_up = fast_follow_up
        if isinstance(partition_assignment_strategy, (str, bytes)) or not partition_assignment_strategy:
            raise ValueError(f"partition_assignment_strategy must list assignors, got {partition_assignment_strategy!r}")
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
        """The protocol this consumer rebalances with (chosen from its assignors)."""
        return self._kassign_protocol

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
        self._fetcher = Fetcher(
            self._client,
            self._subscription,
            key_deserializer=self._key_deserializer,
            value_deserializer=self._value_deserializer,
            fetch_min_bytes=self._fetch_min_bytes,
            fetch_max_bytes=self._fetch_max_bytes,
            fetch_max_wait_ms=self._fetch_max_wait_ms,
            max_partition_fetch_bytes=self._max_partition_fetch_bytes,
            check_crcs=self._check_crcs,
            fetcher_timeout=self._consumer_timeout,
            retry_backoff_ms=self._retry_backoff_ms,
            auto_offset_reset=self._auto_offset_reset,
            isolation_level=self._isolation_level,
            client_rack=self._client_rack,
        )
        self._coordinator = KassignGroupCoordinator(
            self._client,
            self._subscription,
            assignors=self._kassign_assignors,
            client_rack=self._client_rack,
            fast_follow_up=self._kassign_fast_follow_up,
            group_id=self._group_id,
            group_instance_id=self._group_instance_id,
            heartbeat_interval_ms=self._heartbeat_interval_ms,
            session_timeout_ms=self._session_timeout_ms,
            retry_backoff_ms=self._retry_backoff_ms,
            enable_auto_commit=self._enable_auto_commit,
            auto_commit_interval_ms=self._auto_commit_interval_ms,
            exclude_internal_topics=self._exclude_internal_topics,
            rebalance_timeout_ms=self._rebalance_timeout_ms,
            max_poll_interval_ms=self._max_poll_interval_ms,
        )
        subscription = self._subscription.subscription
        if subscription is not None:
            if self._subscription.partitions_auto_assigned():
                await self._subscription.wait_for_assignment()
            else:
                # assign() came before start(): refresh committed offsets as aiokafka does.
                self._coordinator.start_commit_offsets_refresh_task(subscription.assignment)
