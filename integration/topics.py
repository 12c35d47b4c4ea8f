"""Create topics and wait until every partition has a leader (confluent-kafka's admin client)."""

from __future__ import annotations

import logging
import time

log = logging.getLogger(__name__)

__all__ = ["create_topic", "delete_topic", "wait_for_partitions", "partition_count"]


def _admin(bootstrap: str):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})


def wait_for_partitions(bootstrap: str, topic: str, partitions: int, timeout: float = 20.0) -> None:
    """Block until metadata shows ``topic`` with ``partitions`` partitions, each with a leader."""
    admin = _admin(bootstrap)
    deadline = time.monotonic() + timeout
    seen = None
    while time.monotonic() < deadline:
        meta = admin.list_topics(topic=topic, timeout=5).topics.get(topic)
        if meta is not None and meta.error is None:
            seen = len(meta.partitions)
            if seen == partitions and all(p.leader >= 0 for p in meta.partitions.values()):
                return
        time.sleep(0.1)
    raise TimeoutError(f"topic {topic!r} did not show {partitions} led partitions within {timeout}s (saw {seen})")


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
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        meta = admin.list_topics(topic=topic, timeout=5).topics.get(topic)
        if meta is None or meta.error is not None:
            log.info("deleted topic %s", topic)
            return
        time.sleep(0.1)
    raise TimeoutError(f"topic {topic!r} still listed {timeout}s after its deletion")


def partition_count(bootstrap: str, topic: str, timeout: float = 10.0) -> int:
    """How many partitions ``topic`` has; raises LookupError naming the topic when no broker has shown it
    within ``timeout``. Asked again meanwhile: each broker learns of a new topic from the controller in
    its own time, and one restarted a moment ago (a failover test's) may not know one created since."""
    admin = _admin(bootstrap)
    deadline = time.monotonic() + timeout
    while True:
        meta = admin.list_topics(topic=topic, timeout=timeout).topics.get(topic)
        if meta is not None and meta.error is None and meta.partitions:
            return len(meta.partitions)
        if time.monotonic() >= deadline:
            raise LookupError(f"topic {topic!r} does not exist at {bootstrap}")
        time.sleep(0.2)
