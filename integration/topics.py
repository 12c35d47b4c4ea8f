"""Create topics and wait until every partition has a leader (confluent-kafka's admin client)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

log = logging.getLogger(__name__)
T = TypeVar("T")

__all__ = ["create_topic", "delete_topic", "wait_for_partitions", "partition_count"]


def _admin(bootstrap: str):
    """An admin client whose metadata requests never create a topic: librdkafka's admin client is a
    producer, which allows it by default, and a broker with ``auto.create.topics.enable`` (Kafka's
    default) would bring a topic just deleted back, with one partition, as soon as it is asked about."""
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap, "log_level": 3, "allow.auto.create.topics": False})


def _poll_topic(admin, topic: str, timeout: float, answer: Callable[[Any], T | None]) -> T | None:
    """Ask for ``topic``'s metadata (None when it is not listed) until ``answer`` makes something of it,
    and return that; None once ``timeout`` has passed."""
    deadline = time.monotonic() + timeout
    while True:
        wait = min(5.0, max(0.1, deadline - time.monotonic()))
        found = answer(admin.list_topics(topic=topic, timeout=wait).topics.get(topic))
        if found is not None:
            return found
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.1)


def wait_for_partitions(bootstrap: str, topic: str, partitions: int, timeout: float = 20.0) -> Any:
    """Block until metadata shows ``topic`` with ``partitions`` partitions, each with a leader; returns
    that metadata (confluent-kafka's ``TopicMetadata``: replicas, leaders)."""
    seen = None

    def led(meta) -> Any:
        nonlocal seen
        if meta is None or meta.error is not None:
            return None
        seen = len(meta.partitions)
        if seen == partitions and all(p.leader >= 0 for p in meta.partitions.values()):
            return meta
        return None

    found = _poll_topic(_admin(bootstrap), topic, timeout, led)
    if found is None:
        raise TimeoutError(f"topic {topic!r} did not show {partitions} led partitions within {timeout}s (saw {seen})")
    return found


def create_topic(
    bootstrap: str, topic: str, partitions: int, *, replication_factor: int = 1, timeout: float = 20.0
) -> str:
    """Create ``topic`` with ``partitions`` partitions and wait until it is usable; returns its name.

    An existing topic of the same name is an error: tests use fresh names.
    """
    from confluent_kafka.admin import NewTopic

    if partitions <= 0:
        raise ValueError(f"partitions must be positive, got {partitions!r}")
    admin = _admin(bootstrap)  # must outlive the future: destroying the handle fails it
    futures = admin.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=replication_factor)],
        operation_timeout=timeout,
    )
    futures[topic].result(timeout=timeout)
    wait_for_partitions(bootstrap, topic, partitions, timeout)
    log.info("created topic %s with %d partitions", topic, partitions)
    return topic


def delete_topic(bootstrap: str, topic: str, timeout: float = 20.0) -> None:
    """Delete ``topic`` and wait until metadata no longer shows it."""
    admin = _admin(bootstrap)
    admin.delete_topics([topic], operation_timeout=timeout)[topic].result(timeout=timeout)
    gone = _poll_topic(admin, topic, timeout, lambda meta: True if meta is None or meta.error is not None else None)
    if gone is None:
        raise TimeoutError(f"topic {topic!r} still listed {timeout}s after its deletion")
    log.info("deleted topic %s", topic)


def partition_count(bootstrap: str, topic: str, timeout: float = 10.0) -> int:
    """How many partitions ``topic`` has; raises LookupError naming the topic when no broker has shown it
    within ``timeout``. Asked again meanwhile: each broker learns of a new topic from the controller in
    its own time, and one restarted a moment ago (a failover test's) may not know one created since."""
    count = _poll_topic(
        _admin(bootstrap),
        topic,
        timeout,
        lambda meta: len(meta.partitions) if meta is not None and meta.error is None and meta.partitions else None,
    )
    if count is None:
        raise LookupError(f"topic {topic!r} does not exist at {bootstrap}")
    return count
