"""Per-group settings of a KIP-848 consumer group, and the group's type as the broker reports it
(confluent-kafka's admin client: IncrementalAlterConfigs on a GROUP resource, ConsumerGroupDescribe).

On the consumer group protocol the broker owns the session timeout and the heartbeat interval
(``group.consumer.session.timeout.ms`` 45 s and ``group.consumer.heartbeat.interval.ms`` 5 s by
default); a test, benchmark or demo shortens them for its own group only, as an operator would with
``kafka-configs --entity-type groups``. The broker keeps each group's values within
``group.consumer.min/max.session.timeout.ms`` and ``group.consumer.min/max.heartbeat.interval.ms``
(minimums 45 s and 5 s by default); the brokers kassign starts allow down to 1 s and 100 ms
(:data:`kassign.broker.kafka.TEST_SETTINGS`).

Needs the ``confluent`` extra (confluent-kafka).
"""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)

__all__ = [
    "GroupConfigError",
    "GroupTimingRefused",
    "NoConsumerGroupProtocol",
    "set_consumer_group_timing",
    "consumer_group_type",
    "BOUND_SETTINGS",
]

#: The broker settings bounding a group's own timing, with Kafka's defaults (the bounds refused values break).
BOUND_SETTINGS: dict[str, int] = {
    "group.consumer.min.session.timeout.ms": 45000,
    "group.consumer.max.session.timeout.ms": 60000,
    "group.consumer.min.heartbeat.interval.ms": 5000,
    "group.consumer.max.heartbeat.interval.ms": 15000,
}


class GroupConfigError(RuntimeError):
    """Setting a group's ``consumer.session.timeout.ms`` / ``consumer.heartbeat.interval.ms`` failed;
    ``reason`` is the client's or the broker's word. This class itself: no answer (timeout, transport)."""

    def __init__(self, message: str, *, session_ms: int, heartbeat_ms: int, reason: str) -> None:
        super().__init__(message)
        self.session_ms = session_ms
        self.heartbeat_ms = heartbeat_ms
        self.reason = reason


class GroupTimingRefused(GroupConfigError):
    """The broker refused the values; ``out_of_bounds`` is True when it said they are outside the
    cluster's bounds (INVALID_CONFIG), False for any other refusal (a broker without group configs,
    missing authorization, ...)."""

    def __init__(self, message: str, *, session_ms: int, heartbeat_ms: int, reason: str, out_of_bounds: bool) -> None:
        super().__init__(message, session_ms=session_ms, heartbeat_ms=heartbeat_ms, reason=reason)
        self.out_of_bounds = out_of_bounds


class NoConsumerGroupProtocol(GroupTimingRefused):
    """The broker has no consumer group protocol (KIP-848) at all: it does not know a GROUP config
    resource (Kafka before 4.0 answers INVALID_REQUEST "Unknown resource type 32"), so a consumer with
    ``group_protocol="consumer"`` would be refused too (UNSUPPORTED_VERSION)."""


def _no_group_configs(code: int, reason: str) -> bool:
    """True when a refusal says the broker does not know GROUP config resources (type 32), which came
    with the consumer group protocol's general availability in Kafka 4.0."""
    from confluent_kafka import KafkaError

    return code == KafkaError.INVALID_REQUEST and "resource type" in reason.lower()


def _admin(bootstrap: str):  # noqa: ANN202 - confluent_kafka is imported lazily
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})


def set_consumer_group_timing(
    bootstrap: str,
    group_id: str,
    *,
    session_ms: int,
    heartbeat_ms: int,
    assignment_interval_ms: int | None = None,
    timeout: float = 20.0,
) -> None:
    """Set ``consumer.session.timeout.ms`` and ``consumer.heartbeat.interval.ms`` of ``group_id``
    (the group need not exist yet), and with ``assignment_interval_ms`` its
    ``consumer.assignment.interval.ms``: how often at most the broker computes a new target assignment
    (KIP-1263, Kafka 4.2+; 1 s by default, bounded by ``group.consumer.min/max.assignment.interval.ms``,
    0 and 15 s by default).

    Raises :class:`NoConsumerGroupProtocol` (a :class:`GroupTimingRefused`) when the broker has no
    consumer group protocol (Kafka before 4.0), :class:`GroupTimingRefused` when it refuses the values
    (outside its bounds, missing authorization, ...), :class:`GroupConfigError` when no answer came,
    ValueError for ``heartbeat_ms`` not below ``session_ms``.
    """
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    if not 0 < heartbeat_ms < session_ms:
        raise ValueError(f"need 0 < heartbeat_ms < session_ms, got {heartbeat_ms} and {session_ms}")
    if assignment_interval_ms is not None and assignment_interval_ms < 0:
        raise ValueError(f"need assignment_interval_ms >= 0, got {assignment_interval_ms}")
    settings = {"consumer.session.timeout.ms": session_ms, "consumer.heartbeat.interval.ms": heartbeat_ms}
    if assignment_interval_ms is not None:
        settings["consumer.assignment.interval.ms"] = assignment_interval_ms
    resource = ConfigResource(
        ResourceType.GROUP,
        group_id,
        incremental_configs=[
            ConfigEntry(name, str(value), incremental_operation=AlterConfigOpType.SET)
            for name, value in settings.items()
        ],
    )
    admin = _admin(bootstrap)  # held until the answer: a collected client destroys its handle mid-request
    futures = admin.incremental_alter_configs([resource], request_timeout=timeout)
    values = " and ".join(f"{name}={value}" for name, value in settings.items())
    for future in futures.values():
        try:
            future.result(timeout=timeout)
        except KafkaException as exc:
            error = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
            reason = error.str() if error is not None else str(exc)
            if error is None or error.code() < 0:  # librdkafka's own (negative) codes: no broker answered
                raise GroupConfigError(
                    f"setting {values} for group {group_id} failed: {reason}",
                    session_ms=session_ms,
                    heartbeat_ms=heartbeat_ms,
                    reason=reason,
                ) from None
            if _no_group_configs(error.code(), reason):
                raise NoConsumerGroupProtocol(
                    f"the broker at {bootstrap} does not support the consumer group protocol (KIP-848): it has no "
                    f"group configs (setting {values} for group {group_id}: {reason}); it needs Apache Kafka 4.0 "
                    f"or newer with group.coordinator.rebalance.protocols including 'consumer'; use "
                    f"group_protocol='classic' with this cluster",
                    session_ms=session_ms,
                    heartbeat_ms=heartbeat_ms,
                    reason=reason,
                    out_of_bounds=False,
                ) from None
            # INVALID_CONFIG is GroupConfig.validate's answer to values outside the group.consumer.* bounds.
            raise GroupTimingRefused(
                f"the broker refused {values} for group {group_id}: {reason}",
                session_ms=session_ms,
                heartbeat_ms=heartbeat_ms,
                reason=reason,
                out_of_bounds=error.code() == KafkaError.INVALID_CONFIG,
            ) from None
    log.info("group %s: %s", group_id, values)


def consumer_group_type(bootstrap: str, group_id: str, *, timeout: float = 20.0) -> str:
    """The group's type as the broker describes it: ``"consumer"`` (KIP-848), ``"classic"`` or ``"unknown"``
    (a broker too old to say)."""
    admin = _admin(bootstrap)  # held until the answer (see above)
    futures = admin.describe_consumer_groups([group_id], request_timeout=timeout)
    description = futures[group_id].result(timeout=timeout)
    kind = getattr(description, "type", None)
    return getattr(kind, "name", str(kind)).lower() if kind is not None else "unknown"
