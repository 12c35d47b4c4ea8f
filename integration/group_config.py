"""Per-group settings of a KIP-848 consumer group (confluent-kafka's admin client, IncrementalAlterConfigs
on a GROUP resource).

On the consumer protocol the broker owns the session timeout and the heartbeat interval (45 s and
5 s by default); tests shorten them for their own group only, as an operator would with
``kafka-configs --entity-type groups``. The brokers kassign starts allow down to 1 s and 100 ms.
"""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)

__all__ = ["set_consumer_group_timing"]


def set_consumer_group_timing(bootstrap: str, group_id: str, *, session_ms: int, heartbeat_ms: int,
                              timeout: float = 20.0) -> None:
    """Set ``consumer.session.timeout.ms`` and ``consumer.heartbeat.interval.ms`` of ``group_id``
    (the group need not exist yet)."""
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    if not 0 < heartbeat_ms < session_ms:
        raise ValueError(f"need 0 < heartbeat_ms < session_ms, got {heartbeat_ms} and {session_ms}")
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    resource = ConfigResource(ResourceType.GROUP, group_id, incremental_configs=[
        ConfigEntry("consumer.session.timeout.ms", str(session_ms), incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("consumer.heartbeat.interval.ms", str(heartbeat_ms), incremental_operation=AlterConfigOpType.SET),
    ])
    futures = admin.incremental_alter_configs([resource], request_timeout=timeout)
    for future in futures.values():
        future.result(timeout=timeout)
    log.info("group %s: consumer session timeout %d ms, heartbeat interval %d ms", group_id, session_ms, heartbeat_ms)
