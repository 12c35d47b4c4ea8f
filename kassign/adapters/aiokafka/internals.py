"""What kassign reads and writes of aiokafka's private state, in one place, for the versions below.

kassign's coordinators are subclasses of aiokafka's ``GroupCoordinator`` and override its protected
hooks -- the classic protocol's (:mod:`kassign.adapters.aiokafka.coordinator`): ``_on_join_prepare``,
``_perform_assignment``, ``_on_join_complete``, ``_do_rejoin_group``, ``_maybe_leave_group``,
``_do_heartbeat``, ``_stop_heartbeat_task``, ``_send_req``, ``_do_commit_offsets``, ``commit_offsets``,
``_get_metadata_snapshot`` (compared by aiokafka's metadata listener), ``reset_generation`` (called right
after the response that caused it)
and ``CoordinatorGroupRebalance._send_sync_group_request``; KIP-848's
(:mod:`kassign.adapters.aiokafka.consumer_group_coordinator`): ``_coordination_routine``,
``_maybe_leave_group``, ``_do_commit_offsets``, ``_on_metadata_change``, reusing its coordinator
lookup, ``_send_req``, auto-commit and committed-offset refresh. That is the subclassing contract. Everything else it
needs of aiokafka's private attributes -- a consumer's settings to build its fetcher and
coordinator, the replica lists in cluster metadata, a partition's fetch state carried into a new
assignment, the metadata wait -- is here, so a new aiokafka release is checked in one module.

Supported: aiokafka ``SUPPORTED_AIOKAFKA`` (``pyproject.toml`` bounds the ``aiokafka`` extra to the
same range, and CI installs the newest release it allows).
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Mapping
from typing import Any

import aiokafka
from aiokafka.consumer.fetcher import Fetcher

log = logging.getLogger(__name__)

__all__ = [
    "SUPPORTED_AIOKAFKA",
    "supported",
    "check_version",
    "make_fetcher",
    "coordinator_settings",
    "replica_ids",
    "carry_fetch_state",
    "wait_for_metadata",
    "close_started",
    "group_id_of",
    "poll_waiting",
]

#: The aiokafka releases whose internals this module was written against: [low, high).
SUPPORTED_AIOKAFKA = ((0, 14), (0, 15))


def _release(version: str) -> tuple[int, int]:
    parts = version.split(".")
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        return (0, 0)


def supported(version: str) -> bool:
    """Whether an aiokafka version string is in :data:`SUPPORTED_AIOKAFKA`."""
    low, high = SUPPORTED_AIOKAFKA
    return low <= _release(version) < high


def check_version(version: str | None = None) -> bool:
    """Warn (once per call) when the installed aiokafka is outside the supported range."""
    version = version or aiokafka.__version__
    if supported(version):
        return True
    low, high = SUPPORTED_AIOKAFKA
    warnings.warn(
        f"kassign's CooperativeConsumer supports aiokafka {low[0]}.{low[1]}.x up to before "
        f"{high[0]}.{high[1]}, found {version}: group membership may not work",
        RuntimeWarning,
        stacklevel=2,
    )
    return False


def make_fetcher(consumer: Any) -> Fetcher:
    """The Fetcher ``AIOKafkaConsumer.start`` would build, from the consumer's own settings."""
    c = consumer
    return Fetcher(
        c._client,
        c._subscription,
        key_deserializer=c._key_deserializer,
        value_deserializer=c._value_deserializer,
        fetch_min_bytes=c._fetch_min_bytes,
        fetch_max_bytes=c._fetch_max_bytes,
        fetch_max_wait_ms=c._fetch_max_wait_ms,
        max_partition_fetch_bytes=c._max_partition_fetch_bytes,
        check_crcs=c._check_crcs,
        fetcher_timeout=c._consumer_timeout,
        retry_backoff_ms=c._retry_backoff_ms,
        auto_offset_reset=c._auto_offset_reset,
        isolation_level=c._isolation_level,
        client_rack=c._client_rack,
    )


def coordinator_settings(consumer: Any) -> dict[str, Any]:
    """The keyword arguments ``AIOKafkaConsumer.start`` gives its GroupCoordinator."""
    c = consumer
    return dict(
        group_id=c._group_id,
        group_instance_id=c._group_instance_id,
        heartbeat_interval_ms=c._heartbeat_interval_ms,
        session_timeout_ms=c._session_timeout_ms,
        retry_backoff_ms=c._retry_backoff_ms,
        enable_auto_commit=c._enable_auto_commit,
        auto_commit_interval_ms=c._auto_commit_interval_ms,
        exclude_internal_topics=c._exclude_internal_topics,
        rebalance_timeout_ms=c._rebalance_timeout_ms,
        max_poll_interval_ms=c._max_poll_interval_ms,
    )


def replica_ids(cluster: Any, topic: str) -> Mapping[int, list[int]]:
    """Partition -> replica broker ids of ``topic`` (ClusterMetadata has no public accessor)."""
    partitions = getattr(cluster, "_partitions", {}).get(topic, {})
    return {partition: list(meta.replicas) for partition, meta in partitions.items()}


def carry_fetch_state(previous: Any, assignment: Any, tp: Any) -> bool:
    """Move a partition's fetch state (position, pause, pending committed-offset requests) from the
    ``previous`` aiokafka Assignment into ``assignment``; False when it had none."""
    state = previous.state_value(tp)
    if state is None:
        return False
    state._assignment = assignment  # committed-offset refreshes now go to the new assignment
    assignment._tp_state[tp] = state
    return True


async def wait_for_metadata(client: Any) -> None:
    """Wait for the metadata update the client has pending (e.g. after ``set_topics``)."""
    await client._maybe_wait_metadata()


def close_started(coordinator: Any) -> bool:
    """Whether the coordinator's ``close()`` has begun."""
    return coordinator._closing.done()


def group_id_of(consumer: Any) -> str | None:
    """The consumer's ``group_id`` (None without one, or for an object that is not an aiokafka consumer)."""
    return getattr(consumer, "_group_id", None)


def poll_waiting(subscription_state: Any) -> bool:
    """Whether a ``getone()``/``getmany()`` is waiting right now on ``subscription_state`` (for an
    assignment or for records): ``abort_waiters`` would reach it."""
    waiters = (*subscription_state._assignment_waiters, *subscription_state._fetch_waiters)
    return any(not waiter.done() for waiter in waiters)
