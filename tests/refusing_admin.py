"""A stand-in for confluent-kafka's AdminClient whose config changes are all refused, for tests of
``kassign.broker.group_config`` without a broker."""

from __future__ import annotations

from typing import Any


def refusing_admin(code: int, reason: str) -> Any:
    """An admin client whose ``incremental_alter_configs`` futures raise ``KafkaException(code, reason)``."""
    from confluent_kafka import KafkaError, KafkaException

    class Future:
        def result(self, timeout: float | None = None) -> None:
            raise KafkaException(KafkaError(code, reason))

    class Admin:
        def incremental_alter_configs(self, resources: Any, request_timeout: float) -> dict[Any, Future]:
            return {r: Future() for r in resources}

    return Admin()
