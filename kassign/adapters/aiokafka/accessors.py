"""What kassign outside the adapter may read of an aiokafka consumer, as public functions.

aiokafka keeps some of a consumer's settings in private attributes. The adapter reads them in one
module (:mod:`kassign.adapters.aiokafka.internals`, checked against each aiokafka release); other
parts of kassign (telemetry's aiokafka glue, say) read them here instead, so that they depend on a
public name of the adapter and never on its private-internals module.
"""

from __future__ import annotations

from typing import Any

from kassign.adapters.aiokafka import internals

__all__ = ["group_id_of"]


def group_id_of(consumer: Any) -> str | None:
    """The ``group_id`` an aiokafka consumer (plain ``AIOKafkaConsumer`` or kassign's
    :class:`~kassign.adapters.aiokafka.CooperativeConsumer`) was built with; None without one, or
    for an object that is not an aiokafka consumer."""
    return internals.group_id_of(consumer)
