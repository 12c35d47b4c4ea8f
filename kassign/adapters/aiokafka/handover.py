"""Handing partitions over inside one aiokafka consumer, shared by kassign's two coordinators (the
classic protocol's and KIP-848's): installing a new assignment without losing the positions of the
partitions that stay, pausing partitions on their way out, the offsets to commit for them, and
calling the rebalance listener the way Java does (its exceptions kept for the application, slow
calls warned about).
"""

from __future__ import annotations

import inspect
import logging
import time
from collections.abc import Iterable
from typing import Any

from aiokafka.structs import OffsetAndMetadata
from aiokafka.structs import TopicPartition as AioTopicPartition

from kassign.adapters.aiokafka.internals import carry_fetch_state
from kassign.model import TopicPartition

log = logging.getLogger(__name__)

__all__ = ["aio_partitions", "kassign_partitions", "install", "pause", "consumed_offsets", "call_listener"]

# A listener call longer than this (or than half the rebalance timeout) is warned about.
_SLOW_LISTENER_S = 5.0


def aio_partitions(partitions: Iterable[Any]) -> set[AioTopicPartition]:
    """aiokafka TopicPartitions from any (topic, partition) pairs."""
    return {AioTopicPartition(tp[0], tp[1]) for tp in partitions}


def kassign_partitions(partitions: Iterable[Any]) -> frozenset[TopicPartition]:
    """kassign TopicPartitions from any (topic, partition) pairs (aiokafka's are named tuples too)."""
    return frozenset(TopicPartition(tp[0], tp[1]) for tp in partitions)


def install(
    subscription_state: Any,
    previous: Any,
    partitions: Iterable[AioTopicPartition],
    carried: Iterable[AioTopicPartition],
) -> Any:
    """Make ``partitions`` the subscription's assignment and return the new aiokafka Assignment; the
    ``carried`` ones keep their fetch state (position, pause, pending committed-offset requests) from
    the ``previous`` Assignment (None: nothing to carry)."""
    subscription_state.assign_from_subscribed(set(partitions))
    assignment = subscription_state.subscription.assignment
    if previous is not None:
        for tp in carried:
            carry_fetch_state(previous, assignment, tp)
    return assignment


def pause(assignment: Any, partitions: Iterable[AioTopicPartition]) -> None:
    """Pause ``partitions``: records fetched but not yet returned must not reach the application once
    the partitions are on their way out."""
    if assignment is None:
        return
    for tp in partitions:
        state = assignment.state_value(tp)
        if state is not None:
            state.pause()


def consumed_offsets(
    assignment: Any, partitions: Iterable[AioTopicPartition]
) -> dict[AioTopicPartition, OffsetAndMetadata]:
    """The positions of ``partitions`` that have one, as offsets to commit."""
    offsets: dict[AioTopicPartition, OffsetAndMetadata] = {}
    if assignment is None:
        return offsets
    for tp in partitions:
        state = assignment.state_value(tp)
        if state is not None and state.has_valid_position:
            offsets[tp] = OffsetAndMetadata(state.position, "")
    return offsets


async def call_listener(
    listener: Any, method: str, partitions: Iterable[AioTopicPartition], *, group_id: str, rebalance_timeout_s: float
) -> Exception | None:
    """Call ``listener.method(partitions)`` (awaiting it if it is a coroutine); the rebalance goes on
    whatever it does. Returns the exception it raised (for the next ``getmany()``/``getone()``, as Java
    and kafka-python raise it from poll), None otherwise; a call slower than the smaller of 5 s and
    half the rebalance timeout is warned about: the group's round waits for it."""
    if listener is None:
        return None
    began = time.monotonic()
    error = None
    try:
        result = getattr(listener, method)(set(partitions))
        if inspect.isawaitable(result):
            await result
    except Exception as exc:
        log.exception("rebalance listener %r of group %s failed in %s", listener, group_id, method)
        error = exc
    took = time.monotonic() - began
    if took > min(_SLOW_LISTENER_S, rebalance_timeout_s / 2):
        log.warning(
            "rebalance listener %r of group %s took %.1f s in %s (the group's rebalance timeout is "
            "%.1f s; a listener slower than that makes the member miss the round)",
            listener,
            group_id,
            took,
            method,
            rebalance_timeout_s,
        )
    return error
